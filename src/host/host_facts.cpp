// Host facts for the planner: the caller, the state directory, what decides the image
// driver, and, only when a launch asks for them, the node's cgroups, GPU drivers, CDI specs
// and MPI. Everything here looks at the node; the planner (src/launch) only reads the result.
#include "ctr/host_facts.hpp"

#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <sstream>

#include "ctr/configured.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/limits.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/strings.hpp"
#include "ctr/user_dir.hpp"
#include "scan_files.hpp"
#include "untrusted_fs.h"

extern char** environ;

namespace ctr::host {

namespace {

// Candidates for the state directory under /tmp (anyone can create /tmp/ctr-<uid> first).
constexpr int kStateDirCandidates = 16;

// The list of programs and libraries of a vendor: ctr.conf's, else beside ctr.conf.
std::string libraryListPath(const config::Policy& policy, const std::string& configured, const char* fileName) {
  if (!configured.empty()) return configured;
  return ((policy.source.empty() ? sysconfPath() : policy.source).parent_path() / fileName).string();
}

// The node's driver files under another root: for tests and benchmarks of --nv on machines
// without a GPU (a fixture tree); never needed on a real node.
std::string hostRootOf(const std::vector<std::string>& env) {
  auto root = envValue(env, "CTR_HOST_ROOT");
  return !root.empty() && root[0] == '/' ? root : "/";
}

// Where discoverDevicesHost's scan of `vendor` looks.
GpuScanInputs scanInputs(const HostFacts& host, const config::Policy& policy, GpuVendor vendor) {
  GpuScanInputs in;
  in.vendor = vendor;
  in.root = hostRootOf(host.env);
  in.libraryList = vendor == GpuVendor::Nvidia ? libraryListPath(policy, policy.nvidiaLibraryList, "nvliblist.conf")
                                               : libraryListPath(policy, policy.rocmLibraryList, "rocmliblist.conf");
  in.searchPath = envValue(host.env, "PATH");
  in.cacheDir = host.stateDir;
  return in;
}

}  // namespace

std::vector<std::string> deviceInputFiles(const DeviceAsk& ask, const config::Policy& policy, const HostFacts& host) {
  if (!ask.nvidia || ask.amd || ask.gpus || ask.cdi) return {};
  const auto scan = scanInputs(host, policy, GpuVendor::Nvidia);
  std::vector<std::string> files{underRoot(scan.root, "/proc/driver/nvidia/version"), underRoot(scan.root, scan.ldCache),
                                 underRoot(scan.root, "/dev"), scan.libraryList};
  // The scan's cache, which stands for the libraries and programs (read from it, a plan
  // depends on it; a new scan writes another).
  if (auto cache = scanCachePath(scan, nvidiaDriverVersion(scan.root)); !cache.empty()) files.push_back(std::move(cache));
  files.insert(files.end(), policy.cdiSpecDirs.begin(), policy.cdiSpecDirs.end());
  return files;
}

void discoverDevicesHost(HostFacts& host, const DeviceAsk& ask, const config::Policy& policy) {
  if (!ask.nvidia && !ask.amd && !ask.gpus && !ask.cdi) return;
  host.cdi = loadCdiSpecs(policy.cdiSpecDirs);
  auto scan = [&](GpuVendor vendor, std::optional<GpuDriver>& into, std::string& missing) {
    try {
      into = scanGpuDriver(scanInputs(host, policy, vendor));
    } catch (const Error& e) {
      missing = e.what();
    }
  };
  if ((ask.nvidia || ask.gpus) && !hasCdiKind(*host.cdi, kNvidiaCdiKind))
    scan(GpuVendor::Nvidia, host.nvidia, host.nvidiaMissing);
  if (ask.amd && !hasCdiKind(*host.cdi, kAmdCdiKind)) scan(GpuVendor::Amd, host.amd, host.amdMissing);
  if (ask.gpus) {
    auto addNode = [&](unsigned index, const std::string& containerPath, const std::string& hostPath) {
      struct stat st {};
      if (::stat(hostPath.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) return;
      host.gpuDeviceNodes[index].push_back(
          {S_ISCHR(st.st_mode) ? 'c' : 'b', ::major(st.st_rdev), ::minor(st.st_rdev), containerPath});
    };
    if (host.nvidia) {
      for (const auto& node : host.nvidia->devices)
        if (auto index = nvidiaGpuIndex(node)) addNode(*index, node, hostPath(*host.nvidia, node));
    }
    for (const auto& spec : host.cdi->specs) {
      if (spec.kind != kNvidiaCdiKind) continue;
      for (const auto& device : spec.devices) {
        const auto index = cdiGpuIndex(device.name);
        if (!index) continue;
        for (const auto& node : device.edits.deviceNodes)
          addNode(*index, node.path, node.hostPath.empty() ? node.path : node.hostPath);
      }
    }
  }
}

void discoverMpiHost(HostFacts& host, const config::Policy& policy) {
  MpiScanInputs in;
  in.root = hostRootOf(host.env);
  in.libraries = policy.mpiLibraries;
  in.dependencies = policy.mpiDependencies;
  in.paths = policy.mpiPaths;
  in.cacheDir = host.stateDir;
  try {
    host.mpi = scanHostMpi(in);
  } catch (const Error& e) {
    host.mpiMissing = e.what();
  }
}
void discoverStageDir(HostFacts& host, const config::Policy& policy) {
  host.stageDir = chooseUserDir(expandUidPattern(policy.stageDir, host.user.uid, "'stage dir'"), "stage directory");
}

std::map<std::string, std::string> ownCgroups() {
  return limits::parseProcCgroup(readFileIfPresent("/proc/self/cgroup"));
}

std::string ownMountNamespace() {
  std::array<char, 64> name{};
  const ssize_t n = ::readlink("/proc/self/ns/mnt", name.data(), name.size() - 1);
  return n > 0 ? std::string(name.data(), static_cast<std::size_t>(n)) : std::string();
}

HostFacts discoverHost() {
  HostFacts host;
  host.user = lookupHostUser(&host.userFromFiles);
  for (char** e = environ; e && *e; ++e) host.env.emplace_back(*e);
  host.home = envValue(host.env, "HOME");
  if (host.home.empty()) host.home = host.user.home.empty() ? "/" : host.user.home;
  host.runtimeDir = envValue(host.env, "XDG_RUNTIME_DIR");

  std::array<char, PATH_MAX> cwd{};
  if (::getcwd(cwd.data(), cwd.size())) host.cwd = cwd.data();

  host.stateDir = chooseStateDir(host.user.uid, host.runtimeDir);
  host.pid = ::getpid();
  host.cgroups = ownCgroups();
  host.mountNamespace = ownMountNamespace();
  host.setuidHelper = inspectSetuidHelper(configured::kHelperPath);
  host.loopControl = ::access("/dev/loop-control", F_OK) == 0;
  if (host.setuidHelper == HelperState::Usable) {
    struct stat st {};
    host.helperConfigSafe = ::stat(configured::kSysconfPath, &st) == 0 && st.st_uid == 0 &&
                            (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  }
  return host;
}

void discoverNeeds(HostFacts& host, const Needs& needs, const config::Policy& policy) {
  if (!needs.imageFile.empty()) discoverImageFilesystem(host, needs.imageFile, false);
  if (needs.squashfsServers.any()) host.squashfsServers = discoverSquashfsServers(needs.squashfsServers);
  if (needs.limits) host.limits = discoverLimitsHost(host.user.uid, policy.cgroupDelegate);
  discoverDevicesHost(host, needs.devices, policy);
  if (needs.mpi) discoverMpiHost(host, policy);
  if (needs.stageDir) discoverStageDir(host, policy);
  if (needs.subordinateIds) host.subordinate = discoverSubordinateIds(host.user);
  for (const auto& file : needs.overlayFiles)
    if (!host.overlayFiles.contains(file.path)) host.overlayFiles.emplace(file.path, inspectOverlayFile(file));
  for (const auto& file : needs.datasetFiles)
    if (!host.datasetImages.contains(file.path)) host.datasetImages.emplace(file.path, inspectDatasetFile(file));
  if (!needs.signatureImage) return;
  std::vector<const image::ImageSource*> mounted{&*needs.signatureImage};
  for (const auto& [path, dataset] : host.datasetImages) mounted.push_back(&dataset);
  for (const auto& [path, overlay] : host.overlayFiles)
    if (overlay.image) mounted.push_back(&*overlay.image);
  for (const auto* file : mounted)
    if (!host.signedFiles.contains(file->path.string()))
      host.signedFiles.emplace(file->path.string(), discoverSignedFile(*file, policy.execution, host.stateDir));
}

SignedFile discoverSignedFile(const image::ImageSource& image, const config::ExecutionControl& control,
                              const std::filesystem::path& stateDir) {
  SignedFile file;
  std::error_code ec;
  file.realPath = std::filesystem::canonical(image.path, ec).string();
  if (ec) file.realPath = image.path.string();
  const config::ExecutionRule* rule = config::executionRuleFor(control, file.realPath);
  if (!rule) return file;
  const bool blacklist = rule->mode == config::ExecutionMode::Blacklist;
  file.signatures = image::signatureFacts(image, control, !blacklist, blacklist, stateDir);
  return file;
}

SquashfsServers discoverSquashfsServers(const ServerSearch& search) {
  SquashfsServers servers;
  if (search.ctrSquashfs) {
    try {
      servers.ctrSquashfs = findProgram(Program::SquashfsServer);
    } catch (const Error& e) {
      servers.ctrSquashfsMissing = e.oneLine();
    }
  }
  if (search.squashfuse && !(search.squashfuseOnlyAsFallback && !servers.ctrSquashfs.empty())) {
    try {
      servers.squashfuse = findProgram(Program::Squashfuse);
    } catch (const Error& e) {
      servers.squashfuseMissing = e.oneLine();
    }
  }
  return servers;
}

void discoverImageFilesystem(HostFacts& host, const std::string& imagePath, bool imageIsDirectory) {
  if (host.setuidHelper != HelperState::Usable || imageIsDirectory) return;
  struct statfs fs {};
  if (::statfs(imagePath.c_str(), &fs) != 0) return;  // resolveImage read it: the launch will say
  host.imageUntrustedFs = untrustedFilesystemName(static_cast<std::int64_t>(fs.f_type));
}

std::string untrustedFilesystemName(std::int64_t statfsType) {
  const char* name = ctr_untrusted_fs_name(static_cast<unsigned long>(statfsType));
  return name ? name : "";
}

std::string chooseStateDir(uid_t uid, const std::string& runtimeDir, LastResort lastResort) {
  struct stat st {};
  if (!runtimeDir.empty() && runtimeDir[0] == '/' && ::stat(runtimeDir.c_str(), &st) == 0 &&
      S_ISDIR(st.st_mode) && st.st_uid == uid)
    return joinPath(runtimeDir, "ctr");
  // Every rank of a job sees the same /tmp, so all of them settle on the same candidate.
  const std::string base = "/tmp/ctr-" + std::to_string(uid);
  for (int i = 0; i < kStateDirCandidates; ++i) {
    std::string path = i == 0 ? base : base + "." + std::to_string(i);
    if (::lstat(path.c_str(), &st) != 0) return path;  // missing: the runtime creates it
    if (S_ISDIR(st.st_mode) && st.st_uid == uid) return path;
  }
  // Every name taken by others: the user's own /tmp/ctr-UID-XXXXXX, found again by later
  // launches (instances among them), made the first time (nobody can take it in advance).
  if (uid != ::geteuid() || lastResort == LastResort::No) return {};
  try {
    return chooseUserDir(base, "state directory").string();
  } catch (const Error& e) {
    spdlog::debug("no state directory beside {}: {}", base, e.what());
    return {};
  }
}

LimitsHost discoverLimitsHost(uid_t uid, const std::string& delegate) {
  LimitsHost facts;
  facts.mounts = limits::parseCgroupMounts(readFileIfPresent("/proc/self/mountinfo"));
  if (!facts.mounts.v2.empty()) {
    std::istringstream words(readFileIfPresent(facts.mounts.v2 + "/cgroup.controllers"));
    for (std::string word; words >> word;) facts.mounts.v2Controllers.insert(word);
  }
  // The CPUs this process may run on (a batch job's allocation, not the whole node).
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) facts.capacity.cpus.push_back(cpu);
  }
  try {
    const std::string nodes(trim(readFileIfPresent("/sys/devices/system/node/has_memory")));
    facts.capacity.memNodes = nodes.empty() ? std::vector<unsigned>{0} : limits::parseIdList(nodes, "memory nodes");
  } catch (const Error&) {
    facts.capacity.memNodes = {0};
  }
  std::istringstream meminfo(readFileIfPresent("/proc/meminfo"));
  for (std::string key; meminfo >> key;) {
    std::uint64_t kib = 0;
    meminfo >> kib;
    if (key == "MemTotal:") facts.capacity.memoryBytes = kib * 1024;
    meminfo.ignore(256, '\n');
  }
  if (!facts.mounts.v2.empty()) {
    std::string dir = delegate;
    for (auto pos = dir.find("%u"); pos != std::string::npos; pos = dir.find("%u"))
      dir.replace(pos, 2, std::to_string(uid));
    if (dir.empty() && uid == 0) {
      dir = facts.mounts.v2;  // root: new cgroups below the root cgroup, exempt from "no internal processes"
    } else if (dir.empty()) {
      const std::string u = std::to_string(uid);
      const std::string systemd = facts.mounts.v2 + "/user.slice/user-" + u + ".slice/user@" + u + ".service";
      if (::access(systemd.c_str(), F_OK) == 0) dir = systemd;
    }
    facts.delegated = dir;
    facts.delegatedWritable = !dir.empty() && ::access(dir.c_str(), W_OK) == 0 &&
                              ::access((dir + "/cgroup.procs").c_str(), W_OK) == 0;
  }
  return facts;
}

}  // namespace ctr::host
