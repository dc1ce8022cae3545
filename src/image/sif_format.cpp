// Encoding of the fixed-size SIF records and the names siftool prints for field values.
#include <sys/utsname.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "ctr/error.hpp"
#include "ctr/hash.hpp"
#include "ctr/sif.hpp"

namespace ctr::image::sif {

namespace {

// Little-endian field access at fixed offsets; the Go encoder packs fields with no padding.
template <typename T>
T load(std::span<const std::uint8_t> bytes, std::size_t pos) {
  using U = std::make_unsigned_t<T>;
  U value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<U>(U{bytes[pos + i]} << (8 * i));
  return static_cast<T>(value);
}

template <typename T>
void store(std::span<std::uint8_t> bytes, std::size_t pos, T value) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) bytes[pos + i] = static_cast<std::uint8_t>(u >> (8 * i));
}

constexpr std::array<std::string_view, 14> kArchNames = {
    "unknown", "386",    "amd64",  "arm",      "arm64", "ppc64",   "ppc64le",
    "mips",    "mipsle", "mips64", "mips64le", "s390x", "riscv64", "loong64"};

}  // namespace

std::string Header::launchScriptText() const {
  auto end = std::find(launchScript.begin(), launchScript.end(), '\0');
  return {launchScript.begin(), end};
}

bool Header::idIsNil() const {
  return std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; });
}

std::string Descriptor::nameText() const {
  auto end = std::find(name.begin(), name.end(), std::uint8_t{0});
  return {name.begin(), end};
}

std::int32_t Descriptor::extraInt32(std::size_t pos) const { return load<std::int32_t>(extra, pos); }
std::int32_t Descriptor::fsType() const { return extraInt32(0); }
std::int32_t Descriptor::partType() const { return extraInt32(4); }
std::array<char, 3> Descriptor::partArch() const {
  return {static_cast<char>(extra[8]), static_cast<char>(extra[9]), static_cast<char>(extra[10])};
}
std::string Descriptor::extraText() const {
  auto end = std::find(extra.begin(), extra.end(), std::uint8_t{0});
  return {extra.begin(), end};
}

Header decodeHeader(std::span<const std::uint8_t, kHeaderSize> b) {
  Header h;
  std::memcpy(h.launchScript.data(), b.data(), kLaunchScriptSize);
  std::memcpy(h.arch.data(), b.data() + 45, 3);
  std::memcpy(h.id.data(), b.data() + 48, 16);
  h.createdAt = load<std::int64_t>(b, 64);
  h.modifiedAt = load<std::int64_t>(b, 72);
  h.descriptorsFree = load<std::int64_t>(b, 80);
  h.descriptorsTotal = load<std::int64_t>(b, 88);
  h.descriptorsOffset = load<std::int64_t>(b, 96);
  h.descriptorsSize = load<std::int64_t>(b, 104);
  h.dataOffset = load<std::int64_t>(b, 112);
  h.dataSize = load<std::int64_t>(b, 120);
  return h;
}

std::array<std::uint8_t, kHeaderSize> encodeHeader(const Header& h) {
  std::array<std::uint8_t, kHeaderSize> b{};
  std::memcpy(b.data(), h.launchScript.data(), kLaunchScriptSize);
  std::memcpy(b.data() + 32, "SIF_MAGIC\0", 10);
  std::memcpy(b.data() + 42, "01\0", 3);
  std::memcpy(b.data() + 45, h.arch.data(), 3);
  std::memcpy(b.data() + 48, h.id.data(), 16);
  store(b, 64, h.createdAt);
  store(b, 72, h.modifiedAt);
  store(b, 80, h.descriptorsFree);
  store(b, 88, h.descriptorsTotal);
  store(b, 96, h.descriptorsOffset);
  store(b, 104, h.descriptorsSize);
  store(b, 112, h.dataOffset);
  store(b, 120, h.dataSize);
  return b;
}

Descriptor decodeDescriptor(std::span<const std::uint8_t, kDescriptorSize> b) {
  Descriptor d;
  d.dataType = load<std::int32_t>(b, 0);
  d.used = b[4] != 0;
  d.id = load<std::uint32_t>(b, 5);
  d.groupIdRaw = load<std::uint32_t>(b, 9);
  d.linkedIdRaw = load<std::uint32_t>(b, 13);
  d.offset = load<std::int64_t>(b, 17);
  d.size = load<std::int64_t>(b, 25);
  d.sizeWithPadding = load<std::int64_t>(b, 33);
  d.createdAt = load<std::int64_t>(b, 41);
  d.modifiedAt = load<std::int64_t>(b, 49);
  d.uid = load<std::int64_t>(b, 57);
  d.gid = load<std::int64_t>(b, 65);
  std::memcpy(d.name.data(), b.data() + 73, kNameSize);
  std::memcpy(d.extra.data(), b.data() + 201, kExtraSize);
  return d;
}

std::array<std::uint8_t, kDescriptorSize> encodeDescriptor(const Descriptor& d) {
  std::array<std::uint8_t, kDescriptorSize> b{};
  store(b, 0, d.dataType);
  b[4] = d.used ? 1 : 0;
  store(b, 5, d.id);
  store(b, 9, d.groupIdRaw);
  store(b, 13, d.linkedIdRaw);
  store(b, 17, d.offset);
  store(b, 25, d.size);
  store(b, 33, d.sizeWithPadding);
  store(b, 41, d.createdAt);
  store(b, 49, d.modifiedAt);
  store(b, 57, d.uid);
  store(b, 65, d.gid);
  std::memcpy(b.data() + 73, d.name.data(), kNameSize);
  std::memcpy(b.data() + 201, d.extra.data(), kExtraSize);
  return b;
}

