// The pure half of resource limits: units, CPU lists, the cgroup mount table, the capacity
// check and the backend decision.
#include <gtest/gtest.h>

#include <string>

#include "ctr/error.hpp"
#include "ctr/limits.hpp"

namespace {

using namespace ctr::limits;

std::string errorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
  return "";
}

TEST(Limits, ParsesSizesAsDockerAndApptainerDo) {
  EXPECT_EQ(parseSize("1048576", "--memory"), 1048576u);
  EXPECT_EQ(parseSize("512k", "--memory"), 512u * 1024);
  EXPECT_EQ(parseSize("64M", "--memory"), 64u << 20);
  EXPECT_EQ(parseSize("64MiB", "--memory"), 64u << 20);
  EXPECT_EQ(parseSize("1.5g", "--memory"), 3ull << 29);
  EXPECT_EQ(parseSize("2T", "--memory"), 2ull << 40);
  for (const char* bad : {"", "M", "12X", "-5M", "0", "1..2G", "9999999999T"})
    EXPECT_NE(errorOf([&] { (void)parseSize(bad, "--memory"); }).find("--memory '"), std::string::npos) << bad;
  EXPECT_EQ(formatSize(64u << 20), "64 MiB");
  EXPECT_EQ(formatSize(3ull << 29), "1.5 GiB");
}

