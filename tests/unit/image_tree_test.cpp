// ImageTree and the scratch rules (issue 24): an image's symlinks never lead a host-side
// write or read out of the image, files are created anew rather than written through, and
// scratch directories are made only where nobody else can rename them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "ctr/build.hpp"
#include "ctr/error.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/scratch.hpp"
#include "platform_probes.hpp"

namespace fs = std::filesystem;
using ctr::image::ImageTree;

namespace {

std::string readText(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeText(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

class ImageTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ctr-image-tree.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
    root = dir / "root";
    outside = dir / "outside";
    fs::create_directories(root / "etc");
    fs::create_directories(outside);
    writeText(outside / "secret", "host secret");
  }
  void TearDown() override { fs::remove_all(dir); }

  fs::path dir, root, outside;
};

TEST_F(ImageTreeTest, AbsoluteAndClimbingLinksResolveInsideTheImage) {
  fs::create_symlink(outside, root / "opt");
  fs::create_symlink("../../../../../../.." + outside.string(), root / "rel");
  const ImageTree tree(root);
  tree.writeFile("/opt/x", "through opt");
  tree.writeFile("rel/y", "through rel");
  EXPECT_FALSE(fs::exists(outside / "x"));
  EXPECT_FALSE(fs::exists(outside / "y"));
  EXPECT_EQ(readText(root / outside.relative_path() / "x"), "through opt");
  EXPECT_EQ(readText(root / outside.relative_path() / "y"), "through rel");
  EXPECT_TRUE(tree.isDirectory("/opt"));
}

TEST_F(ImageTreeTest, WritingReplacesASymlinkInsteadOfWritingThroughIt) {
  fs::create_symlink(outside / "secret", root / "etc" / "motd");
  const ImageTree tree(root);
  tree.writeFile("/etc/motd", "new", 0640);
  EXPECT_EQ(readText(outside / "secret"), "host secret");
  EXPECT_FALSE(fs::is_symlink(root / "etc" / "motd"));
  EXPECT_EQ(readText(root / "etc" / "motd"), "new");
  EXPECT_EQ(fs::status(root / "etc" / "motd").permissions() & fs::perms::all, fs::perms(0640));
}

TEST_F(ImageTreeTest, ReadingFollowsLinksOnlyInsideTheImage) {
  fs::create_symlink(outside / "secret", root / "leak");
  const ImageTree tree(root);
  EXPECT_EQ(tree.readFile("/leak"), "");  // the image has no such file
  EXPECT_FALSE(tree.isRegularFile("/leak"));
  EXPECT_TRUE(tree.exists("/leak"));  // the link itself
  fs::create_directories(root / outside.relative_path());
  writeText(root / outside.relative_path() / "secret", "image's own");
  EXPECT_EQ(tree.readFile("/leak"), "image's own");
}

// A link to /proc/self/root names the image's own /proc, which has no such thing: the
// directories are made there, inside the image, never in the host's /.
TEST_F(ImageTreeTest, ProcMagicLinkNamesStayInsideTheImage) {
  fs::create_symlink("/proc/self/root" + outside.string(), root / "magic");
  const ImageTree tree(root);
  tree.writeFile("/magic/x", "inside");
  EXPECT_FALSE(fs::exists(outside / "x"));
  EXPECT_EQ(readText(root / "proc/self/root" / outside.relative_path() / "x"), "inside");
}

TEST_F(ImageTreeTest, CopyIsCpDashAThroughDescriptors) {
  const fs::path src = dir / "src";
  fs::create_directories(src / "sub");
  writeText(src / "sub" / "file", "data");
  fs::create_hard_link(src / "sub" / "file", src / "hard");
  fs::create_symlink(outside / "secret", src / "link");
  ::chmod((src / "sub" / "file").c_str(), 0751);
  fs::create_symlink(outside, root / "dest");
  const ImageTree tree(root);
  ctr::UniqueFd from(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ctr::image::copyIntoTree(from.get(), "src", tree, "/dest/copy", false, {}, "test");
  EXPECT_FALSE(fs::exists(outside / "copy"));
  const fs::path copy = root / outside.relative_path() / "copy";
  EXPECT_EQ(readText(copy / "sub" / "file"), "data");
  EXPECT_EQ(fs::status(copy / "sub" / "file").permissions() & fs::perms::all, fs::perms(0751));
  EXPECT_TRUE(fs::is_symlink(copy / "link"));
  EXPECT_EQ(fs::read_symlink(copy / "link"), outside / "secret");
  EXPECT_TRUE(fs::equivalent(copy / "hard", copy / "sub" / "file"));
  // Into an existing directory: the source's name below it, as cp -a.
  ctr::image::copyIntoTree(from.get(), "src", tree, "/etc", false, {}, "test");
  EXPECT_TRUE(fs::exists(root / "etc" / "src" / "sub" / "file"));
}

TEST_F(ImageTreeTest, CopyOntoAFileSymlinkReplacesTheLink) {
  writeText(dir / "payload", "payload");
  fs::create_symlink(outside / "secret", root / "etc" / "target");
  const ImageTree tree(root);
  ctr::UniqueFd from(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ctr::image::copyIntoTree(from.get(), "payload", tree, "/etc/target", false, {}, "test");
  EXPECT_EQ(readText(outside / "secret"), "host secret");
  EXPECT_EQ(readText(root / "etc" / "target"), "payload");
}

TEST_F(ImageTreeTest, SourcesInAnImageAreOpenedInsideIt) {
  fs::create_symlink(outside, root / "d");
  const ImageTree tree(root);
  EXPECT_THROW((void)ctr::image::openSource(&tree, "/d/secret"), ctr::Error);
  auto [parent, name] = ctr::image::openSource(&tree, "/etc");
  EXPECT_EQ(name, "etc");
}

TEST_F(ImageTreeTest, GlobsInAnImageDoNotFollowItsLinksToTheHost) {
  fs::create_symlink(outside, root / "d");
  writeText(root / "etc" / "a.conf", "");
  const ImageTree tree(root);
  EXPECT_THROW((void)ctr::builder::expandFilesSourceInImage("/d/*", tree), ctr::Error);
  EXPECT_EQ(ctr::builder::expandFilesSourceInImage("/etc/*.conf", tree), std::vector<std::string>{"/etc/a.conf"});
}

TEST_F(ImageTreeTest, SetidBitsAndDeviceNodesAreDropped) {
  writeText(root / "suid", "x");
  ::chmod((root / "suid").c_str(), 04755);
  writeText(root / "sgid", "x");
  ::chmod((root / "sgid").c_str(), 02755);
  fs::create_directories(root / "keepdir");
  ::chmod((root / "keepdir").c_str(), 02775);  // a setgid directory is no privilege
  const ImageTree tree(root);
  EXPECT_EQ(ctr::image::setidFiles(tree), (std::vector<std::string>{"/sgid", "/suid"}));
  const bool canMknod = ::mknod((root / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  const auto dropped = ctr::image::dropPrivilegedFiles(tree);
  EXPECT_EQ(dropped.setidBits, 2u);
  EXPECT_EQ(dropped.deviceNodes, canMknod ? 1u : 0u);
  EXPECT_EQ(fs::status(root / "suid").permissions() & fs::perms::mask, fs::perms(0755));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root / "null")));
  EXPECT_TRUE(ctr::image::setidFiles(tree).empty());
}

TEST_F(ImageTreeTest, OnlyTheCallersOwnSetidFilesAreCleared) {
  writeText(root / "mine", "x");
  ::chmod((root / "mine").c_str(), 04755);
  const ImageTree tree(root);
  EXPECT_EQ(ctr::image::clearSetidBitsOf(tree, ::geteuid() + 1), 0u);
  EXPECT_EQ(ctr::image::clearSetidBitsOf(tree, ::geteuid()), 1u);
  EXPECT_EQ(fs::status(root / "mine").permissions() & fs::perms::mask, fs::perms(0755));
}

TEST_F(ImageTreeTest, PrivateDirectoryRule) {
  std::string why;
  ::chmod(dir.c_str(), 0755);
  EXPECT_TRUE(ctr::image::privateDirectory(dir, ::geteuid(), &why)) << why;
  ::chmod(dir.c_str(), 0777);
  EXPECT_FALSE(ctr::image::privateDirectory(dir, ::geteuid(), &why));
  EXPECT_NE(why.find("lets others rename"), std::string::npos) << why;
  ::chmod(dir.c_str(), 01777);  // sticky: others cannot rename what is ours
  EXPECT_TRUE(ctr::image::privateDirectory(dir, ::geteuid(), &why)) << why;
  ::chmod(dir.c_str(), 0775);
  EXPECT_FALSE(ctr::image::privateDirectory(dir / "root", ::geteuid(), &why)) << "a group-writable parent";
  ::chmod(dir.c_str(), 0755);
  // Owned by neither root nor the one asking: another user's directory.
  if (::geteuid() != 0) {
    EXPECT_FALSE(ctr::image::privateDirectory(dir, ::geteuid() + 1, &why));
  }
}

TEST_F(ImageTreeTest, ScratchGoesBesideAPrivateOutputElseToATemporaryDirectory) {
  ::chmod(dir.c_str(), 0755);
  {
    const ctr::image::ScratchDir beside(dir / "out.sif", "test");
    EXPECT_EQ(beside.path().parent_path(), dir);
    EXPECT_EQ(beside.path().filename().string().rfind(".out.sif.test.", 0), 0u);
  }
  ::chmod(dir.c_str(), 0777);
  const ctr::image::ScratchDir away(dir / "out.sif", "test");
  EXPECT_NE(away.path().parent_path(), dir);
  EXPECT_TRUE(ctr::image::privateDirectory(away.path().parent_path(), ::geteuid()));
  ::chmod(dir.c_str(), 0755);
}

TEST_F(ImageTreeTest, CreateReplacingNeverWritesThroughALink) {
  fs::create_symlink(outside / "secret", dir / "job.log");
  {
    ctr::UniqueFd fd = ctr::image::createReplacing(dir / "job.log", 0644);
    ASSERT_TRUE(fd);
    ASSERT_EQ(::write(fd.get(), "log", 3), 3);
  }
  EXPECT_EQ(readText(outside / "secret"), "host secret");
  EXPECT_FALSE(fs::is_symlink(dir / "job.log"));
  EXPECT_EQ(readText(dir / "job.log"), "log");
}

TEST_F(ImageTreeTest, MoveIntoPlaceRespectsReplace) {
  writeText(dir / "a", "a");
  writeText(dir / "b", "b");
  EXPECT_THROW(ctr::image::moveIntoPlace(dir / "a", dir / "b", false), ctr::Error);
  EXPECT_EQ(readText(dir / "b"), "b");
  ctr::image::moveIntoPlace(dir / "a", dir / "b", true);
  EXPECT_EQ(readText(dir / "b"), "a");
}

// Across file systems (tmpfs /dev/shm to the test's directory) a rename cannot work: the
// result is copied through descriptors, symlinks and modes kept, and the source removed.
TEST_F(ImageTreeTest, MoveIntoPlaceCopiesAcrossFileSystems) {
  struct stat shm {}, here {};
  if (::stat("/dev/shm", &shm) != 0 || ::stat(dir.c_str(), &here) != 0 || shm.st_dev == here.st_dev) {
    CTR_SKIP_BECAUSE("/dev/shm is missing or on the test directory's file system: no second file system to move across");
  }
  std::string tmpl = "/dev/shm/ctr-move.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path from = fs::path(tmpl) / "tree";
  fs::create_directories(from / "sub");
  writeText(from / "sub" / "f", "content");
  ::chmod((from / "sub" / "f").c_str(), 0700);
  fs::create_symlink("sub/f", from / "link");
  ctr::image::moveIntoPlace(from, dir / "placed", false);
  EXPECT_EQ(readText(dir / "placed" / "sub" / "f"), "content");
  EXPECT_EQ(fs::status(dir / "placed" / "sub" / "f").permissions() & fs::perms::all, fs::perms(0700));
  EXPECT_EQ(fs::read_symlink(dir / "placed" / "link"), "sub/f");
  EXPECT_FALSE(fs::exists(from));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().find(".placed."), std::string::npos);
  fs::remove_all(tmpl);
}

}  // namespace
