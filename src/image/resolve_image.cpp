// resolveImage: turns an IMAGE argument into the location of its root filesystem.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/overlay_image.hpp"
#include "ctr/sif.hpp"

namespace ctr::image {

namespace {

constexpr std::array<char, 4> kSquashfsMagic = {'h', 's', 'q', 's'};
constexpr std::int64_t kMaxEnvironmentObject = 1 << 20;

bool hasSquashfsMagicAt(int fd, std::int64_t offset) {
  std::array<char, 4> magic{};
  return readAt(fd, offset, std::span<char>(magic)) == magic.size() && magic == kSquashfsMagic;
}

// Where the squashfs of a Singularity 2 image starts: after its first line when that is
// a "#!" line (of at most 1 KiB); 0 for any other file.
std::int64_t launchLineEnd(int fd) {
  std::array<char, 1024> head{};
  const auto got = static_cast<std::ptrdiff_t>(readAt(fd, 0, std::span<char>(head)));
  if (got < 3 || head[0] != '#' || head[1] != '!') return 0;
  const auto end = std::find(head.begin(), head.begin() + got, '\n');
  return end == head.begin() + got ? 0 : (end - head.begin()) + 1;
}

}  // namespace

bool hasSifMagic(int fd) {
  std::array<char, 10> magic{};
  return readAt(fd, 32, std::span<char>(magic)) == magic.size() && std::memcmp(magic.data(), "SIF_MAGIC\0", 10) == 0;
}

std::optional<SquashfsSuperblock> decodeSquashfsSuperblock(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < SquashfsSuperblock::kBytes || !std::equal(kSquashfsMagic.begin(), kSquashfsMagic.end(), bytes.begin()))
    return std::nullopt;
  auto le = [&bytes](std::size_t at, std::size_t size) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < size; ++i) v |= std::uint64_t{bytes[at + i]} << (8 * i);
    return v;
  };
  SquashfsSuperblock sb;
  sb.blockSize = static_cast<std::uint32_t>(le(12, 4));
  sb.compression = static_cast<std::uint16_t>(le(20, 2));
  sb.major = static_cast<std::uint16_t>(le(28, 2));
  sb.minor = static_cast<std::uint16_t>(le(30, 2));
  sb.bytesUsed = le(40, 8);
  sb.inodeTableStart = le(64, 8);
  return sb;
}

std::string describeSquashfs(int fd, std::int64_t offset) {
  std::array<std::uint8_t, SquashfsSuperblock::kBytes> bytes{};
  if (readAt(fd, offset, std::span<std::uint8_t>(bytes)) != bytes.size()) return {};
  const auto sb = decodeSquashfsSuperblock(bytes);
  if (!sb) return {};
  static constexpr std::array<const char*, 7> kCompressors = {"unknown", "gzip", "lzma", "lzo", "xz", "lz4", "zstd"};
  return "squashfs " + std::to_string(sb->major) + "." + std::to_string(sb->minor) + ", " +
         (sb->compression < kCompressors.size() ? kCompressors[sb->compression] : "unknown") +
         " compressed, data block size " + std::to_string(sb->blockSize);
}

std::string toString(ImageKind kind) {
  switch (kind) {
    case ImageKind::Sif: return "sif";
    case ImageKind::Squashfs: return "squashfs";
    case ImageKind::Directory: return "directory";
  }
  return "unknown";
}

namespace {

// The partition a SIF's image is in: the primary system partition, or for a data image
// without one, its first squashfs partition.
// A copy: usedDescriptors() gives a vector of its own, gone once the loop ends.
std::optional<sif::Descriptor> rootPartition(const sif::Image& image, bool data) {
  if (const sif::Descriptor* primary = image.primaryPartition(); primary != nullptr) return *primary;
  if (!data) return std::nullopt;
  for (const auto& d : image.usedDescriptors())
    if (d.isPartition() && d.fsType() == static_cast<std::int32_t>(sif::FsType::Squashfs)) return d;
  return std::nullopt;
}

UniqueFd openImage(const std::filesystem::path& path, const std::string& name) {
  // O_NONBLOCK: an image path that is a FIFO must not hang the launch in open().
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) throw Error(name + ": no such file");
    if (err == EACCES) throw Error(name + ": permission denied");
    throw sysError(name, err);
  }
  return fd;
}

// What identifies the file and where it lives.
void recordFile(ImageSource& source, int fd, const struct stat& st) {
  source.device = st.st_dev;
  source.inode = st.st_ino;
  source.mtimeNs = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  source.ctimeNs = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  source.fileBytes = static_cast<std::uint64_t>(st.st_size);
  source.owner = st.st_uid;
  source.links = static_cast<std::uint64_t>(st.st_nlink);
  source.mode = st.st_mode & 07777;
  if (struct statfs fs {}; ::fstatfs(fd, &fs) == 0) source.filesystem = static_cast<std::int64_t>(fs.f_type);
}

