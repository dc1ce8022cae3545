#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
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

int lastCapability() {
  const std::string text = readFirstLine("/proc/sys/kernel/cap_last_cap");
  int last = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), last);
  if (ec == std::errc{} && end != text.data() && last >= 0) return last;
  // No /proc (e.g. before it is mounted): PR_CAPBSET_READ fails with EINVAL past the end.
  last = 0;
  while (::prctl(PR_CAPBSET_READ, last + 1, 0, 0, 0) >= 0) ++last;
  return last;
}

void dropAllCapabilities() {
  const int last = lastCapability();
  for (int cap = 0; cap <= last; ++cap) {
    // Dropping needs CAP_SETPCAP: a process without it passes if the capability is gone
    // already (nothing left to drop).
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0) {
      throw sysError("prctl(PR_CAPBSET_DROP, " + std::to_string(cap) + ")");
    }
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
