// ctr-squashfs: serves one squashfs image over FUSE from several threads, without privilege
// (docs/design-io.md section 2). The image holder mounts the FUSE file system itself and
// runs this program in its place of squashfuse_ll, with the same command line:
//
//   ctr-squashfs [-f] [-o offset=N,threads=N] IMAGE MOUNTPOINT
//   ctr-squashfs [-f] -o lazy=SPEC[,offset=N,threads=N] - MOUNTPOINT
//
// With lazy=SPEC the image is a registry blob read chunk by chunk as the kernel asks for its
// bytes, each chunk checked against the image's chunk table and kept in the user's node
// cache (src/image/lazy_blob.cpp, docs/design-io.md section 6); SPEC is the JSON file ctr
// wrote.
//
// IMAGE is usually /dev/fd/4 (the file the holder opened and checked), MOUNTPOINT /dev/fd/3
// (the /dev/fuse connection of a mount the holder made: libfuse >= 3.3 then mounts nothing).
// Debian's squashfuse_ll answers every request on one thread, so every rank and data-loader
// worker of a node queues behind it (apptainer/apptainer#665). Here each worker thread of
// libfuse's multi-threaded loop has its own libsquashfs readers (compressor, meta data
// readers) over one file descriptor read with pread; the superblock, the id and fragment
// tables are read once and shared read-only, and inodes, directory listings and data blocks
// are cached for all threads behind locks (a reader that opens files in random order would
// otherwise decompress a meta data block for every open, and each thread its own copy of a
// fragment block that many small files share).
#define FUSE_USE_VERSION 312
#include <endian.h>
#include <fuse_lowlevel.h>
#include <sched.h>
#include <sqfs/compressor.h>
#include <sqfs/block.h>
#include <sqfs/dir.h>
#include <sqfs/error.h>
#include <sqfs/frag_table.h>
#include <sqfs/id_table.h>
#include <sqfs/inode.h>
#include <sqfs/io.h>
#include <sqfs/meta_reader.h>
#include <sqfs/super.h>
#include <sqfs/xattr.h>
#include <sqfs/xattr_reader.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/lazy_blob.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace {

// The kernel may keep names, attributes and data as long as it likes: the image never
// changes under a mount (the holder mounts a checked file and keys it by its identity).
constexpr double kCacheSeconds = 86400.0;
constexpr unsigned kMaxThreads = 16;
// Directory listings kept for all threads, in entries (about 60 bytes each): 4 MiB or so;
// inodes, in bytes (a file's inode holds 4 bytes per data block).
constexpr size_t kMaxCachedEntries = 64 * 1024;
constexpr size_t kMaxCachedInodeBytes = 8 << 20;
// Where each block of a large file starts (8 bytes a block: 64 KiB for a file of 1 GiB),
// kept for files of more than kIndexedBlocks blocks: a read would otherwise add up the sizes
// of every block before its own, and reading a file of n blocks would cost n^2 / 2 sums.
constexpr uint64_t kIndexedBlocks = 64;
constexpr size_t kMaxCachedStartBytes = 8 << 20;
// What an image's sizes may claim. libsquashfs allocates a file's block list (4 bytes a
// block of the size the inode says), a link's target, a directory's index, an extended
// attribute's value and the xattr descriptors' locations by the size the image gives, before
// reading them: a crafted 51 KB image made every lookup ask for 4 GiB. So each claim is
// checked first, against what Linux can have (a target of PATH_MAX: the kernel's squashfs
// refuses one longer than a page; names of 256 bytes; XATTR_NAME_MAX, XATTR_SIZE_MAX,
// XATTR_LIST_MAX) or against what the image holds (a long block list is read through once
// before libsquashfs allocates for it), and a claim past them is a corrupt image: EIO.
constexpr uint32_t kMaxLinkTarget = 4096;
constexpr uint32_t kMaxNameBytes = 256;
constexpr uint32_t kMaxXattrName = 255;
constexpr uint32_t kMaxXattrValue = 65536;
constexpr size_t kMaxXattrList = 65536;
// A block list up to this size is left to libsquashfs unread (16 Ki blocks: a 2 GiB file in
// 128 KiB blocks); a longer one must be in the inode table, and at most kMaxBlockListBytes
// (32 Mi blocks: 4 TiB in 128 KiB blocks, 128 GiB in the smallest, 4 KiB).
constexpr uint64_t kUncheckedBlockListBytes = 64 << 10;
constexpr uint64_t kMaxBlockListBytes = 128 << 20;

struct SqfsDestroy {
  void operator()(void* object) const { sqfs_destroy(object); }
};
template <class T>
using SqfsObject = std::unique_ptr<T, SqfsDestroy>;
struct SqfsFree {
  void operator()(void* memory) const { sqfs_free(memory); }
};
using Inode = std::shared_ptr<const sqfs_inode_generic_t>;
using BlockStarts = std::shared_ptr<const std::vector<uint64_t>>;

// A map the worker threads share, bounded by a cost (entries, bytes): the oldest insertion
// goes first. Values are shared pointers, so one dropped here lives on where it is in use.
template <class Value>
class SharedCache {
 public:
  explicit SharedCache(size_t maxCost) : maxCost_(maxCost) {}

  Value find(uint64_t key) {
    std::shared_lock lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? Value() : it->second.value;
  }

  void insert(uint64_t key, const Value& value, size_t cost) {
    std::unique_lock lock(mutex_);
    if (map_.count(key) == 0) add(key, value, cost);
  }

  // The value at `key`, or make()'s, inserted there in one step; second: whether it was
  // made (so that of several threads after the same key, one makes it).
  template <class Make>
  std::pair<Value, bool> findOrInsert(uint64_t key, size_t cost, Make make) {
    std::unique_lock lock(mutex_);
    if (auto it = map_.find(key); it != map_.end()) return {it->second.value, false};
    Value value = make();
    add(key, value, cost);
    return {value, true};
  }

  // Drops `key` if it still holds `value`.
  void erase(uint64_t key, const Value& value) {
    std::unique_lock lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end() || it->second.value != value) return;
    cost_ -= it->second.cost;
    map_.erase(it);  // its order_ entry ages out
  }

  void clear() {
    std::unique_lock lock(mutex_);
    map_.clear();
    order_.clear();
    cost_ = 0;
  }

 private:
  struct Entry {
    Value value;
    size_t cost;
    uint64_t added;  // when, in insertions: an order_ entry of an erased key's earlier value is passed over
  };

  // Inserts, then the oldest go until the cost fits (the newest always stays).
  void add(uint64_t key, const Value& value, size_t cost) {
    map_.emplace(key, Entry{value, cost, ++insertions_});
    order_.emplace_back(key, insertions_);
    cost_ += cost;
    while (cost_ > maxCost_ && order_.size() > 1) {
      const auto [oldest, when] = order_.front();
      order_.pop_front();
      auto it = map_.find(oldest);
      if (it == map_.end() || it->second.added != when) continue;
      cost_ -= it->second.cost;
      map_.erase(it);
    }
  }

  std::shared_mutex mutex_;
  std::unordered_map<uint64_t, Entry> map_;
  std::deque<std::pair<uint64_t, uint64_t>> order_;  // key, when it was added
  size_t cost_ = 0;
  size_t maxCost_;
  uint64_t insertions_ = 0;
};

// The image as libsquashfs reads it: pread on the holder's descriptor, shifted by the
// offset of the squashfs partition (a SIF's), bounded by the file's size; or, for a lazily
// read image, the same range of the blob through its chunk cache.
struct PreadFile {
  sqfs_file_t file;
  int fd;
  uint64_t offset;
  uint64_t size;
  ctr::image::lazy::Blob* lazy;
};

