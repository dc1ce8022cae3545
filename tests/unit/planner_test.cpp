#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "ctr/error.hpp"
#include "ctr/launch.hpp"
#include "plan_helpers.hpp"

namespace {

using namespace ctr::launch;
using ctr::testing::alice;
using ctr::testing::execTrue;
using ctr::testing::sifImage;
using ctr::testing::squashfsDataset;

std::vector<std::string> destinations(const LaunchPlan& plan) {
  std::vector<std::string> d;
  for (const auto& m : plan.mounts) d.push_back(m.destination);
  return d;
}

using ctr::testing::envOf;
using ctr::testing::findMount;

}  // namespace

TEST(Planner, DefaultMountsFollowApptainerInOrder) {
  auto plan = planLaunch(execTrue(), {}, sifImage(), alice());
  std::vector<std::string> expected = {"/proc", "/sys", "/dev", "/etc/hosts", "/etc/resolv.conf", "/etc/localtime",
                                       "/tmp", "/var/tmp", "/home/alice", "/scratch/alice/run1",
                                       "/etc/passwd", "/etc/group"};
  EXPECT_EQ(destinations(plan), expected);
  EXPECT_EQ(plan.workdir, "/scratch/alice/run1");
  EXPECT_EQ(plan.argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(plan.driver, ImageDriver::Squashfuse);
  EXPECT_EQ(plan.rootMode, RootMode::Bind);
}

TEST(Planner, CurrentDirectoryUnderHomeIsNotBoundTwice) {
  auto host = alice();
  host.cwd = "/home/alice/project";
  auto plan = planLaunch(execTrue(), {}, sifImage(), host);
  EXPECT_EQ(findMount(plan, "/home/alice/project"), nullptr);
  EXPECT_EQ(plan.workdir, "/home/alice/project");
}

TEST(Planner, ContainReplacesHostTmpAndHomeWithTmpfs) {
  auto o = execTrue();
  o.contain = true;
  auto plan = planLaunch(o, {}, sifImage(), alice());
  ASSERT_NE(findMount(plan, "/tmp"), nullptr);
  EXPECT_EQ(findMount(plan, "/tmp")->kind, MountKind::Tmpfs);
  EXPECT_EQ(findMount(plan, "/home/alice")->kind, MountKind::Tmpfs);
  EXPECT_EQ(findMount(plan, "/scratch/alice/run1"), nullptr);
  EXPECT_EQ(plan.workdir, "/home/alice");
  // The planner gives each tmpfs its mode: sticky and world-writable for the temporary
  // directories, private for the home; none is the holder's to make (per launch).
  EXPECT_EQ(findMount(plan, "/tmp")->tmpfsMode, 01777u);
  EXPECT_EQ(findMount(plan, "/var/tmp")->tmpfsMode, 01777u);
  EXPECT_EQ(findMount(plan, "/home/alice")->tmpfsMode, 0700u);
  EXPECT_FALSE(findMount(plan, "/tmp")->tmpfsSizeBytes);
  EXPECT_FALSE(findMount(plan, "/tmp")->prebind);
}

TEST(Planner, TheHolderPrebindsTheDefaultAndSiteBindsButNoUserOrContainedMount) {
  auto o = execTrue();
  o.binds = {"/srv/data:/data"};
  ctr::config::Policy policy;
  policy.defaultBinds = {"/opt/site"};
  auto plan = planLaunch(o, policy, sifImage(), alice());
  EXPECT_TRUE(findMount(plan, "/proc")->prebind);
  EXPECT_TRUE(findMount(plan, "/tmp")->prebind);
  EXPECT_TRUE(findMount(plan, "/home/alice")->prebind);
  EXPECT_TRUE(findMount(plan, "/opt/site")->prebind);
  EXPECT_FALSE(findMount(plan, "/data")->prebind);          // the user's: per launch
  EXPECT_FALSE(findMount(plan, "/etc/passwd")->prebind);    // identity files: built, not bound
  for (const auto& m : plan.preparedRoot.mounts)
    EXPECT_EQ(m.prebind, findMount(plan, m.destination)->prebind) << m.destination;
  auto back = ctr::launch::preparedRootFromJson(ctr::launch::preparedRootToJson(plan.preparedRoot));
  for (size_t i = 0; i < back.mounts.size(); ++i) {
    EXPECT_EQ(back.mounts[i].prebind, plan.preparedRoot.mounts[i].prebind) << back.mounts[i].destination;
    EXPECT_EQ(back.mounts[i].tmpfsMode, plan.preparedRoot.mounts[i].tmpfsMode) << back.mounts[i].destination;
  }
  o.contain = true;
  plan = planLaunch(o, policy, sifImage(), alice());
  EXPECT_FALSE(findMount(plan, "/tmp")->prebind);            // --contain's tmpfs: per launch
}

TEST(Planner, HandoverDropsCapabilitiesLoadsSeccompAndKeepsThePrompt) {
  auto host = alice();
  host.env.push_back("PS1=[\\u@\\h] ");
  auto o = execTrue();
  o.cleanEnv = false;
  auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_TRUE(plan.handover.seccomp);
  EXPECT_FALSE(plan.handover.keepCapabilities);
  EXPECT_TRUE(plan.handover.noNewPrivs);
  EXPECT_EQ(plan.envProgram.ps1, envOf(plan, "PS1"));
  EXPECT_NE(toText(plan).find("hand-over:  seccomp built-in default; capabilities dropped; no_new_privs"),
            std::string::npos) << toText(plan);
  host = alice();
  plan = planLaunch(execTrue(), {}, sifImage(), host);
  EXPECT_EQ(plan.envProgram.ps1, std::nullopt);
}

TEST(Planner, ContainAllAlsoCleansTheEnvironment) {
  auto o = execTrue();
  o.containAll = true;
  auto host = alice();
  host.env.push_back("MY_SETTING=1");
  auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(envOf(plan, "MY_SETTING"), "<unset>");
  EXPECT_EQ(envOf(plan, "OMPI_COMM_WORLD_RANK"), "3");  // MPI wiring survives
}

TEST(Planner, NoHomeLeavesHomeOut) {
  auto o = execTrue();
  o.noHome = true;
  auto plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_EQ(findMount(plan, "/home/alice"), nullptr);
}

TEST(Planner, HomeOptionBindsSourceAtDestination) {
  auto o = execTrue();
  o.home = "/scratch/alice/fakehome:/home/alice";
  auto plan = planLaunch(o, {}, sifImage(), alice());
  const Mount* home = findMount(plan, "/home/alice");
  ASSERT_NE(home, nullptr);
  EXPECT_EQ(home->source, "/scratch/alice/fakehome");
  EXPECT_EQ(envOf(plan, "HOME"), "/home/alice");
}

TEST(Planner, UserBindsFromOptionAndEnvironmentComeAfterPolicyBinds) {
  auto o = execTrue();
  o.binds = {"/data:/data:ro"};
  auto host = alice();
  host.env.push_back("CTR_BIND=/opt/sw,/scratch:/mnt/scratch");
  ctr::config::Policy policy;
  policy.defaultBinds = {"/etc/localtime"};
  auto plan = planLaunch(o, policy, sifImage(), host);
  auto d = destinations(plan);
  auto pos = [&](const std::string& x) { return std::find(d.begin(), d.end(), x) - d.begin(); };
  ASSERT_LT(pos("/etc/localtime"), pos("/opt/sw"));
  ASSERT_LT(pos("/mnt/scratch"), pos("/data"));
  EXPECT_TRUE(findMount(plan, "/data")->readOnly);
  EXPECT_EQ(findMount(plan, "/data")->origin, ctr::launch::MountOrigin::User);
  EXPECT_TRUE(findMount(plan, "/data")->required) << "a missing user bind source is an error";
  EXPECT_EQ(findMount(plan, "/etc/localtime")->origin, ctr::launch::MountOrigin::Policy);
  EXPECT_FALSE(findMount(plan, "/etc/localtime")->required) << "absent admin binds are skipped";
}

TEST(Planner, RefusesUserBindsWhenPolicyForbidsThem) {
  auto o = execTrue();
  o.binds = {"/data"};
  ctr::config::Policy policy;
  policy.allowUserBinds = false;
  EXPECT_THROW((void)planLaunch(o, policy, sifImage(), alice()), ctr::Error);
  // Admin binds still apply.
  policy.defaultBinds = {"/etc/localtime"};
  o.binds.clear();
  EXPECT_NE(findMount(planLaunch(o, policy, sifImage(), alice()), "/etc/localtime"), nullptr);
}

TEST(Planner, RefusesWhenPolicyDisablesUserNamespaces) {
  ctr::config::Policy policy;
  policy.allowUserNamespaces = false;
  EXPECT_THROW((void)planLaunch(execTrue(), policy, sifImage(), alice()), ctr::Error);
}

TEST(Planner, RefusesBadBindRelativePwdAndMissingCommand) {
  auto o = execTrue();
  o.binds = {"relative/path"};
  EXPECT_THROW((void)planLaunch(o, {}, sifImage(), alice()), ctr::Error);
  o = execTrue();
  o.pwd = "work";
  EXPECT_THROW((void)planLaunch(o, {}, sifImage(), alice()), ctr::Error);
  o = execTrue();
  o.args.clear();
  EXPECT_THROW((void)planLaunch(o, {}, sifImage(), alice()), ctr::Error);
}

TEST(Planner, DriverFollowsImageKindAndPolicy) {
  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  EXPECT_EQ(planLaunch(execTrue(), {}, dir, alice()).driver, ImageDriver::Directory);

  ctr::config::Policy policy;
  auto host = alice();
  host.setuidHelper = ctr::host::HelperState::Usable;
  host.helperConfigSafe = true;
  host.loopControl = true;
  EXPECT_EQ(planLaunch(execTrue(), policy, sifImage(), host).driver, ImageDriver::Squashfuse)
      << "the helper is never used unless the admin allows it";
  policy.allowSetuid = true;
  auto plan = planLaunch(execTrue(), policy, sifImage(), host);
  EXPECT_EQ(plan.driver, ImageDriver::SetuidHelper);
  EXPECT_EQ(plan.driverFallback, ImageDriver::Squashfuse) << "auto falls back when the helper cannot proceed";
  host.helperConfigSafe = false;
  EXPECT_EQ(planLaunch(execTrue(), policy, sifImage(), host).driver, ImageDriver::Squashfuse)
      << "the helper refuses a config that is not root-owned and private";
  host.helperConfigSafe = true;
  policy.imageDriver = ctr::config::ImageDriver::Squashfuse;
  EXPECT_EQ(planLaunch(execTrue(), policy, sifImage(), host).driver, ImageDriver::Squashfuse);
  policy.imageDriver = ctr::config::ImageDriver::Setuid;
  EXPECT_FALSE(planLaunch(execTrue(), policy, sifImage(), host).driverFallback)
      << "'image driver = setuid' never falls back";
  host.setuidHelper = ctr::host::HelperState::Missing;
  EXPECT_THROW((void)planLaunch(execTrue(), policy, sifImage(), host), ctr::Error);
  // A setuid helper that group or others may write is refused, and the plan says why.
  policy.imageDriver = ctr::config::ImageDriver::Auto;
  host.setuidHelper = ctr::host::HelperState::Writable;
  plan = planLaunch(execTrue(), policy, sifImage(), host);
  EXPECT_EQ(plan.driver, ImageDriver::Squashfuse);
  EXPECT_NE(plan.driverReason.find("writable by group or others (refused)"), std::string::npos) << plan.driverReason;
}

TEST(Planner, SquashfsServerPrefersCtrSquashfsAndFallsBackToSquashfuse) {
  ctr::config::Policy policy;
  auto host = alice();
  auto plan = planLaunch(execTrue(), policy, sifImage(), host);
  ASSERT_TRUE(plan.imageServer);
  EXPECT_EQ(plan.imageServer->program, "/usr/libexec/ctr/ctr-squashfs");
  EXPECT_NE(plan.imageServer->reason.find("multithreaded"), std::string::npos) << plan.imageServer->reason;

  host.squashfsServers.ctrSquashfs.clear();
  host.squashfsServers.ctrSquashfsMissing = "ctr-squashfs not found";
  plan = planLaunch(execTrue(), policy, sifImage(), host);
  ASSERT_TRUE(plan.imageServer);
  EXPECT_EQ(plan.imageServer->program, "/usr/bin/squashfuse_ll");
  EXPECT_NE(plan.imageServer->reason.find("ctr-squashfs is not installed"), std::string::npos);

  policy.squashfsServer = ctr::config::SquashfsServer::CtrSquashfs;
  try {
    (void)planLaunch(execTrue(), policy, sifImage(), host);
    FAIL() << "'squashfs server = ctr-squashfs' without it must be refused";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ctr-squashfs not found"), std::string::npos) << e.what();
  }

  host = alice();
  policy.squashfsServer = ctr::config::SquashfsServer::Squashfuse;
  EXPECT_EQ(planLaunch(execTrue(), policy, sifImage(), host).imageServer->program, "/usr/bin/squashfuse_ll")
      << "the admin may keep squashfuse_ll";

  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  EXPECT_FALSE(planLaunch(execTrue(), policy, dir, host).imageServer) << "a directory needs no server";
}

TEST(Planner, NoSquashfsServerRefusesOrDropsTheFallback) {
  ctr::config::Policy policy;
  auto host = alice();
  host.squashfsServers = {};
  host.squashfsServers.squashfuseMissing = "squashfuse_ll not found (looked in ...): install squashfuse";
  try {
    (void)planLaunch(execTrue(), policy, sifImage(), host);
    FAIL() << "no server and no helper: refused at planning";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("install squashfuse"), std::string::npos) << e.what();
  }
  policy.allowSetuid = true;
  host.setuidHelper = ctr::host::HelperState::Usable;
  host.helperConfigSafe = true;
  host.loopControl = true;
  const auto plan = planLaunch(execTrue(), policy, sifImage(), host);
  EXPECT_EQ(plan.driver, ImageDriver::SetuidHelper);
  EXPECT_FALSE(plan.driverFallback) << "no FUSE server to fall back to";
  EXPECT_FALSE(plan.imageServer);
}

