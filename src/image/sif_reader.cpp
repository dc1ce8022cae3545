// SIF reader. Every field is untrusted: offsets, sizes and counts are checked against the
// real file size with overflow-safe arithmetic before anything is read (sif-format.md §13).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <set>

#include "ctr/fd.hpp"
#include "ctr/error.hpp"
#include "ctr/log.hpp"
#include "ctr/sif.hpp"

namespace ctr::image::sif {

namespace {

using ReadAt = std::function<void(std::int64_t offset, std::span<std::uint8_t> out)>;

std::string n2s(std::int64_t v) { return std::to_string(v); }

std::string descriptorLabel(std::size_t slot, const Descriptor& d) {
  return "descriptor " + std::to_string(slot) + " (id " + std::to_string(d.id) + ")";
}

void preadFully(int fd, std::int64_t offset, std::span<std::uint8_t> out) {
  if (readAt(fd, offset, out) != out.size()) throw Error("file shrank while being read");
}

// The header, once the file is long enough to hold one and it says SIF version 01.
Header readHeader(std::int64_t fileSize, const ReadAt& readAt) {
  if (fileSize < kHeaderSize) {
    throw Error("truncated SIF: file is " + n2s(fileSize) + " bytes, the header alone needs " +
                n2s(kHeaderSize));
  }
  std::array<std::uint8_t, kHeaderSize> raw{};
  readAt(0, raw);
  if (std::memcmp(raw.data() + 32, "SIF_MAGIC\0", 10) != 0) {
    throw Error("not a SIF file (no SIF_MAGIC at byte 32)");
  }
  if (std::memcmp(raw.data() + 42, "01\0", 3) != 0) {
    std::string v;
    for (int i = 42; i < 44; ++i) v += std::isprint(raw[static_cast<std::size_t>(i)]) ? static_cast<char>(raw[static_cast<std::size_t>(i)]) : '?';
    throw Error("unsupported SIF version \"" + v + "\" (only 01 is supported)");
  }
  return decodeHeader(raw);
}

// Checks the header's counts and offsets against each other and `fileSize`; returns where the
// descriptor table ends.
std::int64_t checkDescriptorTable(const Header& h, std::int64_t fileSize) {
  if (h.descriptorsTotal < 0 || h.descriptorsTotal >= 0xFFFFFFFFLL) {
    throw Error("DescriptorsTotal " + n2s(h.descriptorsTotal) + " is out of range");
  }
  if (h.descriptorsFree < 0 || h.descriptorsFree > h.descriptorsTotal) {
    throw Error("DescriptorsFree " + n2s(h.descriptorsFree) + " is out of range (DescriptorsTotal " +
                n2s(h.descriptorsTotal) + ")");
  }
  const std::int64_t tableSize = h.descriptorsTotal * kDescriptorSize;  // < 2^42, no overflow
  if (h.descriptorsSize != tableSize) {
    throw Error("DescriptorsSize " + n2s(h.descriptorsSize) + " is not DescriptorsTotal " +
                n2s(h.descriptorsTotal) + " x 585 = " + n2s(tableSize));
  }
  if (h.descriptorsOffset < kHeaderSize) {
    throw Error("DescriptorsOffset " + n2s(h.descriptorsOffset) + " overlaps the header");
  }
  std::int64_t tableEnd = 0;
  if (__builtin_add_overflow(h.descriptorsOffset, tableSize, &tableEnd) || tableEnd > fileSize) {
    throw Error("descriptor table at offset " + n2s(h.descriptorsOffset) + " + size " +
                n2s(tableSize) + " is past end of file (" + n2s(fileSize) + " bytes)");
  }
  if (h.dataOffset < tableEnd) {
    throw Error("DataOffset " + n2s(h.dataOffset) + " lies before the end of the descriptor table (" +
                n2s(tableEnd) + ")");
  }
  if (h.dataSize < 0) throw Error("DataSize " + n2s(h.dataSize) + " is negative");
  return tableEnd;
}

// Every slot of the table, used or not (the table is checked to lie inside the file).
std::vector<Descriptor> readDescriptors(const Header& h, const ReadAt& readAt) {
  const std::int64_t tableSize = h.descriptorsTotal * kDescriptorSize;
  std::vector<std::uint8_t> table(static_cast<std::size_t>(tableSize));
  readAt(h.descriptorsOffset, table);
  std::vector<Descriptor> slots;
  slots.reserve(static_cast<std::size_t>(h.descriptorsTotal));
  for (std::int64_t i = 0; i < h.descriptorsTotal; ++i) {
    std::span<const std::uint8_t, kDescriptorSize> rec(
        table.data() + static_cast<std::size_t>(i * kDescriptorSize), kDescriptorSize);
    slots.push_back(decodeDescriptor(rec));
  }
  return slots;
}

// Where objects may lie: inside the file, clear of the header and the descriptor table.
struct FileLayout {
  std::int64_t fileSize;
  std::int64_t tableOffset;
  std::int64_t tableEnd;
};

void checkObjectBounds(const std::string& what, const Descriptor& d, const FileLayout& layout) {
  if (d.offset < 0) throw Error(what + ": object offset " + n2s(d.offset) + " is negative");
  if (d.size < 0) throw Error(what + ": object size " + n2s(d.size) + " is negative");
  std::int64_t end = 0;
  if (__builtin_add_overflow(d.offset, d.size, &end) || end > layout.fileSize) {
    throw Error(what + ": object offset " + n2s(d.offset) + " + size " + n2s(d.size) +
                " is past end of file (" + n2s(layout.fileSize) + " bytes)");
  }
  if (d.size > 0) {
    if (d.offset < kHeaderSize) throw Error(what + ": object at offset " + n2s(d.offset) + " overlaps the header");
    if (d.offset < layout.tableEnd && end > layout.tableOffset) {
      throw Error(what + ": object at offset " + n2s(d.offset) + " + size " + n2s(d.size) +
                  " overlaps the descriptor table");
    }
  }
}

// `withData`: the slots of the objects with a size, in any order.
void checkObjectsDisjoint(const std::vector<Descriptor>& slots, std::vector<std::size_t> withData) {
  std::sort(withData.begin(), withData.end(), [&](std::size_t a, std::size_t b) {
    return slots[a].offset < slots[b].offset;
  });
  for (std::size_t k = 1; k < withData.size(); ++k) {
    const Descriptor& prev = slots[withData[k - 1]];
    const Descriptor& cur = slots[withData[k]];
    if (cur.offset < prev.offset + prev.size) {
      throw Error(descriptorLabel(withData[k], cur) + ": object at " + n2s(cur.offset) + "-" +
                  n2s(cur.offset + cur.size) + " overlaps " + descriptorLabel(withData[k - 1], prev) +
                  " at " + n2s(prev.offset) + "-" + n2s(prev.offset + prev.size));
    }
  }
}

// The used descriptors: unique non-zero IDs, objects inside the file and apart from each
// other, at most one primary system partition.
void checkDescriptors(const std::vector<Descriptor>& slots, const Header& h, const FileLayout& layout) {
  std::set<std::uint32_t> ids;
  std::vector<std::size_t> primaries;
  std::vector<std::size_t> withData;
  std::int64_t usedCount = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Descriptor& d = slots[i];
    if (!d.used) continue;
    ++usedCount;
    const std::string what = descriptorLabel(i, d);
    if (d.id == 0) throw Error(what + ": object ID is 0");
    if (!ids.insert(d.id).second) throw Error(what + ": object ID " + std::to_string(d.id) + " is used twice");
    checkObjectBounds(what, d, layout);
    if (d.size > 0) withData.push_back(i);
    if (d.isPrimarySystemPartition()) primaries.push_back(i);
  }
  // DescriptorsFree is only a hint (the writer looks for a free slot itself); a miscount
  // harms nothing, so it is not worth refusing an image that otherwise loads.
  if (usedCount + h.descriptorsFree != h.descriptorsTotal) {
    spdlog::debug("SIF DescriptorsFree {} does not match {} used of {} descriptors",
                  h.descriptorsFree, usedCount, h.descriptorsTotal);
  }
  if (primaries.size() > 1) {
    throw Error(descriptorLabel(primaries[1], slots[primaries[1]]) +
                ": a second primary system partition (" +
                descriptorLabel(primaries[0], slots[primaries[0]]) + " is one already)");
  }
  checkObjectsDisjoint(slots, std::move(withData));
}

// Fills header and slots from `readAt`, checking everything against `fileSize`.
void loadAndValidate(std::int64_t fileSize, const ReadAt& readAt, Header& header,
                     std::vector<Descriptor>& slots) {
  header = readHeader(fileSize, readAt);
  const std::int64_t tableEnd = checkDescriptorTable(header, fileSize);
  slots = readDescriptors(header, readAt);
  checkDescriptors(slots, header, FileLayout{fileSize, header.descriptorsOffset, tableEnd});
}

}  // namespace