std::string dataTypeName(std::int32_t t) {
  switch (static_cast<DataType>(t)) {
    case DataType::Deffile: return "Def.FILE";
    case DataType::EnvVar: return "Env.Vars";
    case DataType::Labels: return "JSON.Labels";
    case DataType::Partition: return "FS";
    case DataType::Signature: return "Signature";
    case DataType::GenericJson: return "JSON.Generic";
    case DataType::Generic: return "Generic/Raw";
    case DataType::CryptoMessage: return "Cryptographic Message";
    case DataType::Sbom: return "SBOM";
    case DataType::OciRootIndex: return "OCI.RootIndex";
    case DataType::OciBlob: return "OCI.Blob";
  }
  return "Unknown";
}

std::string fsTypeName(std::int32_t t) {
  switch (t) {
    case 1: return "Squashfs";
    case 2: return "Ext3";
    case 3: return "Archive";
    case 4: return "Raw";
    case 5: return "Encrypted squashfs";
    case 6: return "Gocryptfs squashfs";
    default: return "Unknown";
  }
}

std::string partTypeName(std::int32_t t) {
  switch (t) {
    case 1: return "System";
    case 2: return "*System";
    case 3: return "Data";
    case 4: return "Overlay";
    default: return "Unknown";
  }
}

// Go's crypto.Hash names; siftool prints "unknown hash value N" for others.
std::string hashTypeName(std::int32_t t) {
  switch (t) {
    case 1: return "SHA-256";
    case 2: return "SHA-384";
    case 3: return "SHA-512";
    case 4: return "BLAKE2s-256";
    case 5: return "BLAKE2b-256";
    default: return "Unknown";
  }
}

std::string cryptoFormatName(std::int32_t f) {
  switch (f) {
    case 1: return "OpenPGP";
    case 2: return "PEM";
    default: return "Unknown";
  }
}

std::string cryptoMessageName(std::int32_t m) {
  switch (m) {
    case 0x100: return "Clear Signature";
    case 0x200: return "RSA-OAEP";
    default: return "Unknown";
  }
}

std::string sbomFormatName(std::int32_t f) {
  switch (f) {
    case 1: return "cyclonedx-json";
    case 2: return "cyclonedx-xml";
    case 3: return "github-json";
    case 4: return "spdx-json";
    case 5: return "spdx-rdf";
    case 6: return "spdx-tag-value";
    case 7: return "spdx-yaml";
    case 8: return "syft-json";
    default: return "Unknown";
  }
}

std::string archName(std::span<const char> code) {
  if (code.size() < 3 || code[2] != '\0' || code[0] < '0' || code[0] > '9' || code[1] < '0' ||
      code[1] > '9') {
    return "unknown";
  }
  auto n = static_cast<std::size_t>((code[0] - '0') * 10 + (code[1] - '0'));
  return n < kArchNames.size() ? std::string(kArchNames[n]) : "unknown";
}

std::optional<std::array<char, 3>> archCode(std::string_view name) {
  for (std::size_t i = 1; i < kArchNames.size(); ++i) {
    if (kArchNames[i] == name) {
      return std::array<char, 3>{static_cast<char>('0' + i / 10), static_cast<char>('0' + i % 10),
                                 '\0'};
    }
  }
  return std::nullopt;
}

std::string hostArch() {
  utsname u{};
  if (::uname(&u) != 0) return "unknown";
  std::string_view m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  if (m == "i386" || m == "i686") return "386";
  if (m == "ppc64le") return "ppc64le";
  if (m == "ppc64") return "ppc64";
  if (m == "s390x") return "s390x";
  if (m == "riscv64") return "riscv64";
  if (m == "loongarch64") return "loong64";
  return "unknown";
}

std::string uuidToString(const Uuid& id) {
  const std::span<const std::uint8_t> bytes(id);
  return toHex(bytes.subspan(0, 4)) + '-' + toHex(bytes.subspan(4, 2)) + '-' + toHex(bytes.subspan(6, 2)) + '-' +
         toHex(bytes.subspan(8, 2)) + '-' + toHex(bytes.subspan(10));
}

Uuid parseUuid(std::string_view text) {
  Uuid id{};
  std::size_t n = 0;
  auto hexValue = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '-') continue;
    int hi = hexValue(text[i]);
    int lo = i + 1 < text.size() ? hexValue(text[i + 1]) : -1;
    if (hi < 0 || lo < 0 || n >= id.size()) throw Error("invalid UUID '" + std::string(text) + "'");
    id[n++] = static_cast<std::uint8_t>(hi * 16 + lo);
    ++i;
  }
  if (n != id.size()) throw Error("invalid UUID '" + std::string(text) + "'");
  return id;
}

Uuid randomUuid() {
  Uuid id{};
  std::random_device rd;
  for (auto& b : id) b = static_cast<std::uint8_t>(rd());
  id[6] = static_cast<std::uint8_t>((id[6] & 0x0F) | 0x40);  // version 4
  id[8] = static_cast<std::uint8_t>((id[8] & 0x3F) | 0x80);  // RFC 4122 variant
  return id;
}

}  // namespace ctr::image::sif