TEST(Planner, ImageOnAFileSystemUsersControlGoesThroughSquashfuse) {
  // The helper refuses images on FUSE (and vfat, SMB, ...): the plan says so up front
  // instead of trying the helper and falling back with a warning (issue 24, F5).
  ctr::config::Policy policy;
  policy.allowSetuid = true;
  auto host = alice();
  host.setuidHelper = ctr::host::HelperState::Usable;
  host.helperConfigSafe = true;
  host.loopControl = true;
  host.imageUntrustedFs = "FUSE";
  auto plan = planLaunch(execTrue(), policy, sifImage(), host);
  EXPECT_EQ(plan.driver, ImageDriver::Squashfuse);
  EXPECT_FALSE(plan.driverFallback);
  EXPECT_NE(plan.driverReason.find("on a FUSE file system"), std::string::npos) << plan.driverReason;
  policy.imageDriver = ctr::config::ImageDriver::Setuid;
  try {
    (void)planLaunch(execTrue(), policy, sifImage(), host);
    FAIL() << "'image driver = setuid' with an image on FUSE must be refused";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("on a FUSE file system"), std::string::npos) << e.what();
  }
}

TEST(Planner, RootsContainerGetsTheKernelInterfacesReadOnly) {
  auto root = alice();
  root.user.uid = 0;
  root.user.gid = 0;
  root.user.name = "root";
  auto plan = planLaunch(execTrue(), {}, sifImage(), root);
  EXPECT_TRUE(plan.kernelInterfaces.readOnly);
  ASSERT_NE(findMount(plan, "/sys"), nullptr);
  EXPECT_TRUE(findMount(plan, "/sys")->readOnly) << "the cgroup tree below /sys with it";
  EXPECT_TRUE(findMount(plan, "/sys")->recursive);
  const auto order = destinations(plan);
  for (const auto path : kReadOnlyKernelPaths) {
    const Mount* m = findMount(plan, std::string(path));
    ASSERT_NE(m, nullptr) << path;
    EXPECT_TRUE(m->readOnly && m->kind == MountKind::Bind && m->source == path) << path;
    EXPECT_GT(std::find(order.begin(), order.end(), path), std::find(order.begin(), order.end(), "/proc"))
        << path << " is bound over the container's /proc, after it";
  }
  EXPECT_NE(toText(plan).find("kernel:     read-only: /proc/sys /proc/sysrq-trigger"), std::string::npos) << toText(plan);
  EXPECT_EQ(toJson(plan)["kernel_interfaces"]["read_only"], true);
  // With its own PID namespace the fresh procfs gets the same binds over it.
  auto o = execTrue();
  o.pid = true;
  plan = planLaunch(o, {}, sifImage(), root);
  EXPECT_EQ(findMount(plan, "/proc")->kind, MountKind::Proc);
  EXPECT_TRUE(findMount(plan, "/proc/sys")->readOnly);
  // The admin's opt-out, and an ordinary user (who cannot write them anyway).
  ctr::config::Policy writable;
  writable.rootKernelInterfacesReadOnly = false;
  plan = planLaunch(execTrue(), writable, sifImage(), root);
  EXPECT_FALSE(plan.kernelInterfaces.readOnly);
  EXPECT_FALSE(findMount(plan, "/sys")->readOnly);
  EXPECT_EQ(findMount(plan, "/proc/sys"), nullptr);
  EXPECT_NE(plan.kernelInterfaces.reason.find("'root kernel interfaces = writable'"), std::string::npos);
  plan = planLaunch(execTrue(), {}, sifImage(), alice());
  EXPECT_FALSE(plan.kernelInterfaces.readOnly);
  EXPECT_FALSE(findMount(plan, "/sys")->readOnly);
  EXPECT_EQ(findMount(plan, "/proc/sys"), nullptr);
}

