// The launch memo's plan codec (ctr/plan_codec.hpp): every plan comes back as it was, field
// for field, and bytes that are not a whole plan are refused with one line.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/instance.hpp"
#include "ctr/launch.hpp"
#include "ctr/plan_codec.hpp"
#include "plan_helpers.hpp"

namespace ctr::launch {
namespace {

// The plan decoded from its bytes encodes to the same bytes and explains the same.
void expectSamePlanBack(const LaunchPlan& plan) {
  const std::string bytes = encodePlan(plan);
  const LaunchPlan back = decodePlan(bytes);
  EXPECT_EQ(encodePlan(back), bytes);
  EXPECT_EQ(toJson(back), toJson(plan));
  EXPECT_EQ(toText(back), toText(plan));
  EXPECT_EQ(back.supervised(), plan.supervised());
}

host::HostFacts codecHost() {
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  host.pid = 4242;
  host.cgroups = {{"", "/user.slice/user-1000.slice/session-3.scope"}};
  return host;
}

// A cgroup v2 node that delegates to alice, with 8 CPUs and 64 GiB.
host::LimitsHost codecLimitsHost() {
  host::LimitsHost l;
  l.mounts.v2 = "/sys/fs/cgroup";
  l.mounts.v2Controllers = {"cpu", "cpuset", "io", "memory", "pids"};
  l.capacity.cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  l.capacity.memNodes = {0};
  l.capacity.memoryBytes = std::uint64_t{64} << 30;
  l.delegated = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service";
  l.delegatedWritable = true;
  return l;
}

InstanceRecord codecInstanceRecord() {
  InstanceRecord r;
  r.name = "web1";
  r.image = "/images/app.sif";
  r.keeper = 4242;
  r.keeperStart = 123456;
  r.namespaces = {{"user", 11}, {"mnt", 12}, {"uts", 13}, {"pid", 14}};
  r.home = "/home/alice";
  r.workdir = "/scratch/alice/run1";
  r.environment = {"PATH=/usr/bin:/bin"};
  r.cgroups = {{"", "/sys/fs/cgroup/user.slice/ctr-instance-1000-web1"}};
  return r;
}

// Plans of the planner itself, each with other options: what a memo holds.
std::vector<std::pair<std::string, LaunchPlan>> plannedLaunches() {
  std::vector<std::pair<std::string, LaunchPlan>> plans;
  const auto image = testing::sifImage();
  plans.emplace_back("exec", planLaunch(testing::execTrue(), {}, image, codecHost()));

  auto o = testing::execTrue();
  o.binds = {"/data:/data:ro", "/scratch/alice"};
  o.mounts = {"type=bind,source=/opt/tools,destination=/tools,readonly"};
  o.envs = {"A=1", "PATH=/opt/bin:$PATH"};
  o.envFileVars = {{"B", "two"}};
  o.pwd = "/data";
  o.containAll = true;
  o.noMount = {"/etc/hosts"};
  o.ipc = o.uts = true;
  o.hostname = "node7";
  o.noUmask = true;
  o.limits.cpus = 2.5;
  o.limits.memory = std::uint64_t{1} << 30;
  o.limits.pids = 100;
  o.statsFile = "/scratch/alice/run1/stats.json";
  auto host = codecHost();
  host.limits = codecLimitsHost();
  config::Policy overcommit;
  overcommit.refuseOvercommit = true;
  plans.emplace_back("binds, env, containall, limits, stats", planLaunch(o, overcommit, image, host));

  o = testing::execTrue();
  o.overlays = {parseOverlaySpec("env", "/home/alice"), parseOverlaySpec("/data/tools:ro", "/home/alice")};
  host = codecHost();
  host.overlayFiles["/home/alice/env"].kind = host::OverlayFileKind::Missing;
  host.overlayFiles["/data/tools"].kind = host::OverlayFileKind::Directory;
  plans.emplace_back("overlays", planLaunch(o, {}, image, host));

  o = testing::execTrue();
  o.nv = true;
  o.contain = true;
  host = codecHost();
  host.cdi = host::CdiRegistry{};
  host.nvidia = ctr::testing::scannedNvidiaDriver();
  host.nvidia->needsGlibc = "2.34";
  host.nvidia->needsGlibcLibrary = "libcuda.so.1";
  plans.emplace_back("--nv --contain", planLaunch(o, {}, image, host));

  o = testing::execTrue();
  o.mpi = "bind";
  host = codecHost();
  host.mpi = ctr::testing::scannedHostMpi();
  plans.emplace_back("--mpi=bind", planLaunch(o, {}, image, host));

  o = testing::execTrue();
  o.fakeroot = true;
  host = codecHost();
  host.subordinate = host::SubordinateIds{host::IdRange{0, 300000, 65536}, host::IdRange{0, 400000, 65536}};
  plans.emplace_back("--fakeroot", planLaunch(o, {}, image, host));

  o = testing::execTrue();
  o.command = Command::Instance;
  o.instance = "web1";
  o.args = {"web1"};
  plans.emplace_back("instance start", planLaunch(o, {}, image, codecHost()));

  o = testing::execTrue();
  o.command = Command::Run;
  o.args = {"--input", "a b"};
  plans.emplace_back("run", planLaunch(o, {}, image, codecHost()));

  o = testing::execTrue();
  o.stage = true;
  o.binds = {"/shared/data.sqfs:/data:image-src=/"};
  host = codecHost();
  host.datasetImages.emplace("/shared/data.sqfs", testing::squashfsDataset("/shared/data.sqfs", 5));
  auto staged = image;
  staged.fileBytes = 1 << 20;
  staged.mtimeNs = 1'700'000'000'123'456'789;
  plans.emplace_back("--stage with a dataset image", planLaunch(o, {}, staged, host));

  auto registry = image;
  registry.reference = "docker://ubuntu:24.04";
  registry.digest = "sha256:" + std::string(64, 'a');
  config::Policy mirrored;
  mirrored.pull.mirrors = {{"docker.io", "http://127.0.0.1:5000/proxy", false}};
  plans.emplace_back("registry image", planLaunch(testing::execTrue(), mirrored, registry, codecHost()));

  o = testing::execTrue();
  o.image = "instance://web1";
  o.envs = {"JOINED=yes"};
  plans.emplace_back("join", planJoin(o, {}, codecInstanceRecord(), image, codecHost()));

  BuildStepOptions step;
  step.sandbox = "/tmp/out.build/rootfs-0";
  step.stageDir = "/tmp/out.build/mnt";
  step.argv = {"/bin/sh", "-ex", "/.post.script"};
  plans.emplace_back("build step",
                     planBuildStep(step, {}, codecHost(),
                                   {host::IdRange{0, 100000, 65536}, host::IdRange{0, 200000, 65536}}));
  return plans;
}

TEST(PlanCodec, PlansOfThePlannerComeBackAsTheyWere) {
  for (const auto& [what, plan] : plannedLaunches()) {
    SCOPED_TRACE(what);
    expectSamePlanBack(plan);
  }
}

// The planner's plans cover what it decides; this one has every field set by hand, away from
// its default, each optional present and each list non-empty.
LaunchPlan everyFieldSet() {
  LaunchPlan p;
  p.command = Command::Instance;
  p.image.path = "/images/app.sif";
  p.image.kind = image::ImageKind::Sif;
  p.image.offset = 32768;
  p.image.size = 4096;
  p.image.arch = "amd64";
  p.image.environment = "A=1\nB=2\n";
  p.image.overlayOffset = 1 << 20;
  p.image.overlaySize = 1 << 21;
  p.image.dataPartition = true;
  p.image.device = 0x803;
  p.image.inode = 77;
  p.image.mtimeNs = -5;
  p.image.ctimeNs = 1'700'000'000'123'456'789;
  p.image.fileBytes = 1 << 22;
  p.image.filesystem = 0x6969;
  p.image.owner = 1000;
  p.image.links = 2;
  p.image.mode = 0600;
  p.image.reference = "oras://ghcr.io/org/app:1";
  p.image.digest = "sha256:" + std::string(64, 'b');
  p.image.via = "pulled";
  p.image.lazy = image::ImageSource::Lazy{"/run/spec", "https://ghcr.io/v2/blob", "/run/log", 40, 3, true, false};
  p.driver = ImageDriver::SetuidHelper;
  p.driverReason = "'image driver = setuid'";
  p.driverFallback = ImageDriver::Squashfuse;
  p.imageServer = ImageServer{"/usr/libexec/ctr/ctr-squashfs", "'squashfs server = auto'"};
  DatasetImage data;
  data.source = "/d/data.sqfs";
  data.image = testing::squashfsDataset("/d/data.sqfs", 9);
  data.image.lazy = image::ImageSource::Lazy{};
  data.key = "0123456789abcdef";
  data.mountDir = "/run/user/1000/ctr/mnt/data/0123456789abcdef";
  data.driver = ImageDriver::Directory;
  data.driverReason = "with the image";
  data.execution = ExecutionCheck{"/d", config::ExecutionMode::Whitestrict, "/d/data.sqfs", {"KEY1", "KEY2"}, true};
  p.datasets = {data, DatasetImage{}};
  p.staging = Staging{"/var/tmp/ctr-stage-1000", 123, {StagedFile{"the image", "/a", "/b", 4, -6, "--stage"}}};
  p.glibcCheck = GlibcCheck{{GlibcNeed{"NVIDIA driver", "2.34", "libcuda.so.1"}}, {"/lib64/libc.so.6", "/lib/libc.so.6"}};
  p.registryEndpoints = {{"http", "127.0.0.1:5000", "proxy/", true}, {"https", "ghcr.io", "", false}};
  p.rootMode = RootMode::Overlay;
  p.rootReadOnly = true;
  OverlayLayer layer{"/ovl.img", true, "upper", "work", true, true, OverlayLayer::Ext3{4096, 1 << 20}};
  p.overlay = RootOverlay{{layer, OverlayLayer{}}, true, UnionDriver::FuseOverlayfs, std::chrono::seconds{-30}};
  Mount m;
  m.kind = MountKind::Sysfs;
  m.source = "/sys";
  m.destination = "/sys";
  m.readOnly = true;
  m.recursive = false;
  m.required = true;
  m.origin = MountOrigin::Host;
  m.content = std::string("line\n\0with a nul", 16);
  m.identity = IdentityFile::Group;
  m.createSourceMode = 0750u;
  m.tmpfsMode = 01777;
  m.tmpfsSizeBytes = std::uint64_t{1} << 40;
  m.prebind = true;
  m.from = "/etc/cdi/nvidia.yaml:12";
  p.mounts = {m, Mount{}};
  host::HostUser user{1000, 1001, "alice", "Alice,,,", "/home/alice", "/bin/zsh", {1001, "staff"},
                      {{20, "dialout"}, {27, ""}}};
  p.preparedRoot = PreparedRootSpec{{m}, user};
  p.environment = {"A=1", "", "EMPTY="};
  UserEnvironment userEnv{{{"X", "1"}, {"Y", ""}}, std::string("/opt/bin"), "/pre", "/post", false};
  p.envProgram = EnvProgram{{"/.singularity.d/env/01-base.sh"}, userEnv, {{"CTR_CONTAINER", "/images/app.sif"}},
                            {{"LANG", "C"}}, 1000, 1001, std::string("$ "), true};
  p.warnings = {"w1", "w2"};
  p.mountsLeftOut = {"/proc"};
  p.argv = {"a", "", "c"};
  p.commandChoices = {CommandChoice{{"/bin/bash", "--norc"}, {{"SHELL", "/bin/bash"}}, "no runscript"}};
  p.noCommand = NoCommand{"no startscript", 0};
  p.appRoot = "/scif/apps/foo";
  p.sourceEnvScripts = false;
  p.workdir = "/data";
  p.workdirRequired = true;
  p.execution = ExecutionCheck{"", config::ExecutionMode::Blacklist, "/images/app.sif", {"KEY3"}, false};
  p.imageWorkdirFile = "/.singularity.d/workdir";
  p.user = user;
  p.seccompProfile = "/etc/ctr/seccomp.json";
  p.handover = Handover{false, true, false, 022u};
  p.namespaces = Namespaces{false, false, true, false, true, true, true, "node7", true};
  p.stateDir = "/run/user/1000/ctr";
  p.lingerMs = 1500;
  p.lingerUnlessOverlaid = true;
  p.holderKeyPaths = {"/etc", "/etc/passwd"};
  p.holderScope = HolderScope{"/slurm/uid_1000/job_7/step_0", "/system.slice/slurmstepd.scope/job_7", "mnt:[4026532201]"};
  p.limits.cpus = 0.25;
  p.limits.cpusetCpus = "0-3,8";
  p.limits.cpusetMems = "0";
  p.limits.memory = std::uint64_t{3} << 30;
  p.limits.memorySwap = -1;
  p.limits.pids = 64;
  p.limits.blkioWeight = 500;
  p.limits.denyDevices = {{'c', 195, 1, "/dev/nvidia1"}, {'b', 7, 0, "/dev/loop0"}};
  p.cgroup.backend = limits::Backend::V2;
  p.cgroup.reason = "delegated";
  p.cgroup.dirs = {{"", "/sys/fs/cgroup/a/ctr-4242"}, {"memory", "/sys/fs/cgroup/memory/ctr-4242"}};
  p.cgroup.devicesEnforced = true;
  p.cgroup.devicesReason = "BPF device program";
  p.cgroup.sweepDirs = {"/sys/fs/cgroup/a"};
  p.admitAgainst = limits::NodeCapacity{{0, 1, 2, 3}, {0, 1}, std::uint64_t{64} << 30};
  p.statsFile = "/tmp/stats.json";
  p.devices = DeviceInjection{{"nvidia.com/gpu=0"}, {"/etc/cdi/nvidia.yaml"},
                              {InjectedDriver{host::GpuVendor::Amd, "6.2", "2.28", "libamdhip64.so", 12, true}},
                              {"hooks left out"}};
  p.mpi = MpiInjection{host::MpiFamily::Mpich, host::MpiAbiCheck::Relaxed, {MpiReplacement{"libmpi.so.12", "/h", "ctr.conf"}},
                       3, true, "2.17", "libmpi.so.12", {"note"}};
  FakerootMaps maps{{{0, 1000, 1}, {1, 300000, 65536}}, {{0, 1000, 1}}, true, "/usr/bin/newuidmap",
                    "/usr/bin/newgidmap", "subordinate ranges"};
  BuildRoot build;
  static_cast<FakerootMaps&>(build) = maps;
  build.sandbox = "/tmp/out.build/rootfs-0";
  build.stageDir = "/tmp/out.build/mnt";
  p.build = build;
  p.fakeroot = maps;
  p.instance = InstancePlan{"web1", "/i", "/i/web1.json", "/i/web1.lock", "/i/web1.out", "/i/web1.err",
                            "/i/web1.bpf", "/i/web1.join", true, false, true, true};
  p.join = JoinPlan{"web1", "/i/web1.json", 4242, 123456, {{"user", 11}, {"pid", 14}}, {"/sys/fs/cgroup/x"}};
  p.kernelInterfaces = KernelInterfaces{true, "the host's root"};
  return p;
}

TEST(PlanCodec, APlanWithEveryFieldSetComesBackAsItWas) {
  const LaunchPlan plan = everyFieldSet();
  expectSamePlanBack(plan);
  // What neither toJson nor toText shows comes back too (encoding the decoded plan again says
  // nothing of a field the encoding leaves out: it is left out both times).
  const LaunchPlan b = decodePlan(encodePlan(plan));
  const auto& i = plan.image;
  EXPECT_EQ(std::tie(b.image.kind, b.image.arch, b.image.environment, b.image.overlayOffset, b.image.overlaySize,
                     b.image.dataPartition, b.image.device, b.image.inode, b.image.mtimeNs, b.image.ctimeNs,
                     b.image.fileBytes, b.image.filesystem, b.image.owner, b.image.links, b.image.mode),
            std::tie(i.kind, i.arch, i.environment, i.overlayOffset, i.overlaySize, i.dataPartition, i.device, i.inode,
                     i.mtimeNs, i.ctimeNs, i.fileBytes, i.filesystem, i.owner, i.links, i.mode));
  EXPECT_FALSE(b.image.lazy->verified);
  EXPECT_EQ(b.user, plan.user);
  EXPECT_EQ(b.preparedRoot.user, plan.user);
  EXPECT_EQ(std::tie(b.admitAgainst->cpus, b.admitAgainst->memNodes, b.admitAgainst->memoryBytes),
            std::tie(plan.admitAgainst->cpus, plan.admitAgainst->memNodes, plan.admitAgainst->memoryBytes));
  EXPECT_EQ(std::tie(b.execution->ruleDir, b.execution->cached), std::tie(plan.execution->ruleDir, plan.execution->cached));
  EXPECT_EQ(std::tie(b.datasets[0].source, b.datasets[0].driver), std::tie(plan.datasets[0].source, plan.datasets[0].driver));
  EXPECT_EQ(b.glibcCheck.imageLibc, plan.glibcCheck.imageLibc);
  ASSERT_EQ(b.glibcCheck.needs.size(), 1U);
  const auto& need = b.glibcCheck.needs[0];
  EXPECT_EQ(need.what + '|' + need.version + '|' + need.library, "NVIDIA driver|2.34|libcuda.so.1");
  const auto& m = b.mounts[0];
  const auto& pm = plan.mounts[0];
  EXPECT_EQ(std::tie(m.recursive, m.content, m.identity, m.tmpfsMode), std::tie(pm.recursive, pm.content, pm.identity, pm.tmpfsMode));
  const auto& e = b.envProgram;
  const auto& pe = plan.envProgram;
  EXPECT_EQ(std::tie(e.user.evaluate, e.scripts, e.fixed, e.uid, e.gid, e.ps1, e.wiringPassesThrough),
            std::tie(pe.user.evaluate, pe.scripts, pe.fixed, pe.uid, pe.gid, pe.ps1, pe.wiringPassesThrough));
  EXPECT_EQ(b.commandChoices[0].note, "no runscript");
  EXPECT_EQ(b.noCommand.status, 0);
  EXPECT_EQ(std::tie(b.handover.seccomp, b.handover.noNewPrivs), std::tie(plan.handover.seccomp, plan.handover.noNewPrivs));
  const auto& n = b.namespaces;
  const auto& pn = plan.namespaces;
  EXPECT_EQ(std::tie(n.sharedUser, n.ownMount, n.pidInit, n.signalAll), std::tie(pn.sharedUser, pn.ownMount, pn.pidInit, pn.signalAll));
  EXPECT_EQ(*b.fakeroot, *plan.fakeroot);
  EXPECT_EQ(static_cast<const FakerootMaps&>(*b.build), *plan.fakeroot);
  EXPECT_EQ(std::tie(b.build->sandbox, b.build->stageDir), std::tie(plan.build->sandbox, plan.build->stageDir));
  EXPECT_EQ(std::tie(b.instance->dir, b.instance->seccomp, b.instance->startscript),
            std::tie(plan.instance->dir, plan.instance->seccomp, plan.instance->startscript));
  EXPECT_EQ(b.join->cgroups, plan.join->cgroups);
  EXPECT_EQ(std::tie(b.rootReadOnly, b.sourceEnvScripts), std::tie(plan.rootReadOnly, plan.sourceEnvScripts));
  EXPECT_EQ(b.limits.denyDevices, plan.limits.denyDevices);
  EXPECT_EQ(b.overlay.stuckServerGrace, std::chrono::seconds{-30});
}

TEST(PlanCodec, RefusesEveryTruncatedPlanWithOneLine) {
  const std::string bytes = encodePlan(everyFieldSet());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    try {
      (void)decodePlan(std::string_view(bytes).substr(0, n));
      ADD_FAILURE() << "the first " << n << " of " << bytes.size() << " bytes decoded as a plan";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

TEST(PlanCodec, RefusesTrailingBytesAnotherFormatAndABadEnum) {
  const std::string bytes = encodePlan(planLaunch(testing::execTrue(), {}, testing::sifImage(), codecHost()));
  EXPECT_THROW((void)decodePlan(bytes + '\0'), Error);
  EXPECT_THROW((void)decodePlan(bytes + "garbage"), Error);
  auto otherFormat = bytes;
  std::uint32_t format = 0;
  std::memcpy(&format, otherFormat.data(), sizeof format);
  ++format;
  std::memcpy(otherFormat.data(), &format, sizeof format);
  EXPECT_THROW((void)decodePlan(otherFormat), Error);
  auto badCommand = bytes;
  badCommand[sizeof format] = 5;  // the plan's first field, its command: Exec .. Instance (4)
  EXPECT_THROW((void)decodePlan(badCommand), Error);
}

// A memo damaged anywhere is refused or read as some plan; it never crashes the launch or
// throws anything but ctr::Error.
TEST(PlanCodec, AnyByteDamagedIsRefusedOrReadNeverACrash) {
  const std::string bytes = encodePlan(everyFieldSet());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (const char damage : {'\x01', '\x7f', '\xff'}) {
      auto damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ damage);
      try {
        (void)decodePlan(damaged);
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace ctr::launch
