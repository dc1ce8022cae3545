// --nv and --device: CDI specifications (ctr/cdi.hpp) and what the planner makes of them and
// of an NVIDIA driver scan (ctr/gpu.hpp, ctr/launch.hpp).
#include <gtest/gtest.h>

#include <gnu/libc-version.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "ctr/cdi.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/glibc_version.hpp"
#include "ctr/inventory.hpp"
#include "ctr/launch.hpp"
#include "plan_helpers.hpp"

#include <nlohmann/json.hpp>

namespace {

using namespace ctr::host;
using ctr::host::HostFacts;
using ctr::launch::LaunchOptions;
using ctr::launch::LaunchPlan;
using ctr::launch::Mount;
using ctr::launch::MountOrigin;

constexpr const char* kNvidiaYaml = R"(cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-1b2c
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
      hostPath: /dev/nvidia1
      type: c
      major: 195
      minor: 1
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    - path: /dev/nvidia1
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05
    options: [ro, nosuid, nodev, bind]
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, create-symlinks, --link, libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so]
)";

std::string errorOf(std::string_view text, const std::string& file) {
  try {
    (void)parseCdiSpec(text, file);
  } catch (const ctr::Error& e) {
    return e.what();
  }
  return "";
}

CdiRegistry registryOf(std::initializer_list<std::pair<const char*, const char*>> files) {
  CdiRegistry r;
  for (const auto& [name, text] : files) r.specs.push_back(parseCdiSpec(text, name));
  return r;
}

