#include "ctr/chunk_table.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <span>

#include <nlohmann/json.hpp>

#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/hash.hpp"

namespace ctr::image {

namespace {

constexpr std::uint64_t kMinChunkSize = std::uint64_t{1} << 16;
constexpr std::uint64_t kMaxChunkSize = std::uint64_t{1} << 26;
constexpr std::string_view kAlgorithm = "sha256";
constexpr std::size_t kHexPerDigest = 64;

bool validChunkSize(std::uint64_t chunkSize) {
  return chunkSize >= kMinChunkSize && chunkSize <= kMaxChunkSize && (chunkSize & (chunkSize - 1)) == 0;
}

// Chunks needed to cover `size` bytes; cannot overflow, as chunkSize is at least 64 KiB.
std::uint64_t chunksCovering(std::uint64_t size, std::uint64_t chunkSize) {
  return size / chunkSize + (size % chunkSize != 0 ? 1 : 0);
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case too: the table has one spelling, so that its digest has one
}

// 64 lowercase hex digits into 32 bytes; false on anything else.
bool decodeDigest(std::string_view hex, std::array<unsigned char, 32>& out) {
  if (hex.size() != kHexPerDigest) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int high = hexValue(hex[2 * i]), low = hexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<unsigned char>(high << 4 | low);
  }
  return true;
}

// The SHA-256 of one chunk as bytes: Digester speaks "sha256:<hex>".
std::array<unsigned char, 32> chunkDigest(const void* data, std::size_t length) {
  Digester digester(kAlgorithm);
  digester.update(data, length);
  const std::string text = digester.digest();
  std::array<unsigned char, 32> bytes{};
  if (!decodeDigest(std::string_view(text).substr(kAlgorithm.size() + 1), bytes))
    throw Error("libcrypto: sha256 gave " + text);
  return bytes;
}

// Fills `buffer` from `offset` on, short only at the end of the file; the bytes read.
std::size_t readFull(int fd, std::span<char> buffer, std::uint64_t offset, const std::string& what) {
  std::size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t got = ::pread(fd, buffer.data() + done, buffer.size() - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw sysError("read " + what);
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

[[noreturn]] void malformed(const std::string& problem) {
  throw Error("ORAS config: chunk table " + std::string(kChunkTableKey) + ": " + problem);
}

// A non-negative integer field. nlohmann keeps non-negative integers as unsigned, negative
// ones as signed and anything with a fraction, an exponent or past 2^64 as a double: only
// the first is a size.
std::uint64_t unsignedField(const nlohmann::json& table, const char* name) {
  const auto it = table.find(name);
  if (it == table.end()) malformed(std::string(name) + " is missing");
  if (!it->is_number_unsigned()) malformed(std::string(name) + " is not a non-negative integer");
  return it->get<std::uint64_t>();
}

}  // namespace

std::uint64_t ChunkTable::chunkLength(std::uint64_t index) const {
  // A table built by hand may hold more digests than its size covers: no chunk there.
  if (index >= chunkCount() || chunkOffset(index) >= size) return 0;
  return std::min(chunkSize, size - chunkOffset(index));
}

bool ChunkTable::matches(std::uint64_t index, const void* data, std::size_t length) const {
  if (index >= chunkCount() || length != chunkLength(index)) return false;
  return chunkDigest(data, length) == digests[index];
}

DigestAndChunks digestAndChunks(int fd, const std::string& what, std::uint64_t chunkSize) {
  if (!validChunkSize(chunkSize))
    throw Error(what + ": chunk size " + std::to_string(chunkSize) + " is not a power of two from 64 KiB to 64 MiB");
  Digester whole(kAlgorithm);
  DigestAndChunks result;
  result.table.chunkSize = chunkSize;
  // One chunk per read: each byte is read once, for both digests.
  std::vector<char> buffer(chunkSize);
  for (;;) {
    const std::size_t got = readFull(fd, buffer, result.table.size, what);
    if (got == 0) break;
    whole.update(buffer.data(), got);
    result.table.digests.push_back(chunkDigest(buffer.data(), got));
    result.table.size += got;
    if (got < chunkSize) break;
  }
  result.digest = whole.digest();
  return result;
}

std::string chunkTableConfig(const ChunkTable& table) {
  std::string hex;
  hex.reserve(kHexPerDigest * table.digests.size());
  for (const auto& digest : table.digests) hex += toHex(digest);
  // ordered_json: the keys in the documented order. The text is hashed into the manifest,
  // so the same image always gives the same config digest either way.
  nlohmann::ordered_json inner;
  inner["algorithm"] = std::string(kAlgorithm);
  inner["chunkSize"] = table.chunkSize;
  inner["size"] = table.size;
  inner["digests"] = std::move(hex);
  nlohmann::ordered_json config;
  config[std::string(kChunkTableKey)] = std::move(inner);
  return config.dump();
}

std::optional<ChunkTable> parseChunkTableConfig(std::string_view config, std::uint64_t blobSize) {
  // nlohmann 3.11 parses and destroys iteratively, so deep nesting costs memory, not stack;
  // the config's size is bounded where it is fetched.
  const auto json = nlohmann::json::parse(config, nullptr, false);
  if (json.is_discarded()) throw Error("ORAS config: not JSON");
  if (!json.is_object()) throw Error("ORAS config: not a JSON object");
  const auto found = json.find(kChunkTableKey);
  if (found == json.end()) return std::nullopt;  // Apptainer's "{}", or a config from another tool
  const nlohmann::json& object = *found;
  if (!object.is_object()) malformed("not a JSON object");
  // Other keys of the object are left alone: a later format takes a new key (".v2").
  const auto algorithm = object.find("algorithm");
  if (algorithm == object.end()) malformed("algorithm is missing");
  if (!algorithm->is_string() || algorithm->get_ref<const std::string&>() != kAlgorithm)
    malformed("algorithm is not \"sha256\"");

  ChunkTable table;
  table.chunkSize = unsignedField(object, "chunkSize");
  if (!validChunkSize(table.chunkSize))
    malformed("chunkSize " + std::to_string(table.chunkSize) + " is not a power of two from 64 KiB to 64 MiB");
  table.size = unsignedField(object, "size");
  if (table.size != blobSize)
    malformed("size " + std::to_string(table.size) + " is not the SIF layer's " + std::to_string(blobSize) + " bytes");

  const auto digests = object.find("digests");
  if (digests == object.end()) malformed("digests is missing");
  if (!digests->is_string()) malformed("digests is not a string");
  const std::string& hex = digests->get_ref<const std::string&>();
  // At most 2^48 chunks (2^64 bytes in 64 KiB ones): 64 times that does not overflow.
  const std::uint64_t count = chunksCovering(table.size, table.chunkSize);
  if (hex.size() != kHexPerDigest * count)
    malformed("digests has " + std::to_string(hex.size()) + " hex digits, not the " +
              std::to_string(kHexPerDigest * count) + " of " + std::to_string(count) + " chunks");
  table.digests.resize(count);  // count is bounded by the text's length now
  for (std::uint64_t i = 0; i < count; ++i)
    if (!decodeDigest(std::string_view(hex).substr(i * kHexPerDigest, kHexPerDigest), table.digests[i]))
      malformed("digest " + std::to_string(i) + " is not 64 lowercase hex digits");
  return table;
}

}  // namespace ctr::image

namespace ctr::image {

std::string urlChunkTable(const std::string& digest, const ChunkTable& table) {
  auto json = nlohmann::json::parse(chunkTableConfig(table));
  json["digest"] = digest;
  return json.dump();
}

UrlChunkTable parseUrlChunkTable(std::string_view text) {
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object()) throw Error("chunk table: not a JSON object");
  const auto digest = json.find("digest");
  if (digest == json.end() || !digest->is_string() || !isSha256Digest(digest->get<std::string>()))
    throw Error("chunk table: no \"digest\": \"sha256:<64 hex digits>\" of the image");
  const auto found = json.find(kChunkTableKey);
  if (found == json.end() || !found->is_object() || !found->contains("size") || !(*found)["size"].is_number_unsigned())
    throw Error("chunk table: no " + std::string(kChunkTableKey) + " object with the image's size");
  auto table = parseChunkTableConfig(text, (*found)["size"].get<std::uint64_t>());
  if (!table) throw Error("chunk table: no " + std::string(kChunkTableKey) + " object");
  return {digest->get<std::string>(), std::move(*table)};
}

}  // namespace ctr::image
