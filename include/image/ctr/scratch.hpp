// Where build and pull do their work, and how their results reach the output's directory.
//
// The output's directory may belong to someone else (root building or pulling into a
// user's directory, a group-writable project directory). Whoever can write there can rename
// a scratch directory ctr made and put a symlink in its place, so that ctr's later writes by
// path land where they point. So scratch directories are made only where nobody but root
// and the caller can rename or replace entries on the way (privateDirectory), and results
// reach the output's directory as new files (O_EXCL) renamed into place.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "ctr/fd.hpp"

namespace ctr::image {

// Whether nobody but root and the caller (`uid`) can rename or replace `dir` or any
// directory above it: each is owned by root or `uid` and writable by nobody else, or
// sticky (others may add entries but not rename ours). With `why`, the first directory
// that fails and the reason.
[[nodiscard]] bool privateDirectory(const std::filesystem::path& dir, uid_t uid, std::string* why = nullptr);

// For a directory ctr keeps the user's files in (the image cache, the stage directory):
// throws ctr::Error "WHAT DIR: not private to this user (why): refused" unless `st` (its
// stat) is a directory of the caller's that only it can write, and nobody but root and the
// caller can rename it or anything above it (privateDirectory).
void requireOwnPrivateDirectory(const std::filesystem::path& dir, const struct stat& st, std::string_view what);

// A new directory (mode 0700) for work whose result becomes `output`: beside it when the
// output's directory is private (the final rename stays on one file system), else in the
// first private one of $TMPDIR, /var/tmp and /tmp. `what` goes into its name.
[[nodiscard]] std::filesystem::path makeScratchDir(const std::filesystem::path& output, std::string_view what);

// makeScratchDir, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir(const std::filesystem::path& output, std::string_view what);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Creates `path` anew, whatever is there (a symlink there is replaced, never followed): a
// file made O_EXCL beside it, renamed onto it. For logs ctr writes beside an output.
[[nodiscard]] UniqueFd createReplacing(const std::filesystem::path& path, mode_t mode);

// Moves the finished file or directory `from` (in a scratch directory) to `to`: a rename,
// or across file systems a copy through descriptors into a new entry beside `to`, renamed
// into place. Without `replace`, an existing `to` is left alone and is an error.
void moveIntoPlace(const std::filesystem::path& from, const std::filesystem::path& to, bool replace);

}  // namespace ctr::image
