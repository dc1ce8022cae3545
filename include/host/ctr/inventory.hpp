// What `ctr check --host` reports about the node (issue 8, item 5) and what the benchmark
// harness records as the host fingerprint: kernel, CPU, memory (/proc/meminfo: hwloc's NUMA
// sizes are wrong on VMs booted with deferred memory init), NVIDIA and AMD GPUs, RDMA
// devices and verbs providers, MPI libraries in the ld.so cache. Read from /proc and /sys,
// never by loading a vendor library except libcuda's cuDriverGetVersion. The topology
// comes from hwloc in a separate program (ctr-topology), so that ctr itself, on every
// launch's path, loads no hwloc.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "ctr/config.hpp"

namespace ctr::host {

// Everything but the topology, as JSON (keys documented in docs/admin-guide.md). `root` is
// "/" on a real node (a fixture tree in tests); `policy` names the CDI directories.
[[nodiscard]] nlohmann::json hostInventory(const config::Policy& policy, const std::string& root = "/");

// A few lines for people, from hostInventory's JSON (plus "topology" when present).
[[nodiscard]] std::string describeInventory(const nlohmann::json& inventory);

}  // namespace ctr::host
