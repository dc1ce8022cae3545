// The Slurm plugin's C twins of ctr's C++ (src/slurm/spank_join_info.c, spank_state_dir.c,
// spank_process.c): the same input through both sides, equal answers required, so that a
// change to one side alone fails here. The plugin reads what ctr writes (the join
// information, the state directory's layout) and reads the kernel as ctr does (a process's
// start time, the cgroup hierarchies), and drops capabilities as a launch does.
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../../src/runtime/instance_state.hpp"
#include "child_helper.hpp"
#include "ctr/handover.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/instance.hpp"
#include "ctr/limits.hpp"
#include "ctr/oci.hpp"
#include "spank_image_name.h"
#include "ctr/binds.hpp"
#include "spank_join_info.h"
#include "spank_mounts.h"
#include "spank_process.h"
#include "spank_state_dir.h"

// The plugin's log (slurm_error there): the lines the twins wrote, for the tests to see.
static std::vector<std::string> spankErrors;

extern "C" void spank_error(const char* format, ...) {
  char line[8192];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  spankErrors.emplace_back(line);
}

namespace {

using ctr::launch::InstanceRecord;

// The join information as the plugin has it after reading it.
struct PluginJoin {
  bool parsed = false;
  bool keepCapabilities = false;
  std::string name, image, seccomp;
  pid_t keeper = 0;
  unsigned long long keeperStart = 0;
  std::vector<std::pair<std::string, unsigned long long>> namespaces;
  std::vector<std::string> set, unset;
};

PluginJoin pluginReads(std::string text) {
  join_info info{};
  PluginJoin out;
  out.parsed = parse_join_info(text.data(), &info) == 0;
  out.name = info.name;
  out.image = info.image;
  out.seccomp = info.seccomp ? info.seccomp : "";
  out.keepCapabilities = info.keep_capabilities != 0;
  out.keeper = info.keeper;
  out.keeperStart = info.keeper_start;
  for (int i = 0; i < info.nns; ++i) out.namespaces.emplace_back(info.ns_type[i], info.ns_inode[i]);
  for (int i = 0; i < info.nset; ++i) out.set.emplace_back(info.set[i]);
  for (int i = 0; i < info.nunset; ++i) out.unset.emplace_back(info.unset[i]);
  reset_join_info(&info);
  return out;
}

// A record whose environment changes are `set` (new variables) and `unset` (names the start
// had and the keeper dropped), against a caller that has every start variable.
InstanceRecord recordWith(const std::string& image, const std::string& seccomp, const std::vector<std::string>& set,
                          const std::vector<std::string>& unset) {
  InstanceRecord r;
  r.name = "slurm.7.n-train.node1";
  r.image = image;
  r.keeper = 4194303;
  r.keeperStart = 18446744073709551615ULL;
  r.namespaces = {{"user", 4026531837ULL}, {"mnt", 4026531840ULL}, {"ipc", 1}, {"uts", 2}, {"net", 3}, {"pid", 4}};
  r.seccomp = seccomp;
  r.startEnvironment = {"HOME=/home/u", "KEEP=1"};
  r.environment = {"HOME=/home/u", "KEEP=1"};
  for (const auto& kv : set) r.environment.push_back(kv);
  for (const auto& name : unset) r.startEnvironment.push_back(name + "=gone");
  return r;
}

void expectPluginReadsWhatCtrWrote(const InstanceRecord& r, const std::vector<std::string>& set,
                                   const std::vector<std::string>& unset) {
  const auto text = ctr::launch::instanceJoinInfo(r, r.startEnvironment);
  const auto got = pluginReads(text);
  SCOPED_TRACE(text.substr(0, 2000));
  EXPECT_TRUE(got.parsed);
  EXPECT_EQ(got.name, r.name);
  EXPECT_EQ(got.image, r.image);
  EXPECT_EQ(got.keeper, r.keeper);
  EXPECT_EQ(got.keeperStart, r.keeperStart);
  ASSERT_EQ(got.namespaces.size(), r.namespaces.size());
  for (std::size_t i = 0; i < r.namespaces.size(); ++i) {
    EXPECT_EQ(got.namespaces[i].first, r.namespaces[i].type);
    EXPECT_EQ(got.namespaces[i].second, r.namespaces[i].inode);
  }
  EXPECT_EQ(got.seccomp, r.seccomp);
  EXPECT_EQ(got.keepCapabilities, r.fakeroot) << "a --fakeroot container's joiner keeps its capabilities, no other";
  EXPECT_EQ(got.set, set);
  EXPECT_EQ(got.unset, unset);
}

TEST(SpankTwins, PluginReadsTheJoinInformationCtrWrites) {
  expectPluginReadsWhatCtrWrote(recordWith("/images/a.sif", "", {}, {}), {}, {});
  const std::vector<std::string> odd = {
      "PERCENT=100%",       "ESCAPED=%41%zz%",    "NEWLINE=a\nb=c\n",     "CONTROL=\x01\x1f\x7f\t",
      "EQUALS==a=b=",       "EMPTY=",             "UTF8=\xc3\xa9\xe2\x82\xac", "SPACES=  a b  ",
      "LONG=" + std::string(100000, 'x'),          "LONG_PERCENT=" + std::string(20000, '%')};
  const std::vector<std::string> gone = {"GONE", "ALSO_GONE"};
  expectPluginReadsWhatCtrWrote(recordWith("/images/odd %41 name\nwith\x01 bytes.sif",
                                           "/run/ctr/1000/ctr/instances/slurm.7.n-train.node1.bpf", odd, gone),
                                odd, gone);
  expectPluginReadsWhatCtrWrote(recordWith("/" + std::string(PATH_MAX - 2, 'i'), "/s%\n/f.bpf", {"A=1"}, {}), {"A=1"},
                                {});
  expectPluginReadsWhatCtrWrote(recordWith("/" + std::string(PATH_MAX - 2, '%'), "", {}, {"X"}), {}, {"X"});
  auto fakeroot = recordWith("/images/a.sif", "/s.bpf", {"A=1"}, {});
  fakeroot.fakeroot = true;
  expectPluginReadsWhatCtrWrote(fakeroot, {"A=1"}, {});
}

// A directory that goes with the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/ctr-spank-twins-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// The plugin gives ctr XDG_RUNTIME_DIR=/run/ctr/UID and reads the join file from there; ctr
// keeps its state in the state directory it chooses for that runtime directory.
TEST(SpankTwins, PluginFindsTheJoinFileWhereCtrKeepsIt) {
  TempDir runtime;
  const uid_t uid = ::getuid();
  const std::string stateDir = ctr::host::chooseStateDir(uid, runtime.path.string());
  ASSERT_FALSE(stateDir.empty());
  const auto plan = ctr::launch::planInstanceFiles("slurm.7.n-train.node1", stateDir);
  std::filesystem::create_directories(plan.dir);
  const auto r = recordWith("/images/a.sif", plan.seccomp, {"A=1"}, {});
  const std::string text = ctr::launch::instanceJoinInfo(r, r.startEnvironment);
  std::ofstream(plan.join) << text;

  const int runtimeFd = ::open(runtime.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(runtimeFd, 0);
  const int state = open_state_dir_in(runtimeFd, uid);
  ::close(runtimeFd);
  ASSERT_GE(state, 0) << "the plugin does not find ctr's state directory " << stateDir;
  char* read = read_join_file_in(state, r.name.c_str(), uid);
  ::close(state);
  ASSERT_NE(read, nullptr) << "the plugin does not find ctr's join file " << plan.join;
  EXPECT_EQ(std::string(read), text);
  std::free(read);
}

// The plugin removes a killed keeper's files itself (a step's --stay instance): every file
// ctr keeps for an instance, and nothing else.
TEST(SpankTwins, PluginRemovesTheFilesCtrKeepsForAnInstance) {
  const auto plan = ctr::launch::planInstanceFiles("slurm.7.0.node1", "/state");
  std::set<std::string> ctrs;
  for (const auto* path : {&plan.record, &plan.join, &plan.seccomp, &plan.logOut, &plan.logErr, &plan.lock}) {
    EXPECT_EQ(std::filesystem::path(*path).parent_path(), std::filesystem::path(plan.dir));
    ctrs.insert(std::filesystem::path(*path).filename().string());
  }
  std::set<std::string> plugins;
  for (const char* suffix : instance_file_suffixes) plugins.insert(std::string("slurm.7.0.node1.") + suffix);
  EXPECT_EQ(plugins, ctrs);
  EXPECT_EQ(std::filesystem::path(plan.dir).filename(), "instances");
}

// The plugin names each step's instance for ctr (`ctr instance start ... NAME`) and finds its
// files by that name: whatever the node's name, the job's container names and the step, the
// name is one ctr takes, or the plugin has none.
TEST(SpankTwins, PluginNamesInstancesAsCtrTakesThem) {
  const std::vector<std::string> hosts = {"node1", "n1.cluster.example.org", "a b\tc", "", "n\xc3\xa9",
                                          std::string(255, 'h'), "-", "."};
  const std::vector<std::string> containers = {"", "train", "a:b/c d", std::string(100, 'x'), "../..", ".hidden",
                                               "\xc3\xa9", "-"};
  int named = 0;
  for (std::string host : hosts) {
    name_characters(host.data());
    for (const auto& container : containers) {
      for (const unsigned job : {0U, 7U, 4294967295U}) {
        for (const unsigned step : {0U, 12U, 4294967294U, 4294967295U}) {
          for (const unsigned* stepp : {&step, static_cast<const unsigned*>(nullptr)}) {
            char name[96];
            if (step_instance_name(name, sizeof name, job, stepp, container.c_str(), host.c_str()) != 0) continue;
            ++named;
            EXPECT_TRUE(ctr::launch::isValidInstanceName(name)) << name;
            EXPECT_NO_THROW((void)ctr::launch::planInstanceFiles(name, "/state")) << name;
          }
        }
      }
    }
  }
  EXPECT_GT(named, 0);
}

// The plugin's mount points of `controller` (NULL: every v1 hierarchy) in `mountinfo`.
std::vector<std::string> pluginMounts(const std::string& mountinfo, const char* controller) {
  FILE* f = ::fmemopen(const_cast<char*>(mountinfo.data()), mountinfo.size(), "r");
  static char mounts[16][PATH_MAX];
  const int n = cgroup_v1_mounts_in(f, mounts, 16, controller);
  std::fclose(f);
  return {mounts, mounts + n};
}

const std::vector<std::string> kMountinfos = {
    // Debian 12, cgroup v1 (Slurm's proctrack/cgroup), with a co-mounted cpu,cpuacct.
    "24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "28 24 0:25 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "29 28 0:26 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw\n"
    "30 28 0:27 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd\n"
    "33 28 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:14 - cgroup cgroup rw,cpu,cpuacct\n"
    "34 28 0:31 / /sys/fs/cgroup/cpuset rw,nosuid shared:15 - cgroup cgroup rw,cpuset\n"
    "35 28 0:32 / /sys/fs/cgroup/freezer rw,nosuid shared:16 - cgroup cgroup rw,freezer\n"
    "36 28 0:33 / /sys/fs/cgroup/memory rw,nosuid shared:17 - cgroup cgroup rw,memory\n"
    "37 28 0:34 / /sys/fs/cgroup/devices rw,nosuid shared:18 - cgroup cgroup rw,devices\n"
    "38 28 0:35 / /sys/fs/cgroup/pids rw,nosuid shared:19 - cgroup cgroup rw,pids\n"
    "39 28 0:36 / /sys/fs/cgroup/blkio rw,nosuid shared:20 - cgroup cgroup rw,blkio\n",
    // cgroup v2 only.
    "25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
    // Odd ones: no optional fields, several optional fields, an escaped space and odd
    // characters in the mount point, a hierarchy mounted twice (the first counts), options
    // that hold a controller's name in a longer word, a long mount point.
    "40 28 0:40 / /cg/free\\040zer rw - cgroup cgroup rw,freezer\n"
    "41 28 0:41 / /cg/second rw shared:1 master:2 propagate_from:3 - cgroup cgroup rw,freezer\n"
    "42 28 0:42 / /cg/a,b:c rw shared:5 - cgroup none rw,cpuset,cpuacct,noprefix,release_agent=/x\n"
    "43 28 0:43 / /cg/notcpu rw - cgroup cgroup rw,cpuacct2,xcpu,cpu_x,name=cpu\n"
    "44 28 0:44 /sub /cg/bind\\011tab rw - cgroup cgroup ro,memory,clone_children\n"
    "45 28 0:45 / /" + std::string(3000, 'm') + " rw - cgroup cgroup rw,pids\n"
    "46 28 0:46 / /cg/cpu rw - cgroup cgroup rw,cpu\n"
    "47 28 0:47 / /cg/blk rw - cgroup cgroup blkio\n"
    "48 28 0:48 / /cg/dev rw - cgroup2 cgroup rw,devices\n"
    "49 28 0:49 / /cg/tmp rw - tmpfs cgroup rw,devices\n",
    // Nothing, and lines that are not mountinfo's.
    "",
    "garbage\n - cgroup \n1 2 3\n"};

TEST(SpankTwins, PluginFindsTheCgroupHierarchiesCtrFinds) {
  for (const auto& mountinfo : kMountinfos) {
    SCOPED_TRACE(mountinfo.substr(0, 600));
    const auto ctrs = ctr::limits::parseCgroupMounts(mountinfo);
    for (const char* controller : {"cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer"}) {
      const auto plugins = pluginMounts(mountinfo, controller);
      const auto ctrs_ = ctrs.v1.find(controller);
      SCOPED_TRACE(controller);
      if (ctrs_ == ctrs.v1.end()) {
        EXPECT_TRUE(plugins.empty()) << plugins.front();
      } else {
        ASSERT_FALSE(plugins.empty()) << "ctr: " << ctrs_->second;
        EXPECT_EQ(plugins.front(), ctrs_->second);
      }
    }
    // The epilog sweeps every v1 hierarchy: those ctr knows among them.
    const auto all = pluginMounts(mountinfo, nullptr);
    for (const auto& [controller, mount] : ctrs.v1) EXPECT_NE(std::find(all.begin(), all.end(), mount), all.end());
  }
}

// The plugin's and ctr's reading of a /proc/PID/cgroup: the freezer hierarchy's cgroup, and
// whether any of them is JOB or below it.
TEST(SpankTwins, PluginReadsAProcessCgroupsAsCtrDoes) {
  const std::vector<std::string> files = {
      "12:freezer:/slurm_n1/uid_1001/job_7/step_0\n11:memory:/slurm_n1/uid_1001/job_7/step_0/task_1\n"
      "1:name=systemd:/system.slice/slurmd.service\n0::/system.slice/slurmd.service\n",
      "4:cpu,freezer:/slurm/uid_1001/job_7/step_batch\n3:cpuset:/slurm/uid_1001/job_70\n",
      "5:freezer,devices:/slurm/uid_1001/job_7\n",
      "7:freezer:/a:b/c d\n",
      "2:net_cls,net_prio:/slurm/uid_1001/job_7x\n0::/slurm/uid_1001/job_7/step_0\n",
      "0::/\n",
      "9:freezer:/" + std::string(3000, 'f') + "\n",
      ""};
  for (const auto& text : files) {
    SCOPED_TRACE(text.substr(0, 300));
    const auto ctrs = ctr::limits::parseProcCgroup(text);
    FILE* f = ::fmemopen(const_cast<char*>(text.data()), text.size(), "r");
    char path[PATH_MAX] = "";
    const bool found = f && freezer_cgroup_in(f, path, sizeof path);
    if (f) std::fclose(f);
    const auto freezer = ctrs.find("freezer");
    EXPECT_EQ(found, freezer != ctrs.end());
    if (found && freezer != ctrs.end()) {
      EXPECT_EQ(std::string(path), freezer->second);
    }
    for (const std::string job : {"/slurm_n1/uid_1001/job_7", "/slurm/uid_1001/job_7", "/system.slice", "/"}) {
      bool ctrSays = false;
      for (const auto& [controller, cgroup] : ctrs)
        ctrSays = ctrSays || cgroup == job || cgroup.starts_with(job + "/");
      f = ::fmemopen(const_cast<char*>(text.data()), text.size(), "r");
      const bool pluginSays = f && in_cgroup_in(f, job.c_str());
      if (f) std::fclose(f);
      EXPECT_EQ(pluginSays, ctrSays) << job;
    }
  }
}

// Processes whose names (comm) make /proc/PID/stat hard to read: spaces, parentheses, what
// looks like the fields that follow, a newline.
TEST(SpankTwins, PluginReadsAProcessStartTimeAsCtrDoes) {
  for (const std::string comm : {"plain", "with space", "a) b", ")", "((", ") S 1 2 3 4 5 6 7", "fifteen-chars-x",
                                 "tab\there", "new\nline", ") ) )", " "}) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
      (void)!::write(ready[1], "x", 1);
      ::pause();
      ::_exit(0);
    }
    char byte;
    ::close(ready[1]);
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    ::close(ready[0]);
    const auto ctrs = ctr::runtime::processStartTime(child);
    EXPECT_NE(ctrs, 0U) << comm;
    EXPECT_EQ(start_time(child), ctrs) << comm;
    ::kill(child, SIGKILL);
    int status;
    ::waitpid(child, &status, 0);
  }
  EXPECT_EQ(start_time(::getpid()), ctr::runtime::processStartTime(::getpid()));
  EXPECT_EQ(start_time(0), ctr::runtime::processStartTime(0));
  EXPECT_EQ(start_time(INT_MAX), 0U);
  EXPECT_EQ(ctr::runtime::processStartTime(INT_MAX), 0U);
}

