#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "ctr/error.hpp"
#include "ctr/handover.hpp"

namespace ctr::runtime {
namespace {

// glibc has no wrappers for capget/capset; libcap would be one more dependency for three
// calls. Version 3 = two 32-bit words per set (capabilities(7)).
struct CapSets {
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
};

CapSets readCaps() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  CapSets caps;
  if (::syscall(SYS_capget, &header, caps.data) != 0) throw sysError("capget");
  return caps;
}

}  // namespace

void setNoNewPrivs() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw sysError("prctl(PR_SET_NO_NEW_PRIVS)");
  if (::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
    throw Error("no_new_privs did not stick (PR_GET_NO_NEW_PRIVS != 1)");
  }
}

void dropAllCapabilities() {
  // Every capability up to the first number the kernel calls invalid (EINVAL past
  // cap_last_cap), not read from /proc/sys/kernel/cap_last_cap: that file costs every launch
  // five system calls (issue 56).
  int last = -1;
  for (int cap = 0;; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) {
      last = cap;
      continue;
    }
    const int error = errno;
    if (error == EINVAL && cap > 0) break;
    // Dropping needs CAP_SETPCAP: a process without it passes if the capability is gone
    // already (nothing left to drop).
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0) {
      errno = error;
      throw sysError("prctl(PR_CAPBSET_DROP, " + std::to_string(cap) + ")");
    }
    last = cap;
  }
  // EINVAL here means a kernel without ambient capabilities (< 4.3): nothing to clear.
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    throw sysError("prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
  }

  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  CapSets empty;
  if (::syscall(SYS_capset, &header, empty.data) != 0) throw sysError("capset(empty)");

  // Checked, not assumed. The ambient set needs no check of its own: the kernel keeps it
  // within permitted and inheritable, both read back empty here.
  CapSets now = readCaps();
  for (const auto& word : now.data) {
    if (word.effective != 0 || word.permitted != 0 || word.inheritable != 0) {
      throw Error("capabilities still present after capset(empty)");
    }
  }
  for (int cap = 0; cap <= last; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0) {
      throw Error("capability " + std::to_string(cap) + " still in the bounding set");
    }
  }
}

}  // namespace ctr::runtime
