// Directories ctr keeps one user's files in (ctr/user_dir.hpp): the walk from / follows no
// symlink of somebody else's, passes no directory somebody else could change, and a name
// somebody else took is replaced by the caller's own sibling, found again the next time.
// The cases with another user's files need root (chown), as CI runs; elsewhere they skip.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "ctr/error.hpp"
#include "ctr/user_dir.hpp"
#include "platform_probes.hpp"

namespace fs = std::filesystem;

namespace {

constexpr uid_t kStranger = 4242;  // owns what "another user" planted (any uid does: root chowns)

class UserDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/user-dir-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    shared_ = root_ / "shared";  // what /var/tmp is: anyone may add to it
    ASSERT_EQ(::mkdir(shared_.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(shared_.c_str(), 01777), 0);
  }
  void TearDown() override { fs::remove_all(root_); }
  void needRoot() {
    if (::geteuid() != 0) CTR_SKIP_BECAUSE("needs root to plant another user's files (chown)");
  }
  // A directory of the stranger's at `path`.
  void plantDir(const fs::path& path, mode_t mode) {
    ASSERT_EQ(::mkdir(path.c_str(), mode), 0);
    ASSERT_EQ(::chown(path.c_str(), kStranger, kStranger), 0);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }
  fs::path root_, shared_;
};

TEST_F(UserDir, MadeMissingAsThePrivateDirectoryOfTheCaller) {
  auto dir = ctr::openUserDir(shared_ / "cache" / "x", "cache", true, ctr::WhenTaken::Refuse);
  ASSERT_TRUE(dir.fd.valid());
  EXPECT_EQ(dir.path, shared_ / "cache" / "x");
  EXPECT_TRUE(dir.taken.empty());
  struct stat st {};
  ASSERT_EQ(::stat(dir.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((shared_ / "cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "missing parents are made private too";
  auto missing = ctr::openUserDir(shared_ / "nothing", "cache", false, ctr::WhenTaken::Refuse);
  EXPECT_FALSE(missing.fd.valid()) << "without create, a missing directory is not made";
  EXPECT_FALSE(fs::exists(shared_ / "nothing"));
}

TEST_F(UserDir, AnOwnDirectoryOthersCanReadIsMadePrivate) {
  ASSERT_EQ(::mkdir((shared_ / "old").c_str(), 0755), 0);
  auto dir = ctr::openUserDir(shared_ / "old", "cache", true, ctr::WhenTaken::Refuse);
  struct stat st {};
  ASSERT_EQ(::fstat(dir.fd.get(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(UserDir, ANameSomebodyElseTookIsReplacedByTheCallersSiblingFoundAgain) {
  needRoot();
  plantDir(shared_ / "ctr-cache-0", 0777);
  auto first = ctr::openUserDir(shared_ / "ctr-cache-0", "image cache", true, ctr::WhenTaken::UseSibling);
  ASSERT_TRUE(first.fd.valid());
  EXPECT_NE(first.taken.find("is a directory of uid 4242"), std::string::npos) << first.taken;
  EXPECT_EQ(first.path.parent_path(), shared_);
  EXPECT_TRUE(first.path.filename().string().starts_with("ctr-cache-0-")) << first.path;
  EXPECT_EQ(ctr::chooseUserDir(shared_ / "ctr-cache-0", "image cache"), first.path) << "found again, not made again";
  EXPECT_THROW((void)ctr::openUserDir(shared_ / "ctr-cache-0", "image cache", true, ctr::WhenTaken::Refuse), ctr::Error);
}

TEST_F(UserDir, ASymlinkOfSomebodyElsesIsNeverFollowed) {
  needRoot();
  const fs::path target = root_ / "etc-cron.d";  // root's: what root must never write in
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  const fs::path link = shared_ / "ctr-cache-0";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(::lchown(link.c_str(), kStranger, kStranger), 0);
  auto dir = ctr::openUserDir(link, "image cache", true, ctr::WhenTaken::UseSibling);
  EXPECT_NE(dir.taken.find("is a symlink of uid 4242"), std::string::npos) << dir.taken;
  EXPECT_NE(dir.path, target);
  EXPECT_TRUE(fs::is_empty(target));
  // On the way to a directory: refused whatever the last step is.
  const fs::path below = link / "blobs";
  try {
    (void)ctr::openUserDir(below, "image cache", true, ctr::WhenTaken::UseSibling);
    FAIL() << "walked through another user's symlink";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a symlink of uid 4242"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(target));
  EXPECT_FALSE(ctr::pathIsSafeFor(below, 0));
}

TEST_F(UserDir, AnOwnSymlinkIsFollowedAndADirectoryOthersCanChangeIsNot) {
  ASSERT_EQ(::mkdir((root_ / "real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink("real", (root_ / "alias").c_str()), 0);
  auto dir = ctr::openUserDir(root_ / "alias" / "cache", "cache", true, ctr::WhenTaken::Refuse);
  EXPECT_TRUE(fs::is_directory(root_ / "real" / "cache")) << "the caller's own symlink leads the way";
  ASSERT_EQ(::mkdir((root_ / "open").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((root_ / "open").c_str(), 0777), 0);  // not sticky: others may rename in it
  std::string why;
  EXPECT_FALSE(ctr::pathIsSafeFor(root_ / "open" / "cache", ::geteuid(), &why));
  EXPECT_NE(why.find("lets others rename what is in it"), std::string::npos) << why;
  EXPECT_THROW((void)ctr::openUserDir(root_ / "open" / "cache", "cache", true, ctr::WhenTaken::UseSibling), ctr::Error)
      << "a sibling is for a taken name, not for an unsafe way to it";
}

}  // namespace