// Capabilities as the kernel shows them (/proc/self/status), after `drop` in a child.
std::string capabilitiesAfter(bool (*drop)()) {
  return ctr::test::inChild([drop] {
    if (::geteuid() != 0 && ::unshare(CLONE_NEWUSER) != 0) return std::string("unshare(CLONE_NEWUSER) failed");
    std::string out = drop() ? "dropped\n" : "failed\n";
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("Cap")) out += line + "\n";
    return out;
  });
}

TEST(SpankTwins, PluginDropsTheCapabilitiesCtrDrops) {
  const std::string plugins = capabilitiesAfter([] { return drop_capabilities() == 0; });
  const std::string ctrs = capabilitiesAfter([] {
    try {
      ctr::runtime::dropAllCapabilities();
      return true;
    } catch (const std::exception&) {
      return false;
    }
  });
  EXPECT_EQ(plugins, ctrs);
  EXPECT_NE(plugins.find("dropped\n"), std::string::npos) << plugins;
}

}  // namespace

// --container-image as pyxis and enroot read it (spank_image_name.c), checked through ctr's
// own reference parser: what the plugin hands ctr names the registry, repository and tag a
// pyxis user means.
namespace {
std::string imageArgument(const char* image, const char* imageDir = "") {
  char buffer[4096];
  return container_image_argument(image, imageDir, buffer, sizeof buffer);
}
}  // namespace

