// What the node supports for unprivileged containers, as `ctr check` and the planner see it:
// user namespaces (a real unshare), /dev/fuse, the installed setuid helper, and whether the
// host's later mounts reach running launches (the root mount's propagation).
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <vector>

#include "ctr/owned_child.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/mountinfo.hpp"

namespace ctr::host {

HelperState inspectSetuidHelper(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return HelperState::Missing;
  if (st.st_uid != 0 || (st.st_mode & S_ISUID) == 0) return HelperState::NotSetuidRoot;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return HelperState::Writable;
  return HelperState::Usable;
}

FuseState inspectFuse() {
  struct stat st {};
  if (::stat("/dev/fuse", &st) != 0 || !S_ISCHR(st.st_mode)) return FuseState::Missing;
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return FuseState::NotAccessible;
  return FuseState::Usable;
}

RootPropagation rootPropagationOf(std::string_view mountinfo) {
  RootPropagation found = RootPropagation::Unknown;
  std::istringstream lines{std::string(mountinfo)};
  for (std::string line; std::getline(lines, line);) {
    const auto m = parseMountInfoLine(line);
    if (!m || m->mountPoint != "/") continue;
    const auto has = [&](std::string_view prefix) {
      return std::any_of(m->optionalFields.begin(), m->optionalFields.end(),
                         [&](const std::string& f) { return f.starts_with(prefix); });
    };
    found = has("shared:") ? RootPropagation::Shared : has("master:") ? RootPropagation::Slave : RootPropagation::Private;
  }
  return found;
}

RootPropagation inspectRootPropagation() { return rootPropagationOf(readFileIfPresent("/proc/self/mountinfo")); }

namespace {

// The uid and primary gid of the user named `user`, where there is one.
struct AccountIds {
  uid_t uid;
  gid_t gid;
};
std::optional<AccountIds> accountIds(const std::string& user) {
  struct passwd entry {}, *pw = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(user.c_str(), &entry, buf.data(), buf.size(), &pw) != 0 || pw == nullptr) return std::nullopt;
  return AccountIds{pw->pw_uid, pw->pw_gid};
}

}  // namespace

Readability readabilityFor(const std::string& path, const std::string& user) {
  const auto pw = accountIds(user);
  if (!pw) return {Readability::Unreadable, "there is no user '" + user + "'"};
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  if (::getgrouplist(user.c_str(), pw->gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    ::getgrouplist(user.c_str(), pw->gid, groups.data(), &n);
  }
  groups.resize(static_cast<std::size_t>(std::max(n, 0)));
  // The permission class the kernel picks: owner, else group, else others.
  const auto allows = [&](const struct stat& st, mode_t owner, mode_t group, mode_t other) {
    if (pw->uid == 0) return true;
    if (st.st_uid == pw->uid) return (st.st_mode & owner) != 0;
    if (std::find(groups.begin(), groups.end(), st.st_gid) != groups.end()) return (st.st_mode & group) != 0;
    return (st.st_mode & other) != 0;
  };
  // The real path, or (where the caller cannot resolve it) the path as written.
  std::error_code ec;
  std::filesystem::path file = std::filesystem::canonical(path, ec);
  if (ec) file = std::filesystem::absolute(path, ec).lexically_normal();
  // Every directory from / down to the file's own, then the file.
  std::vector<std::filesystem::path> dirs{"/"};
  for (const auto& part : file.parent_path().relative_path()) dirs.push_back(dirs.back() / part);
  struct stat st {};
  for (const auto& dir : dirs) {
    if (::stat(dir.c_str(), &st) != 0) return {Readability::Unknown, dir.string() + ": " + std::strerror(errno)};
    if (!allows(st, S_IXUSR, S_IXGRP, S_IXOTH))
      return {Readability::Unreadable, "user '" + user + "' cannot search " + dir.string()};
  }
  if (::stat(file.c_str(), &st) != 0) return {Readability::Unknown, file.string() + ": " + std::strerror(errno)};
  if (!allows(st, S_IRUSR, S_IRGRP, S_IROTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return {Readability::Unreadable,
            "user '" + user + "' cannot read it (mode " + mode + ", owner uid " + std::to_string(st.st_uid) + ")"};
  }
  return {};
}

int probeUserNamespace() {
  try {
    Child child = Child::fork([] { return ::unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0x7f); });
    const int status = child.wait();
    return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  } catch (const Error&) {
    return EAGAIN;
  }
}

std::optional<std::vector<std::string>> processesRunningAs(const std::string& user) {
  const auto account = accountIds(user);
  if (!account) return std::nullopt;
  const std::string uid = std::to_string(account->uid);
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    // "Name:\tCOMMAND" and "Uid:\tREAL\tEFFECTIVE\tSAVED\tFS" (proc(5)). A process that ended
    // meanwhile has no status, or one that fails to read (ESRCH).
    std::istringstream status;
    try {
      status.str(readFileIfPresent((entry.path() / "status").string()));
    } catch (const Error&) {
      continue;
    }
    std::string name, field;
    bool runsAs = false;
    for (std::string line; std::getline(status, line);) {
      std::istringstream words(line);
      words >> field;
      if (field == "Name:") std::getline(words >> std::ws, name);
      if (field != "Uid:") continue;
      for (int i = 0; i < 3 && words >> field; i++) runsAs = runsAs || field == uid;
      break;
    }
    if (runsAs) found.push_back(pid + " (" + name + ")");
  }
  return found;
}

}  // namespace ctr::host
