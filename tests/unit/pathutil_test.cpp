#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"

namespace fs = std::filesystem;
using ctr::hasDotDotComponent;
using ctr::isAtOrUnder;
using ctr::joinPath;
using ctr::normalizePath;
using ctr::openInRoot;
using ctr::PathKind;
using ctr::resolveInRoot;

TEST(NormalizePath, CollapsesSlashesDotsAndTrailingSlash) {
  EXPECT_EQ(normalizePath("//usr///lib/./x86_64/"), "/usr/lib/x86_64");
  EXPECT_EQ(normalizePath("/"), "/");
  EXPECT_EQ(normalizePath("///"), "/");
  EXPECT_EQ(normalizePath(""), ".");
  EXPECT_EQ(normalizePath("./a/"), "a");
}

TEST(NormalizePath, DotDotStaysAtTheRootOfAnAbsolutePath) {
  EXPECT_EQ(normalizePath("/a/b/../c"), "/a/c");
  EXPECT_EQ(normalizePath("/../../etc"), "/etc");
}

TEST(NormalizePath, RelativePathKeepsLeadingDotDot) {
  EXPECT_EQ(normalizePath("../a/../../b"), "../../b");
  EXPECT_EQ(normalizePath("a/.."), ".");
}

TEST(JoinPath, TreatsAnAbsoluteTailAsRelativeToTheBase) {
  EXPECT_EQ(joinPath("/rootfs", "/etc/passwd"), "/rootfs/etc/passwd");
  EXPECT_EQ(joinPath("/rootfs/", "etc//hosts/"), "/rootfs/etc/hosts");
  EXPECT_EQ(joinPath("/rootfs", "/"), "/rootfs");
  EXPECT_EQ(joinPath("rel", "x"), "rel/x");
}

TEST(HasDotDotComponent, OnlyWholeComponentsCount) {
  EXPECT_TRUE(hasDotDotComponent("/a/../b"));
  EXPECT_TRUE(hasDotDotComponent(".."));
  EXPECT_FALSE(hasDotDotComponent("/a/..b/c.."));
  EXPECT_FALSE(hasDotDotComponent("/a/./b"));
}

TEST(IsAtOrUnder, WholeComponentsOnly) {
  EXPECT_TRUE(isAtOrUnder("/proc/sys", "/proc"));
  EXPECT_TRUE(isAtOrUnder("/proc", "/proc"));
  EXPECT_TRUE(isAtOrUnder("/anything", "/"));
  EXPECT_FALSE(isAtOrUnder("/procfs", "/proc"));
  EXPECT_FALSE(isAtOrUnder("/proc", "/proc/sys"));
}

class ResolveInRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ctr-pathutil-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    top_ = tmpl;
    root_ = top_ / "root";
    fs::create_directories(root_ / "usr/lib64");
    fs::create_directories(root_ / "etc");
    fs::create_directories(top_ / "outside");
    std::ofstream(root_ / "etc/passwd") << "root:x:0:0::/root:/bin/sh\n";
    std::ofstream(top_ / "outside/secret") << "s\n";
    fs::create_directory_symlink("usr/lib64", root_ / "lib64");            // relative
    fs::create_directory_symlink("/usr/lib64", root_ / "usr/abslib");      // absolute, inside
    fs::create_directory_symlink("/../../outside", root_ / "escape");      // climbs out
    fs::create_directory_symlink("../../../outside", root_ / "etc/rel-escape");
    fs::create_symlink("/nonexistent/file", root_ / "dangling");
    fs::create_symlink("loop2", root_ / "loop1");
    fs::create_symlink("loop1", root_ / "loop2");
    rootFd_.reset(::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(rootFd_.valid());
  }
  void TearDown() override { fs::remove_all(top_); }

  std::string errorOf(std::string_view path) {
    try {
      (void)resolveInRoot(rootFd_.get(), path, "bind target");
    } catch (const ctr::Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path top_, root_;
  ctr::UniqueFd rootFd_;
};

TEST_F(ResolveInRoot, ReportsExistingDirectoryAndFile) {
  auto dir = resolveInRoot(rootFd_.get(), "/usr/lib64/");
  EXPECT_EQ(dir.path, "/usr/lib64");
  EXPECT_EQ(dir.kind, PathKind::Directory);
  EXPECT_TRUE(dir.fd.valid());
  auto file = resolveInRoot(rootFd_.get(), "//etc/./passwd");
  EXPECT_EQ(file.path, "/etc/passwd");
  EXPECT_EQ(file.kind, PathKind::RegularFile);
  EXPECT_EQ(file.existing, "/etc/passwd");
}

TEST_F(ResolveInRoot, RootItselfIsADirectory) {
  auto r = resolveInRoot(rootFd_.get(), "/");
  EXPECT_EQ(r.path, "/");
  EXPECT_EQ(r.kind, PathKind::Directory);
}

TEST_F(ResolveInRoot, FollowsRelativeAndAbsoluteSymlinksInsideTheRoot) {
  EXPECT_EQ(resolveInRoot(rootFd_.get(), "/lib64").path, "/usr/lib64");
  auto viaAbsolute = resolveInRoot(rootFd_.get(), "/usr/abslib/libfoo.so");
  EXPECT_EQ(viaAbsolute.path, "/usr/lib64/libfoo.so");
  EXPECT_EQ(viaAbsolute.kind, PathKind::Missing);
  EXPECT_EQ(viaAbsolute.existing, "/usr/lib64");
}

TEST_F(ResolveInRoot, MissingComponentsAreReportedNotThrown) {
  auto r = resolveInRoot(rootFd_.get(), "/scratch/user/data");
  EXPECT_EQ(r.kind, PathKind::Missing);
  EXPECT_EQ(r.path, "/scratch/user/data");
  EXPECT_EQ(r.existing, "/");
  EXPECT_TRUE(r.fd.valid());
}

TEST_F(ResolveInRoot, DanglingSymlinkResolvesToItsMissingTarget) {
  auto r = resolveInRoot(rootFd_.get(), "/dangling");
  EXPECT_EQ(r.kind, PathKind::Missing);
  EXPECT_EQ(r.path, "/nonexistent/file");
}

TEST_F(ResolveInRoot, RefusesAbsoluteSymlinkClimbingAboveTheRoot) {
  EXPECT_EQ(errorOf("/escape/secret"),
            "bind target /escape/secret escapes the container root through symlink "
            "/escape -> /../../outside");
}

TEST_F(ResolveInRoot, RefusesRelativeSymlinkClimbingAboveTheRoot) {
  EXPECT_NE(errorOf("/etc/rel-escape").find("through symlink /etc/rel-escape -> ../../../outside"),
            std::string::npos);
}

TEST_F(ResolveInRoot, DotDotInTheGivenPathStaysAtTheRoot) {
  auto r = resolveInRoot(rootFd_.get(), "/../../etc/passwd");
  EXPECT_EQ(r.path, "/etc/passwd");
  EXPECT_EQ(r.kind, PathKind::RegularFile);
}

TEST_F(ResolveInRoot, RefusesSymlinkLoops) {
  EXPECT_NE(errorOf("/loop1").find("too many levels of symbolic links"), std::string::npos);
}

TEST_F(ResolveInRoot, RefusesPathThroughAFile) {
  EXPECT_NE(errorOf("/etc/passwd/x").find("/etc/passwd is not a directory"), std::string::npos);
}

TEST_F(ResolveInRoot, RefusesRelativePath) {
  EXPECT_NE(errorOf("etc").find("not an absolute path"), std::string::npos);
}

TEST_F(ResolveInRoot, OpenInRootClampsEscapingSymlinksToTheRoot) {
  // chroot semantics: /escape -> /../../outside is /outside inside the root, which is absent.
  EXPECT_THROW((void)openInRoot(rootFd_.get(), "/escape/secret", O_RDONLY), ctr::Error);
  fs::create_directories(root_ / "outside");
  std::ofstream(root_ / "outside/secret") << "inside\n";
  auto fd = openInRoot(rootFd_.get(), "/escape/secret", O_RDONLY);
  char buf[16] = {};
  ASSERT_GT(::read(fd.get(), buf, sizeof(buf) - 1), 0);
  EXPECT_STREQ(buf, "inside\n");
}

TEST_F(ResolveInRoot, OpenInRootFollowsSymlinksInsideTheRoot) {
  auto fd = openInRoot(rootFd_.get(), "/lib64", O_RDONLY | O_DIRECTORY);
  struct stat viaLink {}, direct {};
  ASSERT_EQ(::fstat(fd.get(), &viaLink), 0);
  ASSERT_EQ(::stat((root_ / "usr/lib64").c_str(), &direct), 0);
  EXPECT_EQ(viaLink.st_ino, direct.st_ino);
}

TEST_F(ResolveInRoot, OpenInRootErrorNamesThePath) {
  try {
    (void)openInRoot(rootFd_.get(), "/nope", O_RDONLY);
    FAIL() << "expected an error";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nope"), std::string::npos) << e.what();
  }
}
