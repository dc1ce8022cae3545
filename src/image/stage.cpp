// Node-local staging: the stage directory's keeper (ctr/stage.hpp).
#include "ctr/stage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <spdlog/spdlog.h>

#include "ctr/error.hpp"
#include "ctr/limits.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/scratch.hpp"
#include "ctr/user_dir.hpp"

namespace ctr::image::stage {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLock = "lock";

// The stage directory, opened; made (0700, its parents too) where missing, refused where
// anyone but the user (and root) could rename or replace what is in it or on the way to it
// (the planner already took the user's own sibling of a name another user took).
UniqueFd openStageDir(const fs::path& dir, bool create) {
  UserDir opened = openUserDir(dir, "stage directory", create, WhenTaken::Refuse);
  if (!opened.fd) throw sysError("stage directory " + dir.string(), ENOENT);
  return std::move(opened.fd);
}

// The directory's lock, held while the object lives; says so when another copier has it.
class StageLock {
 public:
  StageLock(int dirFd, const fs::path& dir) {
    fd_ = UniqueFd(::openat(dirFd, kLock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd_) throw sysError("stage lock " + (dir / kLock).string());
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return;
    spdlog::info("waiting for another launch staging into {}", dir.string());
    while (::flock(fd_.get(), LOCK_EX) != 0)
      if (errno != EINTR) throw sysError("stage lock " + (dir / kLock).string());
  }

 private:
  UniqueFd fd_;
};

bool isCopyName(const std::string& name) { return name != kLock && !name.empty() && name[0] != '.'; }
// A copy being made: ".KEY-NAME.XXXXXX" (copyInto's temporary name).
bool isTempName(const std::string& name) { return name.size() > 8 && name[0] == '.'; }

// Whether `name` in the directory is a copy with this size and mtime. A file system that
// keeps whole seconds only counts as the same time.
bool matches(int dirFd, const std::string& name, std::uint64_t bytes, std::int64_t mtimeNs) {
  struct stat st {};
  if (::fstatat(dirFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return false;
  if (static_cast<std::uint64_t>(st.st_size) != bytes) return false;
  const std::int64_t sec = mtimeNs / 1'000'000'000, nsec = mtimeNs % 1'000'000'000;
  return st.st_mtim.tv_sec == sec && (st.st_mtim.tv_nsec == nsec || st.st_mtim.tv_nsec == 0);
}

// Marks a use: the copy's atime (its mtime is the source's).
void touch(int dirFd, const std::string& name) {
  const struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  ::utimensat(dirFd, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
}

std::vector<std::string> namesIn(int dirFd) {
  std::vector<std::string> names;
  DIR* d = ::fdopendir(::dup(dirFd));
  if (!d) return names;
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

std::vector<Entry> entriesOf(int dirFd, const fs::path& dir) {
  std::vector<Entry> entries;
  for (const auto& name : namesIn(dirFd)) {
    struct stat st {};
    if (!isCopyName(name) || ::fstatat(dirFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    entries.push_back({dir / name, static_cast<std::uint64_t>(st.st_size), static_cast<std::int64_t>(st.st_atim.tv_sec)});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.lastUsed > b.lastUsed; });
  return entries;
}

// Under the lock: what killed copiers left (no copier runs now), then the least recently
// used copies until the rest, `keep` aside, fit in `budget`.
void makeRoom(int dirFd, const fs::path& dir, std::uint64_t budget, const std::string& keep) {
  for (const auto& name : namesIn(dirFd))
    if (isTempName(name)) ::unlinkat(dirFd, name.c_str(), 0);
  auto entries = entriesOf(dirFd, dir);
  std::uint64_t total = 0;
  for (const auto& e : entries)
    if (e.copy.filename() != keep) total += e.bytes;
  for (auto it = entries.rbegin(); it != entries.rend() && total > budget; ++it) {
    if (it->copy.filename() == keep) continue;
    spdlog::info("stage: removing {} ({} MiB, least recently used) to stay within 'stage max size'",
                 it->copy.string(), it->bytes >> 20);
    ::unlinkat(dirFd, it->copy.filename().c_str(), 0);
    total -= it->bytes;
  }
}


// The copy, made under the lock: a new file beside it, renamed into place.
void copyInto(int dirFd, const fs::path& dir, const File& file, const std::string& name, std::uint64_t maxBytes) {
  const std::string what = "staging " + file.source.string();
  UniqueFd in(::open(file.source.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!in) throw sysError(what);
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) throw sysError(what);
  const std::int64_t mtimeNs = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != file.bytes || mtimeNs != file.mtimeNs)
    throw Error(what + ": it changed since this launch looked at it; run the launch again");
  if (file.bytes > maxBytes)
    throw Error(what + ": " + limits::formatSize(file.bytes) + " is more than 'stage max size' (" + limits::formatSize(maxBytes) + ")");
  makeRoom(dirFd, dir, maxBytes - file.bytes, name);
  struct statvfs vfs {};
  if (::fstatvfs(dirFd, &vfs) == 0) {
    const std::uint64_t free = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free < file.bytes)
      throw Error(what + ": " + dir.string() + " has " + limits::formatSize(free) + " free and the copy needs " + limits::formatSize(file.bytes));
  }
  std::string tmpl = (dir / ("." + name + ".XXXXXX")).string();
  UniqueFd out(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!out) throw sysError(what + ": create a file in " + dir.string());
  const std::string tmpName = fs::path(tmpl).filename().string();
  try {
    copyFileData(in.get(), out.get(), what);
    struct stat copied {};
    if (::fstat(out.get(), &copied) != 0) throw sysError(what);
    if (static_cast<std::uint64_t>(copied.st_size) != file.bytes)
      throw Error(what + ": the copy has " + std::to_string(copied.st_size) + " bytes, the source " +
                  std::to_string(file.bytes));
    const struct timespec times[2] = {{0, UTIME_NOW}, st.st_mtim};
    if (::futimens(out.get(), times) != 0) throw sysError(what + ": set the copy's time");
    if (::renameat(dirFd, tmpName.c_str(), dirFd, name.c_str()) != 0) throw sysError(what + ": rename the copy");
  } catch (...) {
    ::unlinkat(dirFd, tmpName.c_str(), 0);
    throw;
  }
}

}  // namespace

std::string copyName(const fs::path& source) {
  return toHex16(fnv1a64(source.string())) + "-" + source.filename().string();
}

bool ensure(const fs::path& dir, const File& file, std::uint64_t maxBytes) {
  const std::string name = file.copy.filename().string();
  if (file.copy.parent_path() != dir || !isCopyName(name))
    throw Error("staging " + file.source.string() + ": " + file.copy.string() + " is not a copy's name in " + dir.string());
  UniqueFd dirFd = openStageDir(dir, true);
  if (matches(dirFd.get(), name, file.bytes, file.mtimeNs)) {
    touch(dirFd.get(), name);
    return false;
  }
  StageLock lock(dirFd.get(), dir);
  if (matches(dirFd.get(), name, file.bytes, file.mtimeNs)) {  // another launch copied it meanwhile
    touch(dirFd.get(), name);
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  copyInto(dirFd.get(), dir, file, name, maxBytes);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  spdlog::info("staged {} ({}) to {} in {:.1f} s", file.source.string(), limits::formatSize(file.bytes), file.copy.string(),
               took.count());
  return true;
}

std::vector<Entry> list(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return {};
  UniqueFd dirFd = openStageDir(dir, false);
  return entriesOf(dirFd.get(), dir);
}

std::vector<Entry> clean(const fs::path& dir, std::optional<std::chrono::seconds> unusedFor, bool dryRun) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return {};
  UniqueFd dirFd = openStageDir(dir, false);
  StageLock lock(dirFd.get(), dir);
  auto entries = entriesOf(dirFd.get(), dir);
  if (unusedFor) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    std::erase_if(entries, [&](const Entry& e) { return now - e.lastUsed < unusedFor->count(); });
  }
  if (dryRun) return entries;
  for (const auto& e : entries) ::unlinkat(dirFd.get(), e.copy.filename().c_str(), 0);
  for (const auto& name : namesIn(dirFd.get()))
    if (isTempName(name)) ::unlinkat(dirFd.get(), name.c_str(), 0);
  return entries;
}

}  // namespace ctr::image::stage
