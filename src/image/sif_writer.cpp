// SIF writer: creates and edits images exactly as the reference Go library does
// (sif-format.md §7, §8), so its output is byte-identical to the library's goldens.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <optional>

#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/log.hpp"
#include "ctr/sif.hpp"

namespace ctr::image::sif {

namespace {

// The state being edited; written back to the file by writeTable/writeHeader.
struct Layout {
  int fd = -1;
  Header header;
  std::vector<Descriptor> slots;
};

void pwriteFully(int fd, std::int64_t offset, std::span<const std::uint8_t> data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sysError("write");
    }
    done += static_cast<std::size_t>(n);
  }
}

void writeHeader(const Layout& l) { pwriteFully(l.fd, 0, encodeHeader(l.header)); }

void writeTable(const Layout& l) {
  std::vector<std::uint8_t> table;
  table.reserve(l.slots.size() * static_cast<std::size_t>(kDescriptorSize));
  for (const auto& d : l.slots) {
    auto rec = encodeDescriptor(d);
    table.insert(table.end(), rec.begin(), rec.end());
  }
  pwriteFully(l.fd, l.header.descriptorsOffset, table);
}

// Bytes from DataOffset to the end of the last used object (the library's calculatedDataSize).
std::int64_t calculatedDataSize(const Layout& l) {
  std::int64_t end = l.header.dataOffset;
  for (const auto& d : l.slots) {
    if (d.used) end = std::max(end, d.offset + d.size);
  }
  return end - l.header.dataOffset;
}

// The library rounds with a bit mask, i.e. assumes a power of two; do the same.
std::int64_t nextAligned(std::int64_t offset, std::int64_t alignment) {
  if (alignment <= 0) return offset;
  auto off = static_cast<std::uint64_t>(offset);
  auto align = static_cast<std::uint64_t>(alignment);
  if (off % align == 0) return offset;
  return static_cast<std::int64_t>((off & ~(align - 1)) + align);
}

bool hasPrimary(const Layout& l) {
  return std::any_of(l.slots.begin(), l.slots.end(),
                     [](const Descriptor& d) { return d.used && d.isPrimarySystemPartition(); });
}

void putInt32(std::array<std::uint8_t, kExtraSize>& extra, std::size_t pos, std::int32_t v) {
  auto u = static_cast<std::uint32_t>(v);
  for (std::size_t i = 0; i < 4; ++i) extra[pos + i] = static_cast<std::uint8_t>(u >> (8 * i));
}

bool isOciType(DataType t) { return t == DataType::OciRootIndex || t == DataType::OciBlob; }

// Copies the object's data to `offset`, returning its length and (for OCI types) its digest.
std::int64_t copyData(int fd, std::int64_t offset, const DataSource& src, Digester* hash) {
  if (src.fd < 0) {
    pwriteFully(fd, offset, src.bytes);
    if (hash) hash->update(src.bytes.data(), src.bytes.size());
    return static_cast<std::int64_t>(src.bytes.size());
  }
  std::int64_t done = 0;
  if (!hash) {
    // In-kernel copy: no user-space buffer for a multi-GiB squashfs.
    while (done < src.size) {
      loff_t outOff = offset + done;
      ssize_t n = ::copy_file_range(src.fd, nullptr, fd, &outOff,
                                    static_cast<std::size_t>(std::min<std::int64_t>(src.size - done, 1 << 30)), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) break;
        throw sysError("copy_file_range");
      }
      if (n == 0) throw Error("input ended after " + std::to_string(done) + " of " + std::to_string(src.size) + " bytes");
      done += n;
    }
  }
  std::vector<std::uint8_t> buf(1 << 20);
  while (done < src.size) {
    auto want = static_cast<std::size_t>(std::min<std::int64_t>(src.size - done, static_cast<std::int64_t>(buf.size())));
    ssize_t n = ::read(src.fd, buf.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sysError("read");
    }
    if (n == 0) throw Error("input ended after " + std::to_string(done) + " of " + std::to_string(src.size) + " bytes");
    std::span<const std::uint8_t> chunk(buf.data(), static_cast<std::size_t>(n));
    pwriteFully(fd, offset + done, chunk);
    if (hash) hash->update(chunk.data(), chunk.size());
    done += n;
  }
  return done;
}

