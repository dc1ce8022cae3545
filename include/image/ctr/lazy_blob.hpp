// A blob read lazily (issue 57, docs/design-io.md section 6): each chunk fetched with an
// HTTP range request the first time it is read, checked against the image's chunk table, and
// kept in the user's node-local cache for every later read, by this process or another.
// ctr-squashfs reads an image through it (`-o lazy=SPEC`); ctr writes the SPEC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ctr/chunk_table.hpp"

namespace ctr::image::lazy {

// What a server needs to read one blob lazily.
struct Spec {
  std::string name;           // what messages name: the image's reference
  std::string url;            // an http(s) URL that answers range requests with the blob's bytes
  std::string authorization;  // an "Authorization: ..." header line for it, or empty
  // Where a new token is asked for when the registry answers 401 (a bearer token expired in a
  // long job): the token service's URL (realm, service, scope) and the header that asks
  // ("Authorization: Basic ..." with the user's registry credentials, or empty: anonymous).
  // Empty URL: nothing to refresh.
  std::string tokenUrl;
  std::string tokenAuthorization;
  std::string digest;         // "sha256:<hex>" of the whole blob: names the cache entry
  ChunkTable table;           // checks each chunk
  std::filesystem::path cacheDir;  // the user's node-local cache (made 0700 where missing)
  // The server fetches the chunks not read yet while the link is idle (no read has waited
  // for a chunk for a while), until the image is whole (ctr.conf 'lazy prefetch').
  bool prefetch = false;
  // No chunk table (an image Apptainer pushed, read so where the admin set 'lazy unverified =
  // allow'): `table` only cuts the blob into chunks (its digests are not used), chunks reach
  // the kernel unchecked, and the whole blob is checked against `digest` once every chunk is
  // cached; one that fails is emptied and logged. Such an entry is marked as unchecked in
  // the cache, so that a checked launch of the same digest never trusts its chunks, until the
  // whole check passes.
  bool unverified = false;
};

// A table that cuts a blob of `size` bytes into chunks without digests (Spec::unverified).
ChunkTable unverifiedTable(std::uint64_t size);

// The spec as the JSON text ctr writes (0600: it may hold a token) and ctr-squashfs reads;
// parseSpec throws ctr::Error naming what is missing or malformed.
std::string specText(const Spec& spec);
Spec parseSpec(std::string_view text);
// Where the server of `spec` logs what failed: <cacheDir>/<hex>.log.
std::filesystem::path logFile(const Spec& spec);

// The entries of a user's node cache, as `ctr cache list|clean` shows and removes them.
struct CacheEntry {
  std::string digest;  // "sha256:<hex>" of the blob
  std::string name;    // the image it was read for (its spec's name), "" when the spec is gone
  std::uint64_t blobBytes = 0;    // the blob's size
  std::uint64_t diskBytes = 0;    // what its files take on the disk (the data file is sparse)
  std::uint64_t chunks = 0, cached = 0;
  std::int64_t lastUsed = 0;      // seconds: when a server last opened it
  bool inUse = false;             // a server has it open (clean leaves it)
};
std::vector<CacheEntry> listCache(const std::filesystem::path& dir);
// Removes the entries not in use (and, with `unused`, not opened for that long); with
// `dryRun` only says which. Returns those (that would be) removed.
std::vector<CacheEntry> cleanCache(const std::filesystem::path& dir, std::optional<std::int64_t> unusedSeconds,
                                   bool dryRun);
// Removes the entry of the blob `digest` from the cache at `dir`, unless a server has it open:
// false then (or where there is none).
bool removeEntry(const std::filesystem::path& dir, const std::string& digest);
// Room in the cache at `dir` for `bytes` of the blob `digest` within `maxBytes` (ctr.conf
// 'lazy cache max size'): the least recently used entries not in use, other than `digest`'s,
// removed (each logged) until the others and `bytes` (or what the entry holds, if more) fit. False where they still do not
// (entries in use, or the blob alone larger): nothing more is removed then.
bool makeRoom(const std::filesystem::path& dir, const std::string& digest, std::uint64_t bytes,
              std::uint64_t maxBytes);

class Blob {
 public:
  // Opens the cache entry of spec.digest (DIR/<hex>.data and DIR/<hex>.have), making it
  // where missing or left by an earlier boot. Throws ctr::Error naming the cache file.
  explicit Blob(Spec spec);
  ~Blob();
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Reads [offset, offset + length) of the blob into `out`, fetching the chunks it spans
  // that are not cached yet: 0, or EIO where a chunk could not be fetched (after retries) or
  // failed its digest (logged once, naming the image, the chunk and the URL; never cached),
  // or EINVAL for a range outside the blob. Safe to call from many threads.
  int read(std::uint64_t offset, void* out, std::size_t length);

  // Whether the source answers range requests: fetches the first chunk (cached already: true)
  // and says false, without logging a failure, where the server sent the whole blob (HTTP
  // 200) instead of the range; a launch then pulls the image whole. Throws ctr::Error where
  // the chunk could not be fetched for another reason.
  bool servesRanges();
  // Failures not logged (the launch's own reads throw them, one line); what the last said.
  void quiet(bool quiet);
  [[nodiscard]] std::string lastFailure() const;

  [[nodiscard]] std::uint64_t size() const;
  // Chunks cached (verified) and all chunks, as this process last saw them.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> cachedChunks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctr::image::lazy
