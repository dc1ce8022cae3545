// --nv, --rocm, --gpus and --device: the host's GPU drivers (CDI specs, else the ld.so cache
// scan) and devices into mounts, variables, device-cgroup rules and plan.devices.
#include <algorithm>
#include <cctype>
#include <utility>

#include "ctr/error.hpp"
#include "ctr/limits.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/strings.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

using host::kAmdCdiKind;
using host::kNvidiaCdiKind;

// NVIDIA_VISIBLE_DEVICES as the NVIDIA container runtime reads it: unset or "all" = every
// GPU, "none"/"void" = none, else a list of indices (minor numbers). UUIDs need NVML to map:
// every GPU then, with a note.
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
    const bool numbered = host::nvidiaGpuIndex(node).has_value();
    if (!numbered || all || byUuid || std::find(wanted.begin(), wanted.end(), node) != wanted.end()) {
      if (!numbered || !none) out.push_back(node);
    }
  }
  return out;
}

void planCdiDeviceNodes(const std::vector<host::CdiDeviceNode>& nodes, bool privateDev, std::vector<Mount>& mounts) {
  for (const auto& node : nodes) {
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
}

// The parts of a CDI selection ctr can honour without root, into mounts and variables;
// what it cannot honour goes into the notes.
void planCdiEdits(const host::CdiEdits& edits, bool privateDev, std::vector<Mount>& mounts, std::vector<EnvVar>& env,
                  std::vector<std::string>& libraryDirs, std::vector<std::string>& notes) {
  planCdiDeviceNodes(edits.deviceNodes, privateDev, mounts);
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

// --contain: the driver's device nodes (AMD: /dev/kfd and all of /dev/dri; HIP_VISIBLE_DEVICES /
// ROCR_VISIBLE_DEVICES pass through and the ROCm runtime applies them).
void planGpuDeviceNodes(const host::GpuDriver& driver, const std::string& visible, std::vector<Mount>& mounts,
                        DeviceInjection& injection) {
  const auto nodes = driver.vendor == host::GpuVendor::Nvidia ? selectNvidiaDevices(driver.devices, visible, injection.notes)
                                                              : driver.devices;
  for (const auto& node : nodes) {
    Mount m = bindMount(host::hostPath(driver, node), node, false, MountOrigin::Host);
    m.recursive = node == "/dev/nvidia-caps" || node == "/dev/dri";
    m.from = host::toString(driver.vendor) + " driver device" + (visible.empty() ? "" : " (visible devices: " + visible + ")");
    addMount(mounts, std::move(m));
  }
}

// --nv/--rocm without CDI: the scanned driver into mounts. The libraries go into one
// directory, /.singularity.d/libs (a tmpfs, so the prepared root needs one target for all
// of them), which is appended to LD_LIBRARY_PATH, as images built for Apptainer expect.
void planGpuDriver(const host::GpuDriver& driver, bool contain, const std::string& visible,
                   std::vector<Mount>& mounts, std::vector<std::string>& libraryDirs, DeviceInjection& injection) {
  injection.drivers.push_back(
      {driver.vendor, driver.version, driver.needsGlibc, driver.needsGlibcLibrary, driver.libraries.size(), driver.fromCache});
  addMount(mounts, targetsTmpfs(std::string(kContainerLibDir)));
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
  if (contain) planGpuDeviceNodes(driver, visible, mounts, injection);
  for (const auto& s : driver.skipped)
    injection.notes.push_back(s.listed + (s.soname.empty() || s.soname == s.listed ? "" : " (" + s.soname + ")") +
                              ": " + s.reason);
  if (std::find(libraryDirs.begin(), libraryDirs.end(), kContainerLibDir) == libraryDirs.end())
    libraryDirs.push_back(std::string(kContainerLibDir));
}

// The node's NVIDIA GPUs by index: the driver scan's /dev/nvidiaN, else the CDI spec's devices.
std::vector<unsigned> presentNvidiaGpus(const host::HostFacts& host) {
  std::vector<unsigned> present;
  if (host.nvidia) {
    for (const auto& node : host.nvidia->devices)
      if (auto index = host::nvidiaGpuIndex(node)) present.push_back(*index);
  } else if (host::hasCdiKind(*host.cdi, kNvidiaCdiKind)) {
    for (const auto& spec : host.cdi->specs)
      if (spec.kind == kNvidiaCdiKind)
        for (const auto& d : spec.devices)
          if (auto index = host::cdiGpuIndex(d.name)) present.push_back(*index);
  }
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  return present;
}

// --gpus LIST: these GPUs only, by index (nvidia-smi's, which is the PCI order CUDA then
// follows too with CUDA_DEVICE_ORDER=PCI_BUS_ID). Checked against the node's GPUs. Returns
// the selection as NVIDIA_VISIBLE_DEVICES says it; the GPUs left out go to the deny list.
std::string selectGpus(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy,
                       const host::HostFacts& host) {
  const std::vector<unsigned> present = presentNvidiaGpus(host);
  if (present.empty() && !host.nvidia && !host::hasCdiKind(*host.cdi, kNvidiaCdiKind))
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
  // The GPUs left out: their device nodes go to the device cgroup's deny list.
  for (const auto& [index, nodes] : host.gpuDeviceNodes)
    if (!std::binary_search(wanted.begin(), wanted.end(), index))
      plan.limits.denyDevices.insert(plan.limits.denyDevices.end(), nodes.begin(), nodes.end());
  return csv.empty() ? "none" : csv;
}

// What one vendor flag asks for.
struct GpuFlag {
  const char* flag;            // "--nv", "--gpus", "--rocm"
  std::string_view kind;       // its CDI kind
  const char* visibleVar;      // NVIDIA_VISIBLE_DEVICES, AMD_VISIBLE_DEVICES
  const std::optional<host::GpuDriver>& driver;
  const std::string& missing;  // why there is no driver scan
};

// A vendor flag: the vendor's CDI spec when there is one (its devices named by the vendor's
// visibility variable, "0,1", else all), else the ld.so cache scan.
void planGpuFlag(const GpuFlag& gpu, const std::string& gpuSelection, LaunchPlan& plan, const config::Policy& policy,
                 const host::HostFacts& host, bool contain, std::vector<std::string>& cdiNames,
                 DeviceEnvironment& out, DeviceInjection& injection) {
  const std::string visible =
      gpu.kind == kNvidiaCdiKind && !gpuSelection.empty() ? gpuSelection : envValue(host.env, gpu.visibleVar);
  if (host::hasCdiKind(*host.cdi, gpu.kind)) {
    std::vector<std::string> named;
    for (auto item : splitList(visible))
      if (!item.empty() && item != "all") named.push_back(std::string(gpu.kind) + "=" + std::string(item));
    if (visible == "none" || visible == "void") named.clear();
    else if (named.empty()) named.push_back(std::string(gpu.kind) + "=all");
    cdiNames.insert(cdiNames.end(), named.begin(), named.end());
  } else if (gpu.driver) {
    planGpuDriver(*gpu.driver, contain, visible, plan.mounts, out.libraryDirs, injection);
  } else if (policy.missingGpuDriverIsError) {
    throw Error(std::string(gpu.flag) + ": " + gpu.missing);
  } else {
    plan.warnings.push_back(std::string(gpu.flag) + ": " + gpu.missing + "; running without the GPU ('missing gpu driver = warn')");
  }
}

// --gpus: the selection's variables, after the CDI spec's (the selection wins).
void setGpuSelectionEnv(const std::string& gpuSelection, std::vector<EnvVar>& env) {
  for (const EnvVar& setting : {EnvVar{"NVIDIA_VISIBLE_DEVICES", gpuSelection},
                                EnvVar{"CUDA_VISIBLE_DEVICES", gpuSelection == "none" ? "" : gpuSelection},
                                EnvVar{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}) {
    std::erase_if(env, [&](const EnvVar& v) { return v.first == setting.first; });
    env.push_back(setting);
  }
}

}  // namespace

DeviceEnvironment planDevices(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy,
                              const host::HostFacts& host, bool contain) {
  DeviceEnvironment out;
  if (!options.nv && !options.rocm && options.gpus.empty() && options.devices.empty()) return out;
  if (!host.cdi) throw Error("--nv/--rocm/--gpus/--device asked for, but the host's devices were not looked at");
  for (const auto& warning : host.cdi->warnings) plan.warnings.push_back(warning);
  DeviceInjection injection;
  std::vector<std::string> cdiNames = options.devices;
  const std::string gpuSelection = options.gpus.empty() ? "" : selectGpus(plan, options, policy, host);
  if (options.nv || !options.gpus.empty())
    planGpuFlag({options.nv ? "--nv" : "--gpus", kNvidiaCdiKind, "NVIDIA_VISIBLE_DEVICES", host.nvidia, host.nvidiaMissing},
                gpuSelection, plan, policy, host, contain, cdiNames, out, injection);
  if (options.rocm)
    planGpuFlag({"--rocm", kAmdCdiKind, "AMD_VISIBLE_DEVICES", host.amd, host.amdMissing}, gpuSelection, plan, policy,
                host, contain, cdiNames, out, injection);
  if (!cdiNames.empty()) {
    auto selection = host::resolveCdiDevices(*host.cdi, cdiNames, policy.cdiSpecDirs);
    injection.cdiDevices = selection.devices;
    injection.cdiSpecFiles = selection.specFiles;
    planCdiEdits(selection.edits, contain, plan.mounts, out.env, out.libraryDirs, injection.notes);
  }
  if (!gpuSelection.empty() && !contain)
    injection.notes.push_back("--gpus without --contain: the other GPUs stay in the host's /dev (CUDA_VISIBLE_DEVICES "
                              "hides them from CUDA; --contain leaves their device nodes out)");
  if (!gpuSelection.empty()) setGpuSelectionEnv(gpuSelection, out.env);
  if (!injection.drivers.empty() || !injection.cdiDevices.empty()) plan.devices = std::move(injection);
  return out;
}

}  // namespace ctr::launch