TEST(Planner, PreparedRootHoldsEveryLaunchIndependentMountAndNoUserBind) {
  auto o = execTrue();
  o.binds = {"/srv/data:/data"};
  auto plan = planLaunch(o, {}, sifImage(), alice());
  std::vector<std::string> targets;
  for (const auto& m : plan.preparedRoot.mounts) targets.push_back(m.destination);
  EXPECT_NE(std::find(targets.begin(), targets.end(), "/proc"), targets.end());
  EXPECT_NE(std::find(targets.begin(), targets.end(), "/etc/passwd"), targets.end());
  EXPECT_NE(std::find(targets.begin(), targets.end(), plan.user.home), targets.end());
  EXPECT_EQ(std::find(targets.begin(), targets.end(), "/data"), targets.end());
  EXPECT_EQ(plan.preparedRoot.user.uid, plan.user.uid);
  auto back = ctr::launch::preparedRootFromJson(ctr::launch::preparedRootToJson(plan.preparedRoot));
  ASSERT_EQ(back.mounts.size(), plan.preparedRoot.mounts.size());
  EXPECT_EQ(back.mounts.back().kind, plan.preparedRoot.mounts.back().kind);
  EXPECT_EQ(back.user.home, plan.user.home);
  EXPECT_EQ(back.user.groups, plan.user.groups);
}

TEST(Planner, RunUsesTheRunscriptAndShellUsesBinSh) {
  auto o = execTrue();
  o.command = Command::Run;
  o.args = {"--epochs", "3"};
  auto plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_EQ(plan.argv, (std::vector<std::string>{"--epochs", "3"}));
  std::vector<std::string> programs;
  for (const auto& c : plan.commandChoices) programs.push_back(c.argv[0]);
  EXPECT_EQ(programs, (std::vector<std::string>{"/.singularity.d/runscript", "/singularity", "/apptainer", "/bin/sh"}));
  o.command = Command::Shell;
  o.args.clear();
  plan = planLaunch(o, {}, sifImage(), alice());
  ASSERT_EQ(plan.commandChoices.size(), 2U);
  EXPECT_EQ(plan.commandChoices[0].argv, (std::vector<std::string>{"/bin/bash", "--norc"}));
  EXPECT_EQ(plan.commandChoices[0].env, (std::vector<EnvVar>{{"SHELL", "/bin/bash"}}));
  EXPECT_EQ(plan.commandChoices[1].argv, std::vector<std::string>{"/bin/sh"});
  o.shell = "/bin/zsh";
  EXPECT_EQ(planLaunch(o, {}, sifImage(), alice()).commandChoices[0].argv, std::vector<std::string>{"/bin/zsh"});
  o.command = Command::Test;
  plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_EQ(plan.commandChoices[0].argv, std::vector<std::string>{"/.singularity.d/test"});
  EXPECT_EQ(plan.noCommand.status, 0);
  o.app = "tool";
  plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_EQ(plan.commandChoices[0].argv, std::vector<std::string>{"/scif/apps/tool/scif/test"});
  EXPECT_EQ(plan.noCommand.status, 1);
  EXPECT_EQ(envOf(plan, "SINGULARITY_APPNAME"), "tool");
  EXPECT_EQ(plan.appRoot, "/scif/apps/tool");  // the runtime refuses an image without it (exit 1)
  o.app = "../x";
  EXPECT_THROW((void)planLaunch(o, {}, sifImage(), alice()), ctr::Error);
}

TEST(Planner, BindDestinationsReachTheContainerAsApptainerBind) {
  auto o = execTrue();
  EXPECT_EQ(envOf(planLaunch(o, {}, sifImage(), alice()), "APPTAINER_BIND"), "<unset>");
  o.binds = {"/d:/mnt", "/e"};
  auto host = alice();
  host.env.push_back("APPTAINER_BIND=/t:/srv");
  auto plan = planLaunch(o, {}, sifImage(), host);
  // --bind's first, then the environment's (Apptainer's order), destinations only.
  EXPECT_EQ(envOf(plan, "APPTAINER_BIND"), "/mnt,/e,/srv");
  EXPECT_EQ(envOf(plan, "SINGULARITY_BIND"), "/mnt,/e,/srv");
}

TEST(Planner, NestedBindsComeAfterTheirParentWhateverTheOrder) {
  auto o = execTrue();
  o.binds = {"/d/file:/canary/file2", "/d:/canary", "/d/sub:/canary/dir2/nested", "/d:/canary/dir2"};
  auto d = destinations(planLaunch(o, {}, sifImage(), alice()));
  auto pos = [&](const std::string& x) { return std::find(d.begin(), d.end(), x) - d.begin(); };
  EXPECT_LT(pos("/canary"), pos("/canary/file2"));
  EXPECT_LT(pos("/canary"), pos("/canary/dir2"));
  EXPECT_LT(pos("/canary/dir2"), pos("/canary/dir2/nested"));
  EXPECT_LT(pos("/etc/hosts"), pos("/etc/passwd")) << "unrelated mounts keep their order";
}

TEST(Planner, MountWorkdirScratchAndFlagVariablesOfBinds) {
  auto o = execTrue();
  o.mounts = {"type=bind,source=/data,destination=/in,readonly"};
  o.contain = true;
  o.workdir = "/scratch/alice/w";
  o.scratch = {"/s1,/s2"};
  auto host = alice();
  host.env.push_back("APPTAINER_BIND=/opt/a:/a");
  host.env.push_back("SINGULARITY_BINDPATH=/opt/b:/b");
  auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_TRUE(findMount(plan, "/in")->readOnly);
  EXPECT_EQ(findMount(plan, "/a")->source, "/opt/a");
  EXPECT_EQ(findMount(plan, "/b")->source, "/opt/b");
  EXPECT_EQ(findMount(plan, "/tmp")->source, "/scratch/alice/w/tmp");
  EXPECT_EQ(findMount(plan, "/var/tmp")->source, "/scratch/alice/w/var_tmp");
  EXPECT_EQ(findMount(plan, "/tmp")->createSourceMode, 01777U);
  EXPECT_EQ(findMount(plan, "/s2")->source, "/scratch/alice/w/scratch/s2");
  EXPECT_EQ(findMount(plan, "/home/alice")->source, "/scratch/alice/w/home") << "Apptainer's home with -W and -c";
  EXPECT_EQ(findMount(plan, "/home/alice")->createSourceMode, 0700U);
  o.workdir.clear();
  plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(findMount(plan, "/home/alice")->kind, ctr::launch::MountKind::Tmpfs);
  EXPECT_EQ(findMount(plan, "/s1")->kind, ctr::launch::MountKind::Tmpfs);
  EXPECT_EQ(findMount(plan, "/tmp")->kind, ctr::launch::MountKind::Tmpfs);
}

TEST(Planner, ExecWithoutCommandIsAUsageError) {
  auto o = execTrue();
  o.args.clear();
  try {
    (void)planLaunch(o, {}, sifImage(), alice());
    FAIL() << "no error";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(e.status(), 1);
  }
}

TEST(Planner, CustomHomeAtTheHostHomeIsKeptWhenStartedThere) {
  auto o = execTrue();
  o.home = "/scratch/alice/fakehome:/home/alice";
  auto host = alice();
  host.cwd = "/home/alice";
  auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(findMount(plan, "/home/alice")->source, "/scratch/alice/fakehome");
}

TEST(Planner, WritableTmpfsAsksForAnOverlayRoot) {
  auto o = execTrue();
  o.writableTmpfs = true;
  EXPECT_EQ(planLaunch(o, {}, sifImage(), alice()).rootMode, RootMode::Overlay);
}

