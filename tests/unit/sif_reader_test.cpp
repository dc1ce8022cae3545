#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/sif.hpp"

namespace sif = ctr::image::sif;

namespace {

const std::filesystem::path kImages = std::filesystem::path(CTR_FIXTURES_DIR) / "sif/images";

std::vector<std::uint8_t> readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <typename T>
void put(std::vector<std::uint8_t>& b, std::size_t pos, T v) {
  std::memcpy(b.data() + pos, &v, sizeof v);  // little-endian host (x86-64, arm64)
}

std::string parseError(const std::vector<std::uint8_t>& bytes) {
  try {
    sif::Image::parse(bytes);
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
  return "";
}

// Byte offsets inside the header and a descriptor slot (sif-format.md §2, §3).
constexpr std::size_t kFree = 80, kTotal = 88, kDescOff = 96, kDescSize = 104, kDataOff = 112;
constexpr std::size_t kSlot0 = 4096;
std::size_t slot(std::size_t i) { return kSlot0 + 585 * i; }
constexpr std::size_t kId = 5, kOffset = 17, kSize = 25, kName = 73, kExtra = 201;

// one-group.sif: id 1 Raw/System at 32768 (4 bytes), id 2 Squashfs/PrimSys at 36864 (4096).
std::vector<std::uint8_t> oneGroup() { return readFile(kImages / "one-group.sif"); }

TEST(SifReader, LoadsEveryFixtureImage) {
  for (const auto& entry : std::filesystem::directory_iterator(kImages)) {
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(sif::Image::open(entry.path()));
  }
}

TEST(SifReader, LoadsOldStyleEmptyImageShorterThanDataOffset) {
  auto bytes = readFile(kImages / "empty.sif");
  put<std::int64_t>(bytes, kDataOff, 32768);  // Singularity 3.x layout
  auto image = sif::Image::parse(bytes);
  EXPECT_EQ(image.header().dataOffset, 32768);
  EXPECT_TRUE(image.usedDescriptors().empty());
}

TEST(SifReader, DecodesPartitionsOfOneGroup) {
  auto image = sif::Image::open(kImages / "one-group.sif");
  auto used = image.usedDescriptors();
  ASSERT_EQ(used.size(), 2U);
  EXPECT_EQ(used[1].id, 2U);
  EXPECT_EQ(used[1].offset, 36864);
  EXPECT_EQ(used[1].fsType(), 1);
  EXPECT_TRUE(used[1].isPrimarySystemPartition());
  EXPECT_EQ(sif::archName(used[1].partArch()), "386");
  EXPECT_EQ(image.primaryPartition()->id, 2U);
  EXPECT_EQ(image.readObject(used[0]), (std::vector<std::uint8_t>{0xfa, 0xce, 0xfe, 0xed}));
}

TEST(SifReader, RejectsTruncatedHeader) {
  auto bytes = oneGroup();
  bytes.resize(100);
  EXPECT_EQ(parseError(bytes), "truncated SIF: file is 100 bytes, the header alone needs 128");
}

TEST(SifReader, RejectsBadMagic) {
  auto bytes = oneGroup();
  bytes[32] = 'X';
  EXPECT_EQ(parseError(bytes), "not a SIF file (no SIF_MAGIC at byte 32)");
}

TEST(SifReader, RejectsBadVersion) {
  auto bytes = oneGroup();
  bytes[43] = '2';
  EXPECT_EQ(parseError(bytes), "unsupported SIF version \"02\" (only 01 is supported)");
}

TEST(SifReader, RejectsDescriptorTablePastEndOfFile) {
  auto bytes = oneGroup();
  bytes.resize(20000);
  EXPECT_EQ(parseError(bytes),
            "descriptor table at offset 4096 + size 28080 is past end of file (20000 bytes)");
}

TEST(SifReader, RejectsHugeDescriptorsTotal) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kTotal, std::int64_t{1} << 40);
  EXPECT_EQ(parseError(bytes), "DescriptorsTotal 1099511627776 is out of range");
}

TEST(SifReader, RejectsNegativeDescriptorsTotal) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kTotal, -1);
  EXPECT_EQ(parseError(bytes), "DescriptorsTotal -1 is out of range");
}

TEST(SifReader, RejectsDescriptorsSizeNotMatchingTotal) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kDescSize, 585);
  EXPECT_EQ(parseError(bytes), "DescriptorsSize 585 is not DescriptorsTotal 48 x 585 = 28080");
}

