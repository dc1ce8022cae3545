#include <gtest/gtest.h>

#include <fstream>

#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/strings.hpp"

using ctr::config::parsePolicy;

TEST(ConfigPolicy, DefaultsAreSafe) {
  auto p = parsePolicy("", "ctr.conf");
  EXPECT_FALSE(p.allowSetuid);
  EXPECT_TRUE(p.allowUserNamespaces);
  EXPECT_EQ(p.setuidImageOwners, std::vector<std::string>{"root"});
  EXPECT_EQ(p.maxLoopDevices, 64);  // per user
  EXPECT_EQ(p.maxLoopDevicesTotal, 256);
  EXPECT_TRUE(p.rootKernelInterfacesReadOnly);
}

TEST(ConfigPolicy, RootKernelInterfacesAreReadOnlyUnlessTheAdminSaysWritable) {
  EXPECT_TRUE(parsePolicy("root kernel interfaces = read-only", "f").rootKernelInterfacesReadOnly);
  EXPECT_FALSE(parsePolicy("root kernel interfaces = writable", "f").rootKernelInterfacesReadOnly);
  EXPECT_THROW(parsePolicy("root kernel interfaces = yes", "f"), ctr::Error);
}

TEST(ConfigPolicy, ParsesEveryKey) {
  auto p = parsePolicy(
      "# comment\n"
      "allow setuid = yes   # trailing comment\n"
      "allow user binds = no\n"
      "image driver = squashfuse\n"
      "squashfs server = squashfuse\n"
      "setuid image directories = /opt/images, /scratch/images\n"
      "setuid image owners = root, self\n"
      "setuid formats = sif\n"
      "max loop devices = 8\n"
      "max loop devices total = 100\n"
      "bind path = /scratch\n"
      "bind path = /etc/localtime:/etc/localtime:ro\n"
      "seccomp profile = /etc/ctr/strict.json\n",
      "ctr.conf");
  EXPECT_TRUE(p.allowSetuid);
  EXPECT_FALSE(p.allowUserBinds);
  EXPECT_EQ(p.imageDriver, ctr::config::ImageDriver::Squashfuse);
  EXPECT_EQ(p.squashfsServer, ctr::config::SquashfsServer::Squashfuse);
  EXPECT_EQ(p.setuidImageDirectories.size(), 2U);
  EXPECT_EQ(p.setuidImageOwners, (std::vector<std::string>{"root", "self"}));
  EXPECT_EQ(p.setuidFormats, std::vector<std::string>{"sif"});
  EXPECT_EQ(p.maxLoopDevices, 8);
  EXPECT_EQ(p.maxLoopDevicesTotal, 100);
  EXPECT_EQ(p.defaultBinds.size(), 2U);
  EXPECT_EQ(p.seccompProfile, "/etc/ctr/strict.json");
}

TEST(ConfigPolicy, UnknownKeyNamesFileAndLine) {
  try {
    parsePolicy("allow setuid = no\nallow everything = yes\n", "/etc/ctr/ctr.conf");
    FAIL() << "expected an error";
  } catch (const ctr::Error& e) {
    EXPECT_STREQ(e.what(), "/etc/ctr/ctr.conf:2: unknown key 'allow everything'");
  }
}