TEST(CdiSpec, ReadsTheYamlNvidiaCtkWritesWithEveryKindOfEdit) {
  const CdiSpec spec = parseCdiSpec(kNvidiaYaml, "/etc/cdi/nvidia.yaml");
  EXPECT_EQ(spec.version, "0.6.0");
  EXPECT_EQ(spec.kind, "nvidia.com/gpu");
  ASSERT_EQ(spec.devices.size(), 3u);
  EXPECT_EQ(spec.devices[0].name, "0");
  EXPECT_EQ(spec.devices[1].edits.deviceNodes[0].hostPath, "/dev/nvidia1");
  EXPECT_EQ(spec.devices[1].edits.deviceNodes[0].type, "c");
  EXPECT_EQ(spec.edits.env, std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=void"});
  ASSERT_EQ(spec.edits.mounts.size(), 1u);
  EXPECT_EQ(spec.edits.mounts[0].options[0], "ro");
  ASSERT_EQ(spec.edits.hooks.size(), 2u);
  EXPECT_EQ(spec.edits.hooks[0].args[1], "update-ldcache");
}

TEST(CdiSpec, ReadsJsonByItsExtension) {
  const CdiSpec spec = parseCdiSpec(
      R"({"cdiVersion":"0.5.0","kind":"vendor.example/fpga","devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/fpga0"}],"additionalGids":[44]}}]})",
      "/var/run/cdi/fpga.json");
  EXPECT_EQ(spec.kind, "vendor.example/fpga");
  EXPECT_EQ(spec.devices[0].edits.additionalGids, std::vector<std::uint32_t>{44});
}

TEST(CdiSpec, RefusesBrokenSpecsNamingTheFileAndWhatIsWrong) {
  EXPECT_EQ(errorOf("kind: nvidia.com/gpu\ndevices: []\n", "/etc/cdi/a.yaml"), "/etc/cdi/a.yaml: 'cdiVersion' is missing");
  EXPECT_EQ(errorOf("cdiVersion: 0.6.0\nkind: gpu\ndevices: []\n", "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: kind 'gpu' is not vendor.com/class");
  EXPECT_EQ(errorOf("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices: []\n", "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: 'devices' must list at least one device");
  EXPECT_EQ(errorOf("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: x\n", "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: devices[0]: 'containerEdits' is missing");
  EXPECT_EQ(errorOf("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: x\n  containerEdits:\n    deviceNodes:\n"
                    "    - path: dev/x\n",
                    "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: devices[0].containerEdits.deviceNodes[0].path: 'dev/x' is not an absolute path");
  EXPECT_EQ(errorOf("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: x\n  containerEdits:\n    env: [NOEQUALS]\n",
                    "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: devices[0].containerEdits.env: 'NOEQUALS' is not NAME=VALUE");
  EXPECT_EQ(errorOf("cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: x\n  containerEdits: {}\n- name: x\n"
                    "  containerEdits: {}\n",
                    "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: devices[1]: device 'x' is defined twice");
  EXPECT_NE(errorOf("{not json", "/etc/cdi/a.json").find("/etc/cdi/a.json: not valid JSON"), std::string::npos);
  EXPECT_NE(errorOf("a: [", "/etc/cdi/a.yaml").find("/etc/cdi/a.yaml: not valid YAML"), std::string::npos);
  EXPECT_EQ(errorOf("- just\n- a list\n", "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: expected a mapping with cdiVersion, kind and devices");
  // libyaml's own reading: where the problem is, keys that are not scalars, alias cycles.
  EXPECT_NE(errorOf("a: [\n", "/etc/cdi/a.yaml").find("at line 2, column 1"), std::string::npos);
  EXPECT_EQ(errorOf("? [a, b]\n: c\n", "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: not valid YAML: a mapping key at line 1 is not a scalar");
  EXPECT_EQ(errorOf("a: &x [*x]\n", "/etc/cdi/a.yaml"),
            "/etc/cdi/a.yaml: not valid YAML: nested deeper than 64 levels");
}

TEST(CdiParse, YamlNullsAnchorsAndQuotedScalars) {
  // A plain ~, null or empty value is null (so 'hooks' with no list is none); a quoted "null"
  // is the string; an alias repeats what its anchor names.
  const auto spec = parseCdiSpec("cdiVersion: 0.6.0\nkind: a.com/gpu\ncontainerEdits:\n  hooks: ~\n"
                                       "  env: &e ['A=1']\ndevices:\n- name: \"null\"\n  containerEdits:\n"
                                       "    env: *e\n    deviceNodes:\n",
                                       "/etc/cdi/a.yaml");
  ASSERT_EQ(spec.devices.size(), 1u);
  EXPECT_EQ(spec.devices[0].name, "null");
  EXPECT_EQ(spec.devices[0].line, 7);
  EXPECT_EQ(spec.edits.env, std::vector<std::string>{"A=1"});
  EXPECT_EQ(spec.devices[0].edits.env, std::vector<std::string>{"A=1"});
  EXPECT_TRUE(spec.devices[0].edits.deviceNodes.empty());
}

TEST(CdiResolve, AllMeansTheSpecsAllDeviceAndSpecEditsComeFirst) {
  const auto registry = registryOf({{"/etc/cdi/nvidia.yaml", kNvidiaYaml}});
  const std::vector<std::string> dirs{"/etc/cdi"};
  const std::vector<std::string> names{"nvidia.com/gpu=all"};
  const auto sel = resolveCdiDevices(registry, names, dirs);
  EXPECT_EQ(sel.devices, std::vector<std::string>{"nvidia.com/gpu=all"});
  ASSERT_EQ(sel.edits.deviceNodes.size(), 3u);
  EXPECT_EQ(sel.edits.deviceNodes[0].path, "/dev/nvidiactl");
  EXPECT_EQ(sel.edits.deviceNodes[2].path, "/dev/nvidia1");
}

TEST(CdiResolve, AllWithoutAnAllDeviceTakesEveryDeviceAndALaterSpecWins) {
  const auto registry = registryOf(
      {{"/etc/cdi/a.yaml",
        "cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [WHO=etc]\n"
        "- name: \"1\"\n  containerEdits:\n    env: [ONE=1]\n"},
       {"/var/run/cdi/a.yaml", "cdiVersion: 0.6.0\nkind: a.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n    env: [WHO=run]\n"}});
  const std::vector<std::string> dirs{"/etc/cdi", "/var/run/cdi"};
  const std::vector<std::string> names{"a.com/gpu=all", "a.com/gpu=0"};
  const auto sel = resolveCdiDevices(registry, names, dirs);
  EXPECT_EQ(sel.devices, (std::vector<std::string>{"a.com/gpu=0", "a.com/gpu=1"}));
  EXPECT_EQ(sel.edits.env, (std::vector<std::string>{"WHO=run", "ONE=1"}));
}

TEST(CdiResolve, UnknownKindsAndDevicesAreErrorsThatSayWhatThereIs) {
  const auto registry = registryOf({{"/etc/cdi/nvidia.yaml", kNvidiaYaml}});
  const std::vector<std::string> dirs{"/etc/cdi", "/var/run/cdi"};
  auto error = [&](const std::string& name) {
    const std::vector<std::string> names{name};
    try {
      (void)resolveCdiDevices(registry, names, dirs);
    } catch (const ctr::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("nvidia.com/gpu=3"), "--device nvidia.com/gpu=3: no device '3' of kind nvidia.com/gpu (there are: 0, GPU-1b2c, all)");
  EXPECT_EQ(error("amd.com/gpu=0"), "--device amd.com/gpu=0: no CDI specification for 'amd.com/gpu' in /etc/cdi, /var/run/cdi");
  EXPECT_EQ(error("gpu0"), "--device gpu0: expected a CDI device name vendor.com/class=NAME (e.g. nvidia.com/gpu=all)");
}

TEST(CdiLoad, SkipsABrokenSpecWithAWarningAndReadsTheOthers) {
  char tmpl[] = "/tmp/ctr-cdi.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ctr::writeFile(dir + "/broken.yaml", "cdiVersion: [\n");
  ctr::writeFile(dir + "/nvidia.yaml", kNvidiaYaml);
  ctr::writeFile(dir + "/README", "not a spec");
  const std::vector<std::string> dirs{dir, dir + "/missing"};
  const auto registry = loadCdiSpecs(dirs);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(registry.specs.size(), 1u);
  EXPECT_EQ(registry.specs[0].file, dir + "/nvidia.yaml");
  ASSERT_EQ(registry.warnings.size(), 1u);
  EXPECT_NE(registry.warnings[0].find("CDI spec skipped: " + dir + "/broken.yaml: not valid YAML"), std::string::npos);
}

// The planner's side.

ctr::host::HostFacts bob() {
  ctr::host::HostFacts host;
  host.user.uid = 1000;
  host.user.gid = 1000;
  host.user.name = "bob";
  host.home = "/home/bob";
  host.cwd = "/home/bob";
  host.env = {"HOME=/home/bob", "PATH=/usr/bin:/bin"};
  host.cdi = CdiRegistry{};
  host.squashfsServers = ctr::testing::installedSquashfsServers();
  return host;
}

ctr::image::ImageSource image() {
  ctr::image::ImageSource i;
  i.path = "/images/app.sif";
  i.kind = ctr::image::ImageKind::Sif;
  return i;
}

LaunchOptions nv(bool contain = false) {
  LaunchOptions o;
  o.image = "/images/app.sif";
  o.args = {"nvidia-smi"};
  o.nv = true;
  o.contain = contain;
  return o;
}

const Mount* at(const LaunchPlan& plan, const std::string& destination) { return ctr::testing::findMount(plan, destination); }
using ctr::testing::envOf;

TEST(NvPlan, LibrariesGoIntoOneTmpfsDirectoryOnLdLibraryPathAndTheHoldersRoot) {
  ctr::host::HostFacts host = bob();
  host.nvidia = ctr::testing::scannedNvidiaDriver();
  const LaunchPlan plan = ctr::launch::planLaunch(nv(), ctr::config::Policy{}, image(), host);
  const Mount* libs = at(plan, "/.singularity.d/libs");
  ASSERT_NE(libs, nullptr);
  EXPECT_EQ(libs->kind, ctr::launch::MountKind::Tmpfs);
  EXPECT_EQ(libs->origin, MountOrigin::Host);
  // It only holds the libraries' targets: small, readable by all, made once by the holder.
  EXPECT_EQ(libs->tmpfsMode, 0755u);
  EXPECT_EQ(libs->tmpfsSizeBytes, std::optional<std::uint64_t>(1u << 20));
  EXPECT_TRUE(libs->prebind);
  const Mount* cuda = at(plan, "/.singularity.d/libs/libcuda.so.1");
  ASSERT_NE(cuda, nullptr);
  EXPECT_TRUE(cuda->prebind);
  EXPECT_EQ(cuda->source, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_TRUE(cuda->readOnly);
  ASSERT_NE(at(plan, "/usr/bin/nvidia-smi"), nullptr);
  ASSERT_NE(at(plan, "/var/run/nvidia-persistenced/socket"), nullptr);
  // Without --contain the host's /dev is there already: no device binds.
  EXPECT_EQ(at(plan, "/dev/nvidia0"), nullptr);
  EXPECT_EQ(envOf(plan, "LD_LIBRARY_PATH"), "/.singularity.d/libs");
  bool prepared = false;
  for (const auto& m : plan.preparedRoot.mounts) prepared |= m.destination == "/.singularity.d/libs/libcuda.so.1";
  EXPECT_TRUE(prepared);
  ASSERT_TRUE(plan.devices.has_value());
  ASSERT_EQ(plan.devices->drivers.size(), 1u);
  EXPECT_EQ(plan.devices->drivers[0].version, "535.104.05");
  EXPECT_EQ(plan.devices->drivers[0].libraries, 2u);
  EXPECT_EQ(plan.devices->notes, std::vector<std::string>{"libvdpau_nvidia.so: not in the ld.so cache"});
}

TEST(NvPlan, ContainBindsOnlyTheGpusNvidiaVisibleDevicesSelects) {
  ctr::host::HostFacts host = bob();
  host.nvidia = ctr::testing::scannedNvidiaDriver();
  host.env.push_back("NVIDIA_VISIBLE_DEVICES=0,2");
  const LaunchPlan plan = ctr::launch::planLaunch(nv(true), ctr::config::Policy{}, image(), host);
  EXPECT_NE(at(plan, "/dev/nvidiactl"), nullptr);
  EXPECT_NE(at(plan, "/dev/nvidia-uvm"), nullptr);
  EXPECT_NE(at(plan, "/dev/nvidia0"), nullptr);
  EXPECT_EQ(at(plan, "/dev/nvidia1"), nullptr);
  EXPECT_NE(at(plan, "/dev/nvidia2"), nullptr);
  host.env.back() = "NVIDIA_VISIBLE_DEVICES=none";
  const LaunchPlan none = ctr::launch::planLaunch(nv(true), ctr::config::Policy{}, image(), host);
  EXPECT_NE(at(none, "/dev/nvidiactl"), nullptr);
  EXPECT_EQ(at(none, "/dev/nvidia0"), nullptr);
}

TEST(NvPlan, NoDriverIsAnErrorUnlessThePolicySaysWarn) {
  ctr::host::HostFacts host = bob();
  host.nvidiaMissing = "no NVIDIA driver on this host (/proc/driver/nvidia/version is missing: ...)";
  try {
    (void)ctr::launch::planLaunch(nv(), ctr::config::Policy{}, image(), host);
    FAIL() << "--nv without a driver was planned";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(std::string(e.what()), "--nv: " + host.nvidiaMissing);
  }
  ctr::config::Policy warn;
  warn.missingGpuDriverIsError = false;
  const LaunchPlan plan = ctr::launch::planLaunch(nv(), warn, image(), host);
  EXPECT_FALSE(plan.devices.has_value());
  EXPECT_EQ(at(plan, "/.singularity.d/libs"), nullptr);
  ASSERT_FALSE(plan.warnings.empty());
  EXPECT_NE(plan.warnings.back().find("running without the GPU"), std::string::npos);
}

TEST(NvPlan, ACdiSpecForNvidiaGpuWinsOverTheLdCacheAndItsHooksAreAccountedFor) {
  ctr::host::HostFacts host = bob();
  host.nvidia = ctr::testing::scannedNvidiaDriver();
  host.cdi = registryOf({{"/etc/cdi/nvidia.yaml", kNvidiaYaml}});
  host.env.push_back("NVIDIA_VISIBLE_DEVICES=GPU-1b2c");
  // The host's /dev (no --contain) has the nodes already.
  EXPECT_EQ(at(ctr::launch::planLaunch(nv(), ctr::config::Policy{}, image(), host), "/dev/nvidia1"), nullptr);
  const LaunchPlan plan = ctr::launch::planLaunch(nv(true), ctr::config::Policy{}, image(), host);
  ASSERT_TRUE(plan.devices.has_value());
  EXPECT_TRUE(plan.devices->drivers.empty());
  EXPECT_EQ(plan.devices->cdiDevices, std::vector<std::string>{"nvidia.com/gpu=GPU-1b2c"});
  EXPECT_EQ(at(plan, "/.singularity.d/libs"), nullptr);
  const Mount* node = at(plan, "/dev/nvidia1");
  ASSERT_NE(node, nullptr);
  EXPECT_TRUE(node->required);
  EXPECT_FALSE(node->recursive);
  const Mount* lib = at(plan, "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05");
  ASSERT_NE(lib, nullptr);
  EXPECT_TRUE(lib->readOnly);
  // update-ldcache becomes LD_LIBRARY_PATH; create-symlinks is reported, not run.
  EXPECT_EQ(envOf(plan, "LD_LIBRARY_PATH"), "/usr/lib/x86_64-linux-gnu");
  EXPECT_EQ(envOf(plan, "NVIDIA_VISIBLE_DEVICES"), "void");
  ASSERT_EQ(plan.devices->notes.size(), 1u);
  EXPECT_NE(plan.devices->notes[0].find("create-symlinks"), std::string::npos);
}

TEST(NvPlan, RocmBindsKfdAndDriWithContainAndSharesTheLibraryDirectoryWithNv) {
  ctr::host::HostFacts host = bob();
  host.nvidia = ctr::testing::scannedNvidiaDriver();
  GpuDriver amd;
  amd.vendor = GpuVendor::Amd;
  amd.version = "in-tree";
  amd.libraries = {{"libdrm_amdgpu.so", "libdrm_amdgpu.so.1", "/usr/lib/x86_64-linux-gnu/libdrm_amdgpu.so.1", 0x0303}};
  amd.binaries = {{"rocm-smi", "/usr/bin/rocm-smi"}};
  amd.devices = {"/dev/kfd", "/dev/dri"};
  host.amd = amd;
  LaunchOptions o = nv(true);
  o.rocm = true;
  const LaunchPlan plan = ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), host);
  ASSERT_NE(at(plan, "/.singularity.d/libs/libdrm_amdgpu.so.1"), nullptr);
  ASSERT_NE(at(plan, "/.singularity.d/libs/libcuda.so.1"), nullptr);
  ASSERT_NE(at(plan, "/dev/kfd"), nullptr);
  const Mount* dri = at(plan, "/dev/dri");
  ASSERT_NE(dri, nullptr);
  EXPECT_TRUE(dri->recursive);
  EXPECT_EQ(envOf(plan, "LD_LIBRARY_PATH"), "/.singularity.d/libs");
  ASSERT_EQ(plan.devices->drivers.size(), 2u);
  EXPECT_EQ(plan.devices->drivers[1].vendor, GpuVendor::Amd);
  // Without a driver: the flag's own error.
  host.amd.reset();
  host.amdMissing = "no AMD GPU driver on this host (/dev/kfd is missing: the amdgpu kernel module is not loaded)";
  try {
    (void)ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), host);
    FAIL() << "--rocm without a driver was planned";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(std::string(e.what()), "--rocm: " + host.amdMissing);
  }
}

TEST(GpusPlan, SelectsTheNamedGpusChecksThemAgainstTheNodeAndTheSitesCap) {
  ctr::host::HostFacts host = bob();
  host.nvidia = ctr::testing::scannedNvidiaDriver();  // GPUs 0, 1 and 2
  LaunchOptions o;
  o.image = "/images/app.sif";
  o.args = {"./train"};
  o.contain = true;
  o.gpus = "0,2";
  const LaunchPlan plan = ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), host);
  EXPECT_EQ(envOf(plan, "NVIDIA_VISIBLE_DEVICES"), "0,2");
  EXPECT_EQ(envOf(plan, "CUDA_VISIBLE_DEVICES"), "0,2");
  EXPECT_EQ(envOf(plan, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_NE(at(plan, "/dev/nvidia0"), nullptr);
  EXPECT_EQ(at(plan, "/dev/nvidia1"), nullptr);
  EXPECT_NE(at(plan, "/dev/nvidia2"), nullptr);
  EXPECT_NE(at(plan, "/.singularity.d/libs/libcuda.so.1"), nullptr);  // --gpus implies --nv
  EXPECT_TRUE(plan.limits.denyDevices.empty());  // no device numbers known: nothing to deny
  // With the nodes' numbers (discovery stats them) and the node's cgroups: GPU 1's node is
  // denied; a user cannot have that enforced (no cgroup for it alone), root gets v1 devices.
  ctr::host::HostFacts numbered = host;
  for (unsigned i = 0; i < 3; ++i) numbered.gpuDeviceNodes[i] = {{'c', 195, i, "/dev/nvidia" + std::to_string(i)}};
  ctr::host::LimitsHost cgroups;
  cgroups.mounts = ctr::limits::parseCgroupMounts(
      "33 30 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "35 30 0:31 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
      "36 30 0:32 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n");
  numbered.limits = cgroups;
  const LaunchPlan users = ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), numbered);
  ASSERT_EQ(users.limits.denyDevices.size(), 1u);
  EXPECT_EQ(users.limits.denyDevices[0], (ctr::limits::DeviceRule{'c', 195, 1, "/dev/nvidia1"}));
  EXPECT_EQ(users.cgroup.backend, ctr::limits::Backend::None);
  EXPECT_FALSE(users.cgroup.devicesEnforced);
  EXPECT_NE(ctr::launch::toText(users).find("denied:     /dev/nvidia1 (c 195:1)"), std::string::npos);
  numbered.user.uid = 0;
  const LaunchPlan roots = ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), numbered);
  EXPECT_EQ(roots.cgroup.backend, ctr::limits::Backend::V1);
  EXPECT_TRUE(roots.cgroup.devicesEnforced);
  EXPECT_EQ(roots.cgroup.dirs.count("devices"), 1u);
  EXPECT_TRUE(roots.supervised());
  auto error = [&](const std::string& gpus, const ctr::config::Policy& policy) {
    LaunchOptions bad = o;
    bad.gpus = gpus;
    try {
      (void)ctr::launch::planLaunch(bad, policy, image(), host);
    } catch (const ctr::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("3", {}), "--gpus 3: this node has no GPU 3 (it has 3: 0-2)");
  EXPECT_EQ(error("x", {}).find("--gpus"), 0u);
  ctr::config::Policy capped;
  capped.limitCaps.gpus = 1;
  EXPECT_EQ(error("all", capped), "--gpus all: 3 GPUs asked for, the site allows 1 per container ('max gpus')");
  host.nvidia.reset();
  host.nvidiaMissing = "no NVIDIA driver on this host (...)";
  EXPECT_EQ(error("0", {}), "--gpus 0: no NVIDIA driver on this host (...)");
}

TEST(RdmaPlan, ContainBindsDevInfinibandOnRequestOrByPolicyOnly) {
  ctr::host::HostFacts host = bob();
  LaunchOptions o;
  o.image = "/images/app.sif";
  o.args = {"ibv_devinfo"};
  o.contain = true;
  EXPECT_EQ(at(ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), host), "/dev/infiniband"), nullptr);
  o.rdma = true;
  const Mount* ib = at(ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), host), "/dev/infiniband");
  ASSERT_NE(ib, nullptr);
  EXPECT_TRUE(ib->recursive);
  EXPECT_FALSE(ib->required);  // a node without HCAs runs on
  EXPECT_EQ(ib->from, "--rdma");
  o.rdma = false;
  ctr::config::Policy policy;
  policy.rdmaWithContain = true;
  EXPECT_NE(at(ctr::launch::planLaunch(o, policy, image(), host), "/dev/infiniband"), nullptr);
  // Without --contain the host's /dev has it already.
  o.contain = false;
  o.rdma = true;
  EXPECT_EQ(at(ctr::launch::planLaunch(o, policy, image(), host), "/dev/infiniband"), nullptr);
}

TEST(NvPlan, AUserBindAtTheSameDestinationWins) {
  ctr::host::HostFacts host = bob();
  host.nvidia = ctr::testing::scannedNvidiaDriver();
  LaunchOptions o = nv();
  o.binds = {"/opt/my-nvidia-smi:/usr/bin/nvidia-smi"};
  const LaunchPlan plan = ctr::launch::planLaunch(o, ctr::config::Policy{}, image(), host);
  const Mount* smi = at(plan, "/usr/bin/nvidia-smi");
  ASSERT_NE(smi, nullptr);
  EXPECT_EQ(smi->source, "/opt/my-nvidia-smi");
  EXPECT_EQ(smi->origin, MountOrigin::User);
}

}  // namespace