TEST(SifReader, RejectsHugeDescriptorsOffsetWithoutOverflow) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kDescOff, INT64_MAX - 10);
  EXPECT_NE(parseError(bytes).find("is past end of file"), std::string::npos);
}

TEST(SifReader, RejectsDescriptorTableOverlappingHeader) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kDescOff, 64);
  EXPECT_EQ(parseError(bytes), "DescriptorsOffset 64 overlaps the header");
}

TEST(SifReader, RejectsFreeCountAboveTotal) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kFree, 49);
  EXPECT_EQ(parseError(bytes), "DescriptorsFree 49 is out of range (DescriptorsTotal 48)");
}

TEST(SifReader, ToleratesMiscountedFreeDescriptors) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, kFree, 48);
  EXPECT_NO_THROW(sif::Image::parse(bytes));
}

TEST(SifReader, RejectsObjectPastEndOfFile) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(1) + kOffset, 99999);
  put<std::int64_t>(bytes, slot(1) + kSize, 10);
  EXPECT_EQ(parseError(bytes),
            "descriptor 1 (id 2): object offset 99999 + size 10 is past end of file (40960 bytes)");
}

TEST(SifReader, RejectsNegativeObjectOffset) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(0) + kOffset, -5);
  EXPECT_EQ(parseError(bytes), "descriptor 0 (id 1): object offset -5 is negative");
}

TEST(SifReader, RejectsNegativeObjectSize) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(0) + kSize, -1);
  EXPECT_EQ(parseError(bytes), "descriptor 0 (id 1): object size -1 is negative");
}

TEST(SifReader, RejectsObjectSizeThatOverflows) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(0) + kSize, INT64_MAX);
  EXPECT_NE(parseError(bytes).find("descriptor 0 (id 1): object offset 32768 + size"),
            std::string::npos);
}

TEST(SifReader, RejectsOverlappingObjects) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(0) + kSize, 4097);  // 32768..36865 runs into 36864
  EXPECT_EQ(parseError(bytes),
            "descriptor 1 (id 2): object at 36864-40960 overlaps descriptor 0 (id 1) at 32768-36865");
}

TEST(SifReader, RejectsObjectOverlappingDescriptorTable) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(0) + kOffset, 5000);
  EXPECT_EQ(parseError(bytes),
            "descriptor 0 (id 1): object at offset 5000 + size 4 overlaps the descriptor table");
}

TEST(SifReader, RejectsObjectOverlappingHeader) {
  auto bytes = oneGroup();
  put<std::int64_t>(bytes, slot(0) + kOffset, 0);
  EXPECT_EQ(parseError(bytes), "descriptor 0 (id 1): object at offset 0 overlaps the header");
}

TEST(SifReader, RejectsTwoPrimaryPartitions) {
  auto bytes = oneGroup();
  put<std::int32_t>(bytes, slot(0) + kExtra + 4, 2);
  EXPECT_EQ(parseError(bytes), "descriptor 1 (id 2): a second primary system partition "
                               "(descriptor 0 (id 1) is one already)");
}

TEST(SifReader, RejectsZeroId) {
  auto bytes = oneGroup();
  put<std::uint32_t>(bytes, slot(1) + kId, 0);
  EXPECT_EQ(parseError(bytes), "descriptor 1 (id 0): object ID is 0");
}

TEST(SifReader, RejectsDuplicateId) {
  auto bytes = oneGroup();
  put<std::uint32_t>(bytes, slot(1) + kId, 1);
  EXPECT_EQ(parseError(bytes), "descriptor 1 (id 1): object ID 1 is used twice");
}

TEST(SifReader, AcceptsNameOf128BytesWithoutNul) {
  auto bytes = oneGroup();
  std::memset(bytes.data() + slot(0) + kName, 'n', 128);
  auto image = sif::Image::parse(bytes);
  EXPECT_EQ(image.usedDescriptors()[0].nameText(), std::string(128, 'n'));
}

TEST(SifReader, ToleratesUnknownDataType) {
  auto bytes = oneGroup();
  put<std::int32_t>(bytes, slot(0), 0x4999);
  auto image = sif::Image::parse(bytes);
  EXPECT_EQ(sif::dataTypeName(image.usedDescriptors()[0].dataType), "Unknown");
}

TEST(SifReader, EveryTruncationOfAFixtureIsRejectedCleanly) {
  auto full = oneGroup();
  for (std::size_t n = 0; n < full.size(); n += 97) {
    std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_NE(parseError(cut), "") << n;
  }
}

}  // namespace
