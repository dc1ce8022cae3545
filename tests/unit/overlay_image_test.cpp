// `ctr overlay create`: the layout of the image, the size and --create-dir it refuses, and
// the SIFs it will not add an overlay partition to.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/overlay_image.hpp"
#include "ctr/sif.hpp"

namespace sif = ctr::image::sif;

namespace {

using OverlayDirs = std::vector<std::filesystem::path>;

std::string overlayErrorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
  return "(no error)";
}

TEST(OverlayLayout, IsUpperAndWorkWithoutCreateDir) {
  EXPECT_EQ(ctr::image::overlayLayoutDirs({}), (OverlayDirs{"upper", "work"}));
}

TEST(OverlayLayout, CreateDirMakesEveryParentOnceUnderUpper) {
  EXPECT_EQ(ctr::image::overlayLayoutDirs({"/usr/local/testing", "/usr//share/", "/usr/local", "/"}),
            (OverlayDirs{"upper", "work", "upper/usr", "upper/usr/local", "upper/usr/local/testing", "upper/usr/share"}));
}

TEST(OverlayLayout, RefusesRelativeCreateDir) {
  EXPECT_EQ(overlayErrorOf([] { (void)ctr::image::overlayLayoutDirs({"usr/local"}); }),
            "--create-dir usr/local: not an absolute path");
  EXPECT_NE(overlayErrorOf([] { (void)ctr::image::overlayLayoutDirs({""}); }), "(no error)");
}

TEST(OverlayLayout, RefusesCreateDirLeavingUpper) {
  const auto line = overlayErrorOf([] { (void)ctr::image::overlayLayoutDirs({"/a/../../etc"}); });
  EXPECT_EQ(line.rfind("--create-dir /a/../../etc: '..' is not allowed", 0), 0U) << line;
}

TEST(OverlaySize, RefusesLessThanApptainersMinimumNamingIt) {
  EXPECT_EQ(overlayErrorOf([] { ctr::image::checkOverlaySize(1); }),
            "--size 1: an overlay image must be at least 64 MiB");
  EXPECT_NE(overlayErrorOf([] { ctr::image::checkOverlaySize(-5); }), "(no error)");
  EXPECT_EQ(overlayErrorOf([] { ctr::image::checkOverlaySize(64); }), "(no error)");
}

TEST(OverlayFakeroot, DebugfsScriptGivesEachDirectoryToRoot) {
  EXPECT_EQ(ctr::image::rootOwnershipScript({"upper", "upper/a b"}),
            "set_inode_field \"/upper\" uid 0\nset_inode_field \"/upper\" gid 0\n"
            "set_inode_field \"/upper/a b\" uid 0\nset_inode_field \"/upper/a b\" gid 0\n");
  EXPECT_NE(overlayErrorOf([] { (void)ctr::image::rootOwnershipScript({"upper/a\"b"}); }), "(no error)");
}

class OverlaySif : public ::testing::Test {
 protected:
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "overlay-check.sif";
  void TearDown() override { std::filesystem::remove(path); }

  static sif::ObjectInput partition(sif::FsType fs, sif::PartType part) {
    static const std::vector<std::uint8_t> data{'h', 's', 'q', 's'};
    sif::ObjectInput in;
    in.type = sif::DataType::Partition;
    in.partition = sif::PartitionInfo{fs, part, "amd64"};
    in.data = sif::DataSource::fromBytes(data);
    return in;
  }
  std::string check(const std::vector<sif::ObjectInput>& objects) {
    sif::createImage(path, {}, objects);
    const auto image = sif::Image::open(path);
    return overlayErrorOf([&] { ctr::image::checkSifTakesOverlay(image, "x.sif"); });
  }
};

TEST_F(OverlaySif, TakesAnUnsignedImageWithoutOverlay) {
  EXPECT_EQ(check({partition(sif::FsType::Squashfs, sif::PartType::PrimSys)}), "(no error)");
}

TEST_F(OverlaySif, RefusesASecondOverlayNamingHowToDeleteIt) {
  EXPECT_EQ(check({partition(sif::FsType::Squashfs, sif::PartType::PrimSys),
                   partition(sif::FsType::Ext3, sif::PartType::Overlay)}),
            "x.sif: SIF already has an overlay partition (id 2): delete it first with 'ctr sif del 2 x.sif'");
}

TEST_F(OverlaySif, RefusesASignedImage) {
  static const std::vector<std::uint8_t> signature{'s', 'i', 'g'};
  sif::ObjectInput sig;
  sig.type = sif::DataType::Signature;
  sig.hashType = 1;
  sig.entityHex = "0123456789abcdef";
  sig.linkedId = 1;
  sig.data = sif::DataSource::fromBytes(signature);
  EXPECT_EQ(check({partition(sif::FsType::Squashfs, sif::PartType::PrimSys), sig}),
            "x.sif: SIF is signed: adding an overlay partition would break its signature");
}

TEST_F(OverlaySif, RefusesAnImageWithoutRootOrWithAnEncryptedOne) {
  EXPECT_EQ(check({partition(sif::FsType::Squashfs, sif::PartType::Data)}),
            "x.sif: SIF has no primary system partition to put an overlay on");
  EXPECT_EQ(check({partition(sif::FsType::EncryptedSquashfs, sif::PartType::PrimSys)}),
            "x.sif: SIF root file system is encrypted: cannot add a writable overlay");
}

}  // namespace