TEST(Planner, FakerootIsRootWithTheSubordinateRangesAHomeAtRootAndRootsCapabilities) {
  auto o = execTrue();
  o.fakeroot = true;
  auto host = alice();
  auto plan = planLaunch(o, {}, sifImage(), host);
  ASSERT_TRUE(plan.fakeroot);
  EXPECT_EQ(plan.fakeroot->uidMap, (std::vector<ctr::host::IdRange>{{0, 1000, 1}})) << "no range: the one id";
  EXPECT_FALSE(plan.fakeroot->mapHelpers);
  EXPECT_EQ(plan.user.uid, 0u);
  EXPECT_EQ(plan.user.name, "root");
  EXPECT_TRUE(plan.user.groups.empty());
  EXPECT_EQ(plan.preparedRoot.user.uid, 0u) << "the holder prepares root's identity files";
  EXPECT_EQ(findMount(plan, "/root")->source, "/home/alice") << "Apptainer's home under --fakeroot";
  EXPECT_EQ(findMount(plan, "/home/alice"), nullptr);
  EXPECT_TRUE(plan.handover.keepCapabilities);
  EXPECT_TRUE(plan.handover.noNewPrivs);
  EXPECT_NE(toText(plan).find("fakeroot:   root in the container"), std::string::npos) << toText(plan);

  host.subordinate = ctr::host::SubordinateIds{ctr::host::IdRange{0, 300000, 65536}, ctr::host::IdRange{0, 400000, 65536}};
  plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(plan.fakeroot->uidMap, (std::vector<ctr::host::IdRange>{{0, 1000, 1}, {1, 300000, 65536}}));
  EXPECT_EQ(plan.fakeroot->gidMap, (std::vector<ctr::host::IdRange>{{0, 1000, 1}, {1, 400000, 65536}}));
  EXPECT_TRUE(plan.fakeroot->mapHelpers);
  EXPECT_EQ(toJson(plan)["fakeroot"]["uid_map"][1][1], 300000);
  o.fakeroot = false;
  EXPECT_FALSE(planLaunch(o, {}, sifImage(), host).fakeroot) << "the ranges alone change nothing";
}

TEST(Planner, FakerootMountsTheImageWithSquashfuseNotTheHelpersKernelMount) {
  auto o = execTrue();
  o.fakeroot = true;
  auto host = alice();
  host.setuidHelper = ctr::host::HelperState::Usable;
  host.helperConfigSafe = true;
  host.loopControl = true;
  ctr::config::Policy policy;
  policy.allowSetuid = true;
  ASSERT_EQ(planLaunch(execTrue(), policy, sifImage(), host).driver, ImageDriver::SetuidHelper);
  auto plan = planLaunch(o, policy, sifImage(), host);
  EXPECT_EQ(plan.driver, ImageDriver::Squashfuse);
  EXPECT_FALSE(plan.driverFallback);
  EXPECT_NE(plan.driverReason.find("--fakeroot"), std::string::npos);
  policy.imageDriver = ctr::config::ImageDriver::Setuid;
  try {
    (void)planLaunch(o, policy, sifImage(), host);
    ADD_FAILURE() << "--fakeroot accepted under 'image driver = setuid'";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--fakeroot needs the image mounted in the fakeroot user namespace"),
              std::string::npos) << e.what();
  }
}

// An --overlay argument: parsed as the CLI parses it, with what the host module finds at
// the path (host::inspectOverlayFile).
OverlayArg overlayArg(const std::string& spec, OverlayKind kind, bool hasUpper = false) {
  OverlayArg arg{parseOverlaySpec(spec, "/home/alice"), {}};
  arg.kind = kind;
  arg.hasUpperDir = hasUpper;
  return arg;
}

// The spec into the options, what is at its path into the host's facts.
void addOverlay(LaunchOptions& o, ctr::host::HostFacts& host, const OverlayArg& arg) {
  o.overlays.push_back(static_cast<const OverlaySpec&>(arg));
  host.overlayFiles[arg.path] = static_cast<const ctr::host::OverlayFile&>(arg);
}
void setOverlays(LaunchOptions& o, ctr::host::HostFacts& host, const std::vector<OverlayArg>& args) {
  o.overlays.clear();
  for (const auto& arg : args) addOverlay(o, host, arg);
}

TEST(Planner, OverlaysStackTheWritableOnTopThenTheReadOnlyOnesInTheOrderGiven) {
  auto o = execTrue();
  auto host = alice();
  setOverlays(o, host, {overlayArg("/data/tools:ro", OverlayKind::Directory), overlayArg("env", OverlayKind::Missing),
                        overlayArg("/data/old:ro", OverlayKind::Directory, true)});
  auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(plan.rootMode, RootMode::Overlay);
  ASSERT_EQ(plan.overlay.layers.size(), 3u);
  const auto& w = plan.overlay.layers[0];
  EXPECT_TRUE(w.writable);
  EXPECT_EQ(w.path, "/home/alice/env") << "relative to the current directory";
  EXPECT_EQ(w.dir, "/home/alice/env/upper");
  EXPECT_EQ(w.workDir, "/home/alice/env/work");
  EXPECT_TRUE(w.create) << "a missing writable overlay is created, as Apptainer does";
  EXPECT_EQ(plan.overlay.writable(), &w);
  EXPECT_EQ(plan.overlay.layers[1].dir, "/data/tools") << "a plain directory is the layer itself";
  EXPECT_FALSE(plan.overlay.layers[1].writable);
  EXPECT_EQ(plan.overlay.layers[2].dir, "/data/old/upper") << "what a writable use left is stacked read-only";
  EXPECT_FALSE(plan.overlay.tmpfsUpper);
  const auto text = toText(plan);
  EXPECT_NE(text.find("layer:    /home/alice/env/upper (writable upper layer"), std::string::npos) << text;
  EXPECT_LT(text.find("/data/tools (read-only"), text.find("/data/old/upper (read-only")) << text;
  EXPECT_EQ(toJson(plan)["overlay"]["upper"], "overlay");
  EXPECT_EQ(toJson(plan)["overlay"]["layers"][0]["lock"], "exclusive");
}

TEST(Planner, ReadOnlyOverlaysAloneGiveAReadOnlyRootAndWritableTmpfsAnUpperOfItsOwn) {
  auto o = execTrue();
  auto host = alice();
  setOverlays(o, host, {overlayArg("/data/tools:ro", OverlayKind::Directory)});
  auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(plan.rootMode, RootMode::Overlay);
  EXPECT_EQ(plan.overlay.writable(), nullptr);
  EXPECT_FALSE(plan.overlay.tmpfsUpper);
  EXPECT_EQ(toJson(plan)["overlay"]["upper"], "none");
  o.writableTmpfs = true;
  plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_TRUE(plan.overlay.tmpfsUpper);
  EXPECT_TRUE(plan.warnings.empty());
  // A writable overlay takes the upper layer: --writable-tmpfs is said to be unused.
  addOverlay(o, host, overlayArg("/data/env:rw", OverlayKind::Directory));
  plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_FALSE(plan.overlay.tmpfsUpper);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("--writable-tmpfs is not used"), std::string::npos);
}

TEST(Planner, OverlaysItCannotStackAreRefusedInOneLineNamingThem) {
  auto refused = [](const std::vector<OverlayArg>& overlays, const std::string& expected) {
    auto o = execTrue();
    auto host = alice();
    setOverlays(o, host, overlays);
    try {
      (void)planLaunch(o, {}, sifImage(), host);
      ADD_FAILURE() << "not refused: " << expected;
    } catch (const ctr::Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      EXPECT_EQ(e.status(), 1);
    }
  };
  refused({overlayArg("/a", OverlayKind::Directory), overlayArg("/b", OverlayKind::Missing)},
          "--overlay /a and /b are both writable");
  refused({overlayArg("/a:ro", OverlayKind::Missing)}, "--overlay /a:ro: no such directory");
  refused({overlayArg("/a.sqfs", OverlayKind::Squashfs)}, "the image was not looked at");
  refused({overlayArg("/a.img", OverlayKind::Ext3), overlayArg("/b.img", OverlayKind::Ext3)}, "are both writable");
  refused({overlayArg("/a.txt", OverlayKind::Other)}, "--overlay /a.txt: not a directory");
  refused({overlayArg("/a:ro", OverlayKind::Directory), overlayArg("/a", OverlayKind::Directory)}, "given twice");
  std::vector<OverlayArg> many;
  for (int i = 0; i <= static_cast<int>(kMaxOverlayLayers); ++i)
    many.push_back(overlayArg("/l" + std::to_string(i) + ":ro", OverlayKind::Directory));
  refused(many, "at most 16 layers");
}

