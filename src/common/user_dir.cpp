// Directories ctr keeps one user's files in (ctr/user_dir.hpp).
#include "ctr/user_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include "ctr/error.hpp"

namespace ctr {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxLinks = 40;
constexpr std::string_view kSiblingSuffix = "-XXXXXX";

std::string described(const fs::path& path, const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return path.string() + " (owner uid " + std::to_string(st.st_uid) + ", mode " + mode + ")";
}

bool ownedByRootOr(const struct stat& st, uid_t uid) { return st.st_uid == 0 || st.st_uid == uid; }

// Nobody but the owner can rename or replace what is in it.
bool othersCannotReplace(const struct stat& st) {
  return (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (st.st_mode & S_ISVTX) != 0;
}

// The '/'-separated components of `path`, last first (a stack: the walk pops the next one).
void pushComponents(std::vector<std::string>& todo, const std::string& path) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= path.size();) {
    std::size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    if (end > at) parts.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
}

// One walk of walkSafely: the directory it stands in, the components left (a stack), and
// why it stopped.
struct SafeWalk {
  uid_t uid;
  bool create;
  std::string& why;
  UniqueFd at{};
  fs::path where = "/";
  std::vector<std::string> todo{};
  int links = 0;
};

// / itself must follow the rule.
bool startAtRoot(SafeWalk& walk) {
  walk.at = UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!walk.at || ::fstat(walk.at.get(), &st) != 0) {
    walk.why = "/: " + std::string(std::strerror(errno));
    return false;
  }
  if (!ownedByRootOr(st, walk.uid) || !othersCannotReplace(st)) {
    walk.why = described("/", st) + " lets others rename what is in it";
    return false;
  }
  return true;
}