TEST(ConfigPolicy, RejectsBadValues) {
  EXPECT_THROW(parsePolicy("allow setuid = maybe", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("max loop devices = -3", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("max loop devices = 12abc", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("max loop devices total = 0", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("setuid image directories = relative/dir", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("setuid formats = ext3", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("image driver = docker", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("squashfs server = squashfuse_ll", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("no equals sign here", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("bind path = relative", "f"), ctr::Error);
}

TEST(ConfigPolicy, ShippedConfigParses) {
  auto p = ctr::config::loadPolicy(CTR_SOURCE_DIR "/etc/ctr.conf");
  EXPECT_FALSE(p.allowSetuid);
  EXPECT_EQ(p.source, CTR_SOURCE_DIR "/etc/ctr.conf");
}

TEST(ConfigPolicy, MissingFileGivesDefaults) {
  auto p = ctr::config::loadPolicy("/nonexistent/ctr.conf");
  EXPECT_TRUE(p.source.empty());
}

TEST(ConfigLines, DropsCommentsAndBlankLinesAndSplitsAtTheFirstEquals) {
  auto lines = ctr::configLines("# header\n\n  key = a = b  # note\r\ndeny ioctl arg1 == 5\n   \nlast=1");
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[0].number, 3);
  EXPECT_EQ(lines[0].text, "key = a = b");
  EXPECT_TRUE(lines[0].hasEquals);
  EXPECT_EQ(lines[0].key, "key");
  EXPECT_EQ(lines[0].value, "a = b");
  EXPECT_EQ(lines[1].number, 4);
  EXPECT_EQ(lines[1].key, "deny ioctl arg1");  // callers decide what a line is
  EXPECT_EQ(lines[2].number, 6);
  EXPECT_EQ(lines[2].key, "last");
  EXPECT_EQ(lines[2].value, "1");
  EXPECT_FALSE(ctr::configLines("word\n")[0].hasEquals);
}

TEST(ConfigPolicy, BadValueErrorNamesFileLineAndKey) {
  try {
    parsePolicy("\nmax loop devices total = 0\n", "ctr.conf");
    FAIL() << "expected an error";
  } catch (const ctr::Error& e) {
    EXPECT_STREQ(e.what(), "ctr.conf:2: max loop devices total: expected a whole number from 1 to 1048576, got '0'");
  }
}

TEST(ConfigPolicy, PullLimitsAndTokenRealmHosts) {
  auto p = parsePolicy("", "ctr.conf");
  EXPECT_EQ(p.pull.maxBlobBytes, std::uint64_t{16} << 30);
  EXPECT_EQ(p.pull.maxTotalBytes, std::uint64_t{64} << 30);
  EXPECT_EQ(p.pull.maxUnpackedBytes, std::uint64_t{128} << 30);
  EXPECT_EQ(p.pull.tokenRealmHosts, std::vector<std::string>{"auth.docker.io"});
  p = parsePolicy(
      "pull max blob size = 1G\n"
      "pull max total size = 2.5g\n"
      "pull max unpacked size = 512M\n"
      "pull token realm hosts = auth.example.org, 127.0.0.1:5001, [::1]:8443\n",
      "ctr.conf");
  EXPECT_EQ(p.pull.maxBlobBytes, std::uint64_t{1} << 30);
  EXPECT_EQ(p.pull.maxTotalBytes, std::uint64_t{5} << 29);
  EXPECT_EQ(p.pull.maxUnpackedBytes, std::uint64_t{512} << 20);
  EXPECT_EQ(p.pull.tokenRealmHosts, (std::vector<std::string>{"auth.example.org", "127.0.0.1:5001", "[::1]:8443"}));
  EXPECT_TRUE(parsePolicy("pull token realm hosts =\n", "f").pull.tokenRealmHosts.empty());
  EXPECT_THROW(parsePolicy("pull max blob size = 0", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("pull max total size = lots", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("pull token realm hosts = https://auth.example.org", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("pull token realm hosts = user@auth.example.org", "f"), ctr::Error);
}

TEST(ConfigPolicy, ImageCacheDirectoryAndSize) {
  auto p = parsePolicy("", "ctr.conf");
  EXPECT_EQ(p.pull.cacheDir, "");
  EXPECT_EQ(p.pull.cacheMaxBytes, std::uint64_t{20} << 30);
  p = parsePolicy("image cache dir = /var/tmp/ctr-cache-%u\nimage cache max size = 500M\n", "ctr.conf");
  EXPECT_EQ(p.pull.cacheDir, "/var/tmp/ctr-cache-%u");
  EXPECT_EQ(p.pull.cacheMaxBytes, std::uint64_t{500} << 20);
  EXPECT_THROW(parsePolicy("image cache dir = cache", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("image cache max size = big", "f"), ctr::Error);
}

TEST(ConfigPolicy, SiteImageStore) {
  auto p = parsePolicy("", "ctr.conf");
  EXPECT_EQ(p.pull.storeDir, "");
  EXPECT_EQ(p.pull.storeCopy, ctr::config::StoreCopy::Never);
  EXPECT_EQ(p.pull.storeWaitSeconds, 1800);
  p = parsePolicy("image store dir = /lustre/ctr-store\nimage store copy = always\nimage store wait = 60\n", "ctr.conf");
  EXPECT_EQ(p.pull.storeDir, "/lustre/ctr-store");
  EXPECT_EQ(p.pull.storeCopy, ctr::config::StoreCopy::Always);
  EXPECT_EQ(p.pull.storeWaitSeconds, 60);
  EXPECT_EQ(parsePolicy("image store copy = auto", "f").pull.storeCopy, ctr::config::StoreCopy::Auto);
  EXPECT_THROW(parsePolicy("image store dir = store", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("image store dir = /lustre/store-%u", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("image store copy = sometimes", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("image store wait = 0", "f"), ctr::Error);
}

TEST(ConfigPolicy, NodeLocalStaging) {
  auto p = parsePolicy("", "ctr.conf");
  EXPECT_EQ(p.stageDir, "/var/tmp/ctr-stage-%u");
  EXPECT_EQ(p.stageImages, ctr::config::StageImages::Never);
  EXPECT_EQ(p.stageMaxBytes, std::uint64_t{20} << 30);
  p = parsePolicy("stage dir = /local/stage-%u\nstage images = auto\nstage max size = 2G\n", "ctr.conf");
  EXPECT_EQ(p.stageDir, "/local/stage-%u");
  EXPECT_EQ(p.stageImages, ctr::config::StageImages::Auto);
  EXPECT_EQ(p.stageMaxBytes, std::uint64_t{2} << 30);
  EXPECT_EQ(parsePolicy("stage images = always", "f").stageImages, ctr::config::StageImages::Always);
  EXPECT_THROW(parsePolicy("stage dir = stage", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("stage dir = /local/%h", "f"), ctr::Error) << "an unknown %X at parse time";
  EXPECT_THROW(parsePolicy("stage images = sometimes", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("stage max size = huge", "f"), ctr::Error);
  const auto shipped = ctr::config::loadPolicy(CTR_SOURCE_DIR "/etc/ctr.conf");
  EXPECT_EQ(shipped.stageImages, ctr::config::StageImages::Never);
}

TEST(ConfigPolicy, LazilyReadImages) {
  auto p = parsePolicy("", "ctr.conf");
  EXPECT_EQ(p.pull.lazyImages, ctr::config::LazyImages::Registry);
  EXPECT_EQ(p.pull.lazyCacheDir, "/var/tmp/ctr-lazy-%u");
  EXPECT_TRUE(p.pull.lazyPrefetch);
  EXPECT_EQ(p.pull.lazyCacheMaxBytes, std::uint64_t{20} << 30);
  EXPECT_FALSE(p.pull.lazyUnverified);
  EXPECT_TRUE(parsePolicy("lazy unverified = allow", "f").pull.lazyUnverified);
  EXPECT_THROW(parsePolicy("lazy unverified = yes", "f"), ctr::Error) << "allow or refuse, said in full";
  p = parsePolicy("lazy images = no\nlazy cache dir = /local/lazy-%u\nlazy prefetch = no\nlazy cache max size = 512M\n",
                  "ctr.conf");
  EXPECT_EQ(p.pull.lazyCacheMaxBytes, std::uint64_t{512} << 20);
  EXPECT_EQ(p.pull.lazyImages, ctr::config::LazyImages::No);
  EXPECT_EQ(p.pull.lazyCacheDir, "/local/lazy-%u");
  EXPECT_FALSE(p.pull.lazyPrefetch);
  EXPECT_EQ(parsePolicy("lazy images = all", "f").pull.lazyImages, ctr::config::LazyImages::All);
  EXPECT_THROW(parsePolicy("lazy images = some", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("lazy cache dir = lazy", "f"), ctr::Error);
  EXPECT_THROW(parsePolicy("lazy cache dir = /local/%h", "f"), ctr::Error) << "an unknown %X at parse time";
  EXPECT_THROW(parsePolicy("lazy prefetch = sometimes", "f"), ctr::Error);
  EXPECT_TRUE(parsePolicy("lazy prefetch = on", "f").pull.lazyPrefetch);
  EXPECT_FALSE(parsePolicy("lazy prefetch = off", "f").pull.lazyPrefetch);
  EXPECT_THROW(parsePolicy("lazy cache max size = lots", "f"), ctr::Error);
}

TEST(ConfigPolicy, PullLimitMessagesNameTheFileInUse) {
  EXPECT_EQ(ctr::config::loadPolicy(CTR_SOURCE_DIR "/etc/ctr.conf").pull.configFile, CTR_SOURCE_DIR "/etc/ctr.conf");
  EXPECT_EQ(ctr::config::loadPolicy("/nonexistent/ctr.conf").pull.configFile, "/nonexistent/ctr.conf");
}

TEST(ConfigPolicy, AChoiceKeyNamesEveryChoiceItTakes) {
  const std::pair<const char*, const char*> cases[] = {
      {"image driver = fast", "expected auto, setuid or squashfuse, got 'fast'"},
      {"squashfs server = fuse", "expected auto, ctr-squashfs or squashfuse, got 'fuse'"},
      {"stage images = sometimes", "expected never, auto or always, got 'sometimes'"},
      {"missing gpu driver = ignore", "expected error or warn, got 'ignore'"},
      {"mpi abi check = loose", "expected strict or relaxed, got 'loose'"},
      {"root kernel interfaces = rw", "expected read-only or writable, got 'rw'"},
  };
  for (const auto& [line, message] : cases) {
    try {
      parsePolicy(std::string(line) + "\n", "ctr.conf");
      ADD_FAILURE() << line << ": expected an error";
    } catch (const ctr::Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parsePolicy("stage images = always\n", "c").stageImages, ctr::config::StageImages::Always);
  EXPECT_FALSE(parsePolicy("mpi abi check = relaxed\n", "c").mpiAbiStrict);
}

TEST(ConfigPolicy, RegistryMirrorsAreKeptInOrderAndMalformedOnesRefused) {
  const auto policy = parsePolicy(
      "registry mirror = docker.io = https://hub-cache.example\n"
      "registry mirror = docker.io = http://127.0.0.1:5000/proxy only\n"
      "registry mirror = nvcr.io = harbor.example/nvcr\n",
      "c");
  ASSERT_EQ(policy.pull.mirrors.size(), 3U);
  EXPECT_EQ(policy.pull.mirrors[0].registry, "docker.io");
  EXPECT_EQ(policy.pull.mirrors[0].location, "https://hub-cache.example");
  EXPECT_FALSE(policy.pull.mirrors[0].only);
  EXPECT_EQ(policy.pull.mirrors[1].location, "http://127.0.0.1:5000/proxy");
  EXPECT_TRUE(policy.pull.mirrors[1].only);
  EXPECT_EQ(policy.pull.mirrors[2].registry, "nvcr.io");
  for (const char* bad : {"registry mirror = docker.io", "registry mirror = = https://x", "registry mirror = docker.io =",
                          "registry mirror = docker.io = https://x sometimes", "registry mirror = docker.io = ftp://x",
                          "registry mirror = docker.io = https://user@x", "registry mirror = a/b = https://x",
                          "registry mirror = docker.io = https:///path"})
    EXPECT_THROW((void)parsePolicy(std::string(bad) + "\n", "c"), ctr::Error) << bad;
}

// Execution control: '[DIR] MODE' rules, the longest DIR an image lies under wins, one
// without DIR takes the rest; off takes nothing.
TEST(ConfigPolicy, ExecutionRulesPickTheLongestDirectory) {
  const auto p = parsePolicy("execution rule = whitelist\n"
                             "execution rule = /apps/images/ blacklist\n"
                             "execution rule = /apps/images/dev off\n"
                             "execution rule = /opt/my images whitestrict\n"
                             "trusted key = /etc/ctr/site.pem\n"
                             "blacklisted key = /etc/ctr/revoked.asc\n",
                             "ctr.conf");
  ASSERT_EQ(p.execution.rules.size(), 4u);
  EXPECT_EQ(p.execution.rules[1].dir, "/apps/images");
  EXPECT_EQ(p.execution.rules[3].dir, "/opt/my images");
  EXPECT_EQ(p.execution.trustedKeys, std::vector<std::string>{"/etc/ctr/site.pem"});
  EXPECT_EQ(p.execution.blacklistedKeys, std::vector<std::string>{"/etc/ctr/revoked.asc"});
  auto mode = [&](std::string_view path) {
    const auto* r = executionRuleFor(p.execution, path);
    return r ? std::string(toString(r->mode)) : std::string("none");
  };
  EXPECT_EQ(mode("/home/u/a.sif"), "whitelist");
  EXPECT_EQ(mode("/apps/images/a.sif"), "blacklist");
  EXPECT_EQ(mode("/apps/images-old/a.sif"), "whitelist");  // a name that only starts alike
  EXPECT_EQ(mode("/apps/images/dev/a.sif"), "none");
  EXPECT_EQ(mode("/opt/my images/a.sif"), "whitestrict");
  EXPECT_EQ(executionRuleFor(parsePolicy("", "ctr.conf").execution, "/a.sif"), nullptr);
  EXPECT_THROW(parsePolicy("execution rule = /a sometimes\n", "ctr.conf"), ctr::Error);
  EXPECT_THROW(parsePolicy("execution rule = apps whitelist\n", "ctr.conf"), ctr::Error);
  EXPECT_THROW(parsePolicy("execution rule = /a off\nexecution rule = /a/ whitelist\n", "ctr.conf"), ctr::Error);
  EXPECT_THROW(parsePolicy("trusted key = site.pem\n", "ctr.conf"), ctr::Error);
}
