// Resource limits: what the user asks for (--cpus, --memory, ...), what the node and the
// admin allow, and which cgroup backend applies. Plain data and pure decisions: the planner
// calls them and puts the result into the plan; the runtime (src/runtime/cgroup.cpp) creates
// exactly the cgroup the plan names.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::limits {

// One device the container must not open (a GPU that --gpus left out): its node's type
// ('c' or 'b') and numbers, and the path it has on the host (for --explain).
struct DeviceRule {
  char type = 'c';
  unsigned major = 0;
  unsigned minor = 0;
  std::string path;
  bool operator==(const DeviceRule&) const = default;
};

// The limits as the user asked for them (Apptainer's flag names and units).
struct Request {
  std::optional<double> cpus;                // --cpus: CFS quota, in cores
  std::string cpusetCpus;                    // --cpuset-cpus, e.g. "0-3,8" (normalized)
  std::string cpusetMems;                    // --cpuset-mems
  std::optional<std::uint64_t> memory;       // --memory, bytes
  std::optional<std::int64_t> memorySwap;    // --memory-swap: memory + swap, bytes; -1 unlimited
  std::optional<std::int64_t> pids;          // --pids-limit
  std::optional<std::uint32_t> blkioWeight;  // --blkio-weight, 10..1000
  // Not a user flag: the planner fills it from --gpus (the node's GPUs it left out). Applied
  // where a device controller can be used (v1 devices.deny as root, a v2 BPF device program
  // as root), else only noted; empty() does not count it.
  std::vector<DeviceRule> denyDevices;
  // Whether the user asked for a limit (the device rules are not a user limit).
  [[nodiscard]] bool empty() const {
    return !cpus && cpusetCpus.empty() && cpusetMems.empty() && !memory && !memorySwap && !pids &&
           !blkioWeight;
  }
};

// "64M", "1.5g", "512k", "2GiB", "1048576" (bytes): 1024-based as in Docker and Apptainer.
// Throws ctr::Error naming `what` for anything else, zero or an overflow.
[[nodiscard]] std::uint64_t parseSize(std::string_view text, std::string_view what);

// --apply-cgroups: Apptainer's cgroups TOML ([memory] limit/swap, [cpu] quota/period/cpus/mems,
// [pids] limit, [blockIO] weight). Throws ctr::Error naming FILE:LINE and the key for a
// syntax error or a key ctr cannot apply (never ignored).
[[nodiscard]] Request parseCgroupsToml(std::string_view text, const std::string& fileName);

// "2", "0.5": a number of CPUs, more than 0. Throws ctr::Error naming `what`.
[[nodiscard]] double parseCpus(std::string_view text, std::string_view what);

// "64 MiB", "1.5 GiB": a size for messages.
[[nodiscard]] std::string formatSize(std::uint64_t bytes);

// "0-3,8" -> {0,1,2,3,8}. Throws ctr::Error naming `what` for a malformed list.
[[nodiscard]] std::vector<unsigned> parseIdList(std::string_view text, std::string_view what);
// {0,1,2,3,8} -> "0-3,8".
[[nodiscard]] std::string formatIdList(const std::vector<unsigned>& ids);

// The cgroup file systems of this host, read from /proc/self/mountinfo.
struct CgroupMounts {
  std::map<std::string, std::string> v1;  // controller -> mount point ("memory" -> /sys/fs/cgroup/memory)
  std::string v2;                         // the cgroup2 mount point, empty if none
  std::set<std::string> v2Controllers;    // what the cgroup2 root offers (its cgroup.controllers)
};
[[nodiscard]] CgroupMounts parseCgroupMounts(std::string_view mountinfo);

// This process's cgroup per v1 controller ("memory" -> "/process_api/7") and on v2 ("" -> path),
// from /proc/self/cgroup.
[[nodiscard]] std::map<std::string, std::string> parseProcCgroup(std::string_view text);

// What the node has, for the capacity check.
struct NodeCapacity {
  std::vector<unsigned> cpus;      // online CPUs (hwloc, else sysconf)
  std::vector<unsigned> memNodes;  // NUMA nodes with memory
  std::uint64_t memoryBytes = 0;   // MemTotal
};

// The admin's caps on one request (ctr.conf 'max cpus', 'max memory', 'max pids').
struct Caps {
  std::optional<double> cpus;
  std::optional<std::uint64_t> memory;
  std::optional<std::int64_t> pids;
  std::optional<std::int64_t> gpus;  // 'max gpus': the most GPUs one --gpus may name
};

// Refuses (ctr::Error, one line with the numbers) a request the node cannot hold, that the
// admin's caps forbid, or that names CPUs or memory nodes the node lacks.
void checkCapacity(const Request& request, const NodeCapacity& node, const Caps& caps);

enum class Backend { None, V1, V2 };
[[nodiscard]] std::string toString(Backend backend);

// Where a launch's cgroup goes and why. v1: one directory per controller the request needs,
// below this process's own cgroup of that controller (a job's limits keep applying). v2: one
// directory below a delegated one.
struct Placement {
  Backend backend = Backend::None;
  std::string reason;                       // for --explain and `ctr check`
  std::map<std::string, std::string> dirs;  // controller ("" on v2) -> the directory to create
  // The request's denyDevices: enforced (v1: the "devices" directory in `dirs` gets them in
  // devices.deny; v2: a BPF device program attached to the directory) or not, and why.
  bool devicesEnforced = false;
  std::string devicesReason;
  // Where the cgroups of launches that were SIGKILLed (ctr-<pid>, the pid gone) may be left:
  // the parent this launch's cgroup would have in every hierarchy ctr uses (all the v1
  // controllers mounted, the delegated v2 directory), not only those this request needs.
  std::vector<std::string> sweepDirs;
};

// The backend for `uid` (the request's denyDevices alone ask for a cgroup only where they can
// be enforced: as root): v2 when its root offers the controllers the request needs and a
// delegated directory (`delegated`, from ctr.conf or systemd's user@UID.service) is writable
// by the user; else v1 when its controllers are mounted and the caller is root; else None
// with the reason. `name` is the new cgroup's name (unique per launch).
[[nodiscard]] Placement decidePlacement(const Request& request, bool wantStats, const CgroupMounts& mounts,
                                        const std::map<std::string, std::string>& own,
                                        const std::string& delegated, bool delegatedWritable, uid_t uid,
                                        const std::string& name);

// Every v1 controller a request can need: the hierarchies a dead launch may have left a
// cgroup in.
inline constexpr std::string_view kV1Controllers[] = {"memory", "cpuacct", "cpu", "cpuset", "pids", "blkio", "devices"};

// The controllers a request needs on v1 (memory and cpuacct are always taken for the OOM
// report and --stats; devices for denyDevices where it is mounted).
[[nodiscard]] std::vector<std::string> v1Controllers(const Request& request, const CgroupMounts& mounts);

}  // namespace ctr::limits
