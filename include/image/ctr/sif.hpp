// Singularity Image Format (SIF): a reader that trusts no field of the file, and a writer
// that produces files byte-identical to the reference Go library (github.com/sylabs/sif).
// The byte layout is documented in docs/reference/sif-format.md; section numbers below
// refer to it.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/fd.hpp"

namespace ctr::image::sif {

inline constexpr std::int64_t kHeaderSize = 128;
inline constexpr std::int64_t kDescriptorSize = 585;
inline constexpr std::size_t kLaunchScriptSize = 32;
inline constexpr std::size_t kNameSize = 128;
inline constexpr std::size_t kExtraSize = 384;
inline constexpr std::int64_t kDefaultDescriptorsOffset = 4096;
inline constexpr std::int64_t kDefaultCapacity = 48;
inline constexpr std::int64_t kPartitionAlignment = 4096;
// Go's zero time.Time as Unix seconds: what deterministic images store instead of a time (§1).
inline constexpr std::int64_t kDeterministicTime = -62135596800;
inline constexpr std::uint32_t kGroupMask = 0xF0000000U;
inline constexpr std::string_view kApptainerLaunchScript = "#!/usr/bin/env run-singularity\n";

enum class DataType : std::int32_t {
  Deffile = 0x4001,
  EnvVar = 0x4002,
  Labels = 0x4003,
  Partition = 0x4004,
  Signature = 0x4005,
  GenericJson = 0x4006,
  Generic = 0x4007,
  CryptoMessage = 0x4008,
  Sbom = 0x4009,
  OciRootIndex = 0x400A,
  OciBlob = 0x400B,
};

enum class FsType : std::int32_t {
  Squashfs = 1,
  Ext3 = 2,
  ImmuObj = 3,
  Raw = 4,
  EncryptedSquashfs = 5,
  GocryptfsSquashfs = 6,
};

enum class PartType : std::int32_t { System = 1, PrimSys = 2, Data = 3, Overlay = 4 };

using Uuid = std::array<std::uint8_t, 16>;

// The 128-byte global header (§2), fields as stored.
struct Header {
  std::array<char, kLaunchScriptSize> launchScript{};
  std::array<char, 3> arch{'0', '0', '\0'};  // two ASCII digits + NUL
  Uuid id{};
  std::int64_t createdAt = 0;
  std::int64_t modifiedAt = 0;
  std::int64_t descriptorsFree = 0;
  std::int64_t descriptorsTotal = 0;
  std::int64_t descriptorsOffset = 0;
  std::int64_t descriptorsSize = 0;
  std::int64_t dataOffset = 0;
  std::int64_t dataSize = 0;

  // The launch script up to its first NUL.
  [[nodiscard]] std::string launchScriptText() const;
  [[nodiscard]] bool idIsNil() const;
};

// One 585-byte descriptor slot (§3), fields as stored.
struct Descriptor {
  std::int32_t dataType = 0;
  bool used = false;
  std::uint32_t id = 0;
  std::uint32_t groupIdRaw = 0;   // group | 0xF0000000
  std::uint32_t linkedIdRaw = 0;  // 0, object id, or group | 0xF0000000
  std::int64_t offset = 0;
  std::int64_t size = 0;
  std::int64_t sizeWithPadding = 0;
  std::int64_t createdAt = 0;
  std::int64_t modifiedAt = 0;
  std::int64_t uid = 0;
  std::int64_t gid = 0;
  std::array<std::uint8_t, kNameSize> name{};
  std::array<std::uint8_t, kExtraSize> extra{};

  // Logical group, 0 = none.
  [[nodiscard]] std::uint32_t group() const { return groupIdRaw & ~kGroupMask; }
  [[nodiscard]] bool linkIsGroup() const { return (linkedIdRaw & kGroupMask) == kGroupMask; }
  // Linked object id or group number (see linkIsGroup), 0 = none.
  [[nodiscard]] std::uint32_t link() const {
    return linkIsGroup() ? linkedIdRaw & ~kGroupMask : linkedIdRaw;
  }
  // The name up to its first NUL; a 128-byte name has no NUL and is taken whole.
  [[nodiscard]] std::string nameText() const;