Image Image::open(const std::filesystem::path& path, bool writable) {
  int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) throw Error(path.string() + ": no such file");
    if (err == EACCES) throw Error(path.string() + ": permission denied");
    throw sysError(path.string(), err);
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(owned.get(), &st) != 0) throw sysError(path.string() + ": stat");
  if (!S_ISREG(st.st_mode)) throw Error(path.string() + ": " + fileTypeName(st.st_mode) + ", not a regular file");
  return withContext(path.string(), [&] { return fromFd(std::move(owned), st.st_size, writable); });
}

Image Image::fromFd(UniqueFd fd, std::int64_t fileSize, bool writable) {
  Image image;
  image.fd_ = std::move(fd);
  image.fileSize_ = fileSize;
  image.writable_ = writable;
  const int raw = image.fd_.get();
  loadAndValidate(
      fileSize, [raw](std::int64_t off, std::span<std::uint8_t> out) { preadFully(raw, off, out); },
      image.header_, image.slots_);
  return image;
}

Image Image::parse(std::span<const std::uint8_t> bytes) {
  Image image;
  image.fileSize_ = static_cast<std::int64_t>(bytes.size());
  loadAndValidate(
      image.fileSize_,
      [bytes](std::int64_t off, std::span<std::uint8_t> out) {
        // Callers only ask for ranges already checked against the size; assert it anyway.
        if (off < 0 || static_cast<std::uint64_t>(off) + out.size() > bytes.size()) {
          throw Error("internal error: read past end of buffer");
        }
        if (!out.empty()) std::memcpy(out.data(), bytes.data() + off, out.size());
      },
      image.header_, image.slots_);
  return image;
}

