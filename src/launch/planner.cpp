// The planner: CLI options + policy + image + host facts -> LaunchPlan. Pure except for
// discoverHost(), which gathers the host facts once.
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <array>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ctr/binds.hpp"
#include "ctr/build_config.hpp"
#include "ctr/environment.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/limits.hpp"
#include "ctr/strings.hpp"
#include "ctr/launch.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/programs.hpp"
#include "untrusted_fs.h"

extern char** environ;

namespace ctr::launch {

namespace {

// Candidates for the state directory under /tmp (anyone can create /tmp/ctr-<uid> first).
constexpr int kStateDirCandidates = 16;

Mount bindMount(std::string source, std::string destination, bool readOnly, MountOrigin origin) {
  Mount m;
  m.kind = MountKind::Bind;
  m.source = std::move(source);
  m.destination = std::move(destination);
  m.readOnly = readOnly;
  m.origin = origin;
  m.required = origin == MountOrigin::User;
  return m;
}

Mount tmpfsMount(std::string destination, MountOrigin origin) {
  Mount m;
  m.kind = MountKind::Tmpfs;
  m.destination = std::move(destination);
  m.origin = origin;
  return m;
}

// A later mount at the same destination replaces an earlier one (user binds win over
// defaults), keeping the earlier position so parents are still mounted before children.
void addMount(std::vector<Mount>& mounts, Mount mount) {
  for (auto& m : mounts) {
    if (m.destination == mount.destination) {
      m = std::move(mount);
      return;
    }
  }
  mounts.push_back(std::move(mount));
}

// Only the host's root can write the kernel's interfaces; its container runs as uid 0 mapped
// to itself, with no capability left, so read-only binds keep them out of its reach.
KernelInterfaces decideKernelInterfaces(const config::Policy& policy, uid_t uid) {
  if (uid != 0) return {false, "uid " + std::to_string(uid) + " cannot write them"};
  if (!policy.rootKernelInterfacesReadOnly)
    return {false, "writable for the host's root: 'root kernel interfaces = writable' in ctr.conf"};
  return {true, "the host's root: 'root kernel interfaces = read-only'"};
}

bool isValidAppName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; });
}

bool statIsRootOwnedSetuid(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && st.st_uid == 0 && (st.st_mode & S_ISUID) != 0;
}

std::string limitsText(const limits::Request& r) {
  std::vector<std::string> parts;
  char buf[64];
  if (r.cpus) {
    std::snprintf(buf, sizeof buf, "cpus %g", *r.cpus);
    parts.emplace_back(buf);
  }
  if (!r.cpusetCpus.empty()) parts.push_back("cpuset-cpus " + r.cpusetCpus);
  if (!r.cpusetMems.empty()) parts.push_back("cpuset-mems " + r.cpusetMems);
  if (r.memory) parts.push_back("memory " + limits::formatSize(*r.memory));
  if (r.memorySwap)
    parts.push_back("memory+swap " + (*r.memorySwap < 0 ? std::string("unlimited")
                                                        : limits::formatSize(static_cast<std::uint64_t>(*r.memorySwap))));
  if (r.pids) parts.push_back("pids " + std::to_string(*r.pids));
  if (r.blkioWeight) parts.push_back("blkio-weight " + std::to_string(*r.blkioWeight));
  if (parts.empty()) return "none";
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : ", ") + p;
  return text;
}

std::vector<std::string> namespaceLines(const Namespaces& ns) {
  std::vector<std::string> lines;
  if (ns.sharedUser) lines.emplace_back("user (shared by the user's launches of this image)");
  if (ns.ownMount) lines.emplace_back("mount (the holder's ready one if the prepared root is exactly this root, else an own copy)");
  if (ns.pid) lines.emplace_back("pid (own: ctr's init is PID 1, the app PID 2)");
  if (ns.ipc) lines.emplace_back("ipc (own)");
  if (ns.uts) lines.emplace_back("uts (own" + (ns.hostname.empty() ? std::string(")") : ", hostname " + ns.hostname + ")"));
  if (ns.net) lines.emplace_back("network (own: loopback only)");
  std::string host;
  for (const auto& [own, name] : {std::pair{ns.net, "network"}, {ns.ipc, "ipc"}, {ns.pid, "pid"}, {ns.uts, "uts"}})
    if (!own) host += std::string(host.empty() ? "" : ", ") + name;
  if (!host.empty()) lines.push_back("host " + host);
  return lines;
}

constexpr std::string_view kNvidiaKind = "nvidia.com/gpu";
constexpr std::string_view kAmdKind = "amd.com/gpu";

// NVIDIA_VISIBLE_DEVICES as the NVIDIA container runtime reads it: unset or "all" = every
// GPU, "none"/"void" = none, else a list of indices (minor numbers). UUIDs need NVML to map:
// every GPU then, with a note.
// The GPU index of /dev/nvidiaN (not of nvidiactl, nvidia-uvm, ...).
std::optional<unsigned> nvidiaGpuIndex(const std::string& node) {
  if (node.size() <= 11 || !node.starts_with("/dev/nvidia") || !std::isdigit(static_cast<unsigned char>(node[11])))
    return std::nullopt;
  return static_cast<unsigned>(std::stoul(node.substr(11)));
}