// Checks what can be checked before anything is written, so that a failing add leaves
// the file as it was.
void checkInput(const Layout& l, const ObjectInput& in) {
  if (in.name.size() > kNameSize) throw Error("object name longer than 128 bytes");
  if (in.type == DataType::Partition) {
    if (!in.partition) throw Error("partition object without partition metadata");
    if (!archCode(in.partition->arch)) throw Error("unknown architecture '" + in.partition->arch + "'");
    if (in.partition->part == PartType::PrimSys && hasPrimary(l)) {
      throw Error("primary system partition already exists");
    }
  }
  if (in.group > ~kGroupMask || in.linkedGroup > ~kGroupMask) throw Error("group ID out of range");
  if (in.type == DataType::Signature && in.entityHex.size() > 2 * 256) throw Error("signing entity too long");
}

std::array<std::uint8_t, kExtraSize> fixedExtra(const ObjectInput& in) {
  std::array<std::uint8_t, kExtraSize> extra{};
  switch (in.type) {
    case DataType::Partition: {
      putInt32(extra, 0, static_cast<std::int32_t>(in.partition->fs));
      putInt32(extra, 4, static_cast<std::int32_t>(in.partition->part));
      auto code = *archCode(in.partition->arch);
      std::memcpy(extra.data() + 8, code.data(), 3);
      break;
    }
    case DataType::Signature: {
      putInt32(extra, 0, in.hashType);
      for (std::size_t i = 0; i + 1 < in.entityHex.size(); i += 2) {
        extra[4 + i / 2] = static_cast<std::uint8_t>(std::stoul(in.entityHex.substr(i, 2), nullptr, 16));
      }
      break;
    }
    case DataType::CryptoMessage:
      putInt32(extra, 0, in.cryptoFormat);
      putInt32(extra, 4, in.cryptoMessage);
      break;
    case DataType::Sbom: putInt32(extra, 0, in.sbomFormat); break;
    default: break;
  }
  return extra;
}

// The library's writeDataObject: place, copy, and fill slot `i`.
void writeDataObject(Layout& l, std::size_t i, const ObjectInput& in, std::int64_t time) {
  checkInput(l, in);
  if (in.type == DataType::Partition && in.partition->part == PartType::PrimSys) {
    l.header.arch = *archCode(in.partition->arch);
  }
  Descriptor& d = l.slots[i];
  d = Descriptor{};
  d.id = static_cast<std::uint32_t>(i + 1);
  l.header.dataSize = calculatedDataSize(l);
  const std::int64_t unaligned = l.header.dataOffset + l.header.dataSize;
  const std::int64_t alignment =
      in.alignment.value_or(in.type == DataType::Partition ? kPartitionAlignment : 0);
  const std::int64_t offset = nextAligned(unaligned, alignment);

  std::optional<Digester> hash;
  if (isOciType(in.type)) hash.emplace();
  const std::int64_t n = copyData(l.fd, offset, in.data, hash ? &*hash : nullptr);

  d.dataType = static_cast<std::int32_t>(in.type);
  d.used = true;
  d.groupIdRaw = in.group | kGroupMask;
  d.linkedIdRaw = in.linkedGroup != 0 ? (in.linkedGroup | kGroupMask) : in.linkedId;
  d.offset = offset;
  d.size = n;
  d.sizeWithPadding = offset - unaligned + n;
  d.createdAt = time;
  d.modifiedAt = time;
  std::memcpy(d.name.data(), in.name.data(), in.name.size());
  d.extra = fixedExtra(in);
  if (isOciType(in.type)) {
    std::string digest = hash->digest();
    std::memcpy(d.extra.data(), digest.data(), digest.size());
  }
  l.header.dataSize += d.sizeWithPadding;
  l.header.descriptorsFree -= 1;
}

std::size_t firstFreeSlot(const Layout& l) {
  for (std::size_t i = 0; i < l.slots.size(); ++i) {
    if (!l.slots[i].used) return i;
  }
  throw Error("insufficient descriptor capacity to add an object");
}

