#include "cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "ctr/error.hpp"
#include "ctr/log.hpp"
#include "ctr/device_filter.hpp"

namespace ctr::runtime {

namespace {

using limits::Backend;

// Writes `value` to `dir`/`file`; throws naming both (the kernel's EINVAL says little).
void writeControl(const std::string& dir, const std::string& file, const std::string& value) {
  const std::string path = dir + "/" + file;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw sysError("cgroup: open " + path);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
    throw sysError("cgroup: write '" + value + "' to " + path);
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// "key value" lines (memory.events, memory.oom_control, cpu.stat): the value of `key`.
std::optional<std::uint64_t> keyedValue(const std::string& path, const std::string& key) {
  std::istringstream lines(readFileIfPresent(path));
  for (std::string k; lines >> k;) {
    std::uint64_t value = 0;
    if (!(lines >> value)) break;
    if (k == key) return value;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> numberIn(const std::string& path) {
  const std::string text = readFirstLine(path);
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  return std::stoull(text);
}

std::string quotaText(double cpus) {
  constexpr long kPeriod = 100000;  // 100 ms, the kernel's default CFS period
  // Rounded to the nearest microsecond by hand (cpus > 0): std::lround alone made ctr load libm.
  return std::to_string(std::max(1000L, static_cast<long>(cpus * kPeriod + 0.5)));
}

// The limits of `request` into the v1 directory of `controller`.
void writeV1(const std::string& controller, const std::string& dir, const limits::Request& r) {
  if (controller == "memory") {
    if (r.memory) writeControl(dir, "memory.limit_in_bytes", std::to_string(*r.memory));
    if (r.memorySwap) {
      if (!exists(dir + "/memory.memsw.limit_in_bytes"))
        throw Error("--memory-swap: this kernel has no swap accounting (memory.memsw.limit_in_bytes; "
                    "boot with swapaccount=1)");
      writeControl(dir, "memory.memsw.limit_in_bytes", std::to_string(*r.memorySwap));
    }
  } else if (controller == "cpu") {
    if (r.cpus) {
      writeControl(dir, "cpu.cfs_period_us", "100000");
      writeControl(dir, "cpu.cfs_quota_us", quotaText(*r.cpus));
    }
  } else if (controller == "cpuset") {
    // A new v1 cpuset has no CPUs and no memory nodes: no task could join it. Its parent's
    // unless the user chose.
    const std::string parent = dir.substr(0, dir.find_last_of('/'));
    writeControl(dir, "cpuset.cpus", r.cpusetCpus.empty() ? readFirstLine(parent + "/cpuset.cpus") : r.cpusetCpus);
    writeControl(dir, "cpuset.mems", r.cpusetMems.empty() ? readFirstLine(parent + "/cpuset.mems") : r.cpusetMems);
  } else if (controller == "devices") {
    // The new cgroup starts with its parent's list; each left-out GPU's node is taken off it.
    for (const auto& rule : r.denyDevices)
      writeControl(dir, "devices.deny",
                   std::string(1, rule.type) + " " + std::to_string(rule.major) + ":" + std::to_string(rule.minor) + " rwm");
  } else if (controller == "pids") {
    if (r.pids) writeControl(dir, "pids.max", std::to_string(*r.pids));
  } else if (controller == "blkio") {
    if (r.blkioWeight) {
      const char* file = exists(dir + "/blkio.weight") ? "blkio.weight" : "blkio.bfq.weight";
      if (!exists(dir + "/" + file))
        throw Error("--blkio-weight: the block I/O scheduler here has no weights (no blkio.weight or "
                    "blkio.bfq.weight; it needs BFQ)");
      writeControl(dir, file, std::to_string(*r.blkioWeight));
    }
  }
}

// The limits of `request` into one v2 directory (its parent enabled the controllers).
void writeV2(const std::string& dir, const limits::Request& r) {
  if (r.memory) writeControl(dir, "memory.max", std::to_string(*r.memory));
  if (r.memorySwap) {
    writeControl(dir, "memory.swap.max",
                 *r.memorySwap < 0 ? std::string("max") : std::to_string(*r.memorySwap - static_cast<std::int64_t>(*r.memory)));
  }
  if (r.cpus) writeControl(dir, "cpu.max", quotaText(*r.cpus) + " 100000");
  if (!r.cpusetCpus.empty()) writeControl(dir, "cpuset.cpus", r.cpusetCpus);
  if (!r.cpusetMems.empty()) writeControl(dir, "cpuset.mems", r.cpusetMems);
  if (r.pids) writeControl(dir, "pids.max", std::to_string(*r.pids));
  if (r.blkioWeight) {
    if (exists(dir + "/io.weight")) writeControl(dir, "io.weight", "default " + std::to_string(*r.blkioWeight));
    else if (exists(dir + "/io.bfq.weight")) writeControl(dir, "io.bfq.weight", std::to_string(*r.blkioWeight));
    else throw Error("--blkio-weight: no io.weight or io.bfq.weight in " + dir);
  }
}

// The pids in a cgroup.procs file.
std::vector<pid_t> tasksOf(const std::string& dir) {
  std::vector<pid_t> pids;
  std::istringstream in(readFileIfPresent(dir + "/cgroup.procs"));
  for (long pid = 0; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// SIGKILLs everything in `dir` (cgroup.kill on v2 where the kernel has it) and removes it.
// Returns false when it could not be removed.
bool emptyAndRemove(const std::string& dir) {
  for (int round = 0; round < 200; ++round) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) break;
    if (exists(dir + "/cgroup.kill")) {
      UniqueFd fd(::open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
      if (fd) (void)!::write(fd.get(), "1", 1);
    } else {
      for (pid_t pid : tasksOf(dir)) ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  spdlog::warn("could not remove the cgroup {}: {}", dir, std::strerror(errno));
  return false;
}

std::string parentOf(const std::string& dir) { return dir.substr(0, dir.find_last_of('/')); }

// The running limited launches beside ours: the ctr-<pid> siblings of `dir`.
std::vector<std::string> siblings(const std::string& dir) {
  std::vector<std::string> out;
  const std::string parent = parentOf(dir), self = dir.substr(dir.find_last_of('/') + 1);
  if (DIR* d = ::opendir(parent.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.starts_with("ctr-") && name != self) out.push_back(parent + "/" + name);
    }
    ::closedir(d);
  }
  return out;
}

// What the siblings of the launch's cgroup reserved: memory limits and CPU quotas.
struct Reserved {
  std::uint64_t memoryBytes = 0;
  double cpus = 0;
};

Reserved reservedBeside(const launch::LaunchPlan& plan, bool v2) {
  Reserved reserved;
  auto dirOf = [&](const std::string& controller) -> std::string {
    auto it = plan.cgroup.dirs.find(v2 ? "" : controller);
    return it == plan.cgroup.dirs.end() ? "" : it->second;
  };
  if (const auto dir = dirOf("memory"); !dir.empty()) {
    for (const auto& sib : siblings(dir)) {
      auto bytes = numberIn(sib + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
      if (bytes && *bytes < (1ull << 62)) reserved.memoryBytes += *bytes;  // v1 "unlimited" is ~2^63
    }
  }
  if (const auto dir = dirOf("cpu"); !dir.empty()) {
    for (const auto& sib : siblings(dir)) {
      long long quota = -1, period = 0;
      if (v2) {
        std::istringstream words(readFirstLine(sib + "/cpu.max"));
        std::string q;
        words >> q >> period;
        if (!q.empty() && q != "max") quota = std::stoll(q);
      } else {
        quota = static_cast<long long>(numberIn(sib + "/cpu.cfs_quota_us").value_or(0));
        if (readFirstLine(sib + "/cpu.cfs_quota_us").starts_with("-")) quota = -1;
        period = static_cast<long long>(numberIn(sib + "/cpu.cfs_period_us").value_or(0));
      }
      if (quota > 0 && period > 0) reserved.cpus += static_cast<double>(quota) / static_cast<double>(period);
    }
  }
  return reserved;
}

// 'refuse overcommit': the request plus what the running limited containers beside it
// reserved must fit the node. Called holding the parent's lock, so two launches cannot both
// take the last of it.
void admit(const launch::LaunchPlan& plan, bool v2) {
  const auto& node = *plan.admitAgainst;
  const Reserved reserved = reservedBeside(plan, v2);
  const auto& r = plan.limits;
  if (r.memory && node.memoryBytes > 0 && reserved.memoryBytes + *r.memory > node.memoryBytes)
    throw Error("--memory " + limits::formatSize(*r.memory) + " would overcommit this node: running containers reserve " +
                limits::formatSize(reserved.memoryBytes) + " of its " + limits::formatSize(node.memoryBytes) +
                " ('refuse overcommit' in ctr.conf)");
  const double cores = static_cast<double>(node.cpus.size());
  if (r.cpus && cores > 0 && reserved.cpus + *r.cpus > cores + 1e-9) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "--cpus %g would overcommit this node: running containers reserve %g of its %g CPUs",
                  *r.cpus, reserved.cpus, cores);
    throw Error(std::string(buf) + " ('refuse overcommit' in ctr.conf)");
  }
}

}  // namespace

LaunchCgroup LaunchCgroup::create(const launch::LaunchPlan& plan) {
  LaunchCgroup cg;
  if (plan.cgroup.backend == Backend::None) return cg;
  cg.v2_ = plan.cgroup.backend == Backend::V2;
  // Admission and creation under one lock on the parent directory (flock on a directory fd).
  UniqueFd admissionLock;
  if (plan.admitAgainst) {
    // The same lock for every launch: the memory cgroup's parent (every placement has one).
    const auto& dirs = plan.cgroup.dirs;
    const std::string parent = parentOf(dirs.count("memory") ? dirs.at("memory") : dirs.begin()->second);
    admissionLock.reset(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!admissionLock || ::flock(admissionLock.get(), LOCK_EX) != 0) throw sysError("cgroup: lock " + parent);
    admit(plan, cg.v2_);
  }
  try {
    for (const auto& [controller, dir] : plan.cgroup.dirs) {
      if (cg.v2_) {
        // The controllers the limits need, enabled for the delegated directory's children.
        const std::string parent = dir.substr(0, dir.find_last_of('/'));
        std::string enable;
        std::istringstream available(readFileIfPresent(parent + "/cgroup.controllers"));
        for (std::string c; available >> c;)
          if (c == "memory" || c == "cpu" || c == "cpuset" || c == "pids" || c == "io")
            enable += (enable.empty() ? "+" : " +") + c;
        if (!enable.empty()) writeControl(parent, "cgroup.subtree_control", enable);
      }
      bool shared = false;  // cpu and cpuacct in one v1 hierarchy: one directory
      for (const auto& [other, otherDir] : cg.dirs_) shared = shared || otherDir == dir;
      if (!shared) {
        // The name holds our pid: one that exists is a dead launch's with a recycled pid.
        if (::mkdir(dir.c_str(), 0755) != 0 && !(errno == EEXIST && emptyAndRemove(dir) &&
                                                 ::mkdir(dir.c_str(), 0755) == 0))
          throw sysError("cgroup: mkdir " + dir);
        cg.dirs_[controller] = dir;
        UniqueFd procs(::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
        if (!procs) throw sysError("cgroup: open " + dir + "/cgroup.procs");
        cg.procs_.push_back(std::move(procs));
      }
      if (cg.v2_) {
        writeV2(dir, plan.limits);
        if (plan.cgroup.devicesEnforced && !plan.limits.denyDevices.empty()) {
          UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
          if (!dirFd) throw sysError("cgroup: open " + dir);
          attachDeviceDenyFilter(dirFd.get(), plan.limits.denyDevices);
        }
      } else {
        writeV1(controller, dir, plan.limits);
      }
    }
  } catch (const Error&) {
    cg.remove();
    throw;
  }
  spdlog::debug("cgroup created: {}", plan.cgroup.dirs.begin()->second);
  return cg;
}

LaunchCgroup::~LaunchCgroup() { remove(); }

void LaunchCgroup::enter() const {
  for (const auto& fd : procs_)
    if (::write(fd.get(), "0", 1) != 1) throw sysError("cgroup: join the launch's cgroup");
}

bool LaunchCgroup::oomKilled() const {
  for (const auto& [controller, dir] : dirs_) {
    if (v2_) return keyedValue(dir + "/memory.events", "oom_kill").value_or(0) > 0;
    if (controller == "memory") return keyedValue(dir + "/memory.oom_control", "oom_kill").value_or(0) > 0;
  }
  return false;
}

CgroupUsage LaunchCgroup::usage() const {
  CgroupUsage usage;
  for (const auto& [controller, dir] : dirs_) {
    if (v2_) {
      if (auto us = keyedValue(dir + "/cpu.stat", "usage_usec")) usage.cpuSeconds = static_cast<double>(*us) / 1e6;
      usage.peakMemoryBytes = numberIn(dir + "/memory.peak");
    } else if (controller == "memory") {
      usage.peakMemoryBytes = numberIn(dir + "/memory.max_usage_in_bytes");
    } else if (controller == "cpuacct") {
      if (auto ns = numberIn(dir + "/cpuacct.usage")) usage.cpuSeconds = static_cast<double>(*ns) / 1e9;
    }
  }
  return usage;
}

void LaunchCgroup::remove() {
  procs_.clear();
  for (const auto& [controller, dir] : dirs_) emptyAndRemove(dir);
  dirs_.clear();
}

void LaunchCgroup::release() {
  procs_.clear();
  dirs_.clear();
}

void removeCgroupDirs(const std::map<std::string, std::string>& dirs) {
  for (const auto& [controller, dir] : dirs) emptyAndRemove(dir);
}

void enterCgroupDirs(const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    UniqueFd procs(::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs || ::write(procs.get(), "0", 1) != 1) throw sysError("cgroup: join the instance's cgroup " + dir);
  }
}

void sweepStaleCgroups(const launch::LaunchPlan& plan) {
  for (const auto& parent : plan.cgroup.sweepDirs) {
    DIR* d = ::opendir(parent.c_str());
    if (!d) continue;
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.starts_with("ctr-instance-")) {
        // An instance's holds at least its keeper while it runs: an empty one has ended.
        if (::rmdir((parent + "/" + name).c_str()) == 0) spdlog::debug("removed the cgroup {} of an ended instance", name);
        continue;
      }
      if (!name.starts_with("ctr-") || name.size() < 5) continue;
      char* end = nullptr;
      const long pid = std::strtol(name.c_str() + 4, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // its supervisor lives
      stale.push_back(parent + "/" + name);
    }
    ::closedir(d);
    for (const auto& dir : stale) {
      spdlog::debug("removing the cgroup {} of a launch that was killed", dir);
      emptyAndRemove(dir);
    }
  }
}

}  // namespace ctr::runtime
