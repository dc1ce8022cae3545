// ctr::host's node-support probes (src/host/node_support.cpp): the setuid helper's state as
// `ctr exec` and `ctr check` both read it, on real files with real owners and modes.
#include <sys/stat.h>
#include <unistd.h>

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

TEST(NodeSupport, UserNamespaceProbeGivesZeroOrAnErrno) {
  const int err = ctr::host::probeUserNamespace();
  EXPECT_GE(err, 0);
  EXPECT_LT(err, 128);
}

}  // namespace