TEST(Planner, WritableTakesOnlyADirectoryImageAndNoOtherWritableLayer) {
  auto o = execTrue();
  o.writable = true;
  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  dir.path = "/scratch/alice/sandbox";
  auto plan = planLaunch(o, {}, dir, alice());
  EXPECT_EQ(plan.rootMode, RootMode::Writable);
  EXPECT_EQ(toJson(plan)["root"], "writable");
  EXPECT_THROW((void)planLaunch(o, {}, sifImage(), alice()), ctr::Error) << "a SIF has no directory to write";
  o.writableTmpfs = true;
  EXPECT_THROW((void)planLaunch(o, {}, dir, alice()), ctr::Error);
  o.writableTmpfs = false;
  auto host = alice();
  setOverlays(o, host, {overlayArg("/data/tools:ro", OverlayKind::Directory)});
  EXPECT_THROW((void)planLaunch(o, {}, dir, host), ctr::Error);
}

TEST(Planner, OverlaySpecsWithCharactersOverlayfsCannotCarryAreRefused) {
  EXPECT_TRUE(parseOverlaySpec("/a/b:ro", "/").readOnly);
  EXPECT_FALSE(parseOverlaySpec("/a/b:rw", "/").readOnly);
  EXPECT_EQ(parseOverlaySpec("b/../c", "/a").path, "/a/c");
  for (const char* bad : {"", ":ro", "/a:b", "/a,b:ro", "/a\\b", "/"})
    EXPECT_THROW((void)parseOverlaySpec(bad, "/"), ctr::Error) << bad;
}

TEST(Planner, StateDirIsChosenOnceAndSkipsNamesTakenByOthers) {
  // A uid nobody has: its /tmp names are free, unless we (another uid) take them first.
  const uid_t uid = 3999999;
  const std::string base = "/tmp/ctr-" + std::to_string(uid);
  std::filesystem::remove_all(base);
  std::filesystem::remove_all(base + ".1");
  EXPECT_EQ(ctr::host::chooseStateDir(uid, ""), base);
  EXPECT_EQ(ctr::host::chooseStateDir(uid, "/nonexistent/runtime"), base) << "a missing XDG_RUNTIME_DIR is not used";
  std::filesystem::create_directory(base);  // owned by the test's uid, not by `uid`
  EXPECT_EQ(ctr::host::chooseStateDir(uid, ""), base + ".1");
  std::filesystem::remove_all(base);
  // An XDG_RUNTIME_DIR owned by the user wins.
  char tmpl[] = "/tmp/ctr-xdg-test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  EXPECT_EQ(ctr::host::chooseStateDir(::getuid(), tmpl), std::string(tmpl) + "/ctr");
  EXPECT_NE(ctr::host::chooseStateDir(uid, tmpl), std::string(tmpl) + "/ctr") << "not when someone else owns it";
  std::filesystem::remove_all(tmpl);
  // The plan carries the host's choice.
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  EXPECT_EQ(planLaunch(execTrue(), {}, sifImage(), host).stateDir, "/run/user/1000/ctr");
}

TEST(Planner, ExplainPrintsMountsEnvironmentAndNamespaces) {
  auto plan = planLaunch(execTrue(), {}, sifImage(), alice());
  auto text = toText(plan);
  EXPECT_NE(text.find("/scratch/alice/run1"), std::string::npos);
  EXPECT_NE(text.find("user"), std::string::npos);
  auto json = toJson(plan);
  EXPECT_EQ(json["mounts"].size(), plan.mounts.size());
  EXPECT_EQ(json["argv"][0], "/bin/true");
}

TEST(Planner, SifEnvironmentObjectSitsBetweenHostAndUserSettings) {
  auto image = sifImage();
  image.environment = "IMAGE_ONLY=1\nSHARED=image\nexport QUOTED=\"a b\"\n";
  auto o = execTrue();
  o.envs = {"SHARED=cli"};
  auto host = alice();
  host.env.push_back("IMAGE_ONLY=host");
  auto plan = planLaunch(o, {}, image, host);
  EXPECT_EQ(envOf(plan, "IMAGE_ONLY"), "1");
  EXPECT_EQ(envOf(plan, "SHARED"), "image");  // before the image's scripts
  EXPECT_EQ(plan.envProgram.user.vars, (std::vector<EnvVar>{{"SHARED", "cli"}}));  // after them
  EXPECT_EQ(envOf(plan, "QUOTED"), "a b");
}

TEST(Planner, MalformedSifEnvironmentObjectNamesTheImage) {
  auto image = sifImage();
  image.environment = "not an assignment\n";
  try {
    (void)planLaunch(execTrue(), {}, image, alice());
    FAIL() << "expected an error";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/images/app.sif (SIF environment object):1"), std::string::npos)
        << e.what();
  }
}

TEST(Planner, IsolationFlagsAskForNamespacesAndAMinimalDev) {
  auto o = execTrue();
  auto plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_FALSE(plan.namespaces.pid || plan.namespaces.ipc || plan.namespaces.uts || plan.namespaces.net);
  EXPECT_EQ(findMount(plan, "/dev")->kind, MountKind::Bind);
  EXPECT_EQ(findMount(plan, "/proc")->kind, MountKind::Bind);
  o.containAll = true;
  plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_TRUE(plan.namespaces.pid && plan.namespaces.ipc);
  EXPECT_TRUE(plan.namespaces.pidInit);
  o.noInit = true;  // the app is PID 1
  EXPECT_FALSE(planLaunch(o, {}, sifImage(), alice()).namespaces.pidInit);
  o.noInit = false;
  EXPECT_EQ(findMount(plan, "/proc")->kind, MountKind::Proc);
  EXPECT_EQ(findMount(plan, "/dev")->kind, MountKind::Tmpfs);
  EXPECT_EQ(findMount(plan, "/dev/null")->source, "/dev/null");
  EXPECT_EQ(findMount(plan, "/dev/fd")->kind, MountKind::Symlink);
  EXPECT_EQ(findMount(plan, "/dev/fd")->source, "/proc/self/fd");
  o = execTrue();
  o.hostname = "node";
  o.network = "none";
  plan = planLaunch(o, {}, sifImage(), alice());
  EXPECT_TRUE(plan.namespaces.uts && plan.namespaces.net);
  EXPECT_EQ(plan.namespaces.hostname, "node");
  // Its own network namespace: a sysfs of it over /sys, not the host's (its interfaces).
  EXPECT_EQ(findMount(plan, "/sys")->kind, MountKind::Sysfs);
  EXPECT_EQ(findMount(plan, "/sys")->source, "/sys");
  EXPECT_EQ(findMount(planLaunch(execTrue(), {}, sifImage(), alice()), "/sys")->kind, MountKind::Bind);
  o.network = "bridge";
  EXPECT_THROW((void)planLaunch(o, {}, sifImage(), alice()), ctr::Error);
}

TEST(Planner, DatasetImageIsMountedByTheHolderAndBoundReadOnly) {
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  auto options = execTrue();
  options.binds = {"/d/data.sqfs:/data:image-src=/val"};
  EXPECT_THROW((void)planLaunch(options, {}, sifImage(), host), ctr::Error) << "the CLI must have looked at it";
  ctr::image::ImageSource data;
  data.path = "/d/data.sqfs";
  data.kind = ctr::image::ImageKind::Squashfs;
  data.size = 4096;
  data.device = 7;
  data.inode = 42;
  host.datasetImages.emplace("/d/data.sqfs", data);
  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  const auto plan = planLaunch(options, {}, dir, host);
  ASSERT_EQ(plan.datasets.size(), 1U);
  const auto& d = plan.datasets[0];
  EXPECT_EQ(d.key.size(), 16U);
  EXPECT_EQ(d.mountDir, "/run/user/1000/ctr/mnt/data/" + d.key);
  ASSERT_TRUE(plan.imageServer) << "a directory image with a dataset still needs the FUSE server";
  const auto* m = findMount(plan, "/data");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->source, d.mountDir + "/val");
  EXPECT_TRUE(m->readOnly);

  host.stateDir.clear();
  try {
    (void)planLaunch(options, {}, dir, host);
    FAIL() << "no state directory, no holder to mount the dataset";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is taken"), std::string::npos) << e.what();
  }
}

TEST(Planner, SquashfsOverlayImageIsAReadOnlyLayerTheHolderMounts) {
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  auto o = execTrue();
  auto arg = overlayArg("/data/tools.sqfs", OverlayKind::Squashfs);
  ctr::image::ImageSource tools;
  tools.path = "/data/tools.sqfs";
  tools.kind = ctr::image::ImageKind::Squashfs;
  tools.size = 8192;
  arg.image = tools;
  setOverlays(o, host, {overlayArg("env", OverlayKind::Missing), arg});
  const auto plan = planLaunch(o, {}, sifImage(), host);
  ASSERT_EQ(plan.datasets.size(), 1U);
  ASSERT_EQ(plan.overlay.layers.size(), 2U);
  const auto& layer = plan.overlay.layers[1];
  EXPECT_TRUE(layer.image);
  EXPECT_FALSE(layer.writable) << "an image layer is read-only, :ro or not";
  EXPECT_EQ(layer.dir, plan.datasets[0].mountDir);
  EXPECT_TRUE(plan.overlay.layers[0].writable);
}

