// The chunk digest table of a lazily read image (issue 57, docs/design-io.md section 6): the
// SHA-256 of every `chunkSize` bytes of a blob (a SIF as pushed to a registry), so that a
// server reading the blob piecewise checks each chunk before any of its bytes reach the
// kernel. `ctr push` puts it in the ORAS config blob, whose digest the manifest names: a
// manifest fetched by digest (or by tag over the registry's TLS) authenticates the table, and
// the table each chunk. Apptainer neither checks nor fetches that config, and the SIF blob
// itself is unchanged, so an image pushed by ctr pulls with Apptainer as before.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::image {

inline constexpr std::uint64_t kChunkSize = 1 << 20;  // 1 MiB: 32 bytes of table per MiB of image
// The key of the table in the config object (the rest of the object is left alone).
inline constexpr std::string_view kChunkTableKey = "org.ctr.chunks.v1";

struct ChunkTable {
  std::uint64_t chunkSize = kChunkSize;  // a power of two, 64 KiB to 64 MiB
  std::uint64_t size = 0;                // bytes of the blob the table covers
  std::vector<std::array<unsigned char, 32>> digests;  // SHA-256 of each chunk, in order; the last may be short

  [[nodiscard]] std::uint64_t chunkCount() const { return digests.size(); }
  [[nodiscard]] std::uint64_t chunkOffset(std::uint64_t index) const { return index * chunkSize; }
  // Bytes in chunk `index` (chunkSize, less for the last).
  [[nodiscard]] std::uint64_t chunkLength(std::uint64_t index) const;
  // Whether `data` (`length` bytes) is chunk `index` exactly: its length and its SHA-256.
  [[nodiscard]] bool matches(std::uint64_t index, const void* data, std::size_t length) const;
};

// One read of the file open at `fd` (pread, from offset 0 to its end): its OCI digest
// ("sha256:<hex>") and its chunk table. Throws ctr::Error naming `what`.
struct DigestAndChunks {
  std::string digest;
  ChunkTable table;
};
DigestAndChunks digestAndChunks(int fd, const std::string& what, std::uint64_t chunkSize = kChunkSize);

// The ORAS config text that carries `table`:
//   {"org.ctr.chunks.v1":{"algorithm":"sha256","chunkSize":N,"size":N,"digests":"<64 hex per chunk>"}}
std::string chunkTableConfig(const ChunkTable& table);

// The table in an ORAS config text, checked against the size the manifest gives the blob:
// nullopt when the config has none (Apptainer's "{}", or any object without the key); throws
// ctr::Error naming what is wrong when it has one that is malformed (not JSON, an unknown
// algorithm, a chunk size out of range, a size other than `blobSize`, a digest count that does
// not cover it, a digest that is not 64 lowercase hex digits).
std::optional<ChunkTable> parseChunkTableConfig(std::string_view config, std::uint64_t blobSize);

// The table served beside an image on a web server or object store (IMAGE.chunks, written by
// `ctr sif chunks`): the config text above with the blob's digest, "digest": "sha256:<hex>".
std::string urlChunkTable(const std::string& digest, const ChunkTable& table);
struct UrlChunkTable {
  std::string digest;
  ChunkTable table;
};
// Throws ctr::Error naming what is wrong (not JSON, no digest, no table or a malformed one).
UrlChunkTable parseUrlChunkTable(std::string_view text);

}  // namespace ctr::image
