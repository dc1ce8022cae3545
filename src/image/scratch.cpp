// Scratch directories and placing results: see scratch.hpp.
#include "ctr/scratch.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/oci.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/user_dir.hpp"

namespace ctr::image {

namespace fs = std::filesystem;

namespace {

fs::path outputDirectory(const fs::path& output) {
  fs::path absolute = fs::absolute(output).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();
  return absolute.parent_path();
}

std::string hiddenName(const fs::path& output, std::string_view what) {
  fs::path absolute = fs::absolute(output).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();
  return "." + absolute.filename().string() + "." + std::string(what) + ".XXXXXX";
}

}  // namespace

bool privateDirectory(const fs::path& dir, uid_t uid, std::string* why) { return pathIsSafeFor(dir, uid, why); }

void requireOwnPrivateDirectory(const fs::path& dir, const struct stat& st, std::string_view what) {
  std::string why;
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    why = dir.string() + " is not a directory of this user's that only it can write";
  else if (!privateDirectory(dir, ::geteuid(), &why))
    why = "above it, " + why;
  if (!why.empty())
    throw Error(std::string(what) + " " + dir.string() + ": not private to this user (" + why + "): refused");
}

fs::path makeScratchDir(const fs::path& output, std::string_view what) {
  const uid_t uid = ::geteuid();
  std::vector<fs::path> candidates{outputDirectory(output)};
  if (const char* tmp = std::getenv("TMPDIR"); tmp && *tmp == '/') candidates.emplace_back(tmp);
  candidates.emplace_back("/var/tmp");
  candidates.emplace_back("/tmp");
  std::string reasons;
  for (const auto& dir : candidates) {
    std::string why;
    if (!privateDirectory(dir, uid, &why)) {
      reasons += (reasons.empty() ? "" : "; ") + why;
      continue;
    }
    std::string tmpl = (dir / hiddenName(output, what)).string();
    if (!::mkdtemp(tmpl.data())) throw sysError("create a temporary directory in " + dir.string());
    return tmpl;
  }
  throw Error("no private directory for temporary files (" + reasons + "); set TMPDIR to one only you and root can write");
}

ScratchDir::ScratchDir(const fs::path& output, std::string_view what) : path_(makeScratchDir(output, what)) {}

ScratchDir::~ScratchDir() { oci::removeTree(path_); }

UniqueFd createReplacing(const fs::path& path, mode_t mode) {
  const fs::path dir = outputDirectory(path);
  UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirFd) throw sysError("open " + dir.string());
  std::string name = hiddenName(path, "new");
  std::string tmpl = (dir / name).string();
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) throw sysError("create a file in " + dir.string());
  const std::string tmpName = fs::path(tmpl).filename().string();
  if (::fchmod(fd.get(), mode) != 0 ||
      ::renameat(dirFd.get(), tmpName.c_str(), dirFd.get(), fs::path(path).filename().c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dirFd.get(), tmpName.c_str(), 0);
    throw sysError("create " + path.string(), err);
  }
  return fd;
}

void moveIntoPlace(const fs::path& from, const fs::path& to, bool replace) {
  const unsigned flags = replace ? 0 : RENAME_NOREPLACE;
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) == 0) return;
  if (errno != EXDEV) throw sysError("rename " + from.string() + " to " + to.string());
  // Across file systems: the copy is made under a new name beside `to` (O_EXCL, nothing
  // followed), then renamed, so that nothing at `to` is ever written through.
  const fs::path dir = outputDirectory(to);
  UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirFd) throw sysError("open " + dir.string());
  std::string tmpl = (dir / hiddenName(to, "copy")).string();
  if (!::mkdtemp(tmpl.data())) throw sysError("create a temporary directory in " + dir.string());
  const fs::path holder = tmpl;
  try {
    UniqueFd holderFd(::open(holder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!holderFd) throw sysError("open " + holder.string());
    UniqueFd fromDir(::open(from.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fromDir) throw sysError("open " + from.parent_path().string());
    CopyOptions options;
    options.preserveOwner = ::geteuid() == 0;
    copyEntry(fromDir.get(), from.filename().string(), holderFd.get(), "x", options, "copy to " + to.string());
    const std::string toName = fs::path(to).filename().string();
    if (::renameat2(holderFd.get(), "x", dirFd.get(), toName.c_str(), flags) != 0)
      throw sysError("rename into " + to.string());
  } catch (...) {
    oci::removeTree(holder);
    throw;
  }
  oci::removeTree(holder);
  oci::removeTree(from);
}

}  // namespace ctr::image
