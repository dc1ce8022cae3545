#!/bin/sh
# Serves the ctr-wl-smallfiles dataset from a squashfs image mounted with squashfuse, so the
# same reader measures "many small files from a dataset image" against a plain directory.
#   smallfiles-squashfs.sh up WORKDIR [--count N] [--size BYTES] [--comp gzip|zstd|lz4|xz]
#       WORKDIR/src          the dataset (ctr-wl-smallfiles --prepare; kept if already there)
#       WORKDIR/dataset.sqfs mksquashfs of it
#       WORKDIR/mnt          the image mounted with squashfuse_ll (or squashfuse)
#     then: ctr-wl-smallfiles --read WORKDIR/mnt   (bare, or with WORKDIR/mnt bound into a container)
#   smallfiles-squashfs.sh down WORKDIR   unmounts and removes mnt, the image and src
# Both are idempotent. Exit 77 with "skip: ..." when mksquashfs or squashfuse is missing.
set -eu

usage() { sed -n '2,11s/^# \{0,1\}//p' "$0"; }
die() { echo "smallfiles-squashfs: $*" >&2; exit 1; }
skip() { echo "skip: $*" >&2; exit 77; }

case ${1:-} in -h|--help|help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
action=$1 work=$2
shift 2
count=20000 size=16384 comp=zstd
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --comp) comp=$2; shift 2 ;;
    --quick) count=2000; shift ;;
    *) usage >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
mounted() { grep -q " $(realpath "$1") " /proc/self/mountinfo 2>/dev/null; }

case $action in
up)
  command -v mksquashfs >/dev/null || skip "mksquashfs not found (squashfs-tools)"
  fuse=$(command -v squashfuse_ll || command -v squashfuse) || skip "squashfuse not found"
  reader=$here/ctr-wl-smallfiles
  [ -x "$reader" ] || reader=$(command -v ctr-wl-smallfiles) || die "ctr-wl-smallfiles not found beside $0"
  mkdir -p "$work/mnt"
  if mounted "$work/mnt"; then
    echo "smallfiles-squashfs: $work/mnt already mounted" >&2
    exit 0
  fi
  "$reader" --prepare "$work/src" --count "$count" --size "$size"
  if [ ! -s "$work/dataset.sqfs" ] ||
     [ -n "$(find "$work/src/.ctr-wl-smallfiles" -newer "$work/dataset.sqfs")" ]; then
    rm -f "$work/dataset.sqfs"
    mksquashfs "$work/src" "$work/dataset.sqfs" -comp "$comp" -noappend -quiet -no-progress >&2 ||
      die "mksquashfs failed"
  fi
  # allow_other lets a container's processes (other credentials or namespaces) read a
  # mount made by root; a user's mount needs user_allow_other in /etc/fuse.conf for it.
  opts=
  [ "$(id -u)" = 0 ] && opts="-o allow_other"
  # shellcheck disable=SC2086
  "$fuse" $opts "$work/dataset.sqfs" "$work/mnt" || die "$fuse could not mount $work/dataset.sqfs"
  mounted "$work/mnt" || die "$work/mnt is not a mount point after $fuse"
  echo "smallfiles-squashfs: $work/dataset.sqfs ($(du -h "$work/dataset.sqfs" | cut -f1)) mounted at $work/mnt" >&2
  ;;
down)
  if [ -d "$work/mnt" ] && mounted "$work/mnt"; then
    fusermount3 -u "$work/mnt" 2>/dev/null || fusermount -u "$work/mnt" 2>/dev/null ||
      umount "$work/mnt" || die "cannot unmount $work/mnt"
  fi
  if [ -d "$work/mnt" ]; then rmdir "$work/mnt"; fi
  rm -rf "$work/dataset.sqfs" "$work/src"
  ;;
*) usage >&2; exit 2 ;;
esac
