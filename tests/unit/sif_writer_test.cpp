#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/sif.hpp"

namespace sif = ctr::image::sif;

namespace {

std::vector<std::uint8_t> bytesOf(std::string_view s) { return {s.begin(), s.end()}; }

std::vector<std::uint8_t> readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class SifWriter : public ::testing::Test {
 protected:
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "writer.sif";
  void TearDown() override { std::filesystem::remove(path); }
};

TEST_F(SifWriter, RoundTripsObjectsThroughTheReader) {
  auto def = bytesOf("Bootstrap: scratch\n");
  auto fsData = bytesOf("hsqs-not-really");
  sif::ObjectInput d;
  d.type = sif::DataType::Deffile;
  d.data = sif::DataSource::fromBytes(def);
  sif::ObjectInput p;
  p.type = sif::DataType::Partition;
  p.name = std::string(128, 'x');  // full-length name, no NUL
  p.partition = sif::PartitionInfo{sif::FsType::Squashfs, sif::PartType::PrimSys, "arm64"};
  p.data = sif::DataSource::fromBytes(fsData);
  sif::CreateOptions options;
  options.launchScript = std::string(sif::kApptainerLaunchScript);
  sif::createImage(path, options, {d, p});

  auto image = sif::Image::open(path);
  auto used = image.usedDescriptors();
  ASSERT_EQ(used.size(), 2U);
  EXPECT_EQ(image.readObject(used[0]), def);
  EXPECT_EQ(used[1].offset % 4096, 0);
  EXPECT_EQ(used[1].nameText(), std::string(128, 'x'));
  EXPECT_EQ(sif::archName(image.header().arch), "arm64");
  EXPECT_EQ(image.header().launchScriptText(), sif::kApptainerLaunchScript);
  EXPECT_TRUE(image.isDeterministic());
}

TEST_F(SifWriter, StreamsDataFromFileDescriptor) {
  auto payload = std::filesystem::path(CTR_FIXTURES_DIR) / "sif/input/root.squashfs";
  int fd = ::open(payload.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  sif::ObjectInput p;
  p.type = sif::DataType::Partition;
  p.partition = sif::PartitionInfo{};
  p.data = sif::DataSource::fromFd(fd, static_cast<std::int64_t>(std::filesystem::file_size(payload)));
  sif::createImage(path, {}, {p});
  ::close(fd);
  auto image = sif::Image::open(path);
  auto used = image.usedDescriptors();
  ASSERT_EQ(used.size(), 1U);
  EXPECT_EQ(image.readObject(used[0]), readFile(payload));
}

TEST_F(SifWriter, RefusesSecondPrimaryPartitionAndLeavesFileUnchanged) {
  auto data = bytesOf("abcd");
  sif::ObjectInput p;
  p.type = sif::DataType::Partition;
  p.partition = sif::PartitionInfo{};
  p.data = sif::DataSource::fromBytes(data);
  sif::createImage(path, {}, {p});
  auto before = readFile(path);
  auto image = sif::Image::open(path, true);
  sif::Editor editor(image);
  EXPECT_THROW(editor.add(p, sif::kDeterministicTime), ctr::Error);
  EXPECT_EQ(readFile(path), before);
}

TEST_F(SifWriter, ReusesFreedIdAfterDelete) {
  auto a = bytesOf("abc"), b = bytesOf("def"), c = bytesOf("ghi");
  sif::ObjectInput oa, ob, oc;
  oa.data = sif::DataSource::fromBytes(a);
  ob.data = sif::DataSource::fromBytes(b);
  oc.data = sif::DataSource::fromBytes(c);
  sif::createImage(path, {}, {oa, ob});
  auto image = sif::Image::open(path, true);
  sif::Editor editor(image);
  sif::DeleteOptions del;
  del.id = 1;
  editor.remove(del);
  editor.add(oc, sif::kDeterministicTime);
  EXPECT_EQ(image.descriptorById(1).offset, 32182);  // after "def", which is still there
  EXPECT_EQ(image.readObject(image.descriptorById(1)), c);
}

TEST_F(SifWriter, RefusesLaunchScriptOf32Bytes) {
  sif::CreateOptions options;
  options.launchScript = std::string(32, '#');
  EXPECT_THROW(sif::createImage(path, options, {}), ctr::Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SifFormat, FormatsSizesLikeSiftool) {
  EXPECT_EQ(sif::readableSize(1023), "1023 B");
  EXPECT_EQ(sif::readableSize(28080), "27 KiB");
  EXPECT_EQ(sif::readableSize(4688), "5 KiB");
  EXPECT_EQ(sif::readableSize(3 << 20), "3 MiB");
}

TEST(SifFormat, ParsesAndPrintsUuid) {
  const std::string text = "de170c43-36ab-44a8-bca9-1ea1a070a274";
  EXPECT_EQ(sif::uuidToString(sif::parseUuid(text)), text);
  EXPECT_THROW(sif::parseUuid("xyz"), ctr::Error);
}

}  // namespace
