// Instances: the join record's codec, instance names and references, and the planner of a
// launch into a running instance (planJoin).
#include <gtest/gtest.h>

#include "ctr/error.hpp"
#include "ctr/instance.hpp"
#include "plan_helpers.hpp"

namespace ctr::launch {
namespace {

InstanceRecord web1() {
  InstanceRecord r;
  r.name = "web1";
  r.image = "/images/app.sif";
  r.started = "2026-11-27T04:09:18Z";
  r.keeper = 4242;
  r.keeperStart = 123456;
  r.standIn = 4241;
  r.namespaces = {{"user", 11}, {"mnt", 12}, {"uts", 13}, {"pid", 14}};
  r.home = "/home/alice";
  r.workdir = "/scratch/alice/run1";
  r.environment = {"PATH=/usr/bin:/bin", "FIXTURE=1"};
  r.logOut = "/run/user/1000/ctr/instances/web1.out";
  r.logErr = "/run/user/1000/ctr/instances/web1.err";
  return r;
}

TEST(InstanceRecord, RoundTrips) {
  const auto r = web1();
  const auto back = instanceRecordFromJson(instanceRecordToJson(r), "web1.json");
  EXPECT_EQ(back.name, r.name);
  EXPECT_EQ(back.keeper, r.keeper);
  EXPECT_EQ(back.keeperStart, r.keeperStart);
  EXPECT_EQ(back.standIn, r.standIn);
  ASSERT_EQ(back.namespaces.size(), 4u);
  EXPECT_EQ(back.namespaces[2].type, "uts");
  EXPECT_EQ(back.namespaces[3].inode, 14u);
  EXPECT_EQ(back.environment, r.environment);
  EXPECT_EQ(back.logErr, r.logErr);
  EXPECT_FALSE(back.fakeroot);
  auto fakeroot = r;
  fakeroot.fakeroot = true;
  EXPECT_TRUE(instanceRecordFromJson(instanceRecordToJson(fakeroot), "web1.json").fakeroot);
}

TEST(PlanJoin, AFakerootInstanceIsJoinedAsRootWithRootsCapabilities) {
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  auto record = web1();
  auto plan = planJoin(testing::execTrue(), config::Policy{}, record, testing::sifImage(), host);
  EXPECT_FALSE(plan.handover.keepCapabilities);
  EXPECT_EQ(plan.user.uid, 1000u);
  record.fakeroot = true;
  record.home = "/root";
  plan = planJoin(testing::execTrue(), config::Policy{}, record, testing::sifImage(), host);
  EXPECT_TRUE(plan.handover.keepCapabilities);
  EXPECT_EQ(plan.user.uid, 0u);
  EXPECT_EQ(plan.user.home, "/root");
}

TEST(PlanJoin, ALimitedInstanceIsJoinedIntoItsCgroup) {
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  auto record = web1();
  EXPECT_TRUE(planJoin(testing::execTrue(), config::Policy{}, record, testing::sifImage(), host).join->cgroups.empty());
  // cpu and cpuacct share one v1 hierarchy: one directory, entered once.
  record.cgroups = {{"memory", "/sys/fs/cgroup/memory/ctr-instance-1000-web1"},
                    {"cpu", "/sys/fs/cgroup/cpu,cpuacct/ctr-instance-1000-web1"},
                    {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct/ctr-instance-1000-web1"}};
  const auto back = instanceRecordFromJson(instanceRecordToJson(record), "web1.json");
  EXPECT_EQ(back.cgroups, record.cgroups);
  const auto plan = planJoin(testing::execTrue(), config::Policy{}, back, testing::sifImage(), host);
  EXPECT_EQ(plan.join->cgroups.size(), 2U);
}

TEST(PlanInstance, ItsCgroupIsNamedForTheUserAndTheInstance) {
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  host.pid = 4242;
  host.limits = host::LimitsHost{};
  host.limits->mounts.v1 = {{"memory", "/sys/fs/cgroup/memory"}, {"cpuacct", "/sys/fs/cgroup/cpuacct"}};
  host.cgroups = {{"memory", "/"}, {"cpuacct", "/"}};
  host.user.uid = 0;  // v1 limits are root's
  auto options = testing::execTrue();
  options.command = Command::Instance;
  options.args = {"web1"};
  options.instance = "web1";
  options.limits.memory = 64u << 20;
  auto plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  ASSERT_EQ(plan.cgroup.dirs.count("memory"), 1U);
  EXPECT_EQ(plan.cgroup.dirs.at("memory"), "/sys/fs/cgroup/memory/ctr-instance-0-web1");
  options.command = Command::Exec;
  plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  EXPECT_EQ(plan.cgroup.dirs.at("memory"), "/sys/fs/cgroup/memory/ctr-4242") << "a launch's holds its pid";
}

TEST(InstancePlan, InstanceRunChoosesTheRunscriptAsRunDoes) {
  auto options = testing::execTrue();
  options.command = Command::Instance;
  options.args = {"a", "b"};
  options.instance = "web1";
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  auto plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  ASSERT_FALSE(plan.commandChoices.empty());
  EXPECT_EQ(plan.commandChoices[0].argv, std::vector<std::string>{"/.singularity.d/startscript"});
  EXPECT_FALSE(plan.instance->runscript);
  options.instanceRunscript = true;  // instance run
  plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  ASSERT_FALSE(plan.commandChoices.empty());
  EXPECT_EQ(plan.commandChoices[0].argv, std::vector<std::string>{"/.singularity.d/runscript"});
  EXPECT_EQ(plan.commandChoices.back().argv, std::vector<std::string>{"/bin/sh"});
  EXPECT_TRUE(plan.instance->runscript);
  EXPECT_EQ(plan.argv, (std::vector<std::string>{"a", "b"}));
}

TEST(InstancePlan, StayKeepsTheInstanceInTheCallersPidNamespaceOnly) {
  auto options = testing::execTrue();
  options.command = Command::Instance;
  options.instance = "slurm.7.0.n1";
  options.stayAsKeeper = true;
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  // An instance has its own PID namespace by default: its init, not the caller's ctr, keeps it.
  try {
    (void)planLaunch(options, config::Policy{}, testing::sifImage(), host);
    ADD_FAILURE() << "--stay without --no-pid was planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("give --no-pid too"), std::string::npos) << e.what();
    EXPECT_EQ(e.status(), 1);
  }
  options.noPid = true;
  auto plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  ASSERT_TRUE(plan.instance);
  EXPECT_TRUE(plan.instance->stay);
  EXPECT_FALSE(plan.namespaces.pid);
  EXPECT_EQ(toJson(plan)["instance"]["stay"], true);
  EXPECT_NE(toText(plan).find("this ctr process itself"), std::string::npos) << toText(plan);
  options.stayAsKeeper = false;
  plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  EXPECT_FALSE(plan.instance->stay);
  EXPECT_NE(toText(plan).find("ctr's keeper (no PID namespace: --no-pid)"), std::string::npos);
}

TEST(InstanceRecord, RefusesWhatAJoinMustNotTrust) {
  auto withNamespaces = [](std::vector<JoinNamespace> ns) {
    auto r = web1();
    r.namespaces = std::move(ns);
    return instanceRecordToJson(r);
  };
  // Out of the join order (the PID namespace before the mount namespace), an unknown type,
  // a type twice, no user namespace first.
  for (const auto& text : {withNamespaces({{"user", 1}, {"pid", 2}, {"mnt", 3}}),
                           withNamespaces({{"user", 1}, {"mnt", 2}, {"time", 3}}),
                           withNamespaces({{"user", 1}, {"mnt", 2}, {"mnt", 3}}),
                           withNamespaces({{"mnt", 2}, {"pid", 3}})})
    EXPECT_THROW((void)instanceRecordFromJson(text, "x.json"), Error) << text;
  auto pid1 = web1();
  pid1.keeper = 1;
  EXPECT_THROW((void)instanceRecordFromJson(instanceRecordToJson(pid1), "x.json"), Error);
  try {
    (void)instanceRecordFromJson("{\"name\": 3}", "/state/instances/x.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/state/instances/x.json: not an instance record"), std::string::npos);
  }
}

TEST(InstanceNames, ReferencesAndFiles) {
  EXPECT_EQ(instanceReference("instance://web1"), "web1");
  EXPECT_EQ(instanceReference("/images/app.sif"), std::nullopt);
  EXPECT_THROW((void)instanceReference("instance://../x"), Error);
  EXPECT_THROW((void)instanceReference("instance://"), Error);
  EXPECT_FALSE(isValidInstanceName(".hidden"));
  EXPECT_FALSE(isValidInstanceName(std::string(65, 'a')));
  EXPECT_TRUE(isValidInstanceName("job-42.step_0"));
  const auto files = planInstanceFiles("web1", "/run/user/1000/ctr");
  EXPECT_EQ(files.record, "/run/user/1000/ctr/instances/web1.json");
  EXPECT_EQ(files.lock, "/run/user/1000/ctr/instances/web1.lock");
  EXPECT_THROW((void)planInstanceFiles("web1", ""), Error);  // no shared state directory
}

TEST(PlanInstance, StartHasItsOwnPidNamespaceAndTheStartscript) {
  auto options = testing::execTrue();
  options.command = Command::Instance;
  options.instance = "web1";
  options.args = {"a"};
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  const auto plan = planLaunch(options, config::Policy{}, testing::sifImage(), host);
  ASSERT_TRUE(plan.instance);
  EXPECT_EQ(plan.instance->record, "/run/user/1000/ctr/instances/web1.json");
  EXPECT_TRUE(plan.namespaces.pid);
  ASSERT_EQ(plan.commandChoices.size(), 1u);
  EXPECT_EQ(plan.commandChoices[0].argv[0], "/.singularity.d/startscript");
  EXPECT_EQ(plan.noCommand.status, 0);  // no startscript: the instance still runs
  EXPECT_NE(toText(plan).find("instance:   web1"), std::string::npos);
}

TEST(PlanJoin, EntersTheRecordedNamespacesWithTheCallersCommandAndEnvironment) {
  auto options = testing::execTrue();
  options.image = "instance://web1";
  options.envs = {"JOINED=yes"};
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  const auto plan = planJoin(options, config::Policy{}, web1(), testing::sifImage(), host);
  EXPECT_EQ(plan.rootMode, RootMode::Join);
  ASSERT_TRUE(plan.join);
  EXPECT_EQ(plan.join->keeper, 4242);
  EXPECT_EQ(plan.join->keeperStart, 123456u);
  EXPECT_EQ(plan.join->record, "/run/user/1000/ctr/instances/web1.json");
  EXPECT_TRUE(plan.namespaces.pid);
  EXPECT_TRUE(plan.namespaces.uts);
  EXPECT_FALSE(plan.namespaces.net);
  EXPECT_TRUE(plan.mounts.empty());  // the instance's root, as it is
  EXPECT_EQ(plan.argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(plan.workdir, "/scratch/alice/run1");
  EXPECT_EQ(plan.user.home, "/home/alice");
  bool joinedVar = false;
  for (const auto& [name, value] : plan.envProgram.user.vars) joinedVar = joinedVar || (name == "JOINED" && value == "yes");
  EXPECT_TRUE(joinedVar);
  EXPECT_TRUE(plan.handover.noNewPrivs);
  EXPECT_FALSE(plan.handover.keepCapabilities);
  EXPECT_NE(toText(plan).find("join:       instance web1: keeper pid 4242"), std::string::npos);
}

TEST(PlanJoin, RefusesWhatTheInstanceAlreadySet) {
  auto host = testing::alice();
  host.stateDir = "/run/user/1000/ctr";
  auto options = testing::execTrue();
  options.binds = {"/data"};
  options.nv = true;
  options.overlays = {parseOverlaySpec("/data/tools:ro", "/")};
  options.fakeroot = true;
  try {
    (void)planJoin(options, config::Policy{}, web1(), testing::sifImage(), host);
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--bind/--mount/--scratch, --fakeroot, --writable/--writable-tmpfs/--overlay, the device and MPI options "
                        "cannot be used with instance://web1"),
              std::string::npos)
        << what;
    EXPECT_EQ(e.status(), 1);
  }
}

}  // namespace
}  // namespace ctr::launch