Descriptor& findById(Layout& l, std::uint32_t id) {
  for (auto& d : l.slots) {
    if (d.used && d.id == id) return d;
  }
  throw Error("object " + std::to_string(id) + " not found");
}

void zeroRange(int fd, std::int64_t offset, std::int64_t size) {
  std::vector<std::uint8_t> zeros(static_cast<std::size_t>(std::min<std::int64_t>(size, 1 << 20)));
  for (std::int64_t done = 0; done < size;) {
    auto n = std::min<std::int64_t>(size - done, static_cast<std::int64_t>(zeros.size()));
    pwriteFully(fd, offset + done, std::span(zeros.data(), static_cast<std::size_t>(n)));
    done += n;
  }
}

std::int64_t fileSizeOf(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw sysError("stat");
  return st.st_size;
}

}  // namespace

void writeNewImage(int fd, const CreateOptions& options, const std::vector<ObjectInput>& objects) {
  if (options.capacity < 0 || options.capacity >= 0xFFFFFFFFLL) throw Error("descriptor capacity out of range");
  if (options.launchScript.size() >= kLaunchScriptSize) throw Error("launch script must be shorter than 32 bytes");
  if (static_cast<std::int64_t>(objects.size()) > options.capacity) {
    throw Error("insufficient descriptor capacity to add an object");
  }
  Layout l;
  l.fd = fd;
  std::memcpy(l.header.launchScript.data(), options.launchScript.data(), options.launchScript.size());
  l.header.id = options.id;
  l.header.descriptorsFree = options.capacity;
  l.header.descriptorsTotal = options.capacity;
  l.header.descriptorsOffset = kDefaultDescriptorsOffset;
  l.header.descriptorsSize = options.capacity * kDescriptorSize;
  l.header.dataOffset = kDefaultDescriptorsOffset + options.capacity * kDescriptorSize;
  l.slots.resize(static_cast<std::size_t>(options.capacity));
  for (std::size_t i = 0; i < objects.size(); ++i) writeDataObject(l, i, objects[i], options.time);
  writeTable(l);
  l.header.createdAt = options.time;
  l.header.modifiedAt = options.time;
  writeHeader(l);
  // The table ends at DataOffset; with no descriptors nothing was written there.
  if (fileSizeOf(fd) < l.header.dataOffset && ::ftruncate(fd, l.header.dataOffset) != 0) {
    throw sysError("ftruncate");
  }
}

void createImage(const std::filesystem::path& path, const CreateOptions& options,
                 const std::vector<ObjectInput>& objects) {
  std::string tmpl = path.string() + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) throw sysError("create " + path.string() + ".tmp");
  try {
    writeNewImage(fd.get(), options, objects);
    if (::fchmod(fd.get(), 0644) != 0) throw sysError("chmod " + tmpl);
    if (::fsync(fd.get()) != 0) throw sysError("fsync " + tmpl);
    if (::rename(tmpl.c_str(), path.c_str()) != 0) throw sysError("rename to " + path.string());
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
}

Editor::Editor(Image& image) : image_(image) {
  if (!image.writable_) throw Error("image was not opened for writing");
}

std::int64_t Editor::defaultTime() const {
  return image_.isDeterministic() ? kDeterministicTime : static_cast<std::int64_t>(std::time(nullptr));
}

void Editor::add(const ObjectInput& object, std::int64_t time) {
  Layout l = Layout{image_.fd_.get(), image_.header_, image_.slots_};
  const std::size_t i = firstFreeSlot(l);
  writeDataObject(l, i, object, time);
  writeTable(l);
  l.header.modifiedAt = time;
  writeHeader(l);
  image_.header_ = l.header;
  image_.slots_ = std::move(l.slots);
  image_.fileSize_ = fileSizeOf(image_.fd_.get());
}