TEST(SpankTwins, PyxisImageNamesReachTheRegistryAndRepositoryTheyMean) {
  struct Case {
    const char* image;
    const char* registry;
    const char* repository;
    const char* tag;
  };
  const Case cases[] = {
      {"ubuntu", "registry-1.docker.io", "library/ubuntu", "latest"},
      {"ubuntu:24.04", "registry-1.docker.io", "library/ubuntu", "24.04"},
      {"nvidia/cuda:12.4.0-base", "registry-1.docker.io", "nvidia/cuda", "12.4.0-base"},
      {"pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "registry-1.docker.io", "pytorch/pytorch",
       "2.3.0-cuda12.1-cudnn8-runtime"},
      {"docker.io/ubuntu:24.04", "registry-1.docker.io", "library/ubuntu", "24.04"},
      {"docker:26.1.0", "registry-1.docker.io", "library/docker", "26.1.0"},
      {"nvcr.io#nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch", "24.01-py3"},
      {"alice@nvcr.io#nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch", "24.01-py3"},
      {"alice@ubuntu:24.04", "registry-1.docker.io", "library/ubuntu", "24.04"},  // enroot's USER@ without REGISTRY#
      {"registry.site:5000#group/app", "registry.site:5000", "group/app", "latest"},
  };
  for (const auto& c : cases) {
    const std::string argument = imageArgument(c.image);
    ASSERT_TRUE(argument.starts_with("docker://")) << c.image << " -> " << argument;
    const auto ref = ctr::image::oci::parseReference(argument.substr(9));
    EXPECT_EQ(ref.registry, c.registry) << c.image;
    EXPECT_EQ(ref.repository, c.repository) << c.image;
    EXPECT_EQ(ref.tag, c.tag) << c.image;
  }
  const auto digest = ctr::image::oci::parseReference(
      imageArgument("ubuntu@sha256:0000000000000000000000000000000000000000000000000000000000000000").substr(9));
  EXPECT_EQ(digest.repository, "library/ubuntu");
  EXPECT_EQ(digest.digest.substr(0, 7), "sha256:");
}