namespace ctr::launch {
namespace {

TEST(InstanceJoinInfo, TheNamespacesAndWhatTheContainerChangesInTheCallersEnvironment) {
  auto r = web1();
  r.namespaces = {{"user", 11}, {"mnt", 12}};
  r.seccomp = "/state/instances/web1.bpf";
  r.environment = {"PATH=/usr/bin:/bin", "KEPT=1", "NEW=a%b\nc", "PWD=/somewhere"};
  const std::string info = instanceJoinInfo(r, {"PATH=/opt/bin:/usr/bin", "KEPT=1", "DROPPED=x", "PWD=/home/alice"});
  EXPECT_EQ(info,
            "name=web1\nimage=" +
                r.image +
                "\nkeeper=4242\nkeeper_start=123456\nns=user:11\nns=mnt:12\n"
                "seccomp=/state/instances/web1.bpf\nno_new_privs=1\n"
            "set=PATH=/usr/bin:/bin\nset=NEW=a%25b%0Ac\nunset=DROPPED\n");
}

TEST(InstanceJoinInfo, ALaterJoinKeepsItsOwnValuesOfWhatTheContainerDidNotChange) {
  // Started by step 0 of a job; joined by step 1, whose Slurm variables differ.
  auto r = web1();
  r.namespaces = {{"user", 11}, {"mnt", 12}};
  r.startEnvironment = {"PATH=/opt/bin:/usr/bin", "SLURM_STEP_ID=0", "DROPPED=x", "PWD=/home/alice"};
  r.environment = {"PATH=/usr/bin:/bin", "SLURM_STEP_ID=0", "NEW=1", "PWD=/somewhere"};
  const std::string info =
      instanceJoinInfo(r, {"PATH=/opt/bin:/usr/bin", "SLURM_STEP_ID=1", "DROPPED=y", "STEP_ONLY=1", "PWD=/home/alice"});
  EXPECT_EQ(info,
            "name=web1\nimage=" +
                r.image + "\nkeeper=4242\nkeeper_start=123456\nns=user:11\nns=mnt:12\nno_new_privs=1\n" +
                "set=PATH=/usr/bin:/bin\nset=NEW=1\nunset=DROPPED\n");
}

TEST(InstanceJoinInfo, AgainstTheStartEnvironmentItListsEveryChangeForAnyJoiner) {
  // The join file: a later step reads it instead of running ctr, whatever its environment.
  auto r = web1();
  r.namespaces = {{"user", 11}, {"mnt", 12}};
  r.startEnvironment = {"PATH=/opt/bin:/usr/bin", "SLURM_STEP_ID=0", "DROPPED=x", "PWD=/home/alice"};
  r.environment = {"PATH=/usr/bin:/bin", "SLURM_STEP_ID=0", "NEW=1", "PWD=/somewhere"};
  const std::string info = instanceJoinInfo(r, r.startEnvironment);
  EXPECT_NE(info.find("\nset=PATH=/usr/bin:/bin\nset=NEW=1\nunset=DROPPED\n"), std::string::npos) << info;
  EXPECT_EQ(info.find("SLURM_STEP_ID"), std::string::npos) << info;  // left as the joiner has it
  EXPECT_EQ(info.find("PWD"), std::string::npos) << info;            // each joiner's own
}

}  // namespace
}  // namespace ctr::launch