TEST(Planner, Ext3OverlayImagesAreFuse2fsLayersStackedByFuseOverlayfs) {
  auto o = execTrue();
  auto env = overlayArg("env.img", OverlayKind::Ext3);
  env.ext3Size = 64 << 20;
  auto app = overlayArg("/data/app.sif:ro", OverlayKind::Ext3);
  app.ext3Offset = 4096;
  app.ext3Size = 32 << 20;
  auto host = alice();
  setOverlays(o, host, {app, env, overlayArg("/data/tools:ro", OverlayKind::Directory)});
  const auto plan = planLaunch(o, {}, sifImage(), host);
  EXPECT_EQ(plan.rootMode, RootMode::Overlay);
  EXPECT_EQ(plan.overlay.driver, UnionDriver::FuseOverlayfs);
  ASSERT_EQ(plan.overlay.layers.size(), 3U);
  const auto& top = plan.overlay.layers[0];
  EXPECT_EQ(top.path, "/home/alice/env.img");
  EXPECT_TRUE(top.writable);
  ASSERT_TRUE(top.ext3);
  EXPECT_EQ(top.ext3->offset, 0U);
  EXPECT_EQ(top.ext3->size, 64U << 20);
  EXPECT_EQ(top.dir, "upper");
  EXPECT_EQ(top.workDir, "work");
  EXPECT_FALSE(top.create) << "an image is made by ctr overlay create, never by a launch";
  const auto& sif = plan.overlay.layers[1];
  EXPECT_EQ(sif.path, "/data/app.sif");
  EXPECT_FALSE(sif.writable);
  ASSERT_TRUE(sif.ext3);
  EXPECT_EQ(sif.ext3->offset, 4096U);
  EXPECT_EQ(sif.dir, "upper");
  EXPECT_FALSE(plan.overlay.layers[2].ext3);

  // Without an ext3 layer the kernel's overlayfs stacks them, as before.
  setOverlays(o, host, {overlayArg("/data/tools:ro", OverlayKind::Directory)});
  EXPECT_EQ(planLaunch(o, {}, sifImage(), host).overlay.driver, UnionDriver::Kernel);

  // With a PID namespace too: its init ends the servers before the namespace ends.
  setOverlays(o, host, {env});
  o.pid = true;
  const auto withPid = planLaunch(o, {}, sifImage(), host);
  EXPECT_TRUE(withPid.namespaces.pid);
  EXPECT_EQ(withPid.overlay.driver, UnionDriver::FuseOverlayfs);
}

TEST(Planner, DatasetImagesAreBoundedInOneLine) {
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  auto options = execTrue();
  for (std::size_t i = 0; i <= kMaxDatasetImages; ++i) {
    const std::string path = "/d/set" + std::to_string(i) + ".sqfs";
    options.binds.push_back(path + ":/data" + std::to_string(i) + ":image-src=/");
    ctr::image::ImageSource data;
    data.path = path;
    data.kind = ctr::image::ImageKind::Squashfs;
    data.inode = i + 1;
    host.datasetImages.emplace(path, data);
  }
  try {
    (void)planLaunch(options, {}, sifImage(), host);
    FAIL() << "17 dataset images accepted";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 16 dataset and overlay images"), std::string::npos) << e.what();
    EXPECT_EQ(e.status(), 1);
  }
  options.binds.pop_back();
  EXPECT_EQ(planLaunch(options, {}, sifImage(), host).datasets.size(), kMaxDatasetImages);
}

// Node-local staging (docs/design-io.md section 4): which files are copied, where, and what
// the rest of the plan mounts.
TEST(Planner, StagingFollowsTheFlagAndTheSitePolicy) {
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  auto image = sifImage();
  image.fileBytes = 1 << 20;
  image.mtimeNs = 1'700'000'000'123'456'789;
  image.device = 9;
  image.inode = 77;
  ctr::config::Policy policy;
  EXPECT_FALSE(planLaunch(execTrue(), policy, image, host).staging) << "'stage images = never' by default";

  auto o = execTrue();
  o.stage = true;
  auto plan = planLaunch(o, policy, image, host);
  ASSERT_TRUE(plan.staging);
  EXPECT_EQ(plan.staging->dir, "/var/tmp/ctr-stage-1000") << "%u is the user's id";
  ASSERT_EQ(plan.staging->files.size(), 1U);
  const auto& f = plan.staging->files[0];
  EXPECT_EQ(f.source, "/images/app.sif");
  EXPECT_EQ(f.copy.rfind("/var/tmp/ctr-stage-1000/", 0), 0U) << f.copy;
  EXPECT_TRUE(f.copy.ends_with("-app.sif")) << f.copy;
  EXPECT_EQ(f.bytes, 1U << 20);
  EXPECT_EQ(f.mtimeNs, image.mtimeNs);
  EXPECT_EQ(f.reason, "--stage");
  EXPECT_EQ(plan.image.path.string(), f.copy) << "the holder mounts the copy";
  EXPECT_EQ(plan.image.inode, 77U) << "the holder's key stays the source's identity";
  const auto json = toJson(plan);
  EXPECT_EQ(json["staging"]["files"][0]["source"], "/images/app.sif");
  EXPECT_NE(toText(plan).find("staged:     /images/app.sif -> " + f.copy), std::string::npos) << toText(plan);

  o.stage = false;
  policy.stageImages = ctr::config::StageImages::Always;
  EXPECT_FALSE(planLaunch(o, policy, image, host).staging) << "--no-stage wins over the site's always";
  o.stage.reset();
  plan = planLaunch(o, policy, image, host);
  ASSERT_TRUE(plan.staging);
  EXPECT_EQ(plan.staging->files[0].reason, "'stage images = always'");

  policy.stageImages = ctr::config::StageImages::Auto;
  EXPECT_FALSE(planLaunch(o, policy, image, host).staging) << "auto: a local file stays where it is";
  image.filesystem = 0x6969;  // NFS
  plan = planLaunch(o, policy, image, host);
  ASSERT_TRUE(plan.staging);
  EXPECT_EQ(plan.staging->files[0].reason, "on NFS ('stage images = auto')");
  image.filesystem = 0x0BD00BD0;  // Lustre
  EXPECT_TRUE(planLaunch(o, policy, image, host).staging);

  policy.stageMaxBytes = 1000;
  plan = planLaunch(o, policy, image, host);
  EXPECT_FALSE(plan.staging) << "larger than 'stage max size'";
  EXPECT_EQ(plan.image.path, "/images/app.sif");
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("is not staged"), std::string::npos) << plan.warnings[0];

  policy.stageDir = "/local/%u/%x";
  try {
    (void)planLaunch(o, policy, image, host);
    FAIL() << "an unknown %x accepted";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown %x"), std::string::npos) << e.what();
  }
}

TEST(Planner, StagingCopiesDatasetsAndLeavesDirectoriesAlone) {
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  auto o = execTrue();
  o.stage = true;
  o.binds = {"/shared/data.sqfs:/data:image-src=/"};
  host.datasetImages.emplace("/shared/data.sqfs", squashfsDataset("/shared/data.sqfs", 5));
  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  const auto plan = planLaunch(o, {}, dir, host);
  ASSERT_TRUE(plan.staging);
  ASSERT_EQ(plan.staging->files.size(), 1U) << "a directory image is not copied";
  EXPECT_EQ(plan.staging->files[0].what, "the dataset image");
  ASSERT_EQ(plan.datasets.size(), 1U);
  EXPECT_EQ(plan.datasets[0].image.path.string(), plan.staging->files[0].copy);
  EXPECT_EQ(plan.datasets[0].source, "/shared/data.sqfs") << "the bind still names its source";
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("is a directory: not staged"), std::string::npos) << plan.warnings[0];
}

