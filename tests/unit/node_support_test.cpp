// ctr::host's node-support probes (src/host/node_support.cpp): the setuid helper's state as
// `ctr exec` and `ctr check` both read it, on real files with real owners and modes.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "ctr/host_facts.hpp"
#include "platform_probes.hpp"

namespace {

using ctr::host::HelperState;
using ctr::host::inspectSetuidHelper;

class HelperFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ctr-helper-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/ctr-mount-helper";
    std::ofstream(path_) << "#!/bin/sh\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void mode(mode_t m) { ASSERT_EQ(::chmod(path_.c_str(), m), 0); }

  std::string dir_, path_;
};

TEST_F(HelperFile, OnlyARootOwnedSetuidHelperNobodyElseMayWriteIsUsable) {
  if (::geteuid() != 0) CTR_SKIP_BECAUSE("needs root to own a setuid file (CI runs the unit tests as root)");
  ASSERT_EQ(::chown(path_.c_str(), 0, 0), 0);
  mode(04755);
  EXPECT_EQ(inspectSetuidHelper(path_), HelperState::Usable);
  mode(04775);
  EXPECT_EQ(inspectSetuidHelper(path_), HelperState::Writable) << "group-writable: anyone in the group could replace it";
  mode(04757);
  EXPECT_EQ(inspectSetuidHelper(path_), HelperState::Writable) << "world-writable";
  mode(0755);
  EXPECT_EQ(inspectSetuidHelper(path_), HelperState::NotSetuidRoot);
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
  mode(04755);
  EXPECT_EQ(inspectSetuidHelper(path_), HelperState::NotSetuidRoot) << "setuid, but to another user";
}

TEST_F(HelperFile, AMissingHelperIsMissing) {
  EXPECT_EQ(inspectSetuidHelper(dir_ + "/absent"), HelperState::Missing);
}

// Real mountinfo lines (a systemd host, a VM whose init leaves / private, a Slurm job's own
// namespace): the root mount on top decides, shared before master.
TEST(NodeSupport, RootPropagationIsTheTopRootMountsOptionalFields) {
  using ctr::host::RootPropagation;
  using ctr::host::rootPropagationOf;
  const std::string systemd =
      "23 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
      "24 23 0:22 / /proc rw,nosuid shared:12 - proc proc rw\n";
  EXPECT_EQ(rootPropagationOf(systemd), RootPropagation::Shared);
  const std::string vm =
      "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
      "203 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw\n";
  EXPECT_EQ(rootPropagationOf(vm), RootPropagation::Private) << "a shared mount elsewhere does not count";
  const std::string job =
      "512 400 259:2 / / rw,relatime master:1 - ext4 /dev/nvme0n1p2 rw\n";
  EXPECT_EQ(rootPropagationOf(job), RootPropagation::Slave);
  EXPECT_EQ(rootPropagationOf("512 400 259:2 / / rw shared:7 master:1 - ext4 /dev/x rw\n"), RootPropagation::Shared);
  // A root mounted over the first: the last line is the one on top.
  EXPECT_EQ(rootPropagationOf(systemd + "90 23 0:50 / / rw - tmpfs tmpfs rw\n"), RootPropagation::Private);
  EXPECT_EQ(rootPropagationOf("24 23 0:22 / /proc rw - proc proc rw\nnot a line\n"), RootPropagation::Unknown);
}

TEST(NodeSupport, UserNamespaceProbeGivesZeroOrAnErrno) {
  const int err = ctr::host::probeUserNamespace();
  EXPECT_GE(err, 0);
  EXPECT_LT(err, 128);
}

// The helper's check user: any process that runs as it could trace the check. The test's own
// process runs as its user; a user that does not exist has no answer.
TEST(NodeSupport, ProcessesRunningAsAUserIncludeThisOneAndNoneForNoUser) {
  const passwd* me = ::getpwuid(::getuid());
  ASSERT_NE(me, nullptr);
  const auto mine = ctr::host::processesRunningAs(me->pw_name);
  ASSERT_TRUE(mine.has_value());
  const std::string self = std::to_string(::getpid()) + " (";
  EXPECT_TRUE(std::any_of(mine->begin(), mine->end(), [&](const std::string& p) { return p.starts_with(self); }))
      << "pid " << ::getpid() << " not among " << mine->size() << " processes of " << me->pw_name;
  EXPECT_FALSE(ctr::host::processesRunningAs("ctr-no-such-user-x9").has_value());
}

}  // namespace
