// A cgroup v2 device filter: cgroup v2 has no devices controller; the kernel asks BPF
// programs of type BPF_PROG_TYPE_CGROUP_DEVICE attached to a task's cgroup (and to its
// ancestors) whether an open or mknod of a device node may go ahead.
#pragma once

#include <vector>

#include "ctr/limits.hpp"

namespace ctr::runtime {

// Loads a program that refuses every access to the devices of `deny` and allows the rest
// (what the ancestors' programs allow: it is attached with BPF_F_ALLOW_MULTI, so a site's
// own device policy keeps applying), and attaches it to the cgroup v2 directory open at
// `cgroupDirFd`. The cgroup keeps the program; it goes with the directory. Throws
// ctr::Error with the kernel's reason (and the verifier's log when it refused the program).
void attachDeviceDenyFilter(int cgroupDirFd, const std::vector<limits::DeviceRule>& deny);

}  // namespace ctr::runtime
