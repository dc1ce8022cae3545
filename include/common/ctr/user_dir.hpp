// Directories ctr keeps one user's files in: the image cache, the stage directory, the state
// directory. Their names are often per-user names (`/var/tmp/ctr-cache-%u`, /tmp/ctr-UID) in
// directories everybody can write, so another user can take a name first: as a directory of
// theirs (ctr would then read and write what they control), or as a symlink to somewhere
// ctr, perhaps running as root, would then write. The rule for every directory from / down
// to such a directory, symlinks on the way included:
//
//   owned by root or the caller, and writable by nobody else unless sticky (others may add
//   entries to /tmp but neither rename nor replace ours); a symlink is followed only where
//   it is owned by root or the caller; the directory itself is the caller's, and nobody
//   else may read or write it (mode 0700: what is kept there is the user's alone).
//
// A per-user name that somebody else took is not a reason to fail: the caller's own
// NAME-XXXXXX beside it (made with mkdtemp, so nobody can take it in advance) serves
// instead, and later runs find it again.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "ctr/fd.hpp"

namespace ctr {

// Whether `dir` and every directory above it follow the rule's first part for `uid` (owner
// root or `uid`, nobody else can rename or replace entries, no symlink of somebody else's
// on the way); with `why`, the first that does not and why. Creates nothing.
[[nodiscard]] bool pathIsSafeFor(const std::filesystem::path& dir, uid_t uid, std::string* why = nullptr);

// What to do when the asked name is there but not the caller's private directory.
enum class WhenTaken {
  Refuse,      // throw (a path the user chose themselves: CTR_CACHE_DIR, --dir)
  UseSibling,  // the caller's own NAME-XXXXXX beside it (a per-user name from ctr.conf or /tmp)
};

struct UserDir {
  UniqueFd fd;                 // the directory (O_RDONLY | O_DIRECTORY); invalid when missing and not created
  std::filesystem::path path;  // the asked path, or the sibling used in its place
  std::string taken;           // why the asked path was not used ("" when it was)
};

// The caller's (geteuid's) private directory at `dir` (made absolute and normalised),
// checked by the rule above and opened without following a link at the last step. With
// `create`, what is missing is made 0700 (parents too); without, a missing `dir` gives an
// invalid fd. An own directory that others can read is made 0700. Throws ctr::Error
// "WHAT DIR: why: refused" where a directory above it breaks the rule, or where `dir` is
// taken and `whenTaken` is Refuse.
[[nodiscard]] UserDir openUserDir(const std::filesystem::path& dir, std::string_view what, bool create,
                                  WhenTaken whenTaken);

// The directory openUserDir would use for `dir` with UseSibling, without opening it: `dir`
// when it is missing or the caller's, else an existing sibling of the caller's, else a new
// one (the only case that creates anything). For planners, which must name the place
// before the runtime uses it. Throws as openUserDir does.
[[nodiscard]] std::filesystem::path chooseUserDir(const std::filesystem::path& dir, std::string_view what);

// The caller's home: $HOME, else the passwd entry of the effective user; empty when neither.
[[nodiscard]] std::filesystem::path homeDirectory();

}  // namespace ctr