namespace {

// ctr check --host on a fixture node: an H100 behind the NVIDIA driver, a ConnectX HCA, an
// MI250 through KFD, written where the kernel puts them.
TEST(HostInventory, ReadsGpusHcasAndMemoryWhereTheKernelPutsThem) {
  char tmpl[] = "/tmp/ctr-inventory.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto put = [&](const std::string& rel, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(root + rel).parent_path());
    ctr::writeFile(root + rel, content);
  };
  put("/proc/meminfo", "MemTotal:       263921556 kB\nMemFree:        1 kB\n");
  put("/proc/cpuinfo", "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n");
  put("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n");
  put("/proc/driver/nvidia/gpus/0000:1b:00.0/information",
      "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\nGPU UUID: \t GPU-5f1a\nDevice Minor: \t 0\nBus Location: \t 0000:1b:00.0\n");
  put("/sys/bus/pci/devices/0000:1b:00.0/numa_node", "1\n");
  put("/dev/nvidiactl", "");
  put("/dev/nvidia0", "");
  put("/sys/class/infiniband/mlx5_0/node_type", "1: CA\n");
  put("/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  put("/sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  put("/sys/class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n");
  put("/sys/class/infiniband/mlx5_0/device/numa_node", "0\n");
  put("/etc/libibverbs.d/mlx5.driver", "driver mlx5\n");
  put("/dev/kfd", "");
  put("/sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 64\ngfx_target_version 0\n");
  put("/sys/class/kfd/kfd/topology/nodes/1/properties", "gfx_target_version 90010\nlocation_id 49664\ndomain 0\n");
  ctr::config::Policy policy;
  policy.cdiSpecDirs = {root + "/etc/cdi"};
  const auto inv = ctr::host::hostInventory(policy, root);
  std::filesystem::remove_all(root);

  EXPECT_EQ(inv["memory_total_bytes"], 263921556ull * 1024);
  EXPECT_EQ(inv["cpu_model"], "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(inv["nvidia"]["driver"], "550.54.15");
  EXPECT_EQ(inv["nvidia"]["source"], "ld.so cache");
  ASSERT_EQ(inv["nvidia"]["gpus"].size(), 1u);
  EXPECT_EQ(inv["nvidia"]["gpus"][0]["model"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(inv["nvidia"]["gpus"][0]["uuid"], "GPU-5f1a");
  EXPECT_EQ(inv["nvidia"]["gpus"][0]["numa_node"], 1);
  EXPECT_EQ(inv["nvidia"]["devices"], (nlohmann::json{"/dev/nvidiactl", "/dev/nvidia0"}));
  ASSERT_EQ(inv["rdma"]["devices"].size(), 1u);
  EXPECT_EQ(inv["rdma"]["devices"][0]["ports"][0]["state"], "4: ACTIVE");
  EXPECT_EQ(inv["rdma"]["devices"][0]["numa_node"], 0);
  EXPECT_EQ(inv["rdma"]["providers"], nlohmann::json{"mlx5"});
  EXPECT_EQ(inv["amd"]["kfd"], true);
  ASSERT_EQ(inv["amd"]["gpus"].size(), 1u);
  EXPECT_EQ(inv["amd"]["gpus"][0]["gfx_target_version"], "90010");
  const std::string text = ctr::host::describeInventory(inv);
  EXPECT_NE(text.find("driver 550.54.15"), std::string::npos) << text;
  EXPECT_NE(text.find("0000:1b:00.0 NVIDIA H100 80GB HBM3 GPU-5f1a NUMA 1"), std::string::npos) << text;
}

}  // namespace

namespace {

TEST(GlibcVersion, ParsesVersionNamesAndComparesNumerically) {
  using ctr::host::parseGlibcVersionName;
  ASSERT_TRUE(parseGlibcVersionName("GLIBC_2.34"));
  EXPECT_EQ(ctr::host::toString(*parseGlibcVersionName("GLIBC_2.2.5")), "2.2.5");
  EXPECT_LT(*parseGlibcVersionName("GLIBC_2.9"), *parseGlibcVersionName("GLIBC_2.10"));
  EXPECT_FALSE(parseGlibcVersionName("GLIBC_PRIVATE"));
  EXPECT_FALSE(parseGlibcVersionName("GLIBCXX_3.4"));
  EXPECT_FALSE(parseGlibcVersionName("GLIBC_2."));
  EXPECT_FALSE(parseGlibcVersionName("GLIBC_2.3x"));
}

TEST(GlibcVersion, ReadsThisMachinesLibcAndWhatItsProgramsNeed) {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  if (::access(libc.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << libc;
  const auto defined = ctr::host::glibcDefinedBy(libc);
  ASSERT_TRUE(defined);
  // gnu_get_libc_version() of the libc this test runs on is that file's.
  EXPECT_EQ(ctr::host::toString(*defined), std::string(gnu_get_libc_version()));
  const auto needed = ctr::host::glibcNeededBy("/proc/self/exe");
  ASSERT_TRUE(needed);
  EXPECT_LE(*needed, *defined);
  EXPECT_FALSE(ctr::host::glibcNeededBy(libc));  // libc needs nothing from itself
  EXPECT_THROW((void)ctr::host::glibcNeededBy("/proc/self/status"), ctr::Error);
}

}  // namespace
