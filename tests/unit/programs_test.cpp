// Finding ctr's programs for a relocatable install (issue 15): $PATH as execvp searches it,
// and a missing program named in one line with where it was looked for.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ctr/error.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/install_paths.hpp"

namespace {

class Programs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ctr-programs.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const char* path = std::getenv("PATH");
    savedPath_ = path ? path : "";
  }
  void TearDown() override {
    ::setenv("PATH", savedPath_.c_str(), 1);
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string file(const std::string& rel, mode_t mode) {
    const std::string path = dir_ + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), mode);
    return path;
  }

  std::string dir_, savedPath_;
};

TEST_F(Programs, SearchPathTakesTheFirstExecutableFile) {
  file("a/tool", 0644);  // not executable: passed over
  ::mkdir((dir_ + "/b").c_str(), 0755);
  ::mkdir((dir_ + "/b/tool").c_str(), 0755);  // a directory: passed over
  const std::string wanted = file("c/tool", 0755);
  file("d/tool", 0755);
  EXPECT_EQ(ctr::findInSearchPath("tool", dir_ + "/a:" + dir_ + "/b:" + dir_ + "/c:" + dir_ + "/d"), wanted);
  EXPECT_EQ(ctr::findInSearchPath("tool", dir_ + "/a:" + dir_ + "/b"), "");
}

TEST_F(Programs, ProgramOnPathIsFound) {
  const std::string wanted = file("bin/mksquashfs", 0755);
  ::setenv("PATH", (dir_ + "/none:" + dir_ + "/bin").c_str(), 1);
  EXPECT_EQ(ctr::findProgram(ctr::Program::Mksquashfs), wanted);
}

TEST_F(Programs, SquashfuseFallsBackToTheHighLevelServer) {
  const std::string wanted = file("bin/squashfuse", 0755);
  ::setenv("PATH", (dir_ + "/bin").c_str(), 1);
  EXPECT_EQ(ctr::findProgram(ctr::Program::Squashfuse), wanted);
  const std::string preferred = file("bin2/squashfuse_ll", 0755);
  ::setenv("PATH", (dir_ + "/bin:" + dir_ + "/bin2").c_str(), 1);
  EXPECT_EQ(ctr::findProgram(ctr::Program::Squashfuse), preferred);
}

// A launch looks only for the servers its plan may choose: with 'squashfs server = auto',
// squashfuse_ll only where ctr-squashfs is missing.
TEST_F(Programs, TheFallbackSquashfsServerIsLookedForOnlyWhereTheFirstIsMissing) {
  const std::string squashfuse = file("bin/squashfuse_ll", 0755);
  ::setenv("PATH", (dir_ + "/bin").c_str(), 1);
  const auto both = ctr::host::discoverSquashfsServers({.ctrSquashfs = true, .squashfuse = true});
  EXPECT_EQ(both.squashfuse, squashfuse);
  const auto alone = ctr::host::discoverSquashfsServers({.squashfuse = true});
  EXPECT_EQ(alone.squashfuse, squashfuse);
  EXPECT_TRUE(alone.ctrSquashfs.empty() && alone.ctrSquashfsMissing.empty()) << "not looked for";
  if (both.ctrSquashfs.empty()) GTEST_SKIP() << "no ctr-squashfs beside the tests: " << both.ctrSquashfsMissing;
  const auto fallback =
      ctr::host::discoverSquashfsServers({.ctrSquashfs = true, .squashfuse = true, .squashfuseOnlyAsFallback = true});
  EXPECT_EQ(fallback.ctrSquashfs, both.ctrSquashfs);
  EXPECT_TRUE(fallback.squashfuse.empty() && fallback.squashfuseMissing.empty()) << fallback.squashfuse;
}

TEST_F(Programs, MissingProgramIsNamedWithWhereItWasLookedFor) {
  ::setenv("PATH", (dir_ + "/empty").c_str(), 1);
  try {
    (void)ctr::findProgram(ctr::Program::Squashfuse);
    FAIL() << "found a squashfuse_ll in an empty PATH";
  } catch (const ctr::Error& e) {
    const std::string line = e.oneLine();
    EXPECT_EQ(line.rfind("squashfuse_ll not found (looked in ", 0), 0u) << line;
    EXPECT_NE(line.find("libexec/ctr"), std::string::npos) << line;
    EXPECT_NE(line.find("$PATH=" + dir_ + "/empty): install squashfuse"), std::string::npos) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
}

}  // namespace