// A squashfs file, or a Singularity 2 image: true, with `source` filled in; false for a SIF;
// throws for any other file.
bool locateSquashfs(ImageSource& source, int fd, std::int64_t fileSize, const std::string& name) {
  if (hasSquashfsMagicAt(fd, 0)) {
    source.kind = ImageKind::Squashfs;
    source.offset = 0;
    source.size = static_cast<std::uint64_t>(fileSize);
    return true;
  }
  if (hasSifMagic(fd)) return false;
  // A Singularity 2 image (.simg): a "#!/usr/bin/env run-singularity" line, then squashfs.
  // Looked for only here: a SIF starts with such a line too, and its launch reads no more.
  if (auto offset = launchLineEnd(fd); offset > 0 && hasSquashfsMagicAt(fd, offset)) {
    source.kind = ImageKind::Squashfs;
    source.offset = static_cast<std::uint64_t>(offset);
    source.size = static_cast<std::uint64_t>(fileSize - offset);
    return true;
  }
  throw Error(name + ": not a SIF, squashfs image or directory");
}

// The SIF's partition to mount, once it is there and holds a squashfs.
sif::Descriptor squashfsPartition(const sif::Image& sifImage, int fd, const std::string& name, bool data) {
  const std::optional<sif::Descriptor> primary = rootPartition(sifImage, data);
  if (!primary)
    throw Error(name + (data ? ": SIF has no squashfs partition" : ": SIF has no primary system partition"));
  if (primary->fsType() != static_cast<std::int32_t>(sif::FsType::Squashfs)) {
    throw Error(name + ": SIF primary partition (id " + std::to_string(primary->id) + ") is " +
                sif::fsTypeName(primary->fsType()) + ", not squashfs");
  }
  // Bounds were checked by the reader; the magic check needs 4 bytes inside the object.
  if (primary->size < 4 || !hasSquashfsMagicAt(fd, primary->offset)) {
    throw Error(name + ": SIF primary partition (id " + std::to_string(primary->id) +
                ") at offset " + std::to_string(primary->offset) + " is not a squashfs filesystem");
  }
  return *primary;
}

// The SIF's first environment object; "" when it has none.
std::string sifEnvironment(const sif::Image& sifImage, const std::string& name) {
  for (const auto& d : sifImage.usedDescriptors()) {
    if (d.dataType != static_cast<std::int32_t>(sif::DataType::EnvVar)) continue;
    // An environment is a few KiB; a huge object is a broken or hostile image.
    if (d.size > kMaxEnvironmentObject) {
      throw Error(name + ": SIF environment object (id " + std::to_string(d.id) + ") is " +
                  std::to_string(d.size) + " bytes, more than " +
                  std::to_string(kMaxEnvironmentObject));
    }
    auto bytes = sifImage.readObject(d);
    return std::string(bytes.begin(), bytes.end());
  }
  return {};
}

void locateSif(ImageSource& source, UniqueFd fd, std::int64_t fileSize, const std::string& name, bool data) {
  const int raw = fd.get();
  auto sifImage = withContext(name, [&] { return sif::Image::fromFd(std::move(fd), fileSize); });
  const sif::Descriptor primary = squashfsPartition(sifImage, raw, name, data);
  source.kind = ImageKind::Sif;
  source.dataPartition = !primary.isPrimarySystemPartition();
  source.offset = static_cast<std::uint64_t>(primary.offset);
  source.size = static_cast<std::uint64_t>(primary.size);
  std::string arch = sif::archName(primary.partArch());
  source.arch = arch == "unknown" ? "" : arch;
  source.environment = sifEnvironment(sifImage, name);
  if (const auto overlay = sifExt3Overlay(sifImage)) {
    source.overlayOffset = overlay->offset;
    source.overlaySize = overlay->size;
  }
}

ImageSource resolve(const std::filesystem::path& path, bool data) {
  ImageSource source;
  std::error_code ec;
  source.path = std::filesystem::absolute(path, ec);
  if (ec) source.path = path;
  const std::string name = path.string();

  UniqueFd fd = openImage(path, name);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw sysError(name + ": stat");
  recordFile(source, fd.get(), st);

  if (S_ISDIR(st.st_mode)) {
    source.kind = ImageKind::Directory;
    return source;
  }
  if (!S_ISREG(st.st_mode))
    throw Error(name + ": " + fileTypeName(st.st_mode) + ", not a SIF, squashfs image or directory");
  if (!locateSquashfs(source, fd.get(), st.st_size, name)) locateSif(source, std::move(fd), st.st_size, name, data);
  return source;
}

}  // namespace

ImageSource resolveImage(const std::filesystem::path& path) { return resolve(path, false); }

ImageSource resolveDataImage(const std::filesystem::path& path) { return resolve(path, true); }

}  // namespace ctr::image
