// Registry credentials (issue 53, item 1): the registry's name as credential files spell
// it, Docker/containers auth entries, enroot's netrc, the order of the places looked at,
// and ctr's own file written by `registry login` (0600, replaced whole).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ctr/credentials.hpp"
#include "ctr/error.hpp"

namespace credentials = ctr::image::credentials;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ctr-credentials-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace

TEST(Credentials, RegistryKeyIsHostAndPortWhateverTheSpelling) {
  EXPECT_EQ(credentials::registryKey("https://Reg.Site:5000/v2/"), "reg.site:5000");
  EXPECT_EQ(credentials::registryKey("reg.site:5000"), "reg.site:5000");
  EXPECT_EQ(credentials::registryKey("docker://nvcr.io"), "nvcr.io");
  for (const char* hub : {"docker.io", "index.docker.io", "registry-1.docker.io", "https://index.docker.io/v1/"})
    EXPECT_EQ(credentials::registryKey(hub), "docker.io") << hub;
}

TEST(Credentials, AuthEntryIsBase64OrUsernameAndPassword) {
  // base64("alice:s3:cret"): the password may hold ':'.
  EXPECT_EQ(credentials::fromAuthEntry(R"({"auth":"YWxpY2U6czM6Y3JldA=="})", "r"),
            std::make_pair(std::string("alice"), std::string("s3:cret")));
  EXPECT_EQ(credentials::fromAuthEntry(R"({"username":"bob","password":"pw"})", "r"),
            std::make_pair(std::string("bob"), std::string("pw")));
  EXPECT_FALSE(credentials::fromAuthEntry(R"({"identitytoken":"x"})", "r"));
  EXPECT_THROW((void)credentials::fromAuthEntry(R"({"auth":"bm9jb2xvbg=="})", "r"), ctr::Error);  // "nocolon"
}

TEST(Credentials, NetrcMachineThenDefault) {
  const std::string netrc =
      "machine nvcr.io login $oauthtoken password nvapi-KEY\n"
      "machine reg.site:5000\n  login carol\n  password pw2\n"
      "default login anon password none\n";
  EXPECT_EQ(credentials::fromNetrc(netrc, "nvcr.io"), std::make_pair(std::string("$oauthtoken"), std::string("nvapi-KEY")));
  EXPECT_EQ(credentials::fromNetrc(netrc, "reg.site:5000"), std::make_pair(std::string("carol"), std::string("pw2")));
  EXPECT_EQ(credentials::fromNetrc(netrc, "other.site"), std::make_pair(std::string("anon"), std::string("none")));
  EXPECT_FALSE(credentials::fromNetrc("machine a.site login x password y\n", "b.site"));
}

TEST(Credentials, PlacesInOrderEnvironmentLast) {
  TempDir dir;
  credentials::Places places;
  places.ctrFile = dir.path() / "ctr" / "auth.json";
  places.dockerConfig = dir.path() / "docker" / "config.json";
  places.containersAuth = {dir.path() / "containers" / "auth.json"};
  places.enrootCredentials = dir.path() / "enroot" / ".credentials";
  places.envUsername = "envuser";
  places.envPassword = "envpw";
  EXPECT_EQ(credentials::lookup("reg.site", places)->username, "envuser");
  write(places.enrootCredentials, "machine reg.site login enrootuser password e\n");
  EXPECT_EQ(credentials::lookup("reg.site", places)->username, "enrootuser");
  write(places.containersAuth[0], R"({"auths":{"reg.site":{"auth":"cG9kbWFuOnA="}}})");  // podman:p
  EXPECT_EQ(credentials::lookup("reg.site", places)->username, "podman");
  write(places.dockerConfig, R"({"auths":{"https://reg.site/v1/":{"username":"dockeruser","password":"d"}}})");
  EXPECT_EQ(credentials::lookup("reg.site", places)->username, "dockeruser");
  credentials::store(places.ctrFile, "reg.site", "ctruser", "c");
  const auto found = credentials::lookup("REG.site", places);
  EXPECT_EQ(found->username, "ctruser");
  EXPECT_EQ(found->password, "c");
  EXPECT_EQ(found->source, places.ctrFile.string());
  EXPECT_FALSE(credentials::lookup("elsewhere.site", [&] {
    auto p = places;
    p.envUsername.clear();
    return p;
  }()));
}

TEST(Credentials, StoreKeepsOtherEntriesPrivateAndReplacesWhole) {
  TempDir dir;
  const fs::path file = dir.path() / "cfg" / "ctr" / "auth.json";
  credentials::store(file, "a.site", "u1", "p1");
  credentials::store(file, "https://b.site:5000/", "u2", "p2");
  credentials::store(file, "A.SITE", "u3", "p3");  // the same registry: replaced
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(file.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const auto entries = credentials::list(file);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].registry, "a.site");
  EXPECT_EQ(entries[0].username, "u3");
  EXPECT_EQ(entries[1].registry, "b.site:5000");
  EXPECT_TRUE(credentials::remove(file, "b.site:5000"));
  EXPECT_FALSE(credentials::remove(file, "b.site:5000"));
  EXPECT_EQ(credentials::list(file).size(), 1u);
  for (const auto& entry : fs::directory_iterator(file.parent_path()))
    EXPECT_EQ(entry.path().filename(), "auth.json") << "a temporary file left: " << entry.path();
}

TEST(Credentials, ACredentialFileThatIsNotJsonIsNamed) {
  TempDir dir;
  credentials::Places places;
  places.dockerConfig = dir.path() / "config.json";
  write(places.dockerConfig, "not json");
  try {
    (void)credentials::lookup("reg.site", places);
    FAIL() << "accepted";
  } catch (const ctr::Error& e) {
    EXPECT_NE(e.oneLine().find(places.dockerConfig.string()), std::string::npos) << e.oneLine();
  }
}