void Editor::remove(const DeleteOptions& options) {
  Layout l = Layout{image_.fd_.get(), image_.header_, image_.slots_};
  std::vector<std::size_t> selected;
  for (std::size_t i = 0; i < l.slots.size(); ++i) {
    const Descriptor& d = l.slots[i];
    if (!d.used) continue;
    if (options.id && d.id != *options.id) continue;
    if (options.type && d.dataType != static_cast<std::int32_t>(*options.type)) continue;
    if (options.partType && !(d.isPartition() && d.partType() == static_cast<std::int32_t>(*options.partType))) {
      continue;
    }
    selected.push_back(i);
  }
  if (selected.empty()) {
    throw Error(options.id ? "object " + std::to_string(*options.id) + " not found" : "no matching object found");
  }
  for (std::size_t i : selected) {
    Descriptor& d = l.slots[i];
    if (options.zero) zeroRange(l.fd, d.offset, d.size);
    if (d.isPrimarySystemPartition()) l.header.arch = {'0', '0', '\0'};
    d = Descriptor{};
    l.header.descriptorsFree += 1;
  }
  if (options.compact) {
    l.header.dataSize = calculatedDataSize(l);
    if (::ftruncate(l.fd, l.header.dataOffset + l.header.dataSize) != 0) throw sysError("ftruncate");
  }
  writeTable(l);
  l.header.modifiedAt = options.time;
  writeHeader(l);
  image_.header_ = l.header;
  image_.slots_ = std::move(l.slots);
  image_.fileSize_ = fileSizeOf(image_.fd_.get());
}

void Editor::setPrimary(std::uint32_t id, std::int64_t time) {
  Layout l = Layout{image_.fd_.get(), image_.header_, image_.slots_};
  Descriptor& d = findById(l, id);
  if (!d.isPartition()) throw Error("object " + std::to_string(id) + " is not a partition");
  if (d.partType() == static_cast<std::int32_t>(PartType::PrimSys)) return;
  if (d.partType() != static_cast<std::int32_t>(PartType::System)) {
    throw Error("object " + std::to_string(id) + " is not a system partition");
  }
  // Round trip through the arch name, as the library does: unknown codes become "00".
  auto normalArch = [](const Descriptor& x) {
    return archCode(archName(x.partArch())).value_or(std::array<char, 3>{'0', '0', '\0'});
  };
  Descriptor* old = nullptr;
  for (auto& x : l.slots) {
    if (x.used && x.isPrimarySystemPartition()) old = &x;
  }
  const std::int32_t fs = d.fsType();
  l.header.arch = normalArch(d);
  auto arch = normalArch(d);
  d.extra = {};
  putInt32(d.extra, 0, fs);
  putInt32(d.extra, 4, static_cast<std::int32_t>(PartType::PrimSys));
  std::memcpy(d.extra.data() + 8, arch.data(), 3);
  d.modifiedAt = time;
  if (old) {
    const std::int32_t oldFs = old->fsType();
    auto oldArch = normalArch(*old);
    old->extra = {};
    putInt32(old->extra, 0, oldFs);
    putInt32(old->extra, 4, static_cast<std::int32_t>(PartType::System));
    std::memcpy(old->extra.data() + 8, oldArch.data(), 3);
    old->modifiedAt = time;
  }
  writeTable(l);
  l.header.modifiedAt = time;
  writeHeader(l);
  image_.header_ = l.header;
  image_.slots_ = std::move(l.slots);
}

void Editor::setMetadata(std::uint32_t id, std::span<const std::uint8_t> extra, std::int64_t time) {
  if (extra.size() > kExtraSize) throw Error("metadata longer than 384 bytes");
  Layout l = Layout{image_.fd_.get(), image_.header_, image_.slots_};
  Descriptor& d = findById(l, id);
  d.extra = {};
  std::memcpy(d.extra.data(), extra.data(), extra.size());
  d.modifiedAt = time;
  writeTable(l);
  l.header.modifiedAt = time;
  writeHeader(l);
  image_.header_ = l.header;
  image_.slots_ = std::move(l.slots);
}

void Editor::setOciBlobDigest(std::uint32_t id, std::string_view digest, std::int64_t time) {
  const Descriptor& d = image_.descriptorById(id);
  if (!isOciType(static_cast<DataType>(d.dataType))) {
    throw Error("object " + std::to_string(id) + " is not an OCI blob or root index");
  }
  setMetadata(id, std::span(reinterpret_cast<const std::uint8_t*>(digest.data()), digest.size()), time);
}

}  // namespace ctr::image::sif