// A CDI device named by a GPU index ("0", "3"; not a UUID or "all"): that index.
std::optional<unsigned> cdiGpuIndex(std::string_view name) {
  unsigned index = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (name.empty() || ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return index;
}

std::vector<std::string> selectNvidiaDevices(const std::vector<std::string>& nodes, const std::string& visible,
                                             std::vector<std::string>& notes) {
  std::vector<std::string> out;
  const bool all = visible.empty() || visible == "all";
  const bool none = visible == "none" || visible == "void";
  std::vector<std::string> wanted;
  bool byUuid = false;
  for (auto item : splitList(visible)) {
    if (item.empty()) continue;
    if (std::all_of(item.begin(), item.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      wanted.push_back("/dev/nvidia" + std::string(item));
    else if (!all && !none)
      byUuid = true;
  }
  if (byUuid) notes.push_back("NVIDIA_VISIBLE_DEVICES names GPUs by UUID: every GPU's device node is bound (CUDA applies the selection)");
  for (const auto& node : nodes) {
    const bool numbered = nvidiaGpuIndex(node).has_value();
    if (!numbered || all || byUuid || std::find(wanted.begin(), wanted.end(), node) != wanted.end()) {
      if (!numbered || !none) out.push_back(node);
    }
  }
  return out;
}

// The parts of a CDI selection ctr can honour without root, into mounts and variables;
// what it cannot honour goes into the notes.
void planCdiEdits(const host::CdiEdits& edits, bool privateDev, std::vector<Mount>& mounts, std::vector<EnvVar>& env,
                  std::vector<std::string>& libraryDirs, std::vector<std::string>& notes) {
  for (const auto& node : edits.deviceNodes) {
    // Without --contain the container's /dev is the host's: a node at its host path is there
    // already, and one the spec puts elsewhere could only be made by writing the host's /dev.
    if (!privateDev && (node.hostPath.empty() || node.hostPath == node.path)) continue;
    if (!privateDev && node.path.starts_with("/dev/"))
      throw Error("the CDI device node " + node.path + " (host " + node.hostPath +
                  ") needs a private /dev: add --contain");
    Mount m = bindMount(node.hostPath.empty() ? node.path : node.hostPath, node.path, false, MountOrigin::Host);
    m.recursive = false;
    m.required = true;
    m.from = "CDI " + node.from;
    addMount(mounts, std::move(m));
  }
  for (const auto& cdiMount : edits.mounts) {
    const bool readOnly = std::find(cdiMount.options.begin(), cdiMount.options.end(), "ro") != cdiMount.options.end();
    if (!cdiMount.type.empty() && cdiMount.type != "bind") {
      notes.push_back("CDI mount of type '" + cdiMount.type + "' at " + cdiMount.containerPath + " skipped (only binds)");
      continue;
    }
    Mount m = bindMount(cdiMount.hostPath, cdiMount.containerPath, readOnly, MountOrigin::Host);
    m.recursive = std::find(cdiMount.options.begin(), cdiMount.options.end(), "rbind") != cdiMount.options.end();
    m.required = true;
    m.from = "CDI " + cdiMount.from;
    addMount(mounts, std::move(m));
  }
  for (const auto& entry : edits.env) {
    const auto eq = entry.find('=');
    std::erase_if(env, [&](const EnvVar& v) { return v.first == entry.substr(0, eq); });
    env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto& hook : edits.hooks) {
    // nvidia-ctk's update-ldcache runs ldconfig in the container's root as root; the same
    // effect without writing the image: its folders go on LD_LIBRARY_PATH.
    const auto verb = std::find(hook.args.begin(), hook.args.end(), "update-ldcache");
    if (verb != hook.args.end()) {
      for (auto it = verb; it != hook.args.end(); ++it)
        if (*it == "--folder" && it + 1 != hook.args.end()) libraryDirs.push_back(*(it + 1));
      continue;
    }
    std::string what = hook.path;
    for (size_t i = 1; i < hook.args.size() && i < 3; ++i) what += " " + hook.args[i];
    notes.push_back("CDI hook skipped (" + hook.hookName + ": " + what +
                    "): ctr runs no hooks; they need root or a writable image");
  }
  if (!edits.additionalGids.empty())
    notes.push_back("CDI additionalGids skipped: a user namespace cannot add groups");
}

// --nv/--rocm without CDI: the scanned driver into mounts. The libraries go into one
// directory, /.singularity.d/libs (a tmpfs, so the prepared root needs one target for all
// of them), which is appended to LD_LIBRARY_PATH, as images built for Apptainer expect.
void planGpuDriver(const host::GpuDriver& driver, bool contain, const std::string& visible,
                   std::vector<Mount>& mounts, std::vector<std::string>& libraryDirs, DeviceInjection& injection) {
  injection.drivers.push_back(
      {driver.vendor, driver.version, driver.needsGlibc, driver.needsGlibcLibrary, driver.libraries.size(), driver.fromCache});
  addMount(mounts, tmpfsMount(std::string(kContainerLibDir), MountOrigin::Host));
  const std::string list = driver.vendor == host::GpuVendor::Nvidia ? "nvliblist.conf " : "rocmliblist.conf ";
  auto add = [&](Mount m, std::string from) {
    m.from = std::move(from);
    addMount(mounts, std::move(m));
  };
  for (const auto& lib : driver.libraries) {
    Mount m = bindMount(lib.path, joinPath(kContainerLibDir, lib.soname), true, MountOrigin::Host);
    m.recursive = false;
    add(std::move(m), list + lib.listed + ": ld.so cache " + lib.soname + " (" + host::describeLdCacheFlags(lib.flags) + ")");
  }
  for (const auto& [name, path] : driver.binaries) {
    Mount m = bindMount(path, "/usr/bin/" + name, true, MountOrigin::Host);
    m.recursive = false;
    add(std::move(m), list + name + ": the host's PATH");
  }
  for (const auto& file : driver.files)
    add(bindMount(host::hostPath(driver, file), file, true, MountOrigin::Host), list + file);
  for (const auto& socket : driver.sockets)
    add(bindMount(host::hostPath(driver, socket), socket, false, MountOrigin::Host), "nvidia-persistenced runs");
  if (contain) {
    // AMD: /dev/kfd and all of /dev/dri; HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES pass
    // through and the ROCm runtime applies them.
    const auto nodes = driver.vendor == host::GpuVendor::Nvidia ? selectNvidiaDevices(driver.devices, visible, injection.notes)
                                                                : driver.devices;
    for (const auto& node : nodes) {
      Mount m = bindMount(host::hostPath(driver, node), node, false, MountOrigin::Host);
      m.recursive = node == "/dev/nvidia-caps" || node == "/dev/dri";
      add(std::move(m), host::toString(driver.vendor) + " driver device" +
                            (visible.empty() ? "" : " (visible devices: " + visible + ")"));
    }
  }
  for (const auto& s : driver.skipped)
    injection.notes.push_back(s.listed + (s.soname.empty() || s.soname == s.listed ? "" : " (" + s.soname + ")") +
                              ": " + s.reason);
  if (std::find(libraryDirs.begin(), libraryDirs.end(), kContainerLibDir) == libraryDirs.end())
    libraryDirs.push_back(std::string(kContainerLibDir));
}

// --mpi=bind: the host MPI's dependencies (and its libraries, for lookups through
// LD_LIBRARY_PATH) into kContainerMpiDir, its configuration and the fabric's at their host
// paths; the replacement of the image's libraries is data for the runtime (MpiInjection).
MpiInjection planHostMpi(const host::HostMpi& mpi, bool strict, std::vector<Mount>& mounts,
                         std::vector<std::string>& firstLibraryDirs) {
  MpiInjection injection;
  injection.family = mpi.family;
  injection.check = strict ? host::MpiAbiCheck::Strict : host::MpiAbiCheck::Relaxed;
  injection.needsGlibc = mpi.needsGlibc;
  injection.needsGlibcLibrary = mpi.needsGlibcLibrary;
  injection.notes = mpi.skipped;
  injection.dependencies = mpi.dependencies.size();
  injection.scanFromCache = mpi.fromCache;
  addMount(mounts, tmpfsMount(std::string(kContainerMpiDir), MountOrigin::Host));
  auto bindFile = [&](const host::MpiLibrary& lib) {
    Mount m = bindMount(lib.path, joinPath(kContainerMpiDir, lib.soname), true, MountOrigin::Host);
    m.recursive = false;
    m.required = true;
    m.from = lib.from;
    addMount(mounts, std::move(m));
  };
  for (const auto& lib : mpi.libraries) {
    injection.replace.push_back({lib.soname, lib.path, lib.from});
    bindFile(lib);
  }
  for (const auto& lib : mpi.dependencies) bindFile(lib);
  for (const auto& path : mpi.paths) {
    Mount m = bindMount(mpi.root == "/" ? path.path : joinPath(mpi.root, path.path), path.path, true, MountOrigin::Host);
    m.from = path.from;
    addMount(mounts, std::move(m));
  }
  firstLibraryDirs.push_back(std::string(kContainerMpiDir));
  return injection;
}

// The list of programs and libraries of a vendor: ctr.conf's, else beside ctr.conf.
std::string libraryListPath(const config::Policy& policy, const std::string& configured, const char* fileName) {
  if (!configured.empty()) return configured;
  return ((policy.source.empty() ? sysconfPath() : policy.source).parent_path() / fileName).string();
}

}  // namespace

void discoverDevicesHost(HostFacts& host, const LaunchOptions& options, const config::Policy& policy) {
  if (!options.nv && !options.rocm && options.gpus.empty() && options.devices.empty()) return;
  host.cdi = host::loadCdiSpecs(policy.cdiSpecDirs);
  auto scan = [&](host::GpuVendor vendor, const std::string& list, std::optional<host::GpuDriver>& into,
                  std::string& missing) {
    host::GpuScanInputs in;
    in.vendor = vendor;
    // The node's driver files under another root: for tests and benchmarks of --nv on
    // machines without a GPU (a fixture tree); never needed on a real node.
    if (auto root = envValue(host.env, "CTR_HOST_ROOT"); !root.empty() && root[0] == '/') in.root = root;
    in.libraryList = list;
    in.searchPath = envValue(host.env, "PATH");
    in.cacheDir = host.stateDir;
    try {
      into = host::scanGpuDriver(in);
    } catch (const Error& e) {
      missing = e.what();
    }
  };
  if ((options.nv || !options.gpus.empty()) && !host::hasCdiKind(*host.cdi, kNvidiaKind))
    scan(host::GpuVendor::Nvidia, libraryListPath(policy, policy.nvidiaLibraryList, "nvliblist.conf"), host.nvidia,
         host.nvidiaMissing);
  if (options.rocm && !host::hasCdiKind(*host.cdi, kAmdKind))
    scan(host::GpuVendor::Amd, libraryListPath(policy, policy.rocmLibraryList, "rocmliblist.conf"), host.amd,
         host.amdMissing);
  if (!options.gpus.empty()) {
    auto addNode = [&](unsigned index, const std::string& containerPath, const std::string& hostPath) {
      struct stat st {};
      if (::stat(hostPath.c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) return;
      host.gpuDeviceNodes[index].push_back(
          {S_ISCHR(st.st_mode) ? 'c' : 'b', ::major(st.st_rdev), ::minor(st.st_rdev), containerPath});
    };
    if (host.nvidia) {
      for (const auto& node : host.nvidia->devices)
        if (auto index = nvidiaGpuIndex(node)) addNode(*index, node, host::hostPath(*host.nvidia, node));
    }
    for (const auto& spec : host.cdi->specs) {
      if (spec.kind != kNvidiaKind) continue;
      for (const auto& device : spec.devices) {
        const auto index = cdiGpuIndex(device.name);
        if (!index) continue;
        for (const auto& node : device.edits.deviceNodes)
          addNode(*index, node.path, node.hostPath.empty() ? node.path : node.hostPath);
      }
    }
  }
}

void discoverMpiHost(HostFacts& host, const LaunchOptions& options, const config::Policy& policy) {
  if (options.mpi != "bind") return;
  host::MpiScanInputs in;
  if (auto root = envValue(host.env, "CTR_HOST_ROOT"); !root.empty() && root[0] == '/') in.root = root;
  in.libraries = policy.mpiLibraries;
  in.dependencies = policy.mpiDependencies;
  in.paths = policy.mpiPaths;
  in.cacheDir = host.stateDir;
  try {
    host.mpi = host::scanHostMpi(in);
  } catch (const Error& e) {
    host.mpiMissing = e.what();
  }
}

std::vector<GlibcNeed> glibcNeeds(const LaunchPlan& plan) {
  std::vector<GlibcNeed> needs;
  if (plan.devices) {
    for (const auto& driver : plan.devices->drivers)
      if (!driver.needsGlibc.empty())
        needs.push_back({host::toString(driver.vendor) + " driver " + driver.version, driver.needsGlibc, driver.needsGlibcLibrary});
  }
  if (plan.mpi && !plan.mpi->needsGlibc.empty())
    needs.push_back({"host MPI (" + host::toString(plan.mpi->family) + ", --mpi=bind)", plan.mpi->needsGlibc,
                     plan.mpi->needsGlibcLibrary});
  return needs;
}

HostFacts discoverHost() {
  HostFacts host;
  host.user = lookupHostUser();
  for (char** e = environ; e && *e; ++e) host.env.emplace_back(*e);
  host.home = envValue(host.env, "HOME");
  if (host.home.empty()) host.home = host.user.home.empty() ? "/" : host.user.home;
  host.runtimeDir = envValue(host.env, "XDG_RUNTIME_DIR");

  std::array<char, PATH_MAX> cwd{};
  if (::getcwd(cwd.data(), cwd.size())) host.cwd = cwd.data();

  host.stateDir = chooseStateDir(host.user.uid, host.runtimeDir);
  host.pid = ::getpid();
  host.setuidHelperInstalled = statIsRootOwnedSetuid(build::kHelperPath);
  if (host.setuidHelperInstalled) {
    struct stat st {};
    host.helperConfigSafe = ::stat(build::kSysconfPath, &st) == 0 && st.st_uid == 0 &&
                            (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
    host.loopControl = ::access("/dev/loop-control", F_OK) == 0;
  }
  return host;
}

void discoverImageFilesystem(HostFacts& host, const image::ImageSource& image) {
  if (!host.setuidHelperInstalled || image.kind == image::ImageKind::Directory) return;
  struct statfs fs {};
  if (::statfs(image.path.c_str(), &fs) != 0) return;  // resolveImage read it: the launch will say
  if (const char* name = ctr_untrusted_fs_name(static_cast<unsigned long>(fs.f_type))) host.imageUntrustedFs = name;
}

std::string chooseStateDir(uid_t uid, const std::string& runtimeDir) {
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
  return {};
}

DriverDecision decideDriver(const config::Policy& policy, image::ImageKind kind, const HostFacts& host) {
  if (kind == image::ImageKind::Directory)
    return {ImageDriver::Directory, "a directory image is bound as it is", std::nullopt};
  std::string helperProblem;
  if (!policy.allowSetuid)
    helperProblem = "'allow setuid = no' in ctr.conf";
  else if (!host.setuidHelperInstalled)
    helperProblem = std::string(build::kHelperPath) + " is not installed setuid root";
  else if (!host.helperConfigSafe)
    helperProblem = std::string(build::kSysconfPath) + " is not root-owned and private (the helper refuses it)";
  else if (!host.loopControl)
    helperProblem = "/dev/loop-control is missing";
  else if (!host.imageUntrustedFs.empty())
    helperProblem = "the image is on a " + host.imageUntrustedFs +
                    " file system, whose owner and content users control: the helper refuses it";
  const bool helperUsable = helperProblem.empty();
  switch (policy.imageDriver) {
    case config::ImageDriver::Setuid:
      if (!helperUsable)
        throw Error("ctr.conf says 'image driver = setuid' but the setuid helper is not usable: " +
                    helperProblem);
      return {ImageDriver::SetuidHelper, "'image driver = setuid': kernel squashfs through the helper",
              std::nullopt};
    case config::ImageDriver::Squashfuse:
      return {ImageDriver::Squashfuse, "'image driver = squashfuse' in ctr.conf", std::nullopt};
    case config::ImageDriver::Auto:
      break;
  }
  if (helperUsable)
    return {ImageDriver::SetuidHelper,
            "'image driver = auto' and the setuid helper is usable: kernel squashfs (squashfuse if "
            "the helper cannot proceed)",
            ImageDriver::Squashfuse};
  return {ImageDriver::Squashfuse, "'image driver = auto' and no usable setuid helper (" + helperProblem + ")",
          std::nullopt};
}

LimitsHost discoverLimitsHost(uid_t uid, const std::string& delegate) {
  LimitsHost facts;
  facts.mounts = limits::parseCgroupMounts(readFileIfPresent("/proc/self/mountinfo"));
  if (!facts.mounts.v2.empty()) {
    std::istringstream words(readFileIfPresent(facts.mounts.v2 + "/cgroup.controllers"));
    for (std::string word; words >> word;) facts.mounts.v2Controllers.insert(word);
  }
  facts.own = limits::parseProcCgroup(readFileIfPresent("/proc/self/cgroup"));
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

LaunchPlan planLaunch(const LaunchOptions& options, const config::Policy& policy,
                      const image::ImageSource& image, const HostFacts& host) {
  if (!policy.allowUserNamespaces)
    throw Error("user namespaces are disabled by the administrator ('allow user namespaces = "
                "no' in " + policy.source.string() + "); ctr cannot run containers here");

  LaunchPlan plan;
  plan.command = options.command;
  plan.image = image;
  auto decision = decideDriver(policy, image.kind, host);
  plan.driver = decision.driver;
  plan.driverReason = std::move(decision.reason);
  plan.driverFallback = decision.fallback;
  plan.rootMode = options.writableTmpfs ? RootMode::Overlay : RootMode::Bind;
  plan.user = host.user;
  plan.seccompProfile = policy.seccompProfile;
  plan.stateDir = host.stateDir;
  plan.lingerMs = policy.imageLingerMs;
  plan.limits = options.limits;
  if (!options.statsFile.empty())
    plan.statsFile = options.statsFile[0] == '/' ? options.statsFile : joinPath(host.cwd, options.statsFile);
  const bool contain = options.contain || options.containAll;
  const bool cleanEnv = options.cleanEnv || options.containAll;

  // Home: --home SRC[:DST], else the host $HOME at the same path.
  std::string homeSource = host.home;
  std::string homeDest = host.home;
  if (!options.home.empty()) {
    auto colon = options.home.find(':');
    homeSource = normalizePath(options.home.substr(0, colon));
    homeDest = colon == std::string::npos ? homeSource
                                          : normalizePath(options.home.substr(colon + 1));
    if (homeSource.empty() || homeSource[0] != '/' || homeDest.empty() || homeDest[0] != '/')
      throw Error("bad --home '" + options.home + "': paths must be absolute");
  }

  // Namespaces beyond user and mount: --containall brings PID and IPC, --hostname UTS.
  auto& ns = plan.namespaces;
  ns.pid = options.pid || options.containAll;
  ns.ipc = options.ipc || options.containAll;
  ns.hostname = options.hostname;
  ns.uts = options.uts || !options.hostname.empty();
  if (!options.hostname.empty() &&
      (options.hostname.size() > 64 || options.hostname.find_first_of("/ \t\n") != std::string::npos))
    throw Error("bad --hostname '" + options.hostname + "': at most 64 characters, no '/' or blanks").withStatus(1);
  ns.net = options.net || !options.network.empty();
  if (!options.network.empty() && options.network != "none")
    throw Error("--network " + options.network + ": ctr has only 'none' (loopback only; no CNI plugins)").withStatus(1);

  // Apptainer's defaults, in mount order.
  auto& mounts = plan.mounts;
  if (ns.pid) {
    Mount proc;
    proc.kind = MountKind::Proc;
    proc.destination = "/proc";
    proc.origin = MountOrigin::Default;
    addMount(mounts, std::move(proc));
  } else {
    addMount(mounts, bindMount("/proc", "/proc", false, MountOrigin::Default));
  }
  plan.kernelInterfaces = decideKernelInterfaces(policy, host.user.uid);
  // Recursive: read-only, the cgroup tree below it too.
  addMount(mounts, bindMount("/sys", "/sys", plan.kernelInterfaces.readOnly, MountOrigin::Default));
  if (plan.kernelInterfaces.readOnly) {
    for (const auto path : kReadOnlyKernelPaths)
      addMount(mounts, bindMount(std::string(path), std::string(path), true, MountOrigin::Default));
  }
  if (contain) {
    // A minimal /dev (Apptainer's with --contain), not the host's hundreds of nodes.
    addMount(mounts, tmpfsMount("/dev", MountOrigin::Contain));
    for (const char* node : {"null", "zero", "full", "random", "urandom", "tty", "ptmx"}) {
      Mount m = bindMount(std::string("/dev/") + node, std::string("/dev/") + node, false, MountOrigin::Contain);
      m.recursive = false;
      addMount(mounts, std::move(m));
    }
    addMount(mounts, bindMount("/dev/pts", "/dev/pts", false, MountOrigin::Contain));  // the caller's terminal
    addMount(mounts, tmpfsMount("/dev/shm", MountOrigin::Contain));
    for (const auto& [name, target] : {std::pair<const char*, const char*>{"fd", "/proc/self/fd"},
                                       {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
                                       {"stderr", "/proc/self/fd/2"}}) {
      Mount m;
      m.kind = MountKind::Symlink;
      m.source = target;
      m.destination = std::string("/dev/") + name;
      m.origin = MountOrigin::Contain;
      addMount(mounts, std::move(m));
    }
  } else {
    addMount(mounts, bindMount("/dev", "/dev", false, MountOrigin::Default));
  }
  addMount(mounts, bindMount("/etc/hosts", "/etc/hosts", true, MountOrigin::Default));
  addMount(mounts, bindMount("/etc/resolv.conf", "/etc/resolv.conf", true, MountOrigin::Default));
  addMount(mounts, bindMount("/etc/localtime", "/etc/localtime", true, MountOrigin::Default));
  // -W/--workdir: with --contain, /tmp and /var/tmp come from there (Apptainer's layout).
  std::string workdir;
  if (!options.workdir.empty()) {
    workdir = normalizePath(options.workdir[0] == '/' ? options.workdir : joinPath(host.cwd, options.workdir));
    if (workdir == "/") throw Error("bad --workdir '" + options.workdir + "': not /");
  }
  if (contain && !workdir.empty()) {
    for (const auto& [source, destination] : {std::pair<std::string, std::string>{"tmp", "/tmp"}, {"var_tmp", "/var/tmp"}}) {
      Mount m = bindMount(joinPath(workdir, source), destination, false, MountOrigin::Contain);
      m.createSourceMode = 01777;
      addMount(mounts, std::move(m));
    }
  } else if (contain) {
    addMount(mounts, tmpfsMount("/tmp", MountOrigin::Contain));
    addMount(mounts, tmpfsMount("/var/tmp", MountOrigin::Contain));
  } else {
    addMount(mounts, bindMount("/tmp", "/tmp", false, MountOrigin::Default));
    addMount(mounts, bindMount("/var/tmp", "/var/tmp", false, MountOrigin::Default));
  }
  if (!options.noHome) {
    if (contain && options.home.empty())
      addMount(mounts, tmpfsMount(homeDest, MountOrigin::Contain));
    else
      addMount(mounts, bindMount(homeSource, homeDest, false, MountOrigin::Default));
  }
  for (const auto& spec : policy.defaultBinds) {
    for (auto& b : withContext("in ctr.conf 'bind path'", [&] { return parseBindSpecs(spec); }))
      addMount(mounts, bindMount(b.source, b.destination, b.readOnly, MountOrigin::Policy));
  }
  // The fabric: with a private /dev, the verbs and RDMA CM devices on request or by policy
  // (/sys/class/infiniband is there with /sys). The whole directory, recursively: its
  // uverbsN and rdma_cm nodes, whatever the HCAs.
  if (contain && (options.rdma || policy.rdmaWithContain)) {
    Mount m = bindMount("/dev/infiniband", "/dev/infiniband", false, MountOrigin::Host);
    m.from = options.rdma ? "--rdma" : "ctr.conf 'rdma with contain = yes'";
    addMount(mounts, std::move(m));
  }
  // --nv, --rocm and --device: the host's drivers and devices, before the user's binds (which win).
  std::vector<EnvVar> deviceEnv;
  std::vector<std::string> libraryDirs;
  if (options.nv || options.rocm || !options.gpus.empty() || !options.devices.empty()) {
    if (!host.cdi) throw Error("--nv/--rocm/--gpus/--device asked for, but the host's devices were not looked at");
    for (const auto& warning : host.cdi->warnings) plan.warnings.push_back(warning);
    DeviceInjection injection;
    std::vector<std::string> cdiNames = options.devices;
    // --gpus LIST: these GPUs only, by index (nvidia-smi's, which is the PCI order CUDA then
    // follows too with CUDA_DEVICE_ORDER=PCI_BUS_ID). Checked against the node's GPUs.
    std::string gpuSelection;
    if (!options.gpus.empty()) {
      std::vector<unsigned> present;
      if (host.nvidia) {
        for (const auto& node : host.nvidia->devices)
          if (auto index = nvidiaGpuIndex(node)) present.push_back(*index);
      } else if (host::hasCdiKind(*host.cdi, kNvidiaKind)) {
        for (const auto& spec : host.cdi->specs)
          if (spec.kind == kNvidiaKind)
            for (const auto& d : spec.devices)
              if (auto index = cdiGpuIndex(d.name)) present.push_back(*index);
      }
      std::sort(present.begin(), present.end());
      present.erase(std::unique(present.begin(), present.end()), present.end());
      if (present.empty() && !host.nvidia && !host::hasCdiKind(*host.cdi, kNvidiaKind))
        throw Error("--gpus " + options.gpus + ": " + (host.nvidiaMissing.empty() ? "no NVIDIA GPU on this node" : host.nvidiaMissing));
      const std::vector<unsigned> wanted = options.gpus == "all" ? present : limits::parseIdList(options.gpus, "--gpus");
      for (unsigned id : wanted)
        if (!std::binary_search(present.begin(), present.end(), id))
          throw Error("--gpus " + options.gpus + ": this node has no GPU " + std::to_string(id) + " (it has " +
                      std::to_string(present.size()) + (present.empty() ? "" : ": " + limits::formatIdList(present)) + ")");
      if (policy.limitCaps.gpus && static_cast<std::int64_t>(wanted.size()) > *policy.limitCaps.gpus)
        throw Error("--gpus " + options.gpus + ": " + std::to_string(wanted.size()) + " GPUs asked for, the site allows " +
                    std::to_string(*policy.limitCaps.gpus) + " per container ('max gpus')");
      std::string csv;
      for (unsigned id : wanted) csv += (csv.empty() ? "" : ",") + std::to_string(id);
      gpuSelection = csv.empty() ? "none" : csv;
      // The GPUs left out: their device nodes go to the device cgroup's deny list.
      for (const auto& [index, nodes] : host.gpuDeviceNodes)
        if (!std::binary_search(wanted.begin(), wanted.end(), index))
          plan.limits.denyDevices.insert(plan.limits.denyDevices.end(), nodes.begin(), nodes.end());
    }
    // A vendor flag: the vendor's CDI spec when there is one (its devices named by the
    // vendor's visibility variable, "0,1", else all), else the ld.so cache scan.
    auto gpuFlag = [&](const char* flag, std::string_view kind, const char* visibleVar,
                       const std::optional<host::GpuDriver>& driver, const std::string& missing) {
      const std::string visible = kind == kNvidiaKind && !gpuSelection.empty() ? gpuSelection : envValue(host.env, visibleVar);
      if (host::hasCdiKind(*host.cdi, kind)) {
        std::vector<std::string> named;
        for (auto item : splitList(visible))
          if (!item.empty() && item != "all") named.push_back(std::string(kind) + "=" + std::string(item));
        if (visible == "none" || visible == "void") named.clear();
        else if (named.empty()) named.push_back(std::string(kind) + "=all");
        cdiNames.insert(cdiNames.end(), named.begin(), named.end());
      } else if (driver) {
        planGpuDriver(*driver, contain, visible, mounts, libraryDirs, injection);
      } else if (policy.missingGpuDriverIsError) {
        throw Error(std::string(flag) + ": " + missing);
      } else {
        plan.warnings.push_back(std::string(flag) + ": " + missing + "; running without the GPU ('missing gpu driver = warn')");
      }
    };
    if (options.nv || !options.gpus.empty())
      gpuFlag(options.nv ? "--nv" : "--gpus", kNvidiaKind, "NVIDIA_VISIBLE_DEVICES", host.nvidia, host.nvidiaMissing);
    if (options.rocm) gpuFlag("--rocm", kAmdKind, "AMD_VISIBLE_DEVICES", host.amd, host.amdMissing);
    if (!cdiNames.empty()) {
      auto selection = host::resolveCdiDevices(*host.cdi, cdiNames, policy.cdiSpecDirs);
      injection.cdiDevices = selection.devices;
      injection.cdiSpecFiles = selection.specFiles;
      planCdiEdits(selection.edits, contain, mounts, deviceEnv, libraryDirs, injection.notes);
    }
    if (!gpuSelection.empty() && !contain)
      injection.notes.push_back("--gpus without --contain: the other GPUs stay in the host's /dev (CUDA_VISIBLE_DEVICES "
                                "hides them from CUDA; --contain leaves their device nodes out)");
    if (!gpuSelection.empty()) {  // after the CDI spec's variables: the selection wins
      for (const EnvVar& setting : {EnvVar{"NVIDIA_VISIBLE_DEVICES", gpuSelection},
                                    EnvVar{"CUDA_VISIBLE_DEVICES", gpuSelection == "none" ? "" : gpuSelection},
                                    EnvVar{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}) {
        std::erase_if(deviceEnv, [&](const EnvVar& v) { return v.first == setting.first; });
        deviceEnv.push_back(setting);
      }
    }
    if (!injection.drivers.empty() || !injection.cdiDevices.empty()) plan.devices = std::move(injection);
  }
  // Limits, after the devices: --gpus adds the device rules of the GPUs it left out.
  if (!plan.limits.empty() || !plan.limits.denyDevices.empty() || !options.statsFile.empty()) {
    if (!host.limits) throw Error("resource limits asked for, but the node's cgroups were not looked at");
    limits::checkCapacity(options.limits, host.limits->capacity, policy.limitCaps);
    plan.cgroup = limits::decidePlacement(plan.limits, !options.statsFile.empty(), host.limits->mounts,
                                          host.limits->own, host.limits->delegated,
                                          host.limits->delegatedWritable, host.user.uid,
                                          "ctr-" + std::to_string(host.pid));
    if (!options.limits.empty() && plan.cgroup.backend == limits::Backend::None)
      throw Error("cannot apply the resource limits: " + plan.cgroup.reason);
    if (policy.refuseOvercommit && plan.cgroup.backend != limits::Backend::None &&
        (options.limits.cpus || options.limits.memory))
      plan.admitAgainst = host.limits->capacity;
  }

  // --mpi=bind: the site's MPI in place of the image's; hybrid (the default) needs nothing:
  // mpirun's variables pass with the environment, /dev/shm and /tmp are the host's.
  std::vector<std::string> firstLibraryDirs;
  if (options.mpi == "bind") {
    if (!host.mpi)
      throw Error("--mpi=bind: " + (host.mpiMissing.empty() ? std::string("the host MPI was not looked at") : host.mpiMissing));
    plan.mpi = planHostMpi(*host.mpi, policy.mpiAbiStrict, mounts, firstLibraryDirs);
  } else if (!options.mpi.empty() && options.mpi != "hybrid") {
    throw Error("bad --mpi '" + options.mpi + "': bind (the host's MPI replaces the image's) or hybrid (the image's own)")
        .withStatus(1);
  }
  // Binds from the environment first (site modules set APPTAINER_BIND), then the flags:
  // for the same destination the flag wins.
  std::vector<std::string> userBinds;
  for (const char* name : {"CTR_BIND", "APPTAINER_BIND", "APPTAINER_BINDPATH", "SINGULARITY_BIND", "SINGULARITY_BINDPATH"})
    if (auto fromEnv = envValue(host.env, name); !fromEnv.empty()) userBinds.push_back(fromEnv);
  userBinds.insert(userBinds.end(), options.binds.begin(), options.binds.end());
  if ((!userBinds.empty() || !options.mounts.empty() || !options.workdir.empty()) && !policy.allowUserBinds)
    throw Error("user bind mounts are disabled by the administrator ('allow user binds = no')");
  for (const auto& spec : userBinds) {
    for (auto& b : parseBindSpecs(spec))
      addMount(mounts, bindMount(b.source, b.destination, b.readOnly, MountOrigin::User));
  }
  for (const auto& spec : options.mounts) {
    auto b = parseMountSpec(spec);
    addMount(mounts, bindMount(b.source, b.destination, b.readOnly, MountOrigin::User));
  }
  // --scratch: an empty writable directory, from --workdir when given, else a tmpfs.
  for (const auto& list : options.scratch) {
    for (auto item : splitList(list)) {
      if (item.empty()) continue;
      const std::string dir = normalizePath(item);
      if (dir.empty() || dir[0] != '/' || dir == "/" || hasDotDotComponent(dir))
        throw Error("bad --scratch '" + std::string(item) + "': an absolute path other than / without '..'");
      if (workdir.empty()) {
        addMount(mounts, tmpfsMount(dir, MountOrigin::User));
      } else {
        Mount m = bindMount(joinPath(workdir, "scratch" + dir), dir, false, MountOrigin::User);
        m.createSourceMode = 0750;
        addMount(mounts, std::move(m));
      }
    }
  }
  // The current directory, unless contained or already under a bound path.
  if (!contain && !host.cwd.empty() && host.cwd != "/") {
    // Covered: a mount already provides that path in the container (a custom --home
    // X:$HOME started from $HOME keeps X there, as in Apptainer).
    bool covered = false;
    for (const auto& m : mounts) {
      if ((host.cwd == m.destination || host.cwd.rfind(m.destination + "/", 0) == 0) &&
          m.destination != "/dev" && m.destination != "/proc" && m.destination != "/sys")
        covered = true;
    }
    if (!covered) addMount(mounts, bindMount(host.cwd, host.cwd, false, MountOrigin::Cwd));
  }

  // Identity files; content is filled in by the runtime from the image's own files.
  for (const char* file : {"/etc/passwd", "/etc/group"}) {
    Mount m;
    m.kind = MountKind::Identity;
    m.destination = file;
    m.readOnly = true;
    m.origin = MountOrigin::Identity;
    mounts.push_back(std::move(m));
  }

  // A parent before its children (-B d/file:/canary/file2 -B d:/canary): a mount given
  // before one of its ancestors moves right after it; unrelated mounts keep their order.
  auto isUnder = [](const std::string& path, const std::string& dir) {
    return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < mounts.size() && !moved; ++i) {
      for (size_t j = mounts.size(); j-- > i + 1;) {
        if (isUnder(mounts[i].destination, mounts[j].destination)) {
          std::rotate(mounts.begin() + static_cast<std::ptrdiff_t>(i), mounts.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                      mounts.begin() + static_cast<std::ptrdiff_t>(j) + 1);
          moved = true;
          break;
        }
      }
    }
  }

  // Working directory.
  if (!options.pwd.empty()) {
    if (options.pwd[0] != '/') throw Error("bad --pwd '" + options.pwd + "': must be absolute");
    plan.workdir = normalizePath(options.pwd);
    plan.workdirRequired = true;
  } else if (contain) {
    plan.workdir = options.noHome ? "/" : homeDest;
  } else {
    plan.workdir = host.cwd.empty() ? "/" : host.cwd;
  }

  EnvironmentInputs envInputs;
  envInputs.host = host.env;
  envInputs.cleanEnv = cleanEnv;
  envInputs.noEnv = options.noEnv;
  envInputs.evaluate = !options.noEval;
  envInputs.home = homeDest;
  envInputs.imagePath = image.path.string();
  for (const auto& value : options.envs) {
    auto vars = parseEnvOption(value);
    envInputs.cli.insert(envInputs.cli.end(), vars.begin(), vars.end());
  }
  envInputs.envFiles = options.envFileVars;
  envInputs.devices = std::move(deviceEnv);
  envInputs.libraryDirs = std::move(libraryDirs);
  envInputs.libraryDirsFirst = std::move(firstLibraryDirs);
  if (!image.environment.empty()) {
    envInputs.image = parseEnvFile(image.environment, image.path.string() + " (SIF environment object)");
  }
  Environment env = computeEnvironment(envInputs);
  if (!options.app.empty()) {
    if (!isValidAppName(options.app))
      throw Error("bad --app '" + options.app + "': an app name is letters, digits, '_', '-' and '.'").withStatus(1);
    // The image's 95-apps.sh selects the app from these, before the user's settings.
    for (const char* key : {"APPTAINER_APPNAME", "SINGULARITY_APPNAME"}) {
      env.vars[key] = options.app;
      env.fixed.emplace_back(key, options.app);
    }
  }
  plan.user.home = homeDest;
  // What the holder prepares once for every launch: all but the per-launch mounts.
  for (const auto& m : mounts)
    if (m.origin != MountOrigin::User && m.origin != MountOrigin::Cwd) plan.preparedRoot.mounts.push_back(m);
  plan.preparedRoot.user = plan.user;
  plan.environment = toEnvp(env);
  plan.userEnvironment = std::move(env.user);
  plan.fixedEnvironment = std::move(env.fixed);
  plan.warnings.insert(plan.warnings.end(), env.warnings.begin(), env.warnings.end());

  plan.argv = options.args;
  const std::string appDir = options.app.empty() ? "" : "/scif/apps/" + options.app + "/scif";
  auto choice = [](std::vector<std::string> program, std::vector<EnvVar> set = {}, std::string note = {}) {
    return CommandChoice{std::move(program), std::move(set), std::move(note)};
  };
  switch (options.command) {
    case Command::Exec:
      if (options.args.empty()) throw Error("exec: no command given (usage: ctr exec [options] IMAGE COMMAND [ARGS...])").withStatus(1);
      break;
    case Command::Run:
      if (!appDir.empty()) {
        plan.commandChoices = {choice({appDir + "/runscript"})};
        plan.noCommand = {"no runscript for the app '" + options.app + "' (" + appDir + "/runscript)", 1};
      } else {
        plan.commandChoices = {choice({"/.singularity.d/runscript"}), choice({"/singularity"}), choice({"/apptainer"}),
                               choice({"/bin/sh"}, {}, "the image has no runscript: running /bin/sh")};
        plan.noCommand = {"the image has no runscript (/.singularity.d/runscript, /singularity) and no /bin/sh", 1};
      }
      break;
    case Command::Shell:
      if (!options.shell.empty()) plan.commandChoices.push_back(choice({options.shell}, {{"SHELL", options.shell}}));
      plan.commandChoices.push_back(choice({"/bin/bash", "--norc"}, {{"SHELL", "/bin/bash"}}));
      plan.commandChoices.push_back(choice({"/bin/sh"}, {{"SHELL", "/bin/sh"}}));
      plan.noCommand = {"the image has no shell (" + (options.shell.empty() ? "" : options.shell + ", ") +
                            "/bin/bash, /bin/sh)",
                        1};
      break;
    case Command::Test:
      if (!appDir.empty()) {
        plan.commandChoices = {choice({appDir + "/test"})};
        plan.noCommand = {"no test for the app '" + options.app + "' (" + appDir + "/test)", 1};
      } else {
        plan.commandChoices = {choice({"/.singularity.d/test"})};
        plan.noCommand = {"the image has no test script (/.singularity.d/test): nothing to test", 0};
      }
      break;
  }
  return plan;
}

std::string toString(Command command) {
  switch (command) {
    case Command::Exec: return "exec";
    case Command::Run: return "run";
    case Command::Shell: return "shell";
    case Command::Test: return "test";
  }
  return "?";
}

std::string toString(ImageDriver driver) {
  switch (driver) {
    case ImageDriver::Directory: return "directory";
    case ImageDriver::Squashfuse: return "squashfuse";
    case ImageDriver::SetuidHelper: return "setuid-helper";
  }
  return "?";
}

std::string toString(MountKind kind) {
  switch (kind) {
    case MountKind::Bind: return "bind";
    case MountKind::Tmpfs: return "tmpfs";
    case MountKind::File: return "file";
    case MountKind::Identity: return "identity";
    case MountKind::Proc: return "proc";
    case MountKind::Symlink: return "symlink";
  }
  return "?";
}

std::string toString(MountOrigin origin) {
  switch (origin) {
    case MountOrigin::Default: return "default";
    case MountOrigin::Cwd: return "cwd";
    case MountOrigin::Contain: return "contain";
    case MountOrigin::Policy: return "policy";
    case MountOrigin::User: return "user";
    case MountOrigin::Identity: return "identity";
    case MountOrigin::Host: return "host";
  }
  return "?";
}

std::string toString(RootMode mode) {
  switch (mode) {
    case RootMode::Bind: return "image (read-only; overlay if a mount target is missing)";
    case RootMode::Overlay: return "overlay (image + private tmpfs)";
    case RootMode::Sandbox: return "sandbox (the build's writable directory)";
  }
  return "?";
}

nlohmann::json toJson(const limits::Request& r) {
  nlohmann::json j = nlohmann::json::object();
  if (r.cpus) j["cpus"] = *r.cpus;
  if (!r.cpusetCpus.empty()) j["cpuset_cpus"] = r.cpusetCpus;
  if (!r.cpusetMems.empty()) j["cpuset_mems"] = r.cpusetMems;
  if (r.memory) j["memory_bytes"] = *r.memory;
  if (r.memorySwap) j["memory_swap_bytes"] = *r.memorySwap;
  if (r.pids) j["pids"] = *r.pids;
  if (r.blkioWeight) j["blkio_weight"] = *r.blkioWeight;
  return j;
}

nlohmann::json toJson(const LaunchPlan& plan) {
  nlohmann::json j;
  j["command"] = toString(plan.command);
  j["image"] = {{"path", plan.image.path.string()},
                {"kind", image::toString(plan.image.kind)},
                {"offset", plan.image.offset},
                {"size", plan.image.size}};
  j["driver"] = toString(plan.driver);
  j["driver_reason"] = plan.driverReason;
  j["driver_fallback"] = plan.driverFallback ? nlohmann::json(toString(*plan.driverFallback)) : nlohmann::json();
  j["root"] = plan.rootMode == RootMode::Overlay ? "overlay" : plan.rootMode == RootMode::Sandbox ? "sandbox" : "image";
  if (plan.build) {
    auto maps = [](const std::vector<IdRange>& ranges) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& r : ranges) a.push_back({r.inside, r.outside, r.count});
      return a;
    };
    j["build"] = {{"sandbox", plan.build->sandbox}, {"uid_map", maps(plan.build->uidMap)},
                  {"gid_map", maps(plan.build->gidMap)}, {"map_helpers", plan.build->mapHelpers},
                  {"keep_capabilities", plan.build->keepCapabilities}, {"seccomp", plan.build->seccomp},
                  {"map_note", plan.build->mapNote}};
  }
  j["mounts"] = nlohmann::json::array();
  for (const auto& m : plan.mounts) {
    nlohmann::json mj = {{"kind", toString(m.kind)},
                         {"destination", m.destination},
                         {"readonly", m.readOnly},
                         {"origin", toString(m.origin)},
                         {"required", m.required}};
    if (m.kind == MountKind::Bind || m.kind == MountKind::Symlink) mj["source"] = m.source;
    if (m.createSourceMode) mj["create_source_mode"] = *m.createSourceMode;
    if (!m.from.empty()) mj["from"] = m.from;
    j["mounts"].push_back(std::move(mj));
  }
  j["environment"] = plan.environment;
  const auto& user = plan.userEnvironment;
  j["user_environment"] = {{"evaluated", user.evaluate}, {"variables", nlohmann::json::array()}};
  for (const auto& [name, value] : user.vars) j["user_environment"]["variables"].push_back({{"name", name}, {"value", value}});
  if (user.path) j["user_environment"]["path"] = *user.path;
  if (!user.prependPath.empty()) j["user_environment"]["prepend_path"] = user.prependPath;
  if (!user.appendPath.empty()) j["user_environment"]["append_path"] = user.appendPath;
  j["warnings"] = plan.warnings;
  j["argv"] = plan.argv;
  j["command_choices"] = nlohmann::json::array();
  for (const auto& c : plan.commandChoices) {
    nlohmann::json cj = {{"argv", c.argv}, {"env", nlohmann::json::object()}};
    for (const auto& [k, v] : c.env) cj["env"][k] = v;
    j["command_choices"].push_back(std::move(cj));
  }
  if (!plan.commandChoices.empty()) j["no_command"] = {{"message", plan.noCommand.message}, {"status", plan.noCommand.status}};
  j["workdir_required"] = plan.workdirRequired;
  j["workdir"] = plan.workdir;
  j["uid"] = plan.user.uid;
  j["gid"] = plan.user.gid;
  j["user"] = plan.user.name;
  j["groups"] = nlohmann::json::array();
  for (const auto& g : plan.user.groups) j["groups"].push_back(g.gid);
  j["namespaces"] = namespaceLines(plan.namespaces);
  j["prepared_root_targets"] = nlohmann::json::array();
  for (const auto& m : plan.preparedRoot.mounts) j["prepared_root_targets"].push_back(m.destination);
  j["image_linger_ms"] = plan.lingerMs;
  j["seccomp_profile"] = plan.seccompProfile.empty() ? "built-in default" : plan.seccompProfile;
  j["state_dir"] = plan.stateDir;
  j["limits"] = toJson(plan.limits);
  j["cgroup"] = {{"backend", limits::toString(plan.cgroup.backend)},
                 {"reason", plan.cgroup.reason},
                 {"directories", plan.cgroup.dirs},
                 {"sweep", plan.cgroup.sweepDirs}};
  if (!plan.limits.denyDevices.empty()) {
    nlohmann::json denied = nlohmann::json::array();
    for (const auto& rule : plan.limits.denyDevices)
      denied.push_back({{"path", rule.path}, {"type", std::string(1, rule.type)}, {"major", rule.major}, {"minor", rule.minor}});
    j["cgroup"]["deny_devices"] = {{"devices", denied},
                                   {"enforced", plan.cgroup.devicesEnforced},
                                   {"reason", plan.cgroup.devicesReason}};
  }
  j["kernel_interfaces"] = {{"read_only", plan.kernelInterfaces.readOnly}, {"reason", plan.kernelInterfaces.reason}};
  j["stats_file"] = plan.statsFile;
  j["refuse_overcommit"] = plan.admitAgainst.has_value();
  if (plan.devices) {
    const auto& d = *plan.devices;
    nlohmann::json drivers = nlohmann::json::array();
    for (const auto& driver : d.drivers)
      drivers.push_back({{"vendor", host::toString(driver.vendor)}, {"version", driver.version},
                         {"libraries", driver.libraries}, {"scan_from_cache", driver.scanFromCache},
                         {"needs_glibc", driver.needsGlibc}, {"needs_glibc_library", driver.needsGlibcLibrary}});
    j["devices"] = {{"cdi_devices", d.cdiDevices}, {"cdi_spec_files", d.cdiSpecFiles}, {"drivers", drivers},
                    {"left_out", d.notes}};
  } else {
    j["devices"] = nullptr;
  }
  if (plan.mpi) {
    nlohmann::json replace = nlohmann::json::array();
    for (const auto& r : plan.mpi->replace) replace.push_back({{"soname", r.soname}, {"host_path", r.hostPath}, {"from", r.from}});
    j["mpi"] = {{"mode", "bind"}, {"abi", host::toString(plan.mpi->family)}, {"abi_check", host::toString(plan.mpi->check)},
                {"replace", replace}, {"dependencies", plan.mpi->dependencies}, {"scan_from_cache", plan.mpi->scanFromCache}, {"needs_glibc", plan.mpi->needsGlibc},
                {"needs_glibc_library", plan.mpi->needsGlibcLibrary}, {"left_out", plan.mpi->notes}};
  } else {
    j["mpi"] = nullptr;
  }
  return j;
}

std::string toText(const LaunchPlan& plan) {
  std::ostringstream out;
  out << "command:    " << toString(plan.command) << '\n'
      << "image:      " << plan.image.path.string() << " (" << image::toString(plan.image.kind);
  if (plan.image.kind != image::ImageKind::Directory)
    out << ", squashfs at offset " << plan.image.offset << ", " << plan.image.size << " bytes";
  out << ")\n"
      << "driver:     " << toString(plan.driver) << " (" << plan.driverReason << ")\n"
      << "root:       " << toString(plan.rootMode) << (plan.build ? " " + plan.build->sandbox : "") << '\n'
      << "identity:   uid " << plan.user.uid << ", gid " << plan.user.gid << " (" << plan.user.name
      << ")\n"
      << "namespaces:";
  for (const auto& line : namespaceLines(plan.namespaces)) out << ' ' << line << ';';
  out << "\n"
      << "seccomp:    " << (plan.seccompProfile.empty() ? "built-in default" : plan.seccompProfile)
      << '\n'
      << "state dir:  "
      << (plan.stateDir.empty() ? "(a private one per launch: the shared names are taken)" : plan.stateDir)
      << "\nlinger:     " << plan.lingerMs << " ms after the image's last launch\n"
      << "limits:     " << limitsText(plan.limits) << '\n'
      << "kernel:     ";
  if (plan.kernelInterfaces.readOnly) {
    out << "read-only:";
    for (const auto path : kReadOnlyKernelPaths) out << ' ' << path;
    out << " /sys";
  } else {
    out << "/proc/sys and /sys bound as they are";
  }
  out << " (" << plan.kernelInterfaces.reason << ")\n";
  if (plan.cgroup.backend != limits::Backend::None || !plan.limits.empty()) {
    out << "cgroup:     " << limits::toString(plan.cgroup.backend) << " (" << plan.cgroup.reason << ")\n";
    for (const auto& [controller, dir] : plan.cgroup.dirs)
      out << "  " << (controller.empty() ? "" : controller + ": ") << dir << '\n';
  }
  if (!plan.limits.denyDevices.empty()) {
    out << "denied:    ";
    for (const auto& rule : plan.limits.denyDevices)
      out << ' ' << rule.path << " (" << rule.type << ' ' << rule.major << ':' << rule.minor << ')';
    out << "\n  " << (plan.cgroup.devicesEnforced ? "enforced: " : "") << plan.cgroup.devicesReason << '\n';
  }
  if (!plan.statsFile.empty()) out << "stats:      " << plan.statsFile << '\n';
  if (plan.devices) {
    const auto& d = *plan.devices;
    for (const auto& driver : d.drivers)
      out << "devices:    " << host::toString(driver.vendor) << " driver " << driver.version << " from the ld.so cache, "
          << driver.libraries << " libraries in " << kContainerLibDir
          << (driver.scanFromCache ? " (scan read from the state directory's cache)" : " (scanned now)")
          << (driver.needsGlibc.empty() ? "" : "; needs glibc >= " + driver.needsGlibc + " (" + driver.needsGlibcLibrary + ")")
          << '\n';
    if (!d.cdiDevices.empty()) {
      out << "devices:    CDI";
      for (const auto& name : d.cdiDevices) out << ", " << name;
      out << '\n';
    }
    for (const auto& file : d.cdiSpecFiles) out << "  CDI spec: " << file << '\n';
    for (const auto& note : d.notes) out << "  left out: " << note << '\n';
  }
  if (plan.mpi) {
    const auto& mpi = *plan.mpi;
    out << "mpi:        bind: the host's " << host::toString(mpi.family) << " replaces the image's ";
    for (size_t i = 0; i < mpi.replace.size(); ++i) out << (i ? ", " : "") << mpi.replace[i].soname;
    out << " after the ABI check ('mpi abi check = " << host::toString(mpi.check) << "': same family and major"
        << (mpi.check == host::MpiAbiCheck::Strict ? ", host minor >= image minor" : "") << "); " << mpi.dependencies
        << " dependencies in " << kContainerMpiDir << " (first on LD_LIBRARY_PATH)"
        << (mpi.scanFromCache ? "; scan read from the state directory's cache" : "; scanned now")
        << (mpi.needsGlibc.empty() ? "" : "; needs glibc >= " + mpi.needsGlibc + " (" + mpi.needsGlibcLibrary + ")") << '\n';
    for (const auto& r : mpi.replace) out << "  replace: " << r.soname << " <- " << r.hostPath << " from " << r.from << '\n';
    for (const auto& note : mpi.notes) out << "  left out: " << note << '\n';
  }
  if (plan.build) {
    auto maps = [](const std::vector<IdRange>& ranges) {
      std::string text;
      for (const auto& r : ranges)
        text += (text.empty() ? "" : ", ") + std::to_string(r.inside) + " -> " + std::to_string(r.outside) +
                " (" + std::to_string(r.count) + ")";
      return text;
    };
    out << "uid map:    " << maps(plan.build->uidMap) << (plan.build->mapHelpers ? " (newuidmap)" : "") << '\n'
        << "gid map:    " << maps(plan.build->gidMap) << (plan.build->mapHelpers ? " (newgidmap)" : "") << '\n'
        << "            " << plan.build->mapNote << '\n'
        << "hand-over:  " << (plan.build->keepCapabilities ? "root keeps its capabilities" : "capabilities dropped")
        << ", " << (plan.build->seccomp ? "seccomp" : "no seccomp filter") << '\n';
  }
  out
      << "mounts (in order):\n";
  for (const auto& m : plan.mounts) {
    out << "  " << toString(m.kind) << ' ';
    if (m.kind == MountKind::Bind) out << m.source << " -> ";
    if (m.kind == MountKind::Symlink) out << m.source << " <- ";
    out << m.destination << (m.readOnly ? " (ro)" : " (rw)") << " [" << toString(m.origin)
        << (m.kind == MountKind::Bind && !m.required && !m.createSourceMode ? ", skipped if absent" : "")
        << (m.createSourceMode ? ", source created if absent" : "") << "]"
        << (m.from.empty() ? "" : " from " + m.from) << '\n';
  }
  out << "workdir:    " << plan.workdir << (plan.workdirRequired ? " (--pwd: must exist)" : "") << '\n';
  for (const auto& c : plan.commandChoices) {
    out << "program:   ";
    for (const auto& a : c.argv) out << " '" << a << '\'';
    for (const auto& [k, v] : c.env) out << " (" << k << '=' << v << ')';
    out << " (if executable)\n";
  }
  if (!plan.commandChoices.empty()) out << "otherwise:  " << plan.noCommand.message << " (exit " << plan.noCommand.status << ")\n";
  out << "argv:      ";
  for (const auto& a : plan.argv) out << " '" << a << '\'';
  out << "\nenvironment (before the image's env scripts):\n";
  for (const auto& kv : plan.environment) out << "  " << kv << '\n';
  const auto& user = plan.userEnvironment;
  if (!user.empty()) {
    out << "user environment (after the image's scripts up to 99-base.sh, "
        << (user.evaluate ? "evaluated as \"VALUE\" in sh" : "literal: --no-eval") << "):\n";
    for (const auto& [name, value] : user.vars) out << "  " << name << '=' << value << '\n';
    if (!user.prependPath.empty()) out << "  PREPEND_PATH=" << user.prependPath << '\n';
    if (!user.appendPath.empty()) out << "  APPEND_PATH=" << user.appendPath << '\n';
    if (user.path) out << "  PATH=" << *user.path << " (replaces PATH after all scripts)\n";
  }
  for (const auto& w : plan.warnings) out << "warning:    " << w << '\n';
  return out.str();
}

}  // namespace ctr::launch

namespace ctr::launch {

namespace {

nlohmann::json groupJson(const HostGroup& g) { return {{"gid", g.gid}, {"name", g.name}}; }
HostGroup groupFrom(const nlohmann::json& j) { return {j.at("gid").get<gid_t>(), j.at("name").get<std::string>()}; }

}  // namespace

std::string preparedRootToJson(const PreparedRootSpec& spec) {
  nlohmann::json j;
  j["mounts"] = nlohmann::json::array();
  for (const auto& m : spec.mounts)
    j["mounts"].push_back({{"kind", static_cast<int>(m.kind)},
                           {"source", m.source},
                           {"destination", m.destination},
                           {"readonly", m.readOnly},
                           {"recursive", m.recursive},
                           {"required", m.required},
                           {"origin", static_cast<int>(m.origin)},
                           {"content", m.content}});
  const HostUser& u = spec.user;
  j["user"] = {{"uid", u.uid},     {"gid", u.gid},     {"name", u.name},
               {"gecos", u.gecos}, {"home", u.home},   {"shell", u.shell},
               {"primary_group", groupJson(u.primaryGroup)}};
  j["user"]["groups"] = nlohmann::json::array();
  for (const auto& g : u.groups) j["user"]["groups"].push_back(groupJson(g));
  return j.dump();
}

PreparedRootSpec preparedRootFromJson(std::string_view text) {
  try {
    auto j = nlohmann::json::parse(text);
    PreparedRootSpec spec;
    for (const auto& mj : j.at("mounts")) {
      Mount m;
      m.kind = static_cast<MountKind>(mj.at("kind").get<int>());
      m.source = mj.at("source").get<std::string>();
      m.destination = mj.at("destination").get<std::string>();
      m.readOnly = mj.at("readonly").get<bool>();
      m.recursive = mj.at("recursive").get<bool>();
      m.required = mj.at("required").get<bool>();
      m.origin = static_cast<MountOrigin>(mj.at("origin").get<int>());
      m.content = mj.at("content").get<std::string>();
      spec.mounts.push_back(std::move(m));
    }
    const auto& uj = j.at("user");
    HostUser& u = spec.user;
    u.uid = uj.at("uid").get<uid_t>();
    u.gid = uj.at("gid").get<gid_t>();
    u.name = uj.at("name").get<std::string>();
    u.gecos = uj.at("gecos").get<std::string>();
    u.home = uj.at("home").get<std::string>();
    u.shell = uj.at("shell").get<std::string>();
    u.primaryGroup = groupFrom(uj.at("primary_group"));
    for (const auto& g : uj.at("groups")) u.groups.push_back(groupFrom(g));
    return spec;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("bad prepared-root spec from the launch: ") + e.what());
  }
}

}  // namespace ctr::launch
