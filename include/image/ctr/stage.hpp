// Node-local staging (docs/design-io.md section 4): copies of images and dataset images
// that live on a shared file system, made once per node in the user's stage directory
// (ctr.conf 'stage dir') and mounted instead of the originals. The planner decides what is
// staged and where (launch::Staging); this is the directory's keeper. Layout:
//   DIR/lock             flock: one copier (and one evicter) at a time
//   DIR/KEY-NAME         a copy: KEY is 16 hex digits of the source's path, NAME its file
//                        name; its size and mtime are the source's (checked before each
//                        use), its atime the last use (least recently used go first)
//   DIR/.KEY-NAME.XXXXXX a copy being made (what a killed copier left goes with the next)
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ctr::image::stage {

// One file to stage: the source as the launch looked at it, and where its copy goes.
struct File {
  std::filesystem::path source;
  std::filesystem::path copy;  // in the stage directory
  std::uint64_t bytes = 0;     // the source's size
  std::int64_t mtimeNs = 0;    // and mtime: a copy that differs is made again
};

// The copy's name in a stage directory: KEY-NAME (see above).
[[nodiscard]] std::string copyName(const std::filesystem::path& source);

// Makes sure `file.copy` is a copy of `file.source` and marks its use. A copy that is there
// with the source's size and mtime is used as it is (no lock taken); else, under DIR's
// lock (waiting for another copier), the least recently used copies go until this one
// fits in `maxBytes` with the others, and the source is copied to a new file renamed into
// place. The directory is made (0700) where missing and refused where anyone but the user
// could replace what is in it. Throws ctr::Error, one line naming the source: the source
// changed since the launch looked at it, no room, an I/O error (nothing half-copied left).
// Returns whether it copied.
bool ensure(const std::filesystem::path& dir, const File& file, std::uint64_t maxBytes);

// The copies in `dir`, most recently used first.
struct Entry {
  std::filesystem::path copy;
  std::uint64_t bytes = 0;
  std::int64_t lastUsed = 0;  // seconds since the epoch
};
[[nodiscard]] std::vector<Entry> list(const std::filesystem::path& dir);

// Removes the copies in `dir` (all, or those unused for `unusedFor`) under its lock, with
// what killed copiers left; a container running from one keeps it open until it ends. With
// `dryRun` only lists them. Returns what went (or would go).
std::vector<Entry> clean(const std::filesystem::path& dir, std::optional<std::chrono::seconds> unusedFor, bool dryRun);

}  // namespace ctr::image::stage
