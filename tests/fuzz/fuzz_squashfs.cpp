// libFuzzer target: ctr-squashfs's image code over any bytes. The server's own functions (the
// program's source, compiled without its main) open the image and walk it as the FUSE
// handlers do: every directory listed, every inode's attributes, link targets, extended
// attributes and file data read through the shared block cache. A corrupt or truncated
// image must give errors (the reader's EIO), never a crash, a leak, an endless loop or an
// allocation of a size it claims (run-fuzz.sh fails any allocation over 1 GiB).
#include <sys/mman.h>

#include <set>

#define CTR_SQUASHFS_NO_MAIN
#include "../../src/squashfs/ctr_squashfs.cpp"

namespace {

// Bounds per input, so that a crafted image that claims huge files or deep trees is walked
// in about a millisecond, not until libFuzzer's timeout.
constexpr std::size_t kMaxInodes = 512;
constexpr std::uint64_t kMaxFileBytes = 1 << 20;

void walk(Reader& reader) {
  std::vector<uint64_t> pending{image.super.root_inode_ref};
  std::set<uint64_t> seen;
  std::vector<char> data;
  while (!pending.empty() && seen.size() < kMaxInodes) {
    const uint64_t ref = pending.back();
    pending.pop_back();
    if (!seen.insert(ref).second) continue;  // a listing may name a directory above it
    Inode inode;
    if (reader.readInode(ref, inode) != 0) continue;
    struct stat st {};
    (void)statOf(*inode, st);
    Xattrs names;  // listxattr, then getxattr of each name
    if (xattrsOf(reader, ref, {}, names) == 0) {
      for (const auto& pair : names) {
        Xattrs one;
        if (xattrsOf(reader, ref, pair.first, one) == 0 && one.size() != 1) std::abort();  // a listed name must be found
      }
    }
    if (isDirectory(*inode)) {
      ListingPtr listing;
      if (listingOf(reader, ref, listing) != 0) continue;
      for (const auto& e : listing->entries) {
        (void)findEntry(*listing, e.name);
        pending.push_back(e.ref);
      }
    } else if (isFile(*inode)) {
      FileLayout layout;
      if (layoutOf(ref, *inode, layout) != 0) continue;
      // As a read's reply: its pieces collected, then copied out (so every byte is touched).
      const uint64_t end = std::min<uint64_t>(layout.size, kMaxFileBytes);
      ReadPieces pieces;
      if (end == 0 || collectRange(reader, layout, 0, end, pieces) != 0) continue;
      data.clear();
      for (const iovec& piece : pieces.iov) {
        const char* from = static_cast<const char*>(piece.iov_base);
        data.insert(data.end(), from, from + piece.iov_len);
      }
      if (data.size() != end) std::abort();  // the pieces must add up to the range asked for
    } else {
      std::string target;
      (void)linkTargetOf(*inode, target);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  static const int fd = ::memfd_create("fuzz-squashfs", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) return 0;
  for (std::size_t at = 0; at < size;) {
    const ssize_t n = ::pwrite(fd, bytes + at, size - at, static_cast<off_t>(at));
    if (n <= 0) return 0;
    at += static_cast<std::size_t>(n);
  }
  const char* what = "";
  if (loadImage(fd, 0, size, what) != 0) return 0;
  Reader reader;
  if (reader.open() == 0) walk(reader);
  return 0;
}
