// What the node supports for unprivileged containers, as `ctr check` and the planner see it:
// user namespaces (a real unshare), /dev/fuse, the installed setuid helper, and whether the
// host's later mounts reach running launches (the root mount's propagation).
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

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

int probeUserNamespace() {
  try {
    Child child = Child::fork([] { return ::unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0x7f); });
    const int status = child.wait();
    return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  } catch (const Error&) {
    return EAGAIN;
  }
}

}  // namespace ctr::host
