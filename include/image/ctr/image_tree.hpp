// An image's root directory as build and pull touch it from the host: held by a descriptor,
// every path resolved inside it (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so that a
// symlink the image planted (opt -> /etc, .singularity.d -> /root) leads to the image's own
// /etc, never the host's, and every file is created O_EXCL|O_NOFOLLOW. The image is
// someone else's content; these operations may run as root (docs/admin-guide.md, "Building
// and pulling untrusted images").
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ctr/fd.hpp"

namespace ctr::image {

class ImageTree {
 public:
  // Opens `root`: a directory ctr made in a private scratch directory, or one the caller named.
  explicit ImageTree(const std::filesystem::path& root);

  [[nodiscard]] int fd() const { return fd_.get(); }
  // For messages only: no operation goes through it.
  [[nodiscard]] const std::filesystem::path& path() const { return root_; }

  // The directory `path` (relative to the image's "/" however written), symlinks followed
  // inside the image; with `create`, missing directories are made (0755, as mkdir -p).
  // Throws ctr::Error naming the path when it is not (or cannot be made) a directory.
  [[nodiscard]] UniqueFd directory(std::string_view path, bool create = false) const;
  // The directory that holds `path`'s last component, and that component's name. `path`
  // may not be the image's "/".
  [[nodiscard]] std::pair<UniqueFd, std::string> parentOf(std::string_view path, bool create = false) const;

  // Whether `path` exists inside the image (a symlink as its last component counts, not
  // followed) and whether it is a directory (followed inside the image).
  [[nodiscard]] bool exists(std::string_view path) const;
  [[nodiscard]] bool isDirectory(std::string_view path) const;
  // Whether `path` is a regular file (followed inside the image).
  [[nodiscard]] bool isRegularFile(std::string_view path) const;
  // Whether `path` is a directory itself, not a symlink to one.
  [[nodiscard]] bool isRealDirectory(std::string_view path) const;
  // The names in directory `path`, sorted; none when it is not a directory.
  [[nodiscard]] std::vector<std::string> entries(std::string_view path) const;

  // Replaces whatever is at `path` (a symlink is removed, never followed; a directory is an
  // error) by a new file with `content` and `mode`; parent directories are made.
  void writeFile(std::string_view path, std::string_view content, mode_t mode = 0644) const;
  // Writes `path` only when nothing is there yet.
  void writeIfMissing(std::string_view path, std::string_view content, mode_t mode = 0755) const;
  // A symlink at `path` to `target` when nothing is there yet.
  void linkIfMissing(std::string_view path, std::string_view target) const;
  // A regular file's content (symlinks followed inside the image), "" when missing; refuses
  // more than `limit` bytes and anything but a regular file.
  [[nodiscard]] std::string readFile(std::string_view path, std::size_t limit = 16u << 20) const;
  // Removes the file or symlink at `path` (not a directory); missing is fine.
  void remove(std::string_view path) const;
  // Renames `from` to `to` inside the image (neither's last component followed).
  void rename(std::string_view from, std::string_view to) const;

 private:
  [[nodiscard]] UniqueFd directory(std::string_view path, bool create, int links) const;
  // lstat of `path`: its directory resolved inside the image, its last component not followed.
  bool lstatIn(std::string_view path, struct stat& st) const;

  std::filesystem::path root_;
  UniqueFd fd_;
};

// How copyEntry treats ownership and privilege.
struct CopyOptions {
  // chown copies to their source's owner (root, or root of the build's namespace); an
  // ordinary caller keeps its own ids, as `cp -a` does.
  bool preserveOwner = false;
  // Clears every setuid/setgid bit of the copy.
  bool dropSetid = false;
};

// Copies the entry `name` of directory `fromDir` to `toName` in directory `toDir` as
// `cp -a` does (modes, owners where allowed, times, symlinks as symlinks, hard links within
// the copy as links, extended attributes where allowed), through descriptors only: neither
// side's symlinks are followed, and an existing non-directory at the target is replaced,
// never written through. Throws ctr::Error naming `what` and the failing entry.
void copyEntry(int fromDir, const std::string& name, int toDir, const std::string& toName, const CopyOptions& options,
               const std::string& what);

// `cp -a SOURCE DEST` inside `tree`: DEST an existing directory (followed inside the image)
// receives SOURCE's last component, anything else is replaced by the copy; DEST's parent
// directories are made. `sourceDir`/`sourceName` hold the source open (see openSource).
void copyIntoTree(int sourceDir, const std::string& sourceName, const ImageTree& tree, std::string_view dest,
                  bool destIsDirectory, const CopyOptions& options, const std::string& what);

// A source of %files: its directory and last component. On the host (`tree` null) the path
// is the host's (relative ones from the current directory); in an earlier stage's image it
// is resolved inside that image. The last component is not followed (as `cp -a`).
[[nodiscard]] std::pair<UniqueFd, std::string> openSource(const ImageTree* tree, const std::string& path);

// What dropPrivilegedFiles removed, for the note.
struct PrivilegedFiles {
  std::size_t setidBits = 0;      // files whose setuid/setgid bits were cleared
  std::size_t capabilities = 0;   // files whose security.capability was removed
  std::size_t deviceNodes = 0;    // device nodes removed
  [[nodiscard]] std::size_t total() const { return setidBits + capabilities + deviceNodes; }
};

// Clears setuid/setgid bits and file capabilities and removes device nodes everywhere in
// the tree (descriptors only, nothing followed): what a sandbox directory left on the host
// must not carry from an untrusted image.
PrivilegedFiles dropPrivilegedFiles(const ImageTree& tree);

// Clears the setuid/setgid bits of the regular files `uid` owns (those it can change; a
// directory it cannot enter is passed over). Returns how many. For a build that maps the
// caller to root: the caller's own setuid file must not become root's.
std::size_t clearSetidBitsOf(const ImageTree& tree, uid_t uid);

// Every regular file with a setuid or setgid bit, as image paths ("/usr/bin/su").
[[nodiscard]] std::vector<std::string> setidFiles(const ImageTree& tree);

}  // namespace ctr::image