TEST(Planner, StagedImageLeavesTheHelperWhereItRefusesTheUsersFiles) {
  ctr::config::Policy policy;
  policy.allowSetuid = true;
  auto host = alice();
  host.setuidHelper = ctr::host::HelperState::Usable;
  host.helperConfigSafe = true;
  host.loopControl = true;
  auto o = execTrue();
  o.stage = true;
  auto plan = planLaunch(o, policy, sifImage(), host);
  EXPECT_EQ(plan.driver, ImageDriver::Squashfuse) << "'setuid image owners = root' refuses alice's copy";
  EXPECT_NE(plan.driverReason.find("staged copy"), std::string::npos) << plan.driverReason;
  EXPECT_FALSE(plan.driverFallback);
  policy.setuidImageOwners = {"root", "self"};
  EXPECT_EQ(planLaunch(o, policy, sifImage(), host).driver, ImageDriver::SetuidHelper);
  policy.setuidImageDirectories = {"/images"};
  EXPECT_EQ(planLaunch(o, policy, sifImage(), host).driver, ImageDriver::Squashfuse)
      << "the stage directory is not among 'setuid image directories'";
}

TEST(Planner, DatasetsGoThroughTheHelperWithTheImageWhereItWouldTakeThem) {
  ctr::config::Policy policy;
  policy.allowSetuid = true;
  auto host = alice();
  host.stateDir = "/run/user/1000/ctr";
  host.setuidHelper = ctr::host::HelperState::Usable;
  host.helperConfigSafe = true;
  host.loopControl = true;
  auto options = execTrue();
  options.binds = {"/d/data.sqfs:/data:image-src=/"};
  host.datasetImages.emplace("/d/data.sqfs", squashfsDataset("/d/data.sqfs"));  // root's
  auto driverOf = [&](const ctr::image::ImageSource& image) {
    const auto plan = planLaunch(options, policy, image, host);
    EXPECT_EQ(plan.datasets.size(), 1U);
    return std::pair{plan.datasets.at(0).driver, plan.datasets.at(0).driverReason};
  };
  auto [driver, why] = driverOf(sifImage());
  EXPECT_EQ(driver, ImageDriver::SetuidHelper) << why;
  EXPECT_NE(why.find("the image server if the helper cannot proceed"), std::string::npos) << why;

  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  std::tie(driver, why) = driverOf(dir);
  EXPECT_EQ(driver, ImageDriver::Squashfuse) << "a directory image does not go through the helper";
  EXPECT_NE(why.find("does not go through the setuid helper"), std::string::npos) << why;

  auto& d = host.datasetImages.at("/d/data.sqfs");
  d.owner = 1000;  // alice's own
  std::tie(driver, why) = driverOf(sifImage());
  EXPECT_EQ(driver, ImageDriver::Squashfuse);
  EXPECT_NE(why.find("owner (uid 1000) is not in 'setuid image owners'"), std::string::npos) << why;
  policy.setuidImageOwners = {"root", "self"};
  EXPECT_EQ(driverOf(sifImage()).first, ImageDriver::SetuidHelper);
  policy.setuidImageDirectories = {"/images"};
  std::tie(driver, why) = driverOf(sifImage());
  EXPECT_EQ(driver, ImageDriver::Squashfuse);
  EXPECT_NE(why.find("not under any 'setuid image directories'"), std::string::npos) << why;
  policy.setuidImageDirectories = {"/d"};
  EXPECT_EQ(driverOf(sifImage()).first, ImageDriver::SetuidHelper);
  d.links = 2;
  EXPECT_NE(driverOf(sifImage()).second.find("2 hard links"), std::string::npos);
  d.links = 1;
  d.filesystem = 0x65735546;  // FUSE
  EXPECT_NE(driverOf(sifImage()).second.find("FUSE"), std::string::npos);
  d.filesystem = 0;
  policy.setuidFormats = {"sif"};
  EXPECT_NE(driverOf(sifImage()).second.find("format squashfs"), std::string::npos);
}

TEST(Planner, NoUmaskSetsTheAppsUmask) {
  EXPECT_FALSE(planLaunch(execTrue(), {}, sifImage(), alice()).handover.umask) << "the caller's umask by default";
  auto o = execTrue();
  o.noUmask = true;
  const auto plan = planLaunch(o, {}, sifImage(), alice());
  ASSERT_TRUE(plan.handover.umask);
  EXPECT_EQ(*plan.handover.umask, 022U);
  EXPECT_NE(toText(plan).find("umask 0022 (--no-umask)"), std::string::npos);
  EXPECT_EQ(toJson(plan)["handover"]["umask"], 022);
}

TEST(Planner, ADirectoryImageLingersOnlyWhileWhatItsPreparedRootWasMadeFromIsUnchanged) {
  ctr::config::Policy policy;
  policy.imageLingerMs = 5000;
  const auto sif = planLaunch(execTrue(), policy, sifImage(), alice());
  EXPECT_EQ(sif.lingerMs, 5000U);
  EXPECT_FALSE(sif.lingerUnlessOverlaid);
  EXPECT_TRUE(sif.holderKeyPaths.empty()) << "a SIF's holder is keyed by the file";
  auto dir = sifImage();
  dir.kind = ctr::image::ImageKind::Directory;
  const auto plan = planLaunch(execTrue(), policy, dir, alice());
  EXPECT_EQ(plan.lingerMs, 5000U);
  EXPECT_TRUE(plan.lingerUnlessOverlaid) << "an overlay's lower layer must not change under a lingering holder";
  // Every prepared target and every directory above it: a new entry where a target is
  // made, or a changed identity file's source, starts a new holder.
  const auto& paths = plan.holderKeyPaths;
  for (const char* p : {"/", "/etc", "/etc/passwd", "/etc/group", "/home", "/proc", "/tmp"})
    EXPECT_NE(std::find(paths.begin(), paths.end(), p), paths.end()) << p;
  for (const auto& m : plan.preparedRoot.mounts)
    EXPECT_NE(std::find(paths.begin(), paths.end(), m.destination), paths.end()) << m.destination;
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  EXPECT_NE(toText(plan).find("(none where an overlay has the directory as its lower layer); a new holder when one of"),
            std::string::npos)
      << toText(plan);
  EXPECT_EQ(toJson(plan)["holder_key_paths"].size(), paths.size());
}

TEST(Planner, TheHolderIsSharedWithinTheLaunchesProcessTrackingCgroupOnly) {
  auto host = alice();
  host.cgroups = {{"freezer", "/slurm_n1/uid_1000/job_7/step_0/task_3"},
                  {"memory", "/slurm_n1/uid_1000/job_7/step_0/task_3"},
                  {"", "/"}};
  const auto plan = planLaunch(execTrue(), {}, sifImage(), host);
  EXPECT_EQ(plan.holderScope.freezer, "/slurm_n1/uid_1000/job_7/step_0") << "the tasks of one step share it";
  EXPECT_EQ(plan.holderScope.unified, "/");
  EXPECT_NE(toText(plan).find("holder:     shared by the launches in this one's cgroups (freezer "
                              "/slurm_n1/uid_1000/job_7/step_0, v2 /)"),
            std::string::npos)
      << toText(plan);
  EXPECT_EQ(toJson(plan)["holder_scope"]["freezer"], "/slurm_n1/uid_1000/job_7/step_0");
  // The plugin's ctr, started by slurmstepd, is in the job's cgroup: the job's steps share.
  EXPECT_EQ(planHolderScope({{"freezer", "/slurm/uid_1000/job_7"}}, "mnt:[1]").freezer, "/slurm/uid_1000/job_7");
  EXPECT_EQ(planHolderScope({{"freezer", "/task_1"}}, "mnt:[1]").freezer, "/");
  EXPECT_EQ(planHolderScope({{"freezer", "/a/task_x"}}, "mnt:[1]").freezer, "/a/task_x") << "not a task level";
  EXPECT_TRUE(planHolderScope({}, "mnt:[1]").freezer.empty());
}

// A holder's mounts are a copy of the mount namespace it started in: a launch from another
// one (unshare -m, a session's pam_namespace, a job's private /tmp without cgroups) gets its
// own, and --explain says so.
TEST(Planner, TheHolderIsSharedWithinTheLaunchesMountNamespaceOnly) {
  auto host = alice();
  host.mountNamespace = "mnt:[4026532201]";
  const auto plan = planLaunch(execTrue(), {}, sifImage(), host);
  EXPECT_EQ(plan.holderScope.mountNamespace, "mnt:[4026532201]");
  EXPECT_NE(toText(plan).find("and mount namespace (mnt:[4026532201]): the holder's mounts are a copy of it"),
            std::string::npos)
      << toText(plan);
  EXPECT_EQ(toJson(plan)["holder_scope"]["mount_namespace"], "mnt:[4026532201]");
  EXPECT_EQ(planHolderScope({}, "mnt:[1]").mountNamespace, "mnt:[1]");
}

