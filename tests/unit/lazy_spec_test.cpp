// The spec ctr writes for a lazily read image's server (issue 57): read back as written, and
// a spec the server must not act on refused in one line naming what is wrong.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "ctr/chunk_table.hpp"
#include "ctr/error.hpp"
#include "ctr/lazy_blob.hpp"

namespace lazy = ctr::image::lazy;

namespace {

lazy::Spec sampleSpec() {
  lazy::Spec spec;
  spec.name = "oras://registry.site/group/app:1";
  spec.url = "https://registry.site/v2/group/app/blobs/sha256:" + std::string(64, 'a');
  spec.authorization = "Authorization: Bearer abc.def";
  spec.tokenUrl = "https://auth.site/token?service=registry&scope=repository:group/app:pull";
  spec.tokenAuthorization = "Authorization: Basic YWxpY2U6czNjcmV0";
  spec.digest = "sha256:" + std::string(64, 'a');
  spec.table.chunkSize = ctr::image::kChunkSize;
  spec.table.size = 3 * ctr::image::kChunkSize + 5;
  spec.table.digests.resize(4);
  for (std::size_t i = 0; i < spec.table.digests.size(); ++i) spec.table.digests[i].fill(static_cast<unsigned char>(i));
  spec.cacheDir = "/var/tmp/ctr-lazy-1000";
  return spec;
}

// The spec's text with `key` set to `value` (null: removed).
std::string edited(const std::string& key, const nlohmann::json& value) {
  auto json = nlohmann::json::parse(lazy::specText(sampleSpec()));
  if (value.is_null()) json.erase(key);
  else json[key] = value;
  return json.dump();
}

void expectRefused(const std::string& text, const std::string& words) {
  try {
    (void)lazy::parseSpec(text);
    FAIL() << "accepted: " << text;
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(LazySpec, ReadsBackWhatWasWritten) {
  const lazy::Spec spec = sampleSpec();
  const lazy::Spec back = lazy::parseSpec(lazy::specText(spec));
  EXPECT_EQ(back.name, spec.name);
  EXPECT_EQ(back.url, spec.url);
  EXPECT_EQ(back.authorization, spec.authorization);
  EXPECT_EQ(back.tokenUrl, spec.tokenUrl);
  EXPECT_EQ(back.tokenAuthorization, spec.tokenAuthorization);
  EXPECT_EQ(back.digest, spec.digest);
  EXPECT_EQ(back.cacheDir, spec.cacheDir);
  EXPECT_EQ(back.table.size, spec.table.size);
  EXPECT_EQ(back.table.chunkSize, spec.table.chunkSize);
  EXPECT_EQ(back.table.digests, spec.table.digests);
  EXPECT_EQ(lazy::logFile(back), "/var/tmp/ctr-lazy-1000/" + std::string(64, 'a') + ".log");
}

TEST(LazySpec, UnverifiedCarriesOnlyTheSize) {
  lazy::Spec spec = sampleSpec();
  spec.unverified = true;
  spec.table = lazy::unverifiedTable(5 * (1 << 20) + 1);
  const auto json = nlohmann::json::parse(lazy::specText(spec));
  EXPECT_FALSE(json.contains("chunks")) << "no digests written for a table that has none";
  const lazy::Spec back = lazy::parseSpec(lazy::specText(spec));
  EXPECT_TRUE(back.unverified);
  EXPECT_EQ(back.table.size, spec.table.size);
  EXPECT_EQ(back.table.chunkCount(), 6u);
  EXPECT_EQ(back.table.chunkLength(5), 1u);
  EXPECT_FALSE(lazy::parseSpec(lazy::specText(sampleSpec())).unverified);
  auto bad = json;
  bad["unverified"] = nlohmann::json::object();
  EXPECT_THROW((void)lazy::parseSpec(bad.dump()), ctr::Error);
}

TEST(LazySpec, RefusesWhatTheServerMustNotActOn) {
  expectRefused("not json", "not a JSON object");
  expectRefused(edited("url", "file:///etc/passwd"), "the URL is not http(s)");
  expectRefused(edited("url", nullptr), "no 'url' string");
  expectRefused(edited("tokenUrl", "gopher://x/"), "the token URL is not http(s)");
  expectRefused(edited("digest", "sha256:" + std::string(64, 'A')), "is not a sha256 digest");
  expectRefused(edited("digest", "sha512:" + std::string(64, 'a')), "is not a sha256 digest");
  expectRefused(edited("digest", "sha256:../../etc"), "is not a sha256 digest");
  expectRefused(edited("cacheDir", "relative/dir"), "not an absolute path");
  expectRefused(edited("chunks", nlohmann::json::object()), "no chunk table");
  auto json = nlohmann::json::parse(lazy::specText(sampleSpec()));
  json["chunks"][std::string(ctr::image::kChunkTableKey)]["digests"] = "00";
  expectRefused(json.dump(), "hex digits");
}
