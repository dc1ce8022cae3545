/* The file systems ctr-mount-helper refuses to mount images from, by statfs f_type. Shared
 * with ctr's planner (launch::decideDriver), so that `ctr exec --explain` and `ctr check`
 * predict the refusal instead of meeting it at run time. C, no system calls.
 *
 * The helper's owner policy ('setuid image owners') trusts st_uid to mean "only this owner
 * made the file and only they can change it". That holds where the host's root mounted the
 * file system and the kernel keeps the ownership. It does not hold on:
 *  - FUSE (fuse, fuseblk; virtiofs shares the magic): a daemon answers every stat and read,
 *    and any user may run one (fusermount; with 'user_allow_other' others can see it). A
 *    root-looking image there is the user's, and can change under the kernel's squashfs.
 *  - file systems whose owner comes from the mount options or the medium's author, i.e. the
 *    removable media that desktops and fstab 'user' entries let users mount: vfat/msdos,
 *    exfat, ntfs (ntfs3), hfs, hfsplus, iso9660, udf;
 *  - SMB/CIFS: the owner is the uid= mount option, the content is the server's users'.
 * Network file systems with real ownership (NFS, Lustre, GPFS, ...) are where sites keep
 * their images; their servers are trusted as the host trusts its own mounts. A user-mounted
 * disk with a Unix file system (udisks and ext4) cannot be told apart by type: see
 * docs/admin-guide.md ("setuid image directories"). */
#ifndef CTR_UNTRUSTED_FS_H
#define CTR_UNTRUSTED_FS_H

#include <linux/magic.h>
#include <stddef.h>

#ifndef EXFAT_SUPER_MAGIC
#define EXFAT_SUPER_MAGIC 0x2011BAB0
#endif
#define CTR_NTFS_SB_MAGIC 0x5346544e  /* "NTFS": the classic driver */
#define CTR_NTFS3_SB_MAGIC 0x7366746e /* "ntfs": ntfs3 */
#define CTR_HFS_SUPER_MAGIC 0x4244
#define CTR_HFSPLUS_SUPER_MAGIC 0x482b

/* The name of the refused file system of type `f_type`, or NULL when it is not refused. */
static inline const char *ctr_untrusted_fs_name(unsigned long f_type) {
  switch (f_type & 0xffffffffUL) { /* f_type is a signed long on some ABIs */
    case FUSE_SUPER_MAGIC: return "FUSE";
    case MSDOS_SUPER_MAGIC: return "vfat";
    case EXFAT_SUPER_MAGIC: return "exfat";
    case CTR_NTFS_SB_MAGIC:
    case CTR_NTFS3_SB_MAGIC: return "ntfs";
    case CTR_HFS_SUPER_MAGIC: return "hfs";
    case CTR_HFSPLUS_SUPER_MAGIC: return "hfsplus";
    case ISOFS_SUPER_MAGIC: return "iso9660";
    case UDF_SUPER_MAGIC: return "udf";
    case CIFS_SUPER_MAGIC:
    case SMB2_SUPER_MAGIC: return "SMB/CIFS";
    default: return NULL;
  }
}

#endif