// needsOf: the host probes a launch needs, decided from the options and the image alone.
TEST(PlanNeeds, APlainLaunchOfADirectoryNeedsNothingBeyondTheCaller) {
  auto image = sifImage();
  image.kind = ctr::image::ImageKind::Directory;
  ctr::config::Policy policy;
  policy.stageImages = ctr::config::StageImages::Never;
  const auto needs = needsOf(execTrue(), image, policy, alice());
  EXPECT_TRUE(needs.imageFile.empty());
  EXPECT_FALSE(needs.squashfsServers.any() || needs.limits || needs.mpi || needs.stageDir || needs.subordinateIds);
  EXPECT_FALSE(needs.devices.nvidia || needs.devices.amd || needs.devices.gpus || needs.devices.cdi);
}

TEST(PlanNeeds, EachOptionNamesItsProbe) {
  ctr::config::Policy policy;
  policy.stageImages = ctr::config::StageImages::Never;
  auto options = execTrue();
  options.nv = true;
  options.mpi = "bind";
  options.fakeroot = true;
  options.statsFile = "run.json";
  auto needs = needsOf(options, sifImage(), policy, alice());
  EXPECT_EQ(needs.imageFile, sifImage().path.string());
  EXPECT_TRUE(needs.squashfsServers.any());  // a SIF is served by FUSE where the helper is not used
  EXPECT_TRUE(needs.devices.nvidia);
  EXPECT_FALSE(needs.devices.amd);
  EXPECT_TRUE(needs.mpi);
  EXPECT_TRUE(needs.limits);  // --stats reads the launch's cgroup
  EXPECT_TRUE(needs.subordinateIds);
  EXPECT_FALSE(needs.stageDir);
  options.ignoreSubuid = true;
  options.stage = true;
  needs = needsOf(options, sifImage(), policy, alice());
  EXPECT_FALSE(needs.subordinateIds);
  EXPECT_TRUE(needs.stageDir);
  EXPECT_TRUE(needs.overlayFiles.empty() && needs.datasetFiles.empty());
}

TEST(PlanNeeds, TheFilesTheOptionsNameAreLookedAtWithTheFlagThatNamedThem) {
  auto image = sifImage();
  image.kind = ctr::image::ImageKind::Directory;
  auto options = execTrue();
  options.overlays = {parseOverlaySpec("env:ro", "/home/alice")};
  options.binds = {"/d/data.sqfs:/data:image-src=/val", "/etc/hosts:/etc/hosts"};
  const auto needs = needsOf(options, image, {}, alice());
  ASSERT_EQ(needs.overlayFiles.size(), 1U);
  EXPECT_EQ(needs.overlayFiles[0].path, "/home/alice/env");
  EXPECT_EQ(needs.overlayFiles[0].label, "--overlay env:ro");
  ASSERT_EQ(needs.datasetFiles.size(), 1U) << "only the bind with image-src=";
  EXPECT_EQ(needs.datasetFiles[0].path, "/d/data.sqfs");
  EXPECT_EQ(needs.datasetFiles[0].label.rfind("--bind /d/data.sqfs:/data", 0), 0U) << needs.datasetFiles[0].label;
  EXPECT_TRUE(needs.squashfsServers.any()) << "a dataset image is served by FUSE";
}

// Only the servers the plan may choose are looked for: 'auto' looks for squashfuse_ll only
// where ctr-squashfs is missing, a named server alone, a lazy image ctr-squashfs whatever the
// setting.
TEST(PlanNeeds, OnlyTheSquashfsServersThePlanMayChooseAreLookedFor) {
  ctr::config::Policy policy;
  auto search = needsOf(execTrue(), sifImage(), policy, alice()).squashfsServers;
  EXPECT_TRUE(search.ctrSquashfs && search.squashfuse && search.squashfuseOnlyAsFallback);
  policy.squashfsServer = ctr::config::SquashfsServer::Squashfuse;
  search = needsOf(execTrue(), sifImage(), policy, alice()).squashfsServers;
  EXPECT_TRUE(!search.ctrSquashfs && search.squashfuse && !search.squashfuseOnlyAsFallback);
  policy.squashfsServer = ctr::config::SquashfsServer::CtrSquashfs;
  search = needsOf(execTrue(), sifImage(), policy, alice()).squashfsServers;
  EXPECT_TRUE(search.ctrSquashfs && !search.squashfuse);
  policy.squashfsServer = ctr::config::SquashfsServer::Squashfuse;
  auto lazy = sifImage();
  lazy.lazy.emplace();
  search = needsOf(execTrue(), lazy, policy, alice()).squashfsServers;
  EXPECT_TRUE(search.ctrSquashfs && !search.squashfuse) << "only ctr-squashfs reads a blob lazily";
}

// The two sides of that search agree: facts holding only what needsOf asked for plan the same
// server as facts holding both, for every setting, and with either server missing.
TEST(PlanNeeds, TheServersLookedForAreTheOnesThePlanChooses) {
  using ctr::config::SquashfsServer;
  for (const auto setting : {SquashfsServer::Auto, SquashfsServer::CtrSquashfs, SquashfsServer::Squashfuse}) {
    for (const bool ctrSquashfsInstalled : {true, false}) {
      ctr::config::Policy policy;
      policy.squashfsServer = setting;
      auto installed = alice();
      if (!ctrSquashfsInstalled) {
        installed.squashfsServers.ctrSquashfs.clear();
        installed.squashfsServers.ctrSquashfsMissing = "ctr-squashfs not found";
      }
      const auto search = needsOf(execTrue(), sifImage(), policy, installed).squashfsServers;
      auto found = installed;  // what discoverSquashfsServers returns for that search
      auto& servers = found.squashfsServers;
      if (!search.ctrSquashfs) servers.ctrSquashfs = servers.ctrSquashfsMissing = "";
      if (!search.squashfuse || (search.squashfuseOnlyAsFallback && ctrSquashfsInstalled))
        servers.squashfuse = servers.squashfuseMissing = "";
      const auto chosen = [&](const ctr::host::HostFacts& host) {
        try {
          const auto server = planLaunch(execTrue(), policy, sifImage(), host).imageServer;
          return server ? server->program : std::string("none");
        } catch (const ctr::Error& e) {
          return "error: " + e.oneLine();
        }
      };
      EXPECT_EQ(chosen(found), chosen(installed))
          << ctr::config::toString(setting) << (ctrSquashfsInstalled ? "" : ", no ctr-squashfs");
    }
  }
}

// The runtime's decisions, taken by the planner: which identity file a mount makes, whether
// the root ends read-only, where the image's libc is looked for.
TEST(Planner, IdentityMountsNameTheirFileAndTheRootIsReadOnly) {
  const auto plan = planLaunch(execTrue(), {}, sifImage(), alice());
  const auto* passwd = findMount(plan, "/etc/passwd");
  const auto* group = findMount(plan, "/etc/group");
  ASSERT_TRUE(passwd && group);
  EXPECT_EQ(passwd->identity, IdentityFile::Passwd);
  EXPECT_EQ(group->identity, IdentityFile::Group);
  EXPECT_TRUE(plan.rootReadOnly);
  EXPECT_TRUE(plan.glibcCheck.needs.empty());
  EXPECT_TRUE(plan.glibcCheck.imageLibc.empty());
  EXPECT_EQ(plan.envProgram.uid, alice().user.uid);
  auto withOverlay = execTrue();
  withOverlay.writableTmpfs = true;
  EXPECT_FALSE(planLaunch(withOverlay, {}, sifImage(), alice()).rootReadOnly);
}

TEST(Planner, ARegistryImageShowsWhereItsBlobsComeFrom) {
  auto image = sifImage();
  image.reference = "docker://ubuntu:24.04";
  image.digest = "sha256:" + std::string(64, 'a');
  ctr::config::Policy policy;
  policy.pull.mirrors = {{"docker.io", "http://127.0.0.1:5000/proxy", false}};
  const auto plan = planLaunch(execTrue(), policy, image, alice());
  ASSERT_EQ(plan.registryEndpoints.size(), 2U);
  EXPECT_TRUE(plan.registryEndpoints[0].mirror);
  EXPECT_EQ(plan.registryEndpoints[1].host, "registry-1.docker.io");
  const auto text = toText(plan);
  EXPECT_NE(text.find("endpoints:  mirror http://127.0.0.1:5000/v2/proxy/"), std::string::npos) << text;
  EXPECT_NE(text.find("then the registry https://registry-1.docker.io/v2/"), std::string::npos) << text;
  EXPECT_EQ(toJson(plan)["image"]["endpoints"][0]["host"], "127.0.0.1:5000");
  EXPECT_TRUE(planLaunch(execTrue(), policy, sifImage(), alice()).registryEndpoints.empty()) << "a file image";
}
