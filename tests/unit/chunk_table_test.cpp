// The chunk digest table of a lazily read image (issue 57): computed in one read of a file,
// carried in the ORAS config text and read back, and every malformed table refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ctr/chunk_table.hpp"
#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace image = ctr::image;

namespace {

constexpr std::uint64_t kSmallChunk = 64 * 1024;  // the smallest allowed: small test files
const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

class ChunkTable : public ::testing::Test {
 protected:
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "chunk-table.bin";
  void TearDown() override { std::filesystem::remove(path); }

  // Writes `size` bytes that differ from chunk to chunk and returns them.
  std::vector<char> writeFile(std::size_t size) {
    std::vector<char> bytes(size);
    std::uint32_t x = 12345;
    for (auto& b : bytes) {
      x = x * 1103515245 + 12345;
      b = static_cast<char>(x >> 16);
    }
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return bytes;
  }

  image::DigestAndChunks compute(std::uint64_t chunkSize = kSmallChunk) {
    ctr::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd);
    return image::digestAndChunks(fd.get(), path.string(), chunkSize);
  }
};

// A table's config text with each field spelt as given (JSON values, not quoted here).
std::string tableText(const std::string& chunkSize, const std::string& size, const std::string& digests,
                      const std::string& algorithm = "\"sha256\"") {
  return R"({"org.ctr.chunks.v1":{"algorithm":)" + algorithm + R"(,"chunkSize":)" + chunkSize + R"(,"size":)" + size +
         R"(,"digests":)" + digests + "}}";
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// The message parseChunkTableConfig refuses `config` with, or "" if it accepts it.
std::string refusal(const std::string& config, std::uint64_t blobSize) {
  try {
    (void)image::parseChunkTableConfig(config, blobSize);
    return "";
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
}

TEST_F(ChunkTable, RoundTripsThroughTheConfigText) {
  const auto bytes = writeFile(2 * kSmallChunk + kSmallChunk / 2);
  const auto computed = compute();
  const auto& table = computed.table;
  ASSERT_EQ(table.chunkCount(), 3U);
  EXPECT_EQ(table.size, bytes.size());
  EXPECT_EQ(table.chunkSize, kSmallChunk);
  EXPECT_EQ(table.chunkLength(0), kSmallChunk);
  EXPECT_EQ(table.chunkLength(2), kSmallChunk / 2);
  EXPECT_EQ(table.chunkLength(3), 0U);

  const auto parsed = image::parseChunkTableConfig(image::chunkTableConfig(table), bytes.size());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->chunkSize, kSmallChunk);
  EXPECT_EQ(parsed->size, bytes.size());
  EXPECT_EQ(parsed->digests, table.digests);

  const char* last = bytes.data() + 2 * kSmallChunk;
  EXPECT_TRUE(parsed->matches(2, last, kSmallChunk / 2));
  EXPECT_TRUE(parsed->matches(0, bytes.data(), kSmallChunk));
  EXPECT_FALSE(parsed->matches(1, bytes.data(), kSmallChunk));  // another chunk's bytes
  EXPECT_FALSE(parsed->matches(2, last, kSmallChunk / 2 - 1));  // one byte short
  EXPECT_FALSE(parsed->matches(3, last, kSmallChunk / 2));      // no such chunk
  auto changed = std::vector<char>(last, last + kSmallChunk / 2);
  changed[1000] ^= 1;
  EXPECT_FALSE(parsed->matches(2, changed.data(), changed.size()));
}

TEST_F(ChunkTable, ConfigTextHasTheDocumentedShape) {
  writeFile(100);
  const auto table = compute().table;
  const std::string text = image::chunkTableConfig(table);
  EXPECT_EQ(text.rfind(R"({"org.ctr.chunks.v1":{"algorithm":"sha256","chunkSize":65536,"size":100,"digests":")", 0), 0U)
      << text;
  EXPECT_EQ(text.size(), text.find("\"digests\":\"") + 11 + 64 + 3) << text;  // one digest, then "}}
}

TEST_F(ChunkTable, WholeDigestIsDigestFilesAndEachChunkItsOwn) {
  const auto bytes = writeFile(3 * kSmallChunk + 7);
  const auto computed = compute();
  ctr::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  EXPECT_EQ(computed.digest, image::digestFile(fd.get(), path.string()).digest);
  // Each chunk's digest is the plain SHA-256 of its bytes, as a reader holding only them computes.
  for (std::uint64_t i = 0; i < computed.table.chunkCount(); ++i) {
    image::Digester chunk;
    chunk.update(bytes.data() + i * kSmallChunk, computed.table.chunkLength(i));
    const auto parsed = image::parseChunkTableConfig(
        tableText("65536", "65536", quoted(chunk.digest().substr(7))), kSmallChunk);
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->digests[0], computed.table.digests[i]) << "chunk " << i;
  }
}

TEST_F(ChunkTable, FileOfWholeChunksHasNoEmptyLastChunk) {
  writeFile(2 * kSmallChunk);
  const auto table = compute().table;
  EXPECT_EQ(table.chunkCount(), 2U);
  EXPECT_EQ(table.chunkLength(1), kSmallChunk);
}

TEST_F(ChunkTable, EmptyFileHasNoChunks) {
  writeFile(0);
  const auto computed = compute();
  EXPECT_EQ(computed.digest, "sha256:" + kEmptySha256);
  EXPECT_EQ(computed.table.size, 0U);
  EXPECT_EQ(computed.table.chunkCount(), 0U);
  const auto parsed = image::parseChunkTableConfig(image::chunkTableConfig(computed.table), 0);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->chunkCount(), 0U);
  EXPECT_EQ(parsed->chunkLength(0), 0U);
  EXPECT_FALSE(parsed->matches(0, "", 0));
}