int preadAt(sqfs_file_t* base, sqfs_u64 offset, void* buffer, size_t size) {
  auto* self = reinterpret_cast<PreadFile*>(base);
  if (offset > self->size || size > self->size - offset) return SQFS_ERROR_OUT_OF_BOUNDS;
  if (self->lazy != nullptr) return self->lazy->read(self->offset + offset, buffer, size) == 0 ? 0 : SQFS_ERROR_IO;
  auto* out = static_cast<char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::pread(self->fd, out, size, static_cast<off_t>(self->offset + offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SQFS_ERROR_IO;
    if (n == 0) return SQFS_ERROR_OUT_OF_BOUNDS;
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;
}
int refuseWrite(sqfs_file_t*, sqfs_u64, const void*, size_t) { return SQFS_ERROR_UNSUPPORTED; }
int refuseTruncate(sqfs_file_t*, sqfs_u64) { return SQFS_ERROR_UNSUPPORTED; }
sqfs_u64 sizeOf(const sqfs_file_t* base) { return reinterpret_cast<const PreadFile*>(base)->size; }
void destroyFile(sqfs_object_t* base) { delete reinterpret_cast<PreadFile*>(base); }

sqfs_file_t* newPreadFile(int fd, uint64_t offset, uint64_t size, ctr::image::lazy::Blob* lazy) {
  auto* f = new PreadFile{};
  f->file.base.destroy = destroyFile;
  f->file.base.copy = nullptr;
  f->file.read_at = preadAt;
  f->file.write_at = refuseWrite;
  f->file.get_size = sizeOf;
  f->file.truncate = refuseTruncate;
  f->fd = fd;
  f->offset = offset;
  f->size = size;
  f->lazy = lazy;
  return &f->file;
}

struct DirEntry {
  std::string name;
  uint64_t ref;   // the inode's reference: (meta data block << 16) | offset in it
  uint32_t inum;  // the inode's number, st_ino
  uint16_t type;  // SQFS_INODE_*
};
struct Listing {
  std::vector<DirEntry> entries;  // sorted by name
  uint32_t inum = 0;              // the directory's own inode number
  uint32_t parentInum = 0;
};
using ListingPtr = std::shared_ptr<const Listing>;

// What every thread shares, read-only once main() has set it up (the caches have their own
// locks).
struct Image {
  int fd = -1;
  std::unique_ptr<ctr::image::lazy::Blob> lazy;  // a lazily read image's blob, else null
  uint64_t offset = 0;
  uint64_t size = 0;
  sqfs_super_t super{};
  SqfsObject<sqfs_id_table_t> ids;
  SqfsObject<sqfs_frag_table_t> fragments;
  uint64_t xattrPairsStart = 0;  // where the extended attributes' key-value pairs start
  std::vector<sqfs_u8> zeros;  // a block of them: what a sparse block reads as
  SharedCache<Inode> inodes{kMaxCachedInodeBytes};
  SharedCache<ListingPtr> listings{kMaxCachedEntries};
  SharedCache<BlockStarts> blockStarts{kMaxCachedStartBytes};
};
Image image;

// Where the directory table ends: at the first table written after it.
uint64_t directoryTableEnd(const sqfs_super_t& s) {
  uint64_t end = s.bytes_used;
  for (const uint64_t start : {s.fragment_table_start, s.export_table_start, s.id_table_start, s.xattr_id_table_start})
    if (start > s.directory_table_start && start < end) end = start;
  return end;
}

// One worker thread's readers: libsquashfs objects keep their position and caches inside,
// so no two threads may share one.
struct Reader {
  SqfsObject<sqfs_file_t> file;
  SqfsObject<sqfs_compressor_t> compressor;
  SqfsObject<sqfs_meta_reader_t> inodes;
  SqfsObject<sqfs_meta_reader_t> dirs;
  SqfsObject<sqfs_xattr_reader_t> xattrs;  // null when the image has none
  SqfsObject<sqfs_meta_reader_t> xattrPairs;
  std::vector<sqfs_u8> scratch;            // a compressed block as the image holds it

  // 0, or the libsquashfs error that stopped it.
  int open() {
    const sqfs_super_t& s = image.super;
    file.reset(newPreadFile(image.fd, image.offset, image.size, image.lazy.get()));
    sqfs_compressor_config_t config{};
    int err = sqfs_compressor_config_init(&config, static_cast<SQFS_COMPRESSOR>(s.compression_id), s.block_size,
                                          SQFS_COMP_FLAG_UNCOMPRESS);
    if (err != 0) return err;
    sqfs_compressor_t* cmp = nullptr;
    if ((err = sqfs_compressor_create(&config, &cmp)) != 0) return err;
    compressor.reset(cmp);
    if ((s.flags & SQFS_FLAG_COMPRESSOR_OPTIONS) != 0 && (err = cmp->read_options(cmp, file.get())) < 0) return err;
    inodes.reset(sqfs_meta_reader_create(file.get(), cmp, s.inode_table_start, s.directory_table_start));
    dirs.reset(sqfs_meta_reader_create(file.get(), cmp, s.directory_table_start, directoryTableEnd(s)));
    if (!inodes || !dirs) return SQFS_ERROR_ALLOC;
    scratch.resize(s.block_size);
    if ((s.flags & SQFS_FLAG_NO_XATTRS) == 0 && s.xattr_id_table_start != 0xFFFFFFFFFFFFFFFFULL) {
      xattrs.reset(sqfs_xattr_reader_create(0));
      if (!xattrs) return SQFS_ERROR_ALLOC;
      if ((err = sqfs_xattr_reader_load(xattrs.get(), &s, file.get(), cmp)) != 0) return err;
      xattrPairs.reset(sqfs_meta_reader_create(file.get(), cmp, image.xattrPairsStart, s.bytes_used));
      if (!xattrPairs) return SQFS_ERROR_ALLOC;
    }
    return 0;
  }

  // The inode at `ref`, from the shared cache or read (and cached) now.
  int readInode(uint64_t ref, Inode& out) {
    if ((out = image.inodes.find(ref))) return 0;
    if (int err = checkInodeSizes(ref); err != 0) return err;
    sqfs_inode_generic_t* inode = nullptr;
    const int err = sqfs_meta_reader_read_inode(inodes.get(), &image.super, ref >> 16, ref & 0xFFFF, &inode);
    if (err != 0) return err;
    out = Inode(inode, SqfsFree{});
    image.inodes.insert(ref, out, sizeof *inode + inode->payload_bytes_available);
    return 0;
  }

  // Reads the fixed part of the inode at `ref` and checks what sqfs_meta_reader_read_inode
  // would allocate by (kMaxLinkTarget above): 0, or the image is corrupt. Once per inode
  // read (they are cached), a few dozen bytes from the meta data block it is in.
  int checkInodeSizes(uint64_t ref) {
    sqfs_meta_reader_t* m = inodes.get();
    sqfs_inode_t base{};
    int err = sqfs_meta_reader_seek(m, image.super.inode_table_start + (ref >> 16), ref & 0xFFFF);
    if (err != 0 || (err = sqfs_meta_reader_read(m, &base, sizeof base)) != 0) return err;
    switch (le16toh(base.type)) {
      case SQFS_INODE_FILE: {
        sqfs_inode_file_t fixed{};
        if ((err = sqfs_meta_reader_read(m, &fixed, sizeof fixed)) != 0) return err;
        return checkBlockList(blockCount(le32toh(fixed.file_size), le32toh(fixed.fragment_index),
                                         le32toh(fixed.fragment_offset)));
      }
      case SQFS_INODE_EXT_FILE: {
        sqfs_inode_file_ext_t fixed{};
        if ((err = sqfs_meta_reader_read(m, &fixed, sizeof fixed)) != 0) return err;
        return checkBlockList(blockCount(le64toh(fixed.file_size), le32toh(fixed.fragment_idx),
                                         le32toh(fixed.fragment_offset)));
      }
      case SQFS_INODE_SLINK:
      case SQFS_INODE_EXT_SLINK: {
        sqfs_inode_slink_t link{};
        if ((err = sqfs_meta_reader_read(m, &link, sizeof link)) != 0) return err;
        return le32toh(link.target_size) > kMaxLinkTarget ? SQFS_ERROR_CORRUPTED : 0;
      }
      case SQFS_INODE_EXT_DIR: {
        // The index (one entry per meta data block of a long listing): libsquashfs grows its
        // buffer to each entry's claimed name size before reading the name.
        sqfs_inode_dir_ext_t dir{};
        if ((err = sqfs_meta_reader_read(m, &dir, sizeof dir)) != 0) return err;
        if (dir.size == 0) return 0;  // libsquashfs reads no index then
        sqfs_u8 name[kMaxNameBytes];
        for (uint32_t i = 0; i < le16toh(dir.inodex_count); ++i) {
          sqfs_dir_index_t entry{};
          if ((err = sqfs_meta_reader_read(m, &entry, sizeof entry)) != 0) return err;
          const uint64_t nameBytes = uint64_t{le32toh(entry.size)} + 1;
          if (nameBytes > kMaxNameBytes) return SQFS_ERROR_CORRUPTED;
          if ((err = sqfs_meta_reader_read(m, name, nameBytes)) != 0) return err;
        }
        return 0;
      }
    }
    return 0;
  }

  // The blocks of a file of `size` bytes whose tail is (or is not) in a fragment block: how
  // many words its inode lists (libsquashfs's own count).
  static uint64_t blockCount(uint64_t size, uint32_t fragment, uint32_t fragmentOffset) {
    const uint64_t blockSize = image.super.block_size;
    const bool tailInBlock = size % blockSize != 0 && (fragment == 0xFFFFFFFF || fragmentOffset == 0xFFFFFFFF);
    return size / blockSize + (tailInBlock ? 1 : 0);
  }

  // A file inode's block list of `count` words, which follows the inode's fixed part where
  // `inodes` now is: one longer than kUncheckedBlockListBytes is read through here, so that
  // libsquashfs allocates for it only once the inode table has been seen to hold it.
  int checkBlockList(uint64_t count) {
    if (count > kMaxBlockListBytes / sizeof(sqfs_u32)) return SQFS_ERROR_CORRUPTED;
    uint64_t left = count * sizeof(sqfs_u32);
    if (left <= kUncheckedBlockListBytes) return 0;
    sqfs_u8 skipped[SQFS_META_BLOCK_SIZE];
    for (uint64_t n = 0; left > 0; left -= n) {
      n = std::min<uint64_t>(left, sizeof skipped);
      if (int err = sqfs_meta_reader_read(inodes.get(), skipped, n); err != 0) return err;
    }
    return 0;
  }

  int readListing(const sqfs_inode_generic_t& dir, Listing& out) {
    sqfs_readdir_state_t state{};
    int err = sqfs_readdir_state_init(&state, &image.super, &dir);
    if (err != 0) return err;
    for (;;) {
      sqfs_dir_entry_t* entry = nullptr;
      sqfs_u32 inum = 0;
      sqfs_u64 ref = 0;
      err = sqfs_meta_reader_readdir(dirs.get(), &state, &entry, &inum, &ref);
      if (err > 0) break;
      if (err < 0) return err;
      std::unique_ptr<sqfs_dir_entry_t, SqfsFree> owned(entry);
      if (entry->size >= kMaxNameBytes) return SQFS_ERROR_CORRUPTED;  // a name's size less one
      out.entries.push_back({std::string(reinterpret_cast<const char*>(entry->name), entry->size + 1u), ref, inum,
                             entry->type});
    }
    std::sort(out.entries.begin(), out.entries.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    return 0;
  }
};

Reader* threadReader() {
  thread_local std::unique_ptr<Reader> reader;
  thread_local bool failed = false;
  if (!reader && !failed) {
    auto fresh = std::make_unique<Reader>();
    if (fresh->open() == 0)
      reader = std::move(fresh);
    else
      failed = true;
  }
  return reader.get();
}

// FUSE's node ids: the root is 1; every other inode is its reference plus 2 (stable, unique,
// never 0 or 1), so a lookup allocates nothing and `forget` has nothing to free.
uint64_t refOfNode(fuse_ino_t node) { return node == FUSE_ROOT_ID ? image.super.root_inode_ref : node - 2; }
fuse_ino_t nodeOfRef(uint64_t ref) { return ref == image.super.root_inode_ref ? FUSE_ROOT_ID : ref + 2; }

int errnoOf(int sqfsError) {
  switch (sqfsError) {
    case SQFS_ERROR_ALLOC: return ENOMEM;
    case SQFS_ERROR_NOT_DIR: return ENOTDIR;
    case SQFS_ERROR_NO_ENTRY: return ENOENT;
    case SQFS_ERROR_NOT_FILE: return EISDIR;
    default: return EIO;  // a corrupt or truncated image: the reader sees EIO, never a crash
  }
}

bool isDirectory(const sqfs_inode_generic_t& inode) {
  return inode.base.type == SQFS_INODE_DIR || inode.base.type == SQFS_INODE_EXT_DIR;
}
bool isFile(const sqfs_inode_generic_t& inode) {
  return inode.base.type == SQFS_INODE_FILE || inode.base.type == SQFS_INODE_EXT_FILE;
}

mode_t typeBits(uint16_t type) {
  switch (type) {
    case SQFS_INODE_DIR: case SQFS_INODE_EXT_DIR: return S_IFDIR;
    case SQFS_INODE_FILE: case SQFS_INODE_EXT_FILE: return S_IFREG;
    case SQFS_INODE_SLINK: case SQFS_INODE_EXT_SLINK: return S_IFLNK;
    case SQFS_INODE_BDEV: case SQFS_INODE_EXT_BDEV: return S_IFBLK;
    case SQFS_INODE_CDEV: case SQFS_INODE_EXT_CDEV: return S_IFCHR;
    case SQFS_INODE_FIFO: case SQFS_INODE_EXT_FIFO: return S_IFIFO;
    case SQFS_INODE_SOCKET: case SQFS_INODE_EXT_SOCKET: return S_IFSOCK;
  }
  return 0;
}

int statOf(const sqfs_inode_generic_t& inode, struct stat& st) {
  st = {};
  const auto& b = inode.base;
  st.st_ino = b.inode_number;
  st.st_mode = typeBits(b.type) | (b.mode & 07777);
  if ((st.st_mode & S_IFMT) == 0) return SQFS_ERROR_CORRUPTED;
  sqfs_u32 uid = 0;
  sqfs_u32 gid = 0;
  if (sqfs_id_table_index_to_id(image.ids.get(), b.uid_idx, &uid) != 0 ||
      sqfs_id_table_index_to_id(image.ids.get(), b.gid_idx, &gid) != 0)
    return SQFS_ERROR_CORRUPTED;
  st.st_uid = uid;
  st.st_gid = gid;
  st.st_mtim.tv_sec = st.st_atim.tv_sec = st.st_ctim.tv_sec = b.mod_time;
  st.st_blksize = image.super.block_size;
  st.st_nlink = 1;
  switch (b.type) {
    case SQFS_INODE_DIR: st.st_nlink = inode.data.dir.nlink; st.st_size = inode.data.dir.size; break;
    case SQFS_INODE_EXT_DIR: st.st_nlink = inode.data.dir_ext.nlink; st.st_size = inode.data.dir_ext.size; break;
    case SQFS_INODE_FILE:
    case SQFS_INODE_EXT_FILE: {
      sqfs_u64 size = 0;
      sqfs_inode_get_file_size(&inode, &size);
      st.st_size = static_cast<off_t>(size);
      if (b.type == SQFS_INODE_EXT_FILE) st.st_nlink = inode.data.file_ext.nlink;
      break;
    }
    case SQFS_INODE_SLINK: st.st_nlink = inode.data.slink.nlink; st.st_size = inode.data.slink.target_size; break;
    case SQFS_INODE_EXT_SLINK: st.st_nlink = inode.data.slink_ext.nlink; st.st_size = inode.data.slink_ext.target_size; break;
    case SQFS_INODE_BDEV: case SQFS_INODE_CDEV: st.st_nlink = inode.data.dev.nlink; st.st_rdev = inode.data.dev.devno; break;
    case SQFS_INODE_EXT_BDEV: case SQFS_INODE_EXT_CDEV:
      st.st_nlink = inode.data.dev_ext.nlink;
      st.st_rdev = inode.data.dev_ext.devno;
      break;
    case SQFS_INODE_FIFO: case SQFS_INODE_SOCKET: st.st_nlink = inode.data.ipc.nlink; break;
    case SQFS_INODE_EXT_FIFO: case SQFS_INODE_EXT_SOCKET: st.st_nlink = inode.data.ipc_ext.nlink; break;
  }
  st.st_blocks = (st.st_size + 511) / 512;
  return 0;
}

// A directory's listing, from the cache or read (and cached) now.
int listingOf(Reader& reader, uint64_t ref, ListingPtr& out) {
  if ((out = image.listings.find(ref))) return 0;
  Inode dir;
  int err = reader.readInode(ref, dir);
  if (err != 0) return err;
  if (!isDirectory(*dir)) return SQFS_ERROR_NOT_DIR;
  auto listing = std::make_shared<Listing>();
  if ((err = reader.readListing(*dir, *listing)) != 0) return err;
  listing->inum = dir->base.inode_number;
  listing->parentInum = dir->base.type == SQFS_INODE_DIR ? dir->data.dir.parent_inode : dir->data.dir_ext.parent_inode;
  out = listing;
  image.listings.insert(ref, listing, listing->entries.size() + 1);
  return 0;
}

Reader* readerOr(fuse_req_t req) {
  Reader* reader = threadReader();
  if (!reader) fuse_reply_err(req, EIO);
  return reader;
}

int entryOf(Reader& reader, uint64_t ref, fuse_entry_param& entry) {
  entry = {};
  Inode inode;
  int err = reader.readInode(ref, inode);
  if (err == 0) err = statOf(*inode, entry.attr);
  if (err != 0) return err;
  entry.ino = nodeOfRef(ref);
  entry.attr_timeout = kCacheSeconds;
  entry.entry_timeout = kCacheSeconds;
  return 0;
}

const DirEntry* findEntry(const Listing& listing, std::string_view name) {
  auto it = std::lower_bound(listing.entries.begin(), listing.entries.end(), name,
                            [](const DirEntry& e, std::string_view n) { return e.name < n; });
  return it != listing.entries.end() && it->name == name ? &*it : nullptr;
}

// Opens need no message where the kernel can do without (Linux >= 4.19 files, 5.1
// directories): ENOSYS to the first open makes it stop sending OPEN and RELEASE, and keep the
// page cache across opens. So a reader that opens many small files, or the same files each
// epoch, makes no request once their data is cached. Reads find the inode by node id.
std::atomic<bool> zeroMessageOpen{false};
std::atomic<bool> zeroMessageOpendir{false};

void onInit(void*, fuse_conn_info* conn) {
  // Links resolve in the kernel after the first readlink; readdirplus on every listing, so
  // that a reader that lists a directory and then opens its files makes no lookup.
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  conn->want &= ~(FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_AUTO_INVAL_DATA);
  zeroMessageOpen = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
  zeroMessageOpendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
}

void onLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  ListingPtr listing;
  if (int err = listingOf(*reader, refOfNode(parent), listing); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  const DirEntry* found = findEntry(*listing, name);
  fuse_entry_param entry{};
  if (!found) {
    entry.entry_timeout = kCacheSeconds;  // ino 0: the kernel keeps the name as absent
    fuse_reply_entry(req, &entry);
    return;
  }
  if (int err = entryOf(*reader, found->ref, entry); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  fuse_reply_entry(req, &entry);
}

void onGetattr(fuse_req_t req, fuse_ino_t node, fuse_file_info*) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  fuse_entry_param entry{};
  if (int err = entryOf(*reader, refOfNode(node), entry); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  fuse_reply_attr(req, &entry.attr, kCacheSeconds);
}

// A symbolic link's target: 0, EINVAL for another kind of inode, EIO when the inode says
// more than it holds.
int linkTargetOf(const sqfs_inode_generic_t& inode, std::string& out) {
  if (inode.base.type != SQFS_INODE_SLINK && inode.base.type != SQFS_INODE_EXT_SLINK) return EINVAL;
  const uint32_t size = inode.base.type == SQFS_INODE_SLINK ? inode.data.slink.target_size
                                                            : inode.data.slink_ext.target_size;
  if (size > inode.payload_bytes_available) return EIO;
  out.assign(reinterpret_cast<const char*>(inode.extra), size);
  return 0;
}

void onReadlink(fuse_req_t req, fuse_ino_t node) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  Inode inode;
  if (int err = reader->readInode(refOfNode(node), inode); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  std::string target;
  if (int err = linkTargetOf(*inode, target); err != 0) return (void)fuse_reply_err(req, err);
  fuse_reply_readlink(req, target.c_str());
}


void onOpen(fuse_req_t req, fuse_ino_t node, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  if (zeroMessageOpen.load(std::memory_order_relaxed)) return (void)fuse_reply_err(req, ENOSYS);
  Reader* reader = readerOr(req);
  if (!reader) return;
  Inode inode;
  if (int err = reader->readInode(refOfNode(node), inode); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  if (!isFile(*inode)) return (void)fuse_reply_err(req, isDirectory(*inode) ? EISDIR : EINVAL);
  fi->keep_cache = 1;  // the data cannot change: keep it in the page cache across opens
  fuse_reply_open(req, fi);
}

// File data. A block the image stores as is (incompressible data: JPEGs, packed arrays,
// random bytes) is never decoded: a read takes the bytes it asks for from the image straight
// into its reply (a small file's tail, not the whole fragment block it shares with others),
// with the image file's page cache as their cache and the kernel's read-ahead of that file
// ahead of them. A compressed block (data or fragment) is decompressed once for every worker
// and cached, keyed by where it is in the image (a read that spans two blocks, the kernel's
// read-ahead windows, which are not aligned to them, and the small files that share a
// fragment block do not decompress it again on another thread), and read ahead: the blocks
// after the one a read ended in are decompressed on a thread of their own while the kernel
// consumes this one. A program run from a cold image (its pages fault in one 128 KiB window
// at a time, each waiting for the last) then finds most of its blocks done. Replies point
// into the cached blocks: nothing is copied again in this process.
struct DataBlock {
  std::mutex mutex;
  std::condition_variable done;
  bool ready = false;
  int error = 0;
  std::unique_ptr<sqfs_u8[]> bytes;  // not zeroed first: decoding writes every byte kept
  size_t size = 0;
};
using DataBlockPtr = std::shared_ptr<DataBlock>;

// A block of the image: where it starts (from the squashfs start) and its size word as the
// inode or the fragment table gives it (bit 24: stored as is; the low 24 bits: its size in
// the image, 0 for a sparse block, which is all zeros and never read).
struct BlockRef {
  uint64_t location = 0;
  uint32_t word = 0;
  bool sparse() const { return SQFS_IS_SPARSE_BLOCK(word); }
  bool stored() const { return !sparse() && !SQFS_IS_BLOCK_COMPRESSED(word); }  // kept as is
  uint32_t storedSize() const { return SQFS_ON_DISK_BLOCK_SIZE(word); }
};

constexpr size_t kBlockCacheBytes = 16 << 20;
constexpr uint64_t kReadAheadBlocks = 8;
// Compressed blocks by where they are in the image, each costing a block's size (its
// buffer). Never destroyed: the read-ahead thread may still wait on it when main returns.
SharedCache<DataBlockPtr>& blockCache = *new SharedCache<DataBlockPtr>(kBlockCacheBytes);

// The block at `location`, and whether the caller is to fill it (then it must call
// fillBlock whatever happens).
std::pair<DataBlockPtr, bool> acquireBlock(uint64_t location) {
  return blockCache.findOrInsert(location, image.super.block_size, [] { return std::make_shared<DataBlock>(); });
}

// Reads and decompresses one compressed block with `reader`'s compressor: 0 or a libsquashfs
// error. Every block holds at most a block's size (libsquashfs's own bound).
int decodeBlock(Reader& reader, const BlockRef& at, std::unique_ptr<sqfs_u8[]>& bytes, size_t& size) {
  const uint32_t stored = at.storedSize();
  const uint32_t blockSize = image.super.block_size;
  if (stored > blockSize) return SQFS_ERROR_OVERFLOW;
  bytes.reset(new (std::nothrow) sqfs_u8[blockSize]);
  if (!bytes) return SQFS_ERROR_ALLOC;
  sqfs_u8* in = reader.scratch.data();
  if (int err = reader.file->read_at(reader.file.get(), at.location, in, stored); err != 0) return err;
  const sqfs_s32 n = reader.compressor->do_block(reader.compressor.get(), in, stored, bytes.get(), blockSize);
  if (n <= 0) return n < 0 ? n : SQFS_ERROR_OVERFLOW;
  size = static_cast<size_t>(n);
  return 0;
}

// Decodes the block this thread acquired to fill and publishes it (or the error) to every
// waiter; a failed one is dropped from the cache.
void fillBlock(Reader& reader, const BlockRef& at, const DataBlockPtr& block) {
  std::unique_ptr<sqfs_u8[]> bytes;
  size_t size = 0;
  const int err = decodeBlock(reader, at, bytes, size);
  if (err != 0) blockCache.erase(at.location, block);  // the next read tries again
  std::lock_guard lock(block->mutex);
  block->error = err;
  if (err == 0) {
    block->bytes = std::move(bytes);
    block->size = size;
  }
  block->ready = true;
  block->done.notify_all();
}

// The block, from the cache or decoded here; waits for one another thread is filling.
int blockOf(Reader& reader, const BlockRef& at, DataBlockPtr& out) {
  auto acquired = acquireBlock(at.location);
  const DataBlockPtr block = acquired.first;  // not a structured binding: the lambda below takes it
  if (acquired.second) fillBlock(reader, at, block);
  std::unique_lock lock(block->mutex);
  block->done.wait(lock, [&] { return block->ready; });
  if (block->error != 0) return block->error;
  out = block;
  return 0;
}

// One thread decompresses ahead; requests queue (at most a few: older ones are dropped, a
// reader that moved on no longer needs them).
class ReadAhead {
 public:
  void request(const BlockRef& at) {
    {
      std::lock_guard lock(mutex_);
      if (!started_) {
        started_ = true;
        std::thread([this] { run(); }).detach();
      }
      queue_.push_back(at);
      if (queue_.size() > 2 * kReadAheadBlocks) queue_.pop_front();
    }
    wake_.notify_one();
  }

 private:
  [[noreturn]] void run() {
    for (;;) {
      BlockRef at;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return !queue_.empty(); });
        at = queue_.front();
        queue_.pop_front();
      }
      Reader* reader = threadReader();
      if (!reader) continue;
      auto [block, mine] = acquireBlock(at.location);
      if (mine) fillBlock(*reader, at, block);
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<BlockRef> queue_;
  bool started_ = false;
};
ReadAhead& readAhead = *new ReadAhead;

// Where a file's bytes are: whole blocks from `blocksStart` on, one size word each in the
// inode, then the tail in a fragment block if it has one (else a short last block).
struct FileLayout {
  uint64_t size = 0;
  uint64_t blocks = 0;
  uint64_t blocksStart = 0;
  const sqfs_u32* words = nullptr;  // the inode's: valid while its Inode is held
  BlockStarts starts;               // where each block starts, for a file of many blocks
  bool fragmentTail = false;
  sqfs_fragment_t fragment{};       // where the tail's block is (fragmentTail)
  uint32_t fragmentOffset = 0;      // and where in it the tail starts
};

// The layout of the file inode at `ref`.
int layoutOf(uint64_t ref, const sqfs_inode_generic_t& inode, FileLayout& out) {
  sqfs_u64 fileSize = 0, start = 0;
  sqfs_u32 fragment = 0, fragmentOffset = 0;
  if (sqfs_inode_get_file_size(&inode, &fileSize) != 0 || sqfs_inode_get_file_block_start(&inode, &start) != 0 ||
      sqfs_inode_get_frag_location(&inode, &fragment, &fragmentOffset) != 0)
    return EIO;
  out.size = fileSize;
  out.blocks = sqfs_inode_get_file_block_count(&inode);
  out.blocksStart = start;
  out.words = inode.extra;
  out.fragmentTail = fragment != 0xFFFFFFFF && fileSize % image.super.block_size != 0;
  out.fragmentOffset = fragmentOffset;
  if (out.fragmentTail && sqfs_frag_table_lookup(image.fragments.get(), fragment, &out.fragment) != 0) return EIO;
  if (out.blocks > kIndexedBlocks && !(out.starts = image.blockStarts.find(ref))) {
    auto starts = std::make_shared<std::vector<uint64_t>>(out.blocks);
    uint64_t at = out.blocksStart;
    for (uint64_t i = 0; i < out.blocks; at += SQFS_ON_DISK_BLOCK_SIZE(out.words[i++])) (*starts)[i] = at;
    out.starts = starts;
    image.blockStarts.insert(ref, out.starts, out.blocks * sizeof(uint64_t));
  }
  return 0;
}

// A walk over a file's blocks in order from block `index`: where each one is.
class BlockWalk {
 public:
  BlockWalk(const FileLayout& layout, uint64_t index) : layout_(layout), index_(0), at_(layout.blocksStart) {
    if (layout_.starts) {  // past the last block only the fragment tail is left: no start needed
      index_ = index;
      if (index < layout_.blocks) at_ = (*layout_.starts)[index];
      return;
    }
    while (index_ < index && index_ < layout_.blocks) advance();
    index_ = index;
  }
  uint64_t index() const { return index_; }
  // The block at the walk's index, and where in it the file's bytes start; false past the
  // file's blocks and tail (the inode says less than its size).
  bool current(BlockRef& out, uint64_t& skip) const {
    skip = 0;
    if (index_ < layout_.blocks) {
      out = {at_, layout_.words[index_]};
      return true;
    }
    if (index_ != layout_.blocks || !layout_.fragmentTail) return false;
    out = {layout_.fragment.start_offset, layout_.fragment.size};
    skip = layout_.fragmentOffset;
    return !out.sparse();
  }
  void next() {
    if (index_ < layout_.blocks)
      advance();
    else
      ++index_;
  }

 private:
  void advance() { at_ += SQFS_ON_DISK_BLOCK_SIZE(layout_.words[index_++]); }
  const FileLayout& layout_;
  uint64_t index_;
  uint64_t at_;
};

// A read's bytes as pieces of cached blocks (or of `image.zeros`), the blocks held until the
// reply is written.
struct ReadPieces {
  std::vector<iovec> iov;
  std::vector<DataBlockPtr> held;
  std::vector<sqfs_u8> direct;  // the bytes read straight from the image, at their place in the range
  uint64_t lastIndex = 0;       // the block the read ended in
  void clear() {
    iov.clear();
    held.clear();
  }
};

// Collects the file's bytes [start, end) (end <= its size): 0 or an errno. A block stored
// as is (incompressible data: JPEGs, packed arrays, random bytes) is not decoded at all:
// the bytes asked for are read from the image straight into the reply (for a small file's
// tail, its own bytes, not the whole fragment block it shares), the image file's page cache
// being their cache. A compressed one comes from the block cache.
int collectRange(Reader& reader, const FileLayout& layout, uint64_t start, uint64_t end, ReadPieces& out) {
  const uint64_t blockSize = image.super.block_size;
  const uint64_t first = start;
  out.clear();
  if (out.direct.size() < end - start) out.direct.resize(end - start);
  for (BlockWalk walk(layout, start / blockSize); start < end; walk.next()) {
    const uint64_t within = start - walk.index() * blockSize;
    const uint64_t want = std::min<uint64_t>(end - start, blockSize - within);
    BlockRef at;
    uint64_t skip = 0;
    if (!walk.current(at, skip)) return EIO;
    const sqfs_u8* bytes = image.zeros.data() + within;
    if (at.stored()) {
      // A block shorter than the inode says (a tail past its fragment block's end): EIO.
      if (at.storedSize() > blockSize || skip + within + want > at.storedSize()) return EIO;
      sqfs_u8* into = out.direct.data() + (start - first);
      if (int err = reader.file->read_at(reader.file.get(), at.location + skip + within, into, want); err != 0)
        return errnoOf(err);
      bytes = into;
    } else if (!at.sparse()) {
      DataBlockPtr block;
      if (int err = blockOf(reader, at, block); err != 0) return errnoOf(err);
      if (skip + within + want > block->size) return EIO;
      bytes = block->bytes.get() + skip + within;
      out.held.push_back(std::move(block));
    }
    out.iov.push_back({const_cast<sqfs_u8*>(bytes), static_cast<size_t>(want)});
    out.lastIndex = walk.index();
    start += want;
  }
  return 0;
}

// Asks for the compressed blocks after the read's last (programs fault their pages in
// anywhere in the file, windows of 128 KiB, so up to kReadAheadBlocks, not just the next
// one). Blocks stored as is are left to the kernel's read-ahead of the image file, which
// sees their reads in order.
void readAheadAfter(const FileLayout& layout, uint64_t lastIndex) {
  const uint64_t blockSize = image.super.block_size;
  BlockWalk walk(layout, lastIndex + 1);
  for (; walk.index() <= lastIndex + kReadAheadBlocks && walk.index() * blockSize < layout.size; walk.next()) {
    BlockRef at;
    uint64_t skip = 0;
    if (walk.current(at, skip) && !at.sparse() && !at.stored() && !blockCache.find(at.location))
      readAhead.request(at);
  }
}

void onRead(fuse_req_t req, fuse_ino_t node, size_t size, off_t offset, fuse_file_info*) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  const uint64_t ref = refOfNode(node);
  Inode inode;  // held to the reply: the layout points into it
  if (int err = reader->readInode(ref, inode); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  if (!isFile(*inode)) return (void)fuse_reply_err(req, EISDIR);
  FileLayout layout;
  if (int err = layoutOf(ref, *inode, layout); err != 0) return (void)fuse_reply_err(req, err);
  const uint64_t start = static_cast<uint64_t>(offset);
  if (offset < 0 || start >= layout.size || size == 0) return (void)fuse_reply_buf(req, nullptr, 0);
  const uint64_t end = std::min<uint64_t>(layout.size, start + size);
  thread_local ReadPieces pieces;
  if (int err = collectRange(*reader, layout, start, end, pieces); err != 0) {
    pieces.clear();
    return (void)fuse_reply_err(req, err);
  }
  readAheadAfter(layout, pieces.lastIndex);
  fuse_reply_iov(req, pieces.iov.data(), static_cast<int>(pieces.iov.size()));
  pieces.clear();
}

void onOpendir(fuse_req_t req, fuse_ino_t node, fuse_file_info* fi) {
  if (zeroMessageOpendir.load(std::memory_order_relaxed)) return (void)fuse_reply_err(req, ENOSYS);
  Reader* reader = readerOr(req);
  if (!reader) return;
  ListingPtr listing;
  if (int err = listingOf(*reader, refOfNode(node), listing); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

// Offsets: 0 is the start, entry i (".", "..", then the listing) is followed by i + 1.
// The listing is the cached one (or read again: the image does not change, so the offsets
// of a directory read in several calls stay valid).
void readDirectory(fuse_req_t req, fuse_ino_t node, size_t size, off_t offset, bool plus) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  ListingPtr cached;
  if (int err = listingOf(*reader, refOfNode(node), cached); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  const Listing& listing = *cached;
  std::vector<char> out(size);
  size_t used = 0;
  const size_t count = listing.entries.size() + 2;
  for (size_t i = static_cast<size_t>(std::max<off_t>(offset, 0)); i < count; ++i) {
    const bool dot = i < 2;
    const char* name = i == 0 ? "." : i == 1 ? ".." : listing.entries[i - 2].name.c_str();
    fuse_entry_param entry{};
    entry.attr.st_ino = i == 0 ? listing.inum : i == 1 ? listing.parentInum : listing.entries[i - 2].inum;
    entry.attr.st_mode = dot ? S_IFDIR : typeBits(listing.entries[i - 2].type);
    if (plus && !dot) {
      // The entry's attributes, and a lookup the kernel counts: ino 0 ("." and "..") is none.
      if (int err = entryOf(*reader, listing.entries[i - 2].ref, entry); err != 0) {
        if (used == 0) return (void)fuse_reply_err(req, errnoOf(err));
        break;
      }
    }
    const size_t room = out.size() - used;
    const size_t need = plus ? fuse_add_direntry_plus(req, out.data() + used, room, name, &entry, static_cast<off_t>(i + 1))
                             : fuse_add_direntry(req, out.data() + used, room, name, &entry.attr, static_cast<off_t>(i + 1));
    if (need > room) break;
    used += need;
  }
  fuse_reply_buf(req, out.data(), used);
}

void onReaddir(fuse_req_t req, fuse_ino_t node, size_t size, off_t offset, fuse_file_info*) {
  readDirectory(req, node, size, offset, false);
}
void onReaddirplus(fuse_req_t req, fuse_ino_t node, size_t size, off_t offset, fuse_file_info*) {
  readDirectory(req, node, size, offset, true);
}

void onStatfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st {};
  st.f_bsize = st.f_frsize = image.super.block_size;
  st.f_blocks = (image.super.bytes_used + image.super.block_size - 1) / image.super.block_size;
  st.f_files = image.super.inode_count;
  st.f_namemax = 256;
  fuse_reply_statfs(req, &st);
}

using Xattrs = std::vector<std::pair<std::string, std::string>>;

// One extended attribute's value, read where the pairs reader is (libsquashfs's
// sqfs_xattr_reader_read_value allocates the size the image gives, up to 4 GiB, before
// reading): in place, or for a value stored once for several names (SQFS_XATTR_FLAG_OOL,
// as mksquashfs writes a repeated one), where the reference there points.
int readXattrValue(Reader& reader, uint16_t type, std::string& out) {
  sqfs_meta_reader_t* m = reader.xattrPairs.get();
  sqfs_u32 size = 0;
  sqfs_u64 ref = 0;
  sqfs_u64 block = 0;
  size_t offset = 0;
  int err = sqfs_meta_reader_read(m, &size, sizeof size);
  if (err == 0 && (type & SQFS_XATTR_FLAG_OOL) != 0) {
    if ((err = sqfs_meta_reader_read(m, &ref, sizeof ref)) != 0) return err;
    ref = le64toh(ref);
    sqfs_meta_reader_get_position(m, &block, &offset);
    if ((err = sqfs_meta_reader_seek(m, image.xattrPairsStart + (ref >> 16), ref & 0xFFFF)) == 0)
      err = sqfs_meta_reader_read(m, &size, sizeof size);
  }
  if (err != 0) return err;
  if (le32toh(size) > kMaxXattrValue) return SQFS_ERROR_CORRUPTED;
  out.resize(le32toh(size));
  if ((err = sqfs_meta_reader_read(m, out.data(), out.size())) != 0) return err;
  return (type & SQFS_XATTR_FLAG_OOL) != 0 ? sqfs_meta_reader_seek(m, block, offset) : 0;
}

// An inode's extended attributes as (full name, value) pairs: every name (values left
// empty), or with `only`, that one pair alone, so that no request holds more than one value.
int xattrsOf(Reader& reader, uint64_t ref, std::string_view only, Xattrs& out) {
  if (!reader.xattrs) return 0;
  Inode inode;
  int err = reader.readInode(ref, inode);
  if (err != 0) return err;
  sqfs_u32 index = 0;
  if (sqfs_inode_get_xattr_index(inode.get(), &index) != 0 || index == 0xFFFFFFFF) return 0;
  sqfs_xattr_id_t desc{};
  if ((err = sqfs_xattr_reader_get_desc(reader.xattrs.get(), index, &desc)) != 0) return err;
  sqfs_meta_reader_t* m = reader.xattrPairs.get();
  if ((err = sqfs_meta_reader_seek(m, image.xattrPairsStart + (desc.xattr >> 16), desc.xattr & 0xFFFF)) != 0)
    return err;
  size_t listed = 0;  // as listxattr returns them: each name and a NUL
  std::string name;
  std::string value;
  for (sqfs_u32 i = 0; i < desc.count; ++i) {
    sqfs_xattr_entry_t key{};
    if ((err = sqfs_meta_reader_read(m, &key, sizeof key)) != 0) return err;
    const uint16_t type = le16toh(key.type);
    const char* prefix = sqfs_get_xattr_prefix(static_cast<SQFS_XATTR_TYPE>(type & SQFS_XATTR_PREFIX_MASK));
    if (!prefix) return SQFS_ERROR_UNSUPPORTED;
    name = prefix;  // the full name: "user." and the key as stored ("test")
    const size_t prefixBytes = name.size();
    const size_t keyBytes = le16toh(key.size);
    listed += prefixBytes + keyBytes + 1;
    if (prefixBytes + keyBytes > kMaxXattrName || listed > kMaxXattrList) return SQFS_ERROR_CORRUPTED;
    name.resize(prefixBytes + keyBytes);
    if ((err = sqfs_meta_reader_read(m, name.data() + prefixBytes, keyBytes)) != 0) return err;
    if ((err = readXattrValue(reader, type, value)) != 0) return err;
    if (only.empty()) {
      out.emplace_back(name, std::string());
    } else if (name == only) {
      out.emplace_back(name, value);
      return 0;
    }
  }
  return 0;
}

// getxattr and listxattr: size 0 asks for the size, too small a size is ERANGE.
void replyXattr(fuse_req_t req, const std::string& bytes, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, bytes.size());
  if (size < bytes.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, bytes.data(), bytes.size());
}

void onGetxattr(fuse_req_t req, fuse_ino_t node, const char* name, size_t size) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  Xattrs pairs;
  if (*name == '\0') return (void)fuse_reply_err(req, ENODATA);  // `only` empty would list every name
  if (int err = xattrsOf(*reader, refOfNode(node), name, pairs); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  if (pairs.empty()) return (void)fuse_reply_err(req, ENODATA);
  replyXattr(req, pairs.front().second, size);
}

void onListxattr(fuse_req_t req, fuse_ino_t node, size_t size) {
  Reader* reader = readerOr(req);
  if (!reader) return;
  Xattrs pairs;
  if (int err = xattrsOf(*reader, refOfNode(node), {}, pairs); err != 0) return (void)fuse_reply_err(req, errnoOf(err));
  std::string names;
  for (const auto& pair : pairs) names.append(pair.first).push_back('\0');
  replyXattr(req, names, size);
}

struct Options {
  std::string image;
  std::string mountpoint;
  uint64_t offset = 0;
  unsigned threads = 0;  // 0: the CPUs this process may run on, at most kMaxThreads
  std::string lazySpec;  // lazy=SPEC: IMAGE is "-", the blob is read through the node cache
};

bool parseNumber(std::string_view text, uint64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "ctr-squashfs: %s\nusage: ctr-squashfs [-f] [-o offset=N,threads=N,lazy=SPEC] IMAGE|- MOUNTPOINT\n",
               problem.c_str());
  std::exit(2);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-f") continue;  // always in the foreground: the holder owns this process
    if (arg == "-o") {
      if (++i == argc) usage("-o needs a value");
      std::string_view list = argv[i];
      while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        uint64_t value = 0;
        if (item.rfind("offset=", 0) == 0 && parseNumber(item.substr(7), value)) {
          o.offset = value;
        } else if (item.rfind("threads=", 0) == 0 && parseNumber(item.substr(8), value) && value >= 1 &&
                   value <= 256) {
          o.threads = static_cast<unsigned>(value);
        } else if (item.rfind("lazy=", 0) == 0 && item.size() > 5) {
          o.lazySpec = std::string(item.substr(5));
        } else {
          usage("unknown or malformed option '" + std::string(item) + "'");
        }
      }
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') usage("unknown option '" + std::string(arg) + "'");
    positional.emplace_back(arg);
  }
  if (positional.size() != 2) usage("expected IMAGE and MOUNTPOINT");
  o.image = positional[0];
  o.mountpoint = positional[1];
  if (o.lazySpec.empty() == (o.image == "-")) usage("IMAGE is '-' exactly when lazy=SPEC names the image");
  if (o.threads == 0) {
    cpu_set_t cpus;
    const int count = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    o.threads = std::clamp<unsigned>(static_cast<unsigned>(count), 1, kMaxThreads);
  }
  return o;
}

// Where the extended attributes' key-value pairs start, from the table the superblock points
// to. libsquashfs allocates the locations of the descriptors' meta data blocks (8 bytes for
// each 512 descriptors) by the count there before reading them: the locations must fit in
// the image.
int readXattrTableHeader(sqfs_file_t* file) {
  const sqfs_super_t& s = image.super;
  image.xattrPairsStart = 0;
  if ((s.flags & SQFS_FLAG_NO_XATTRS) != 0 || s.xattr_id_table_start == 0xFFFFFFFFFFFFFFFFULL) return 0;
  sqfs_xattr_id_table_t table{};
  if (s.xattr_id_table_start > s.bytes_used || s.bytes_used - s.xattr_id_table_start < sizeof table)
    return SQFS_ERROR_OUT_OF_BOUNDS;
  if (int err = file->read_at(file, s.xattr_id_table_start, &table, sizeof table); err != 0) return err;
  const uint64_t descriptorBytes = uint64_t{le32toh(table.xattr_ids)} * sizeof(sqfs_xattr_id_t);
  const uint64_t locationBytes = (descriptorBytes + SQFS_META_BLOCK_SIZE - 1) / SQFS_META_BLOCK_SIZE * sizeof(sqfs_u64);
  if (locationBytes > s.bytes_used - s.xattr_id_table_start - sizeof table) return SQFS_ERROR_CORRUPTED;
  image.xattrPairsStart = le64toh(table.xattr_table_start);
  return 0;
}

// Sets up `image` over fd's bytes [offset, offset + size): the superblock, the id table,
// the caches emptied; readers over it open (the compressor and tables check out) and the root
// is a directory. 0, or the libsquashfs error and `what` failed. What a fuzzer calls for
// every input, and main once.
int loadImage(int fd, uint64_t offset, uint64_t size, const char*& what) {
  image.fd = fd;
  image.offset = offset;
  image.size = size;
  image.ids.reset();
  image.fragments.reset();
  image.inodes.clear();
  image.listings.clear();
  image.blockStarts.clear();
  blockCache.clear();
  SqfsObject<sqfs_file_t> file(newPreadFile(image.fd, image.offset, image.size, image.lazy.get()));
  what = "superblock";
  if (int err = sqfs_super_read(&image.super, file.get()); err != 0) return err;
  // libsquashfs sizes the fragment table by the superblock's count (16 bytes an entry) and
  // allocates it before reading: a count no image of this size can have (every fragment
  // block takes at least a byte) would have it ask for up to 64 GiB.
  // Nor more fragments than files: each fragment block holds the tail of one at least.
  what = "superblock";
  if (uint64_t{image.super.fragment_entry_count} > size || image.super.fragment_entry_count > image.super.inode_count ||
      image.super.bytes_used > size)
    return SQFS_ERROR_CORRUPTED;
  what = "extended attribute table";
  if (int err = readXattrTableHeader(file.get()); err != 0) return err;
  what = "compressor or tables";
  Reader reader;
  if (int err = reader.open(); err != 0) return err;
  what = "id table";
  image.ids.reset(sqfs_id_table_create(0));
  if (!image.ids) return SQFS_ERROR_ALLOC;
  if (int err = sqfs_id_table_read(image.ids.get(), file.get(), &image.super, reader.compressor.get()); err != 0)
    return err;
  what = "fragment table";
  image.fragments.reset(sqfs_frag_table_create(0));
  if (!image.fragments) return SQFS_ERROR_ALLOC;
  if (int err = sqfs_frag_table_read(image.fragments.get(), file.get(), &image.super, reader.compressor.get());
      err != 0)
    return err;
  image.zeros.assign(image.super.block_size, 0);
  what = "root inode";
  Inode root;
  if (int err = reader.readInode(image.super.root_inode_ref, root); err != 0) return err;
  return isDirectory(*root) ? 0 : SQFS_ERROR_NOT_DIR;
}

#ifndef CTR_SQUASHFS_NO_MAIN
// A lazily read image: the spec ctr wrote, the blob's cache entry opened, and the squashfs
// partition at `offset` in the blob set up like a local file's (its superblock and tables are
// the first chunks fetched).
void openLazyImage(const Options& o) {
  std::string text;
  try {
    const int fd = ::open(o.lazySpec.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw ctr::sysError("open " + o.lazySpec);
    char buffer[65536];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || text.size() > (64u << 20)) {
        ::close(fd);
        throw ctr::Error("read " + o.lazySpec + ": " + (n < 0 ? std::strerror(errno) : "too large"));
      }
      text.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    auto spec = ctr::image::lazy::parseSpec(text);
    // What the cache logs (a chunk that failed its digest or could not be fetched) goes to
    // stderr and to <cache>/<hex>.log: the holder that runs this server has no terminal, and
    // the user finds the lines there (--explain names the file).
    auto console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    console->set_pattern("ctr-squashfs: %v");
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(ctr::image::lazy::logFile(spec).string());
    file->set_pattern("%Y-%m-%dT%H:%M:%S%z ctr-squashfs[%P]: %v");
    auto logger = std::make_shared<spdlog::logger>("ctr-squashfs", spdlog::sinks_init_list{console, file});
    logger->flush_on(spdlog::level::trace);  // each line as it happens: the server may be killed
    spdlog::set_default_logger(logger);
    image.lazy = std::make_unique<ctr::image::lazy::Blob>(std::move(spec));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctr-squashfs: %s\n", e.what());
    std::exit(1);
  }
  const uint64_t size = image.lazy->size();
  if (size < o.offset) {
    std::fprintf(stderr, "ctr-squashfs: lazy image: offset %llu is past the end of the blob\n",
                 static_cast<unsigned long long>(o.offset));
    std::exit(1);
  }
  const char* what = "";
  if (int err = loadImage(-1, o.offset, size - o.offset, what); err != 0) {
    std::fprintf(stderr, "ctr-squashfs: lazy image: not a squashfs image this server can read (%s: libsquashfs error %d)\n",
                 what, err);
    std::exit(1);
  }
}

// Opens IMAGE and sets it up (loadImage), so that a file
// that is no squashfs image is refused before anything is served.
void openImage(const Options& o) {
  if (!o.lazySpec.empty()) return openLazyImage(o);
  const int fd = ::open(o.image.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::fprintf(stderr, "ctr-squashfs: %s: %s\n", o.image.c_str(), std::strerror(errno));
    std::exit(1);
  }
  if (static_cast<uint64_t>(st.st_size) < o.offset) {
    std::fprintf(stderr, "ctr-squashfs: %s: offset %llu is past the end of the file\n", o.image.c_str(),
                 static_cast<unsigned long long>(o.offset));
    std::exit(1);
  }
  const char* what = "";
  if (int err = loadImage(fd, o.offset, static_cast<uint64_t>(st.st_size) - o.offset, what); err != 0) {
    std::fprintf(stderr, "ctr-squashfs: %s: not a squashfs image this server can read (%s: libsquashfs error %d)\n",
                 o.image.c_str(), what, err);
    std::exit(1);
  }
}

#endif  // CTR_SQUASHFS_NO_MAIN

}  // namespace

#ifndef CTR_SQUASHFS_NO_MAIN
int main(int argc, char** argv) {
  const Options options = parseOptions(argc, argv);
  openImage(options);

  fuse_lowlevel_ops ops{};
  ops.init = onInit;
  ops.lookup = onLookup;
  ops.getattr = onGetattr;
  ops.readlink = onReadlink;
  ops.open = onOpen;
  ops.read = onRead;
  ops.opendir = onOpendir;
  ops.readdir = onReaddir;
  ops.readdirplus = onReaddirplus;
  ops.statfs = onStatfs;
  ops.getxattr = onGetxattr;
  ops.listxattr = onListxattr;

  // Read-only also where this program mounts by itself (by hand, through fusermount3): the
  // kernel then refuses writes, which the zero-message opens would not see.
  char program[] = "ctr-squashfs";
  char readOnly[] = "-oro";
  char* fuseArgv[] = {program, readOnly, nullptr};
  fuse_args args = FUSE_ARGS_INIT(2, fuseArgv);
  fuse_session* session = fuse_session_new(&args, &ops, sizeof ops, nullptr);
  if (!session) return 1;
  if (fuse_set_signal_handlers(session) != 0 || fuse_session_mount(session, options.mountpoint.c_str()) != 0) {
    fuse_session_destroy(session);
    return 1;
  }
  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, options.threads);
  fuse_loop_cfg_set_idle_threads(loop, options.threads);  // keep workers (and their caches) alive
  fuse_loop_cfg_set_clone_fd(loop, 1);                    // a /dev/fuse queue per worker
  const int result = fuse_session_loop_mt(session, loop);
  fuse_loop_cfg_destroy(loop);
  fuse_session_unmount(session);
  fuse_remove_signal_handlers(session);
  fuse_session_destroy(session);
  return result == 0 ? 0 : 1;
}
#endif  // CTR_SQUASHFS_NO_MAIN