// The way back up passes directories already checked.
bool stepUp(SafeWalk& walk) {
  UniqueFd up(::openat(walk.at.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!up) {
    walk.why = walk.where.string() + "/..: " + std::strerror(errno);
    return false;
  }
  walk.at = std::move(up);
  walk.where = walk.where.parent_path();
  return true;
}

// `name` in the current directory, not followed; with `create`, made 0700 when missing.
bool statOrCreate(SafeWalk& walk, const std::string& name, const fs::path& here, struct stat& st) {
  if (::fstatat(walk.at.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
  const int err = errno;
  if (err != ENOENT || !walk.create) {
    walk.why = here.string() + ": " + std::strerror(err);
    errno = err;
    return false;
  }
  if (::mkdirat(walk.at.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
    walk.why = "create " + here.string() + ": " + std::strerror(errno);
    return false;
  }
  if (::fstatat(walk.at.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    walk.why = here.string() + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

// A symlink owned by root or the user: its target's components are walked next, from / for
// an absolute one.
bool followLink(SafeWalk& walk, const std::string& name, const fs::path& here, const struct stat& st) {
  if (!ownedByRootOr(st, walk.uid)) {
    walk.why = here.string() + " is a symlink of uid " + std::to_string(st.st_uid);
    return false;
  }
  if (++walk.links > kMaxLinks) {
    walk.why = here.string() + ": too many symlinks";
    return false;
  }
  char target[PATH_MAX];
  const ssize_t n = ::readlinkat(walk.at.get(), name.c_str(), target, sizeof target - 1);
  if (n <= 0) {
    walk.why = "read the symlink " + here.string() + ": " + std::strerror(errno);
    return false;
  }
  const std::string to(target, static_cast<std::size_t>(n));
  pushComponents(walk.todo, to);
  if (to[0] == '/') {
    walk.at = UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    walk.where = "/";
  }
  return true;
}

// A directory that follows the rule, opened without following a link and checked to be the
// one looked at.
bool enterDirectory(SafeWalk& walk, const std::string& name, const fs::path& here, const struct stat& st) {
  if (!S_ISDIR(st.st_mode)) {
    walk.why = here.string() + " is not a directory";
    errno = ENOTDIR;
    return false;
  }
  if (!ownedByRootOr(st, walk.uid) || !othersCannotReplace(st)) {
    walk.why = described(here, st) + " lets others rename what is in it";
    return false;
  }
  UniqueFd next(::openat(walk.at.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat opened {};
  if (!next || ::fstat(next.get(), &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
    walk.why = here.string() + " changed while it was checked";
    return false;
  }
  walk.at = std::move(next);
  walk.where = here;
  return true;
}

// Walks from / to the absolute `path`, one component at a time, never letting the kernel
// follow a link: each directory passed must follow the rule, each symlink be owned by
// root or `uid` (its target is then walked the same way). With `create`, missing
// components are made 0700. Returns an O_PATH descriptor of the directory reached and its
// real path, or an invalid one with `why` (errno ENOENT when a component is missing).
UniqueFd walkSafely(const fs::path& path, uid_t uid, bool create, std::string& why, fs::path& reached) {
  SafeWalk walk{.uid = uid, .create = create, .why = why};
  if (!startAtRoot(walk)) return {};
  pushComponents(walk.todo, path.string());
  while (!walk.todo.empty()) {
    const std::string name = walk.todo.back();
    walk.todo.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      if (!stepUp(walk)) return {};
      continue;
    }
    const fs::path here = walk.where / name;
    struct stat st {};
    if (!statOrCreate(walk, name, here, st)) return {};
    if (S_ISLNK(st.st_mode)) {
      if (!followLink(walk, name, here, st)) return {};
      continue;
    }
    if (!enterDirectory(walk, name, here, st)) return {};
  }
  reached = walk.where;
  return std::move(walk.at);
}

fs::path absoluteOf(const fs::path& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty() && p != p.root_path()) p = p.parent_path();
  return p;
}

// Why the entry `name` in `parent` is not the caller's private directory ("" when it is,
// and then `fd` holds it open); `missing` when it is not there.
std::string ownPrivate(int parent, const std::string& name, uid_t uid, UniqueFd& fd, bool& missing) {
  missing = false;
  fd = UniqueFd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    struct stat st {};
    if (err == ENOENT) {
      missing = true;
      return "missing";
    }
    if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
      return "a symlink of uid " + std::to_string(st.st_uid);
    if (err == ENOTDIR) return "not a directory";
    return std::strerror(err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::strerror(errno);
  if (st.st_uid != uid) return "a directory of uid " + std::to_string(st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("writable by others (mode ") + mode + ")";
  }
  return {};
}

// The caller's own NAME-XXXXXX in `parent` (first by name, so that every rank of a job
// settles on the same one), or "".
std::string existingSibling(int parent, const std::string& name, uid_t uid) {
  UniqueFd list(::openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = list ? ::fdopendir(list.release()) : nullptr;
  if (!d) return {};
  const std::string prefix = name + "-";
  std::vector<std::string> mine;
  while (const dirent* e = ::readdir(d)) {
    const std::string entry = e->d_name;
    if (entry.size() != name.size() + kSiblingSuffix.size() || !entry.starts_with(prefix)) continue;
    struct stat st {};
    if (::fstatat(parent, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
        (st.st_mode & 077) == 0)
      mine.push_back(entry);
  }
  ::closedir(d);
  return mine.empty() ? std::string() : *std::min_element(mine.begin(), mine.end());
}

struct Resolved {
  UniqueFd fd;
  fs::path path;
  std::string taken;
};

Resolved resolve(const fs::path& dir, std::string_view what, bool create, WhenTaken whenTaken) {
  const uid_t uid = ::geteuid();
  const fs::path wanted = absoluteOf(dir);
  const std::string name = wanted.filename().string();
  if (name.empty()) throw Error(std::string(what) + " " + dir.string() + ": not a directory ctr can keep files in");
  std::string why;
  fs::path parentReal;
  UniqueFd parent = walkSafely(wanted.parent_path(), uid, create, why, parentReal);
  if (!parent) {
    if (errno == ENOENT && !create) return {{}, wanted, {}};
    throw Error(std::string(what) + " " + wanted.string() + ": " + why + ": refused");
  }
  if (create && ::mkdirat(parent.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
    throw sysError(std::string(what) + " " + wanted.string());
  UniqueFd fd;
  bool missing = false;
  std::string taken = ownPrivate(parent.get(), name, uid, fd, missing);
  if (taken.empty() || (missing && !create)) {
    if (fd) {
      // What ctr keeps for a user is that user's alone (a cache made 0755 by an older ctr).
      struct stat st {};
      if (::fstat(fd.get(), &st) == 0 && (st.st_mode & 077) != 0) ::fchmod(fd.get(), st.st_mode & 0700);
    }
    return {std::move(fd), wanted, {}};
  }
  taken = wanted.string() + " is " + taken;
  if (whenTaken == WhenTaken::Refuse) throw Error(std::string(what) + " " + taken + ": refused");
  std::string sibling = existingSibling(parent.get(), name, uid);
  if (sibling.empty()) {
    std::string tmpl = (parentReal / (name + std::string(kSiblingSuffix))).string();
    if (!::mkdtemp(tmpl.data())) throw sysError(std::string(what) + ": " + taken + ", and creating one beside it failed");
    sibling = fs::path(tmpl).filename().string();
  }
  bool gone = false;
  if (std::string bad = ownPrivate(parent.get(), sibling, uid, fd, gone); !bad.empty())
    throw Error(std::string(what) + " " + (parentReal / sibling).string() + " is " + bad + ": refused");
  const fs::path used = wanted.parent_path() / sibling;
  // Once per directory and process: a launch asks about its directories more than once.
  static std::set<std::string> told;
  if (told.insert(wanted.string()).second)
    spdlog::warn("{} {}: using {}, a private one of yours, instead", what, taken, used.string());
  return {std::move(fd), used, taken};
}

}  // namespace

bool pathIsSafeFor(const fs::path& dir, uid_t uid, std::string* why) {
  std::string reason;
  fs::path reached;
  UniqueFd fd = walkSafely(absoluteOf(dir), uid, false, reason, reached);
  if (!fd && why) *why = reason;
  return static_cast<bool>(fd);
}

UserDir openUserDir(const fs::path& dir, std::string_view what, bool create, WhenTaken whenTaken) {
  Resolved r = resolve(dir, what, create, whenTaken);
  return {std::move(r.fd), std::move(r.path), std::move(r.taken)};
}

fs::path chooseUserDir(const fs::path& dir, std::string_view what) {
  return resolve(dir, what, false, WhenTaken::UseSibling).path;
}

std::filesystem::path homeDirectory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir) return pw->pw_dir;
  return {};
}

}  // namespace ctr