TEST(SpankTwins, PyxisPathsAndTransportsPassAsTheyAre) {
  for (const char* image : {"/shared/images/app.sqsh", "./app.sqsh", "../images/app.sif", "~/app.sif", "app.sif",
                            "images/app.sqsh", "docker://ubuntu", "oras://reg.site/app:1", "docker-archive:/x.tar",
                            "oci:/layout:1", "instance://mine", "https://site/app.sif", "dockerd://ubuntu"})
    EXPECT_EQ(imageArgument(image), image) << image;
  EXPECT_EQ(imageArgument("app", "/site/images"), "/site/images/app") << "the site's image directory for a bare name";
  EXPECT_EQ(imageArgument("ubuntu:24.04", "/site/images"), "docker://ubuntu:24.04") << "a tag is a registry image";
}

namespace {

// container_mounts's answer for pyxis's --container-mounts=SPEC.
struct Mounts {
  int rc;
  std::string binds, scratch, why;
};
Mounts containerMounts(const char* spec) {
  char binds[16384], scratch[4096], why[1024];
  const int rc = container_mounts(spec, binds, sizeof binds, scratch, sizeof scratch, why, sizeof why);
  return {rc, binds, scratch, why};
}

}  // namespace

// pyxis's --container-mounts, as the plugin hands it to ctr: every bind it writes is one
// ctr's own parser reads as the source, destination and mode pyxis meant (a relative source
// is the job's directory's, where the plugin runs ctr; a relative target the root's).
TEST(SpankTwins, PyxisMountsAreTheBindsCtrReads) {
  using ctr::launch::BindSpec;
  const auto m = containerMounts("./data:/data:ro+rbind,/scratch,/opt/x:./opt/y:rw+rprivate+x-create=dir,"
                                 "tmpfs:/tmp/work,.:/job,/etc/hosts:/h:nosuid+nodev+ro");
  ASSERT_EQ(m.rc, 0) << m.why;
  const auto binds = ctr::launch::parseBindSpecs(m.binds, "/home/u/job");
  ASSERT_EQ(binds.size(), 5u) << m.binds;
  EXPECT_EQ(binds[0], (BindSpec{"/home/u/job/data", "/data", true, ""}));
  EXPECT_EQ(binds[1], (BindSpec{"/scratch", "/scratch", false, ""}));
  EXPECT_EQ(binds[2], (BindSpec{"/opt/x", "/opt/y", false, ""}));
  EXPECT_EQ(binds[3], (BindSpec{"/home/u/job", "/job", false, ""}));
  EXPECT_EQ(binds[4], (BindSpec{"/etc/hosts", "/h", true, ""}));
  EXPECT_EQ(m.scratch, "/tmp/work") << "a tmpfs source is ctr's --scratch";
}

