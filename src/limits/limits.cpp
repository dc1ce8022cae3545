#include "ctr/limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ctr/error.hpp"
#include "ctr/mountinfo.hpp"
#include "ctr/strings.hpp"

namespace ctr::limits {

namespace {

std::string fmtNumber(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

}  // namespace

std::uint64_t parseSize(std::string_view text, std::string_view what) {
  const std::string given(text);
  auto bad = [&] {
    return Error(std::string(what) + " '" + given +
                 "' is not a size (a number of bytes, or with a unit: 512k, 64M, 1.5G, 2T)");
  };
  text = trim(text);
  std::size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  if (end == 0) throw bad();
  double number = 0;
  try {
    std::size_t used = 0;
    number = std::stod(std::string(text.substr(0, end)), &used);
    if (used != end) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  std::string unit(trim(text.substr(end)));
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  if (unit.size() > 1 && unit.back() == 'b') unit.pop_back();        // "MB", "GiB"
  if (unit.size() > 1 && unit.back() == 'i') unit.pop_back();        // "Mi"
  double scale = 1;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k") scale = 1024.0;
  else if (unit == "m") scale = 1024.0 * 1024;
  else if (unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else throw bad();
  const double bytes = std::floor(number * scale);
  if (!(bytes >= 1) || bytes > 9.0e18) throw bad();
  return static_cast<std::uint64_t>(bytes);
}

double parseCpus(std::string_view text, std::string_view what) {
  const std::string given(text);
  try {
    std::size_t used = 0;
    const double cpus = std::stod(given, &used);
    if (used == given.size() && cpus > 0 && cpus < 1e6) return cpus;
  } catch (const std::logic_error&) {
  }
  throw Error(std::string(what) + " '" + given + "' is not a number of CPUs (e.g. 4 or 0.5)");
}

std::string formatSize(std::uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " bytes";
  char buf[32];
  std::snprintf(buf, sizeof buf, value == std::floor(value) ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buf;
}

std::vector<unsigned> parseIdList(std::string_view text, std::string_view what) {
  const std::string given(text);
  auto bad = [&] {
    return Error(std::string(what) + " '" + given + "' is not a list of numbers and ranges (e.g. 0-3,8)");
  };
  std::set<unsigned> ids;
  auto number = [&](std::string_view s) -> unsigned {
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw bad();
    return static_cast<unsigned>(std::stoul(std::string(s)));
  };
  for (auto item : splitList(text)) {
    auto dash = item.find('-');
    if (dash == std::string_view::npos) {
      ids.insert(number(item));
      continue;
    }
    const unsigned first = number(trim(item.substr(0, dash))), last = number(trim(item.substr(dash + 1)));
    if (last < first || last - first > 65536) throw bad();
    for (unsigned id = first; id <= last; ++id) ids.insert(id);
  }
  if (ids.empty()) throw bad();
  return {ids.begin(), ids.end()};
}

std::string formatIdList(const std::vector<unsigned>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

CgroupMounts parseCgroupMounts(std::string_view mountinfo) {
  CgroupMounts mounts;
  std::istringstream lines{std::string(mountinfo)};
  for (std::string line; std::getline(lines, line);) {
    auto m = parseMountInfoLine(line);
    if (!m) continue;
    if (m->fsType == "cgroup2") {
      if (mounts.v2.empty()) mounts.v2 = m->mountPoint;
    } else if (m->fsType == "cgroup") {
      for (auto option : splitList(m->superOptions)) {
        for (const char* controller : {"cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer"})
          if (option == controller && !mounts.v1.count(controller)) mounts.v1[controller] = m->mountPoint;
      }
    }
  }
  return mounts;
}

std::map<std::string, std::string> parseProcCgroup(std::string_view text) {
  std::map<std::string, std::string> own;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    // "ID:controller,controller:/path" (v2: "0::/path")
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string path = line.substr(second + 1);
    const std::string controllers = line.substr(first + 1, second - first - 1);
    if (controllers.empty()) {
      own[""] = path;
      continue;
    }
    for (auto c : splitList(controllers)) own[std::string(c)] = path;
  }
  return own;
}

void checkCapacity(const Request& request, const NodeCapacity& node, const Caps& caps) {
  const double cores = static_cast<double>(node.cpus.size());
  if (request.cpus) {
    if (!(*request.cpus > 0)) throw Error("--cpus " + fmtNumber(*request.cpus) + ": must be more than 0");
    if (cores > 0 && *request.cpus > cores)
      throw Error("--cpus " + fmtNumber(*request.cpus) + " asks for more than this node's " +
                  std::to_string(node.cpus.size()) + " CPUs");
    if (caps.cpus && *request.cpus > *caps.cpus)
      throw Error("--cpus " + fmtNumber(*request.cpus) + " is over the administrator's limit of " +
                  fmtNumber(*caps.cpus) + " CPUs per container ('max cpus' in ctr.conf)");
  }
  if (!request.cpusetCpus.empty() && !node.cpus.empty()) {
    for (unsigned cpu : parseIdList(request.cpusetCpus, "--cpuset-cpus"))
      if (!std::binary_search(node.cpus.begin(), node.cpus.end(), cpu))
        throw Error("--cpuset-cpus " + request.cpusetCpus + ": CPU " + std::to_string(cpu) +
                    " is not online on this node (online: " + formatIdList(node.cpus) + ")");
  }
  if (!request.cpusetMems.empty() && !node.memNodes.empty()) {
    for (unsigned mem : parseIdList(request.cpusetMems, "--cpuset-mems"))
      if (!std::binary_search(node.memNodes.begin(), node.memNodes.end(), mem))
        throw Error("--cpuset-mems " + request.cpusetMems + ": memory node " + std::to_string(mem) +
                    " does not exist on this node (nodes: " + formatIdList(node.memNodes) + ")");
  }
  if (request.memory) {
    if (node.memoryBytes > 0 && *request.memory > node.memoryBytes)
      throw Error("--memory " + formatSize(*request.memory) + " asks for more than this node's " +
                  formatSize(node.memoryBytes) + " of memory");
    if (caps.memory && *request.memory > *caps.memory)
      throw Error("--memory " + formatSize(*request.memory) + " is over the administrator's limit of " +
                  formatSize(*caps.memory) + " per container ('max memory' in ctr.conf)");
    if (*request.memory < (4u << 20))
      throw Error("--memory " + formatSize(*request.memory) + " is too small to start a container (4 MiB at least)");
  }
  if (request.memorySwap && *request.memorySwap != -1) {
    if (!request.memory) throw Error("--memory-swap needs --memory (it is memory plus swap)");
    if (static_cast<std::uint64_t>(*request.memorySwap) < *request.memory)
      throw Error("--memory-swap " + formatSize(static_cast<std::uint64_t>(*request.memorySwap)) +
                  " is less than --memory " + formatSize(*request.memory) + " (it is memory plus swap)");
  }
  if (request.pids) {
    if (*request.pids < 1) throw Error("--pids-limit " + std::to_string(*request.pids) + ": must be at least 1");
    if (caps.pids && *request.pids > *caps.pids)
      throw Error("--pids-limit " + std::to_string(*request.pids) + " is over the administrator's limit of " +
                  std::to_string(*caps.pids) + " ('max pids' in ctr.conf)");
  } else if (caps.pids) {
    // A capped site applies its cap to every container.
  }
  if (request.blkioWeight && (*request.blkioWeight < 10 || *request.blkioWeight > 1000))
    throw Error("--blkio-weight " + std::to_string(*request.blkioWeight) + ": must be from 10 to 1000");
}

std::string toString(Backend backend) {
  switch (backend) {
    case Backend::None: return "none";
    case Backend::V1: return "cgroup v1";
    case Backend::V2: return "cgroup v2";
  }
  return "none";
}

std::vector<std::string> v1Controllers(const Request& request, const CgroupMounts& mounts) {
  std::vector<std::string> controllers = {"memory", "cpuacct"};
  if (!request.denyDevices.empty() && mounts.v1.count("devices")) controllers.push_back("devices");
  if (request.cpus) controllers.push_back("cpu");
  if (!request.cpusetCpus.empty() || !request.cpusetMems.empty()) controllers.push_back("cpuset");
  if (request.pids) controllers.push_back("pids");
  if (request.blkioWeight) controllers.push_back("blkio");
  return controllers;
}

namespace {

// The v2 controllers a request needs (memory and cpu always: OOM report and --stats).
std::vector<std::string> v2Controllers(const Request& request) {
  std::vector<std::string> controllers = {"memory", "cpu"};
  if (!request.cpusetCpus.empty() || !request.cpusetMems.empty()) controllers.push_back("cpuset");
  if (request.pids) controllers.push_back("pids");
  if (request.blkioWeight) controllers.push_back("io");
  return controllers;
}

std::string joinPath(const std::string& a, const std::string& b) {
  if (b.empty() || b == "/") return a;
  return a + (a.ends_with('/') || b.starts_with('/') ? "" : "/") + b;
}

}  // namespace

// The parents of a launch's cgroup in every hierarchy this caller can use (Placement::sweepDirs).
std::vector<std::string> sweepDirsOf(const CgroupMounts& mounts, const std::map<std::string, std::string>& own,
                                     const std::string& delegated, bool delegatedWritable, uid_t uid) {
  std::vector<std::string> dirs;
  auto add = [&](std::string dir) {
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(std::move(dir));
  };
  if (!mounts.v2.empty() && !delegated.empty() && delegatedWritable) add(delegated);
  if (uid != 0) return dirs;
  for (const auto controller : kV1Controllers) {
    const std::string c(controller);
    if (!mounts.v1.count(c)) continue;
    auto it = own.find(c);
    add(joinPath(mounts.v1.at(c), it == own.end() ? "/" : it->second));
  }
  return dirs;
}

Placement decidePlacement(const Request& request, bool wantStats, const CgroupMounts& mounts,
                          const std::map<std::string, std::string>& own, const std::string& delegated,
                          bool delegatedWritable, uid_t uid, const std::string& name) {
  Placement placement;
  const bool devices = !request.denyDevices.empty();
  if (request.empty() && !wantStats && !devices) {
    placement.reason = "no limits asked for";
    return placement;
  }
  // Device rules need root on either backend: a v1 devices hierarchy cannot be delegated,
  // and loading a BPF device program needs CAP_SYS_ADMIN (CAP_BPF) in the initial namespace.
  if (devices && uid != 0) {
    placement.devicesReason = "device access is not enforced: it needs root (a v1 devices cgroup or a v2 BPF "
                              "device program); CUDA_VISIBLE_DEVICES hides the other GPUs from CUDA";
    if (request.empty() && !wantStats) {
      placement.reason = "no limits asked for";
      return placement;
    }
  }
  // v2, where its root has the controllers and a delegated directory is ours to write.
  std::string v2Problem;
  if (mounts.v2.empty()) {
    v2Problem = "no cgroup2 file system is mounted";
  } else {
    std::vector<std::string> missing;
    for (const auto& c : v2Controllers(request))
      if (!mounts.v2Controllers.count(c)) missing.push_back(c);
    if (!missing.empty()) {
      std::string list;
      for (const auto& c : missing) list += (list.empty() ? "" : ", ") + c;
      v2Problem = "cgroup v2 at " + mounts.v2 + " offers no " + list + " controller (bound to cgroup v1)";
    } else if (delegated.empty()) {
      v2Problem = "no delegated cgroup v2 directory ('cgroup delegate' in ctr.conf, or systemd's user@" +
                  std::to_string(uid) + ".service)";
    } else if (!delegatedWritable) {
      v2Problem = "the delegated cgroup " + delegated + " is not writable by uid " + std::to_string(uid);
    }
  }
  if (v2Problem.empty()) {
    placement.backend = Backend::V2;
    placement.sweepDirs = sweepDirsOf(mounts, own, delegated, delegatedWritable, uid);
    placement.reason = "cgroup v2, below the delegated " + delegated;
    placement.dirs[""] = joinPath(delegated, name);
    if (devices && uid == 0) {
      placement.devicesEnforced = true;
      placement.devicesReason = "a BPF device program on the cgroup v2 directory denies them";
    }
    return placement;
  }
  // v1 (the controllers mounted separately), root only: nobody delegates v1 hierarchies.
  std::string v1Problem;
  const auto controllers = v1Controllers(request, mounts);
  for (const auto& c : controllers)
    if (!mounts.v1.count(c)) v1Problem = "the cgroup v1 " + c + " controller is not mounted";
  if (v1Problem.empty() && uid != 0)
    v1Problem = "cgroup v1 limits need root (v1 hierarchies cannot be delegated to users)";
  if (v1Problem.empty()) {
    placement.backend = Backend::V1;
    placement.sweepDirs = sweepDirsOf(mounts, own, delegated, delegatedWritable, uid);
    placement.reason = "as root, below this process's own v1 cgroups; not v2: " + v2Problem;
    for (const auto& c : controllers) {
      auto it = own.find(c);
      // "cpu" and "cpuacct" may share one hierarchy ("cpu,cpuacct"): the same directory.
      placement.dirs[c] = joinPath(joinPath(mounts.v1.at(c), it == own.end() ? "/" : it->second), name);
    }
    if (devices && placement.dirs.count("devices")) {
      placement.devicesEnforced = true;
      placement.devicesReason = "the cgroup v1 devices controller denies them (devices.deny)";
    } else if (devices) {
      placement.devicesReason = "device access is not enforced: the cgroup v1 devices controller is not mounted";
    }
    return placement;
  }
  placement.reason = "no usable cgroup backend: " + v2Problem + "; " + v1Problem;
  if (devices && placement.devicesReason.empty()) placement.devicesReason = "device access is not enforced: " + placement.reason;
  return placement;
}

}  // namespace ctr::limits