  [[nodiscard]] bool isPartition() const {
    return dataType == static_cast<std::int32_t>(DataType::Partition);
  }
  // Partition Extra (§5.1); meaningful only when isPartition().
  [[nodiscard]] std::int32_t fsType() const;
  [[nodiscard]] std::int32_t partType() const;
  [[nodiscard]] std::array<char, 3> partArch() const;
  [[nodiscard]] bool isPrimarySystemPartition() const {
    return isPartition() && partType() == static_cast<std::int32_t>(PartType::PrimSys);
  }
  // Reads a little-endian int32 from Extra at `pos` (pos + 4 <= 384).
  [[nodiscard]] std::int32_t extraInt32(std::size_t pos) const;
  // Extra up to its first NUL, as text (OCI digests).
  [[nodiscard]] std::string extraText() const;
};

// Names as siftool prints them (§4, §5); "Unknown" for values the format does not define.
std::string dataTypeName(std::int32_t dataType);
std::string fsTypeName(std::int32_t fsType);
std::string partTypeName(std::int32_t partType);
std::string hashTypeName(std::int32_t hashType);
std::string cryptoFormatName(std::int32_t format);
std::string cryptoMessageName(std::int32_t message);
std::string sbomFormatName(std::int32_t format);
// Arch code ("02") -> Go arch name ("amd64"); "unknown" for anything else (§5.3).
std::string archName(std::span<const char> code);
// Go arch name -> code ("amd64" -> "02"); nullopt if not a known arch.
std::optional<std::array<char, 3>> archCode(std::string_view name);
// Arch of the machine ctr runs on, as a Go arch name.
std::string hostArch();

std::string uuidToString(const Uuid& id);
// Parses "de170c43-36ab-44a8-bca9-1ea1a070a274"; throws ctr::Error.
Uuid parseUuid(std::string_view text);
Uuid randomUuid();

// Decoding and encoding of the fixed-size records; exposed for tests and tools.
Header decodeHeader(std::span<const std::uint8_t, kHeaderSize> bytes);
std::array<std::uint8_t, kHeaderSize> encodeHeader(const Header& header);
Descriptor decodeDescriptor(std::span<const std::uint8_t, kDescriptorSize> bytes);
std::array<std::uint8_t, kDescriptorSize> encodeDescriptor(const Descriptor& descriptor);

// A SIF file opened and fully validated. All descriptor slots are kept (used or not) in
// slot order. Throws ctr::Error naming the offending field for any malformed input.
class Image {
 public:
  // Opens read-only, or read-write for the editing operations below.
  static Image open(const std::filesystem::path& path, bool writable = false);
  // Validates an already open file (used by resolveImage, which opens the path once).
  static Image fromFd(UniqueFd fd, std::int64_t fileSize, bool writable = false);
  // Parses a whole file held in memory (fuzzing, tests); the result cannot read objects.
  static Image parse(std::span<const std::uint8_t> bytes);

  [[nodiscard]] const Header& header() const { return header_; }
  [[nodiscard]] const std::vector<Descriptor>& slots() const { return slots_; }
  [[nodiscard]] std::vector<Descriptor> usedDescriptors() const;
  [[nodiscard]] std::int64_t fileSize() const { return fileSize_; }
  [[nodiscard]] int fd() const { return fd_.get(); }
  // Throws ctr::Error "object N not found" if no used descriptor has that id.
  [[nodiscard]] const Descriptor& descriptorById(std::uint32_t id) const;
  // The unique primary system partition, or nullptr (the reader rejects two of them).
  [[nodiscard]] const Descriptor* primaryPartition() const;
  // Reads the whole data of an object (bounds were checked on load).
  [[nodiscard]] std::vector<std::uint8_t> readObject(const Descriptor& d) const;
  // Writes the object data to `outFd` without holding it all in memory.
  void copyObjectTo(const Descriptor& d, int outFd) const;
  // True for images created with the deterministic option (nil id, sentinel times).
  [[nodiscard]] bool isDeterministic() const;