TEST(SpankTwins, PyxisMountsCtrCannotGiveAreRefusedInOneLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"umount:/dev/shm", "umount: is enroot's"},  {"data:/d", "the source must be a relative path"},
      {"/a:b", "the target must be a relative path or an absolute path"},
      {"/a:/b:noexec", "--container-mounts=/a:/b:noexec: flag 'noexec' is not supported"}, {"/a,,/b", "invalid format"}, {"", "invalid format"},
      {"/a::ro", "invalid format"}, {"/tmp:../../x", "the target ../../x has a '..'"},
      {"/tmp:/x/../..", "the target /x/../.. has a '..'"}};
  for (const auto& [spec, why] : cases) {
    const auto m = containerMounts(spec);
    EXPECT_EQ(m.rc, -1) << spec;
    EXPECT_NE(m.why.find(why), std::string::npos) << spec << ": " << m.why;
    EXPECT_EQ(m.why.find('\n'), std::string::npos) << "one line: " << m.why;
  }
}

// pyxis's task changes to --container-workdir once in the container, where it stands at the
// root: a relative path is the root's, ".." at the root stays there.
TEST(SpankTwins, PyxisRelativeWorkdirIsTheContainerRoots) {
  auto path = [](const char* workdir) {
    char out[PATH_MAX];
    EXPECT_EQ(container_path(workdir, out, sizeof out), 0) << workdir;
    return std::string(out);
  };
  EXPECT_EQ(path("../x"), "/x");
  EXPECT_EQ(path("x/./y/"), "/x/y");
  EXPECT_EQ(path("./data"), "/data");
  EXPECT_EQ(path("/a/b/../c"), "/a/c");
  EXPECT_EQ(path("/a//b"), "/a/b");
  EXPECT_EQ(path(".."), "/");
  EXPECT_EQ(path("/"), "/");
  EXPECT_EQ(path("a/../../b"), "/b");
  char small[4];
  EXPECT_EQ(container_path("/abcd", small, sizeof small), -1);
  EXPECT_EQ(container_path("/ab", small, sizeof small), 0);
  EXPECT_STREQ(small, "/ab");
}
