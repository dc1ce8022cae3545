#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "ctr/error.hpp"
#include "ctr/image.hpp"
#include "ctr/sif.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <span>
#include <vector>

namespace {

const std::string kImages = std::string(CTR_FIXTURES_DIR) + "/sif/images/";
const std::string kInput = std::string(CTR_FIXTURES_DIR) + "/sif/input/";

std::string errorOf(const std::string& path) {
  try {
    ctr::image::resolveImage(path);
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
  return "";
}

TEST(ResolveImage, FindsPrimarySquashfsPartitionOfSif) {
  auto src = ctr::image::resolveImage(kImages + "one-group.sif");
  EXPECT_EQ(src.kind, ctr::image::ImageKind::Sif);
  EXPECT_EQ(src.offset, 36864U);
  EXPECT_EQ(src.size, 4096U);
  EXPECT_EQ(src.arch, "386");
  EXPECT_NE(src.inode, 0U);
}

TEST(ResolveImage, RecognisesPlainSquashfs) {
  auto src = ctr::image::resolveImage(kInput + "root.squashfs");
  EXPECT_EQ(src.kind, ctr::image::ImageKind::Squashfs);
  EXPECT_EQ(src.offset, 0U);
  EXPECT_EQ(src.size, 4096U);
}

// The superblock decoder that `ctr sif` listings and the lazy launch's table fetch share,
// against what unsquashfs -s says of the fixture (gzip, 131072-byte blocks, 249 bytes used).
TEST(SquashfsSuperblock, DecodesWhatUnsquashfsReports) {
  std::ifstream in(kInput + "root.squashfs", std::ios::binary);
  std::vector<std::uint8_t> bytes(ctr::image::SquashfsSuperblock::kBytes);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  const auto sb = ctr::image::decodeSquashfsSuperblock(bytes);
  ASSERT_TRUE(sb.has_value());
  EXPECT_EQ(sb->major, 4);
  EXPECT_EQ(sb->minor, 0);
  EXPECT_EQ(sb->compression, 1);  // gzip
  EXPECT_EQ(sb->blockSize, 131072U);
  EXPECT_EQ(sb->bytesUsed, 249U);
  EXPECT_GT(sb->inodeTableStart, 95U);
  EXPECT_LT(sb->inodeTableStart, sb->bytesUsed);
  EXPECT_FALSE(ctr::image::decodeSquashfsSuperblock(std::span(bytes).first(95)).has_value());
  bytes[0] = 'x';
  EXPECT_FALSE(ctr::image::decodeSquashfsSuperblock(bytes).has_value());

  const int fd = ::open((kInput + "root.squashfs").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ctr::image::describeSquashfs(fd), "squashfs 4.0, gzip compressed, data block size 131072");
  EXPECT_EQ(ctr::image::describeSquashfs(fd, 1), "");
  ::close(fd);
}

TEST(ResolveImage, RecognisesDirectory) {
  auto src = ctr::image::resolveImage(kImages);
  EXPECT_EQ(src.kind, ctr::image::ImageKind::Directory);
  EXPECT_EQ(ctr::image::toString(src.kind), "directory");
}

TEST(ResolveImage, RejectsMissingFile) {
  EXPECT_EQ(errorOf("/nonexistent/a.sif"), "/nonexistent/a.sif: no such file");
}

TEST(ResolveImage, RejectsFileThatIsNoImage) {
  std::string p = kInput + "index.json";
  EXPECT_EQ(errorOf(p), p + ": not a SIF, squashfs image or directory");
}

TEST(ResolveImage, RejectsSifWithoutPrimaryPartition) {
  std::string p = kImages + "empty.sif";
  EXPECT_EQ(errorOf(p), p + ": SIF has no primary system partition");
}

TEST(ResolveImage, RejectsTruncatedSif) {
  std::string p = ::testing::TempDir() + "/truncated.sif";
  {
    std::ifstream in(kImages + "one-group.sif", std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), {});
    std::ofstream out(p, std::ios::binary);
    out.write(data.data(), 20000);
  }
  std::string e = errorOf(p);
  EXPECT_NE(e.find(p + ": descriptor table"), std::string::npos) << e;
}

}  // namespace

TEST(ResolveImage, ReadsTheSifEnvironmentObject) {
  namespace sif = ctr::image::sif;
  auto dir = std::filesystem::temp_directory_path() / ("ctr-env-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto squashfs = std::filesystem::path(CTR_FIXTURES_DIR) / "sif/input/root.squashfs";
  std::ifstream in(squashfs, std::ios::binary);
  std::vector<std::uint8_t> fs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string envText = "FOO=bar\n";
  std::vector<std::uint8_t> env(envText.begin(), envText.end());
  sif::ObjectInput e;
  e.type = sif::DataType::EnvVar;
  e.data = sif::DataSource::fromBytes(env);
  sif::ObjectInput p;
  p.type = sif::DataType::Partition;
  p.partition = sif::PartitionInfo{};
  p.data = sif::DataSource::fromBytes(fs);
  sif::createImage(dir / "env.sif", {}, {e, p});
  auto src = ctr::image::resolveImage(dir / "env.sif");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(src.environment, envText);
  EXPECT_EQ(ctr::image::resolveImage(kImages + "one-group.sif").environment, "");
}
