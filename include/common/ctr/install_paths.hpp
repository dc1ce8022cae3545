// Where ctr finds its own files and the programs it runs, so that an install works under
// any prefix (a site's /apps/ctr/X.Y module tree, a user's $HOME, an unpacked tarball):
//   1. relative to the running executable: /proc/self/exe is PREFIX/bin/ctr, so
//      PREFIX/libexec/ctr/NAME and PREFIX/etc/ctr/ctr.conf, as installed;
//   2. the prefix configured at build time (CMAKE_INSTALL_PREFIX);
//   3. for external programs only (squashfuse_ll, mksquashfs, unsquashfs, mkfs.ext3, debugfs,
//      fuse2fs, fuse-overlayfs): $PATH, and for e2fsprogs' and the FUSE servers' programs
//      /usr/sbin and /sbin after it (an ordinary user's
//      PATH often lacks them).
// Unprivileged code only: the setuid helper keeps its compiled-in paths (its trust rests on
// them), and so does the check of that helper in the launch planner.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ctr {

// SquashfsServer is ctr's own multithreaded FUSE server for squashfs images (ctr-squashfs);
// Squashfuse the one-threaded squashfuse_ll it replaces where it is not installed.
// MkfsExt3 and Debugfs (e2fsprogs) make and edit `ctr overlay create`'s ext3 images;
// Fuse2fs and FuseOverlayfs mount and stack them for `--overlay IMG.img`.
enum class Program { Squashfuse, SquashfsServer, Mksquashfs, Unsquashfs, Topology, MkfsExt3, Debugfs, Fuse2fs, FuseOverlayfs };

// PREFIX of the running ctr when it runs from an installed layout (its directory is
// PREFIX/bin), else empty (a build tree's bin/ counts as PREFIX/bin too: it simply holds
// none of the files looked for).
[[nodiscard]] const std::filesystem::path& relocatedPrefix();

// Absolute path of `program`, by the order above. Throws ctr::Error with one line naming
// the program, where it was looked for and what to install, e.g.
//   "squashfuse_ll not found (looked in /apps/ctr/libexec/ctr and $PATH): install squashfuse ..."
[[nodiscard]] std::string findProgram(Program program);

// Where findProgram looks for `program`, in its order: ctr's directories, then each of $PATH's
// (an empty entry is "."). A program found later in one of them would be found instead: what a
// kept launch plan that names a program is keyed on (cli/launch_memo.cpp).
[[nodiscard]] std::vector<std::filesystem::path> programSearchDirs(Program program);

// The ctr.conf of unprivileged ctr: PREFIX/etc/ctr/ctr.conf of a relocated install when it
// exists, else the path configured at build time (the one the setuid helper reads).
[[nodiscard]] std::filesystem::path sysconfPath();

// The first executable regular file NAME in the ':'-separated directory list `searchPath`
// (an empty entry is "."), as execvp(3) searches; empty when there is none.
[[nodiscard]] std::string findInSearchPath(const std::string& name, const std::string& searchPath);

}  // namespace ctr