TEST_F(ChunkTable, DefaultChunkSizeIsOneMebibyte) {
  writeFile(kSmallChunk);
  const auto computed = compute(image::kChunkSize);
  EXPECT_EQ(computed.table.chunkSize, 1U << 20);
  EXPECT_EQ(computed.table.chunkCount(), 1U);
}

TEST_F(ChunkTable, RefusesToComputeWithAChunkSizeOutOfRange) {
  writeFile(10);
  for (std::uint64_t chunkSize : {std::uint64_t{0}, kSmallChunk / 2, kSmallChunk + 1, std::uint64_t{128} << 20})
    EXPECT_THROW(compute(chunkSize), ctr::Error) << chunkSize;
}

TEST(ChunkTableConfig, WithoutTheKeyHasNoTable) {
  EXPECT_FALSE(image::parseChunkTableConfig("{}", 0));
  EXPECT_FALSE(image::parseChunkTableConfig("{}", 12345));
  EXPECT_FALSE(image::parseChunkTableConfig(R"({"org.ctr.chunks.v2":{},"other":[1,2]})", 0));
}

TEST(ChunkTableConfig, RefusesWhatIsNotAJsonObject) {
  EXPECT_NE(refusal("", 0).find("not JSON"), std::string::npos);
  EXPECT_NE(refusal("{", 0).find("not JSON"), std::string::npos);
  EXPECT_NE(refusal("{} trailing", 0).find("not JSON"), std::string::npos);
  EXPECT_NE(refusal("[]", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal("\"{}\"", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal("null", 0).find("not a JSON object"), std::string::npos);
}

TEST(ChunkTableConfig, RefusesEachMalformedField) {
  const std::string one = quoted(std::string(64, 'a'));  // the digest of one chunk
  const std::string two = quoted(std::string(128, 'a'));
  struct Case {
    std::string config;
    std::uint64_t blobSize;
    std::string named;  // what the message must name
  };
  const std::vector<Case> cases = {
      {R"({"org.ctr.chunks.v1":5})", 0, "chunk table org.ctr.chunks.v1: not a JSON object"},
      {R"({"org.ctr.chunks.v1":[]})", 0, "chunk table org.ctr.chunks.v1: not a JSON object"},
      {R"({"org.ctr.chunks.v1":null})", 0, "chunk table org.ctr.chunks.v1: not a JSON object"},
      {tableText("65536", "0", "\"\"", "\"sha512\""), 0, "algorithm"},
      {tableText("65536", "0", "\"\"", "\"SHA256\""), 0, "algorithm"},
      {tableText("65536", "0", "\"\"", "256"), 0, "algorithm"},
      {R"({"org.ctr.chunks.v1":{"chunkSize":65536,"size":0,"digests":""}})", 0, "algorithm is missing"},
      {tableText("0", "0", "\"\""), 0, "chunkSize"},
      {tableText("32768", "0", "\"\""), 0, "chunkSize"},             // below 64 KiB
      {tableText("65535", "0", "\"\""), 0, "chunkSize"},
      {tableText("196608", "0", "\"\""), 0, "chunkSize"},            // 3 x 64 KiB
      {tableText("134217728", "0", "\"\""), 0, "chunkSize"},         // 128 MiB
      {tableText("9223372036854775808", "0", "\"\""), 0, "chunkSize"},  // 2^63
      {tableText("18446744073709551616", "0", "\"\""), 0, "chunkSize"},  // 2^64: a double
      {tableText("-65536", "0", "\"\""), 0, "chunkSize"},
      {tableText("65536.0", "0", "\"\""), 0, "chunkSize"},
      {tableText("6.5536e4", "0", "\"\""), 0, "chunkSize"},
      {tableText("\"65536\"", "0", "\"\""), 0, "chunkSize"},
      {tableText("true", "0", "\"\""), 0, "chunkSize"},
      {R"({"org.ctr.chunks.v1":{"algorithm":"sha256","size":0,"digests":""}})", 0, "chunkSize is missing"},
      {tableText("65536", "1", one), 2, "size 1 is not the SIF layer's 2 bytes"},
      {tableText("65536", "-1", one), 1, "size"},
      {tableText("65536", "1.0", one), 1, "size"},
      {tableText("65536", "1e0", one), 1, "size"},
      {tableText("65536", "99999999999999999999999", one), 1, "size"},
      {tableText("65536", "null", one), 1, "size"},
      {R"({"org.ctr.chunks.v1":{"algorithm":"sha256","chunkSize":65536,"digests":""}})", 0, "size is missing"},
      {tableText("65536", "1", "\"\""), 1, "digests has 0 hex digits, not the 64 of 1 chunks"},
      {tableText("65536", "0", one), 0, "digests has 64 hex digits, not the 0 of 0 chunks"},
      {tableText("65536", "65536", two), 65536, "digests"},           // one chunk, two digests
      {tableText("65536", "65537", one), 65537, "digests"},           // two chunks, one digest
      {tableText("65536", "1", quoted(std::string(63, 'a'))), 1, "digests"},
      {tableText("65536", "1", quoted(std::string(65, 'a'))), 1, "digests"},
      {tableText("65536", "1", quoted(std::string(64, 'A'))), 1, "digest 0 is not 64 lowercase hex digits"},
      {tableText("65536", "1", quoted(std::string(63, 'a') + "g")), 1, "digest 0"},
      {tableText("65536", "65537", quoted(std::string(64, 'a') + std::string(63, '0') + " ")), 65537, "digest 1"},
      {tableText("65536", "1", "[" + one + "]"), 1, "digests is not a string"},
      {tableText("65536", "1", "1"), 1, "digests is not a string"},
      {R"({"org.ctr.chunks.v1":{"algorithm":"sha256","chunkSize":65536,"size":0}})", 0, "digests is missing"},
      // The largest size: 2^48 chunks, whose digest count must not overflow or be allocated.
      {tableText("65536", "18446744073709551615", one), UINT64_MAX, "digests has 64 hex digits"},
  };
  for (const auto& c : cases) {
    const std::string message = refusal(c.config, c.blobSize);
    EXPECT_NE(message.find(c.named), std::string::npos) << c.config << "\n  refused with: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(ChunkTableConfig, AcceptsEveryAllowedChunkSizeAndIgnoresOtherKeys) {
  for (std::uint64_t chunkSize = 64 * 1024; chunkSize <= 64 * 1024 * 1024; chunkSize *= 2) {
    const auto parsed = image::parseChunkTableConfig(
        tableText(std::to_string(chunkSize), std::to_string(chunkSize + 1), quoted(std::string(128, 'f'))),
        chunkSize + 1);
    ASSERT_TRUE(parsed) << chunkSize;
    EXPECT_EQ(parsed->chunkCount(), 2U);
    EXPECT_EQ(parsed->chunkLength(1), 1U);
  }
  const auto parsed = image::parseChunkTableConfig(
      R"({"a":1,"org.ctr.chunks.v1":{"algorithm":"sha256","chunkSize":65536,"size":0,"digests":"","later":true}})", 0);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->chunkCount(), 0U);
}

}  // namespace

TEST_F(ChunkTable, ServedBesideAnImageCarriesItsDigest) {
  const auto bytes = writeFile(kSmallChunk + 7);
  const auto computed = compute();
  const std::string text = image::urlChunkTable(computed.digest, computed.table);
  const auto served = image::parseUrlChunkTable(text);
  EXPECT_EQ(served.digest, computed.digest);
  EXPECT_EQ(served.table.size, bytes.size());
  EXPECT_EQ(served.table.digests, computed.table.digests);
  // The same object an ORAS config carries, plus the digest.
  EXPECT_TRUE(image::parseChunkTableConfig(text, bytes.size()));
}

TEST(UrlChunkTable, RefusesWhatCannotNameTheImage) {
  auto refusedWith = [](const std::string& text) {
    try {
      (void)image::parseUrlChunkTable(text);
      return std::string();
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
  };
  const std::string table = tableText("65536", "0", quoted(""));
  const std::string digest = "sha256:" + kEmptySha256;
  EXPECT_EQ(refusedWith(R"({"digest":")" + digest + R"(",)" + table.substr(1)), "");
  EXPECT_NE(refusedWith("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusedWith(table).find("no \"digest\""), std::string::npos);
  EXPECT_NE(refusedWith(R"({"digest":"sha256:../x",)" + table.substr(1)).find("no \"digest\""), std::string::npos);
  EXPECT_NE(refusedWith(R"({"digest":")" + digest + R"("})").find("with the image's size"), std::string::npos);
  EXPECT_NE(refusedWith(R"({"digest":")" + digest + R"(",)" + tableText("65536", "0", quoted("00")).substr(1)), "")
      << "a malformed table";
}