 private:
  friend class Editor;
  Image() = default;

  UniqueFd fd_;
  std::int64_t fileSize_ = 0;
  bool writable_ = false;
  Header header_;
  std::vector<Descriptor> slots_;
};

// Where an object's bytes come from: memory, or `size` bytes read from `fd` from its
// current position (streamed, never buffered whole).
struct DataSource {
  std::span<const std::uint8_t> bytes;
  int fd = -1;
  std::int64_t size = 0;

  static DataSource fromBytes(std::span<const std::uint8_t> b) { return {b, -1, 0}; }
  static DataSource fromFd(int f, std::int64_t n) { return {{}, f, n}; }
  [[nodiscard]] std::int64_t length() const {
    return fd >= 0 ? size : static_cast<std::int64_t>(bytes.size());
  }
};

struct PartitionInfo {
  FsType fs = FsType::Squashfs;
  PartType part = PartType::PrimSys;
  std::string arch = "amd64";  // Go arch name
};

// One object to add (the reference library's DescriptorInput).
struct ObjectInput {
  DataType type = DataType::Generic;
  DataSource data;
  std::string name;
  std::uint32_t group = 1;                 // 0 = no group
  std::uint32_t linkedId = 0;              // object id, 0 = none
  std::uint32_t linkedGroup = 0;           // group link; takes precedence over linkedId
  std::optional<std::int64_t> alignment;   // default: 4096 for partitions, none otherwise
  std::optional<PartitionInfo> partition;  // required for DataType::Partition
  std::int32_t hashType = 0;               // Signature
  std::string entityHex;                   // Signature: fingerprint, hex
  std::int32_t cryptoFormat = 0;           // CryptoMessage
  std::int32_t cryptoMessage = 0;          // CryptoMessage
  std::int32_t sbomFormat = 0;             // SBOM
};

struct CreateOptions {
  std::int64_t capacity = kDefaultCapacity;
  std::string launchScript;  // < 32 bytes
  Uuid id{};                 // nil unless set (use randomUuid() for a non-deterministic file)
  std::int64_t time = kDeterministicTime;
};

struct DeleteOptions {
  std::optional<std::uint32_t> id;
  std::optional<DataType> type;
  std::optional<PartType> partType;
  bool zero = false;
  bool compact = false;
  std::int64_t time = kDeterministicTime;
};

// Writes a new SIF at `path`: to a temporary file in the same directory, renamed over
// `path` at the end (so a reader never sees half a file).
void createImage(const std::filesystem::path& path, const CreateOptions& options,
                 const std::vector<ObjectInput>& objects);
// Writes a new SIF into an empty, already open file (the caller owns naming/renaming).
void writeNewImage(int fd, const CreateOptions& options, const std::vector<ObjectInput>& objects);

// In-place edits of an image opened writable, as the reference library does them. Each
// operation validates everything before it writes, so a failing one leaves the file as it
// was. Errors: "insufficient descriptor capacity", "primary partition already exists",
// "object not found", ...
class Editor {
 public:
  explicit Editor(Image& image);
  void add(const ObjectInput& object, std::int64_t time);
  void remove(const DeleteOptions& options);
  void setPrimary(std::uint32_t id, std::int64_t time);
  void setMetadata(std::uint32_t id, std::span<const std::uint8_t> extra, std::int64_t time);
  void setOciBlobDigest(std::uint32_t id, std::string_view digest, std::int64_t time);
  // "now", or the sentinel for a deterministic image (what the reference library uses
  // when the caller gives no time).
  [[nodiscard]] std::int64_t defaultTime() const;

 private:
  Image& image_;
};

// siftool's renderings (sif-format.md §12), byte-identical to `siftool header|list|info`.
std::string formatHeader(const Header& header);
std::string formatList(const Image& image);
std::string formatInfo(const Descriptor& descriptor);
// Go's time format "2020-06-30 00:01:56 +0000 UTC".
std::string formatTime(std::int64_t unixSeconds);
// siftool's human size: "N B" below 1024, else "N KiB", "N MiB", ...
std::string readableSize(std::int64_t size);

}  // namespace ctr::image::sif
