// What the node supports for unprivileged containers, as `ctr check` and the planner see it:
// user namespaces (a real unshare), /dev/fuse, and the installed setuid helper.
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "ctr/owned_child.hpp"
#include "ctr/error.hpp"
#include "ctr/host_facts.hpp"

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