std::vector<Descriptor> Image::usedDescriptors() const {
  std::vector<Descriptor> used;
  for (const auto& d : slots_) {
    if (d.used) used.push_back(d);
  }
  return used;
}

const Descriptor& Image::descriptorById(std::uint32_t id) const {
  for (const auto& d : slots_) {
    if (d.used && d.id == id) return d;
  }
  throw Error("object " + std::to_string(id) + " not found");
}

const Descriptor* Image::primaryPartition() const {
  for (const auto& d : slots_) {
    if (d.used && d.isPrimarySystemPartition()) return &d;
  }
  return nullptr;
}

std::vector<std::uint8_t> Image::readObject(const Descriptor& d) const {
  if (!fd_) throw Error("image has no file to read objects from");
  std::vector<std::uint8_t> data(static_cast<std::size_t>(d.size));
  preadFully(fd_.get(), d.offset, data);
  return data;
}

void Image::copyObjectTo(const Descriptor& d, int outFd) const {
  if (!fd_) throw Error("image has no file to read objects from");
  std::vector<std::uint8_t> buf(std::min<std::int64_t>(d.size, 1 << 20));
  std::int64_t done = 0;
  while (done < d.size) {
    auto chunk = static_cast<std::size_t>(std::min<std::int64_t>(d.size - done, static_cast<std::int64_t>(buf.size())));
    preadFully(fd_.get(), d.offset + done, std::span(buf.data(), chunk));
    std::size_t written = 0;
    while (written < chunk) {
      ssize_t n = ::write(outFd, buf.data() + written, chunk - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw sysError("write");
      }
      written += static_cast<std::size_t>(n);
    }
    done += static_cast<std::int64_t>(chunk);
  }
}

bool Image::isDeterministic() const {
  return header_.idIsNil() && header_.createdAt == kDeterministicTime &&
         header_.modifiedAt == kDeterministicTime;
}

}  // namespace ctr::image::sif
