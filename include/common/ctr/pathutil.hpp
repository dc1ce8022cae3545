// Paths: the one lexical path-join/normalise of the project, and resolution of a path
// inside a container root that can never escape that root.
//
// Lexical functions are pure (no syscalls). The in-root functions only open and read
// (openat/openat2, readlinkat, fstat); only openInRoot with O_CREAT creates a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ctr/fd.hpp"

namespace ctr {

// Lexical normalisation: collapses "//" and "/./", drops a trailing '/', resolves ".."
// against the preceding component. For an absolute path ".." at the root stays at the root
// ("/../a" -> "/a"); a relative path keeps leading ".." ("../a/.." -> ".."). "" -> ".".
// Symlinks are not consulted: use resolveInRoot for that.
[[nodiscard]] std::string normalizePath(std::string_view path);

// Joins `tail` under `base`, treating an absolute `tail` as relative to `base`
// (joinPath("/rootfs", "/etc/passwd") == "/rootfs/etc/passwd"), then normalises.
// Lexical only: a ".." in `tail` can climb above `base`; callers joining untrusted
// paths check hasDotDotComponent first or use resolveInRoot.
[[nodiscard]] std::string joinPath(std::string_view base, std::string_view tail);

// Whether normalised absolute `path` is `dir` or inside it (every path is inside "/").
[[nodiscard]] bool isAtOrUnder(std::string_view path, std::string_view dir);

// True if any '/'-separated component of `path` is exactly "..".
[[nodiscard]] bool hasDotDotComponent(std::string_view path);

// A directory pattern of ctr.conf ('image cache dir', 'stage dir') with %u replaced by
// `uid` and %% by %. Throws ctr::Error naming `setting` for any other %X.
[[nodiscard]] std::string expandUidPattern(std::string_view pattern, unsigned uid, std::string_view setting);

enum class PathKind { Missing, Directory, RegularFile, Other };

// "missing", "directory", "file", "other"
[[nodiscard]] std::string_view toString(PathKind kind);

struct ResolvedPath {
  // Where `path` really leads inside the root, every symlink followed, absolute and
  // normalised ("/usr/lib64" for "/lib64" when /lib64 -> usr/lib64).
  std::string path;
  PathKind kind = PathKind::Missing;
  // O_PATH|O_CLOEXEC descriptor of the target when it exists, else of its deepest existing
  // ancestor; `existing` is that ancestor's resolved container path. The components of
  // `path` after `existing` are the ones a caller must create (e.g. a missing bind target).
  UniqueFd fd;
  std::string existing;
};

// Resolves the absolute container path `path` inside the directory `rootFd` (the
// container's "/"), walking one component at a time with O_NOFOLLOW and following
// symlinks itself: absolute link targets start again at the root, relative ones at the
// link's directory. The walk holds a descriptor at every step, so it cannot be raced out of
// the root. Refuses (ctr::Error) a symlink whose target climbs above the root with "..":
//   "<what> /x escapes the container root through symlink /x -> /../../etc"
// and a path that runs through a non-directory, a symlink loop (more than 40 links), or a
// relative `path`. A missing final component (or missing directories) is not an error:
// kind is Missing. `what` names the path in messages ("bind target", "working directory").
[[nodiscard]] ResolvedPath resolveInRoot(int rootFd, std::string_view path,
                                         std::string_view what = "path");

// Opens `path` inside `rootFd` with chroot semantics ("/.." is "/", absolute symlinks start
// at the root, magic links such as /proc/self/root are refused): openat2 with
// RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, falling back to the resolveInRoot walk on
// kernels without openat2 (< 5.6). `flags` are open(2) flags (O_CLOEXEC is always added),
// `mode` is used with O_CREAT. Throws ctr::Error naming the path and errno (ENOENT too).
[[nodiscard]] UniqueFd openInRoot(int rootFd, std::string_view path, int flags,
                                  unsigned mode = 0);

// The shared (network and parallel) file systems, by statfs type ("NFS", "Lustre", "GPFS",
// ...): where many nodes reading one image file is what a node-local copy saves (staging,
// the site store's 'image store copy = auto'). FUSE is left out: it may be anything.
[[nodiscard]] std::optional<std::string_view> sharedFilesystemName(std::int64_t statfsType);

}  // namespace ctr