TEST(Limits, ParsesAndFormatsIdLists) {
  EXPECT_EQ(parseIdList("0-3,8", "--cpuset-cpus"), (std::vector<unsigned>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parseIdList(" 8, 1 ,1", "--cpuset-cpus"), (std::vector<unsigned>{1, 8}));
  EXPECT_EQ(formatIdList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  for (const char* bad : {"", "a", "3-1", "1-", "-1", "1;2"})
    EXPECT_NE(errorOf([&] { (void)parseIdList(bad, "--cpuset-cpus"); }).find("--cpuset-cpus"), std::string::npos) << bad;
}

// The mount table of these CI machines (v1 controllers, v2 without them) and a v2-only host.
constexpr const char* kHybrid =
    "30 24 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
    "33 30 0:29 / /sys/fs/cgroup/memory rw,nosuid shared:13 - cgroup cgroup rw,memory\n"
    "34 30 0:30 / /sys/fs/cgroup/cpu rw,nosuid shared:14 - cgroup cgroup rw,cpu\n"
    "35 30 0:31 / /sys/fs/cgroup/cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpuacct\n"
    "36 30 0:32 / /sys/fs/cgroup/pids rw,nosuid shared:16 - cgroup cgroup rw,pids\n"
    "37 30 0:33 / /sys/fs/cgroup/cpuset rw,nosuid shared:17 - cgroup cgroup rw,cpuset\n";
constexpr const char* kUnified = "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(Limits, ReadsTheCgroupMountTable) {
  auto hybrid = parseCgroupMounts(kHybrid);
  EXPECT_EQ(hybrid.v2, "/sys/fs/cgroup/unified");
  EXPECT_EQ(hybrid.v1.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(hybrid.v1.at("cpu"), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(hybrid.v1.count("blkio"), 0u);
  auto unified = parseCgroupMounts(kUnified);
  EXPECT_EQ(unified.v2, "/sys/fs/cgroup");
  EXPECT_TRUE(unified.v1.empty());
  auto own = parseProcCgroup("4:memory:/process_api/abc\n2:cpu,cpuacct:/job\n0::/user.slice\n");
  EXPECT_EQ(own.at("memory"), "/process_api/abc");
  EXPECT_EQ(own.at("cpuacct"), "/job");
  EXPECT_EQ(own.at(""), "/user.slice");
}

TEST(Limits, RefusesWhatTheNodeOrTheAdminCannotGive) {
  NodeCapacity node{{0, 1}, {0}, 8ull << 30};
  Caps none;
  Request ok;
  ok.cpus = 1.5;
  ok.memory = 1ull << 30;
  EXPECT_EQ(errorOf([&] { checkCapacity(ok, node, none); }), "");
  Request cpus;
  cpus.cpus = 4;
  EXPECT_EQ(errorOf([&] { checkCapacity(cpus, node, none); }), "--cpus 4 asks for more than this node's 2 CPUs");
  Request memory;
  memory.memory = 16ull << 30;
  EXPECT_EQ(errorOf([&] { checkCapacity(memory, node, none); }),
            "--memory 16 GiB asks for more than this node's 8 GiB of memory");
  Caps caps;
  caps.memory = 2ull << 30;
  caps.cpus = 1;
  EXPECT_NE(errorOf([&] { checkCapacity(ok, node, caps); }).find("over the administrator's limit of 1 CPUs"),
            std::string::npos);
  Request cpuset;
  cpuset.cpusetCpus = "1,5";
  EXPECT_EQ(errorOf([&] { checkCapacity(cpuset, node, none); }),
            "--cpuset-cpus 1,5: CPU 5 is not online on this node (online: 0-1)");
  Request swap;
  swap.memorySwap = 1 << 30;
  EXPECT_NE(errorOf([&] { checkCapacity(swap, node, none); }).find("needs --memory"), std::string::npos);
}

TEST(Limits, PlacesTheCgroupWhereTheHostAllows) {
  Request memory;
  memory.memory = 64u << 20;
  const std::map<std::string, std::string> own = {{"memory", "/job"}, {"cpuacct", "/"}, {"", "/"}};
  // These machines: v1 as root, below the caller's own cgroups.
  auto hybrid = parseCgroupMounts(kHybrid);
  hybrid.v2Controllers = {"hugetlb"};
  auto root = decidePlacement(memory, false, hybrid, own, "", false, 0, "ctr-42");
  EXPECT_EQ(root.backend, Backend::V1);
  EXPECT_EQ(root.dirs.at("memory"), "/sys/fs/cgroup/memory/job/ctr-42");
  EXPECT_EQ(root.dirs.at("cpuacct"), "/sys/fs/cgroup/cpuacct/ctr-42");
  auto user = decidePlacement(memory, false, hybrid, own, "", false, 1000, "ctr-42");
  EXPECT_EQ(user.backend, Backend::None);
  EXPECT_NE(user.reason.find("need root"), std::string::npos) << user.reason;
  // A v2 host with a delegated directory the user may write.
  auto unified = parseCgroupMounts(kUnified);
  unified.v2Controllers = {"cpuset", "cpu", "io", "memory", "pids"};
  auto v2 = decidePlacement(memory, false, unified, own, "/sys/fs/cgroup/user.slice/u", true, 1000, "ctr-42");
  EXPECT_EQ(v2.backend, Backend::V2);
  EXPECT_EQ(v2.dirs.at(""), "/sys/fs/cgroup/user.slice/u/ctr-42");
  auto undelegated = decidePlacement(memory, false, unified, own, "/sys/fs/cgroup/x", false, 1000, "ctr-42");
  EXPECT_EQ(undelegated.backend, Backend::None);
  EXPECT_NE(undelegated.reason.find("not writable by uid 1000"), std::string::npos) << undelegated.reason;
  // Nothing asked for: no cgroup at all.
  EXPECT_EQ(decidePlacement({}, false, hybrid, own, "", false, 0, "ctr-42").backend, Backend::None);
}

TEST(Limits, SweepsDeadLaunchesInEveryHierarchyNotOnlyTheRequests) {
  // A launch with --memory alone needs memory and cpuacct, but one SIGKILLed before it with
  // --pids-limit and --cpus left ctr-<pid> in pids and cpu too (issue 24, F11).
  Request memory;
  memory.memory = 64u << 20;
  const std::map<std::string, std::string> own = {{"memory", "/job"}, {"pids", "/job"}, {"", "/"}};
  auto hybrid = parseCgroupMounts(kHybrid);
  hybrid.v2Controllers = {"hugetlb"};
  auto root = decidePlacement(memory, false, hybrid, own, "/sys/fs/cgroup/unified", true, 0, "ctr-42");
  ASSERT_EQ(root.backend, Backend::V1);
  EXPECT_EQ(root.dirs.count("pids"), 0u);
  const std::vector<std::string> expected = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory/job", "/sys/fs/cgroup/cpuacct",
                                             "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/pids/job"};
  EXPECT_EQ(root.sweepDirs, expected);
  // A user on delegated v2: the delegated directory only (v1 is root's).
  auto unified = parseCgroupMounts(kUnified);
  unified.v2Controllers = {"cpuset", "cpu", "io", "memory", "pids"};
  auto user = decidePlacement(memory, false, unified, own, "/sys/fs/cgroup/user.slice/u", true, 1000, "ctr-42");
  EXPECT_EQ(user.sweepDirs, std::vector<std::string>{"/sys/fs/cgroup/user.slice/u"});
  // No cgroup: nothing to sweep.
  EXPECT_TRUE(decidePlacement({}, false, hybrid, own, "", false, 0, "ctr-42").sweepDirs.empty());
}

TEST(Limits, DeniesLeftOutGpusWhereADeviceCgroupCanBeUsed) {
  Request gpus;  // --gpus 0 on a node with GPUs 0 and 1: only the device rule, no user limit
  gpus.denyDevices = {{'c', 195, 1, "/dev/nvidia1"}};
  ASSERT_TRUE(gpus.empty());
  const std::map<std::string, std::string> own = {{"memory", "/job"}, {"devices", "/job"}, {"", "/"}};
  auto withDevices = parseCgroupMounts(std::string(kHybrid) +
                                       "38 30 0:34 / /sys/fs/cgroup/devices rw,nosuid - cgroup cgroup rw,devices\n");
  // Root on v1: a cgroup with the devices controller, below the caller's own.
  auto root = decidePlacement(gpus, false, withDevices, own, "", false, 0, "ctr-42");
  EXPECT_EQ(root.backend, Backend::V1);
  EXPECT_EQ(root.dirs.at("devices"), "/sys/fs/cgroup/devices/job/ctr-42");
  EXPECT_TRUE(root.devicesEnforced);
  EXPECT_NE(root.devicesReason.find("devices.deny"), std::string::npos) << root.devicesReason;
  // Root where v1 has no devices controller: the other limits' cgroup, the rule only noted.
  auto noController = decidePlacement(gpus, false, parseCgroupMounts(kHybrid), own, "", false, 0, "ctr-42");
  EXPECT_EQ(noController.dirs.count("devices"), 0u);
  EXPECT_FALSE(noController.devicesEnforced);
  EXPECT_NE(noController.devicesReason.find("devices controller is not mounted"), std::string::npos);
  // A user: no cgroup for the rule alone (nothing could enforce it), and why.
  auto user = decidePlacement(gpus, false, withDevices, own, "", false, 1000, "ctr-42");
  EXPECT_EQ(user.backend, Backend::None);
  EXPECT_FALSE(user.devicesEnforced);
  EXPECT_NE(user.devicesReason.find("needs root"), std::string::npos) << user.devicesReason;
  // A user with a real limit on delegated v2: the limit applies, the rule cannot (BPF is root's).
  Request both = gpus;
  both.memory = 64u << 20;
  auto unified = parseCgroupMounts(kUnified);
  unified.v2Controllers = {"cpuset", "cpu", "io", "memory", "pids"};
  auto v2user = decidePlacement(both, false, unified, own, "/sys/fs/cgroup/user.slice/u", true, 1000, "ctr-42");
  EXPECT_EQ(v2user.backend, Backend::V2);
  EXPECT_FALSE(v2user.devicesEnforced);
  // Root on v2: the BPF device program.
  auto v2root = decidePlacement(gpus, false, unified, own, "/sys/fs/cgroup", true, 0, "ctr-42");
  EXPECT_EQ(v2root.backend, Backend::V2);
  EXPECT_TRUE(v2root.devicesEnforced);
  EXPECT_NE(v2root.devicesReason.find("BPF"), std::string::npos);
}

TEST(Limits, ReadsApptainerCgroupsToml) {
  auto r = parseCgroupsToml(R"([memory]
    limit = 67108864
    swap = 134217728
[cpu]
    quota = 50000
    period = 100000
    cpus = "0-1"
[pids]
    limit = 64
[blockIO]
    weight = 200
)", "limits.toml");
  EXPECT_EQ(r.memory, 64u << 20);
  EXPECT_EQ(r.memorySwap, 128 << 20);
  EXPECT_DOUBLE_EQ(*r.cpus, 0.5);
  EXPECT_EQ(r.cpusetCpus, "0-1");
  EXPECT_EQ(r.pids, 64);
  EXPECT_EQ(r.blkioWeight, 200u);
  // What ctr cannot apply is refused by name, with the line; so is bad syntax.
  EXPECT_NE(errorOf([] { (void)parseCgroupsToml("[memory]\nreservation = 1\n", "l.toml"); })
                .find("l.toml:2: [memory] reservation is not supported by ctr"),
            std::string::npos);
  EXPECT_NE(errorOf([] { (void)parseCgroupsToml("[network]\nclassID = 1\n", "l.toml"); })
                .find("[network] classID is not supported"),
            std::string::npos);
  EXPECT_NE(errorOf([] { (void)parseCgroupsToml("[memory]\nlimit = \"big\"\n", "l.toml"); })
                .find("[memory] limit must be an integer"),
            std::string::npos);
  EXPECT_NE(errorOf([] { (void)parseCgroupsToml("[memory\nlimit = 1\n", "l.toml"); }).find("l.toml:1: "),
            std::string::npos);
}

}  // namespace
