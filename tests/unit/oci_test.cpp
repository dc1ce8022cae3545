// Docker/OCI images: config mapping, the Apptainer metadata, layer application (whiteouts,
// opaque directories, refusals of paths that leave the root), platform choice, digests.
// Layers are tar archives built in memory by the small ustar writer below and read by
// libarchive, as a pull reads them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/oci.hpp"
#include "ctr/run_process.hpp"

namespace oci = ctr::image::oci;
namespace fs = std::filesystem;

namespace {

// One ustar member: type '0' file, '5' directory, '2' symlink, '1' hard link.
struct Member {
  std::string name;
  char type = '0';
  std::string data;  // content, or the link target
  unsigned mode = 0644;
};

std::string tarOf(const std::vector<Member>& members) {
  std::string out;
  for (const auto& m : members) {
    std::string h(512, '\0');
    auto put = [&](std::size_t off, std::size_t len, const std::string& v) { h.replace(off, std::min(len, v.size()), v.substr(0, len)); };
    auto octal = [&](std::size_t off, std::size_t len, unsigned long long v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(len - 1), v);
      put(off, len - 1, buf);
    };
    const bool link = m.type == '1' || m.type == '2';
    const std::size_t size = m.type == '0' ? m.data.size() : 0;
    put(0, 100, m.name);
    octal(100, 8, m.type == '5' ? 0755 : m.mode);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, size);
    octal(136, 12, 1700000000);
    h.replace(148, 8, "        ");
    h[156] = m.type;
    if (link) put(157, 100, m.data);
    put(257, 6, "ustar");
    put(263, 2, "00");
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    octal(148, 7, sum);
    out += h;
    if (size) {
      out += m.data;
      out.append((512 - size % 512) % 512, '\0');
    }
  }
  out.append(1024, '\0');
  return out;
}

ctr::ProcessOptions capture() {
  ctr::ProcessOptions o;
  o.captureStdout = true;
  return o;
}

std::string readText(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

class OciLayers : public ::testing::Test {
 protected:
  fs::path root;
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/oci-root.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root = tmpl;
  }
  void TearDown() override { oci::removeTree(root); }
  std::string errorOf(oci::LayerApplier& applier, const std::vector<Member>& layer, const std::string& name) {
    try {
      applier.applyFromMemory(tarOf(layer), name);
    } catch (const ctr::Error& e) {
      return e.oneLine();
    }
    return "no error";
  }
};

TEST_F(OciLayers, WhiteoutsAndOpaqueDirectoriesHideEarlierLayers) {
  oci::LayerApplier applier(root);
  applier.applyFromMemory(tarOf({{"a/", '5', ""}, {"a/old", '0', "old"}, {"a/sub/", '5', ""}, {"a/sub/deep", '0', "deep"},
                                 {"b/", '5', ""}, {"b/gone", '0', "x"}, {"b/stays", '0', "y"}}),
                          "layer 1");
  // Opaque marker after an entry of its own layer: that entry stays, lower content goes,
  // also under a subdirectory this layer names again.
  applier.applyFromMemory(tarOf({{"a/new", '0', "new"}, {"a/sub/", '5', ""}, {"a/.wh..wh..opq", '0', ""}, {"b/.wh.gone", '0', ""}}),
                          "layer 2");
  applier.finish();
  EXPECT_EQ(readText(root / "a/new"), "new");
  EXPECT_FALSE(fs::exists(root / "a/old"));
  EXPECT_TRUE(fs::is_directory(root / "a/sub"));
  EXPECT_FALSE(fs::exists(root / "a/sub/deep"));
  EXPECT_FALSE(fs::exists(root / "b/gone"));
  EXPECT_EQ(readText(root / "b/stays"), "y");
  EXPECT_FALSE(fs::exists(root / "b/.wh.gone"));
}

TEST_F(OciLayers, LaterEntriesReplaceEarlierOnesAndHardLinksShareTheFile) {
  oci::LayerApplier applier(root);
  applier.applyFromMemory(tarOf({{"etc/", '5', ""}, {"etc/x", '2', "/etc/passwd"}, {"etc/dir/", '5', ""}, {"etc/dir/f", '0', "f"}}), "layer 1");
  applier.applyFromMemory(tarOf({{"etc/x", '0', "file now"}, {"etc/dir", '0', "file too"}, {"etc/link", '1', "etc/x"}}), "layer 2");
  applier.finish();
  EXPECT_EQ(readText(root / "etc/x"), "file now");
  EXPECT_EQ(readText(root / "etc/dir"), "file too");
  struct stat a {}, b {};
  ASSERT_EQ(::stat((root / "etc/x").c_str(), &a), 0);
  ASSERT_EQ(::stat((root / "etc/link").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
}

TEST_F(OciLayers, RefusesDotDotAndAbsolutePaths) {
  oci::LayerApplier applier(root);
  EXPECT_EQ(errorOf(applier, {{"../etc/evil", '0', "x"}}, "layer 3"),
            "layer 3: ../etc/evil: path with '..' refused (it would leave the image root)");
  EXPECT_EQ(errorOf(applier, {{"a/../../evil", '0', "x"}}, "layer 3"),
            "layer 3: a/../../evil: path with '..' refused (it would leave the image root)");
  EXPECT_NE(errorOf(applier, {{"/etc/evil", '0', "x"}}, "layer 3").find("absolute path refused"), std::string::npos);
  EXPECT_NE(errorOf(applier, {{"ok", '1', "../outside"}}, "layer 3").find("'..' refused"), std::string::npos);
  EXPECT_FALSE(fs::exists(root.parent_path() / "evil"));
}

TEST_F(OciLayers, RefusesWritesThroughASymlinkOfAnEarlierLayer) {
  const fs::path outside = root.string() + "-outside";
  fs::create_directory(outside);
  oci::LayerApplier applier(root);
  applier.applyFromMemory(tarOf({{"escape", '2', outside.string()}}), "layer 1");
  EXPECT_EQ(errorOf(applier, {{"escape/evil", '0', "x"}}, "layer 2"),
            "layer 2: escape/evil: refused: it goes through the symlink escape (writing through a symlink could leave the image root)");
  // The same within one layer, and a whiteout through it.
  EXPECT_NE(errorOf(applier, {{"l", '2', "/"}, {"l/etc/passwd", '0', "x"}}, "layer 3").find("goes through the symlink l"),
            std::string::npos);
  EXPECT_NE(errorOf(applier, {{"escape/.wh.victim", '0', ""}}, "layer 4").find("goes through the symlink"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(outside));
  fs::remove_all(outside);
}

TEST_F(OciLayers, ReportsTheDigestOfTheLayerBytes) {
  oci::LayerApplier applier(root);
  const std::string layer = tarOf({{"f", '0', "content"}});
  ctr::image::Digester d;
  d.update(layer.data(), layer.size());
  EXPECT_EQ(applier.applyFromMemory(layer, "layer 1").digest, d.digest());
}

TEST(OciDigest, MatchesTheFips180Vectors) {
  ctr::image::Digester d;
  d.update("abc", 3);
  const std::string abc = d.digest();
  EXPECT_EQ(abc, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NO_THROW(oci::checkDigestSyntax(abc, "x"));
  // Two blocks, fed in uneven pieces: streaming gives the one-shot digest.
  const std::string text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  ctr::image::Digester pieces;
  for (std::size_t i = 0; i < text.size(); i += 7) pieces.update(text.data() + i, std::min<std::size_t>(7, text.size() - i));
  EXPECT_EQ(pieces.digest(), "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_THROW(oci::checkDigestSyntax("sha512:abcd", "x"), ctr::Error);
  EXPECT_THROW(oci::checkDigestSyntax("sha256:ABC", "x"), ctr::Error);
}

// Apptainer's default names (its internal/pkg/util/uri GetName), which scripts and
// workflow tools then use: the reference's last component and its tag.
TEST(PullName, NamedAsApptainerNamesThem) {
  using oci::defaultPullName;
  EXPECT_EQ(defaultPullName("docker://alpine"), "alpine_latest.sif");
  EXPECT_EQ(defaultPullName("docker://alpine:3.18"), "alpine_3.18.sif");
  EXPECT_EQ(defaultPullName("docker://127.0.0.1:5000/lab/app:v2"), "app_v2.sif");
  EXPECT_EQ(defaultPullName("docker://ghcr.io/org/tool:1.0,extra"), "tool_1.0.sif");
  EXPECT_EQ(defaultPullName("docker://alpine@sha256:abcd"), "alpine@sha256_abcd.sif");
  EXPECT_EQ(defaultPullName("docker-archive:/data/images/app.tar"), "app.tar_latest.sif");
  EXPECT_EQ(defaultPullName("oci-archive:app.tar:1"), "app.tar_1.sif");
  EXPECT_EQ(defaultPullName("alpine"), "");               // no transport
  EXPECT_EQ(defaultPullName("ubuntu:18.04.img"), "");     // a file name with a colon, as Apptainer reads it
  EXPECT_EQ(defaultPullName("docker://"), "");
}

TEST(PullName, NameThenOutputThenDefaultAndDirInFront) {
  using oci::pullOutputPath;
  EXPECT_EQ(pullOutputPath({"docker://alpine:3"}, "", ""), "alpine_3.sif");
  EXPECT_EQ(pullOutputPath({"out.sif", "docker://alpine:3"}, "", ""), "out.sif");
  EXPECT_EQ(pullOutputPath({"docker://alpine:3"}, "mine.sif", ""), "mine.sif");
  EXPECT_EQ(pullOutputPath({"out.sif", "docker://alpine:3"}, "mine.sif", ""), "mine.sif");  // --name wins, as there
  EXPECT_EQ(pullOutputPath({"docker://alpine:3"}, "", "/images"), "/images/alpine_3.sif");
  EXPECT_EQ(pullOutputPath({"docker://alpine:3"}, "/abs/x.sif", "/images"), "/images/abs/x.sif");  // Go's filepath.Join
  try {
    (void)pullOutputPath({"alpine"}, "", "");
    FAIL() << "a source without a transport and no output was accepted";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(e.status(), 1);
    EXPECT_NE(std::string(e.what()).find("'alpine' names no transport"), std::string::npos) << e.what();
  }
}

TEST(PullSource, AgentAndReferenceWithApptainersArchiveSpelling) {
  using Parsed = std::optional<std::pair<std::string, std::string>>;
  EXPECT_EQ(oci::pullSource("docker://host:5000/a/b:1"), (Parsed{{"docker", "host:5000/a/b:1"}}));
  EXPECT_EQ(oci::pullSource("docker-archive:/tmp/a.tar"), (Parsed{{"docker-archive", "/tmp/a.tar"}}));
  EXPECT_EQ(oci::pullSource("docker-archive:///tmp/a.tar"), (Parsed{{"docker-archive", "/tmp/a.tar"}}));
  EXPECT_EQ(oci::pullSource("oci-archive://img.tar:1"), (Parsed{{"oci-archive", "img.tar:1"}}));
  EXPECT_EQ(oci::pullSource("oci:layout:1"), (Parsed{{"oci", "layout:1"}}));
  EXPECT_EQ(oci::pullSource("image.sif"), std::nullopt);
  EXPECT_EQ(oci::pullSource("library://alpine"), std::nullopt);
}

TEST(OciReference, SplitsRegistryRepositoryTagAndDigest) {
  auto r = oci::parseReference("docker://127.0.0.1:5000/group/demo:1.0");
  EXPECT_EQ(r.registry, "127.0.0.1:5000");
  EXPECT_EQ(r.repository, "group/demo");
  EXPECT_EQ(r.tag, "1.0");
  EXPECT_EQ(r.shortName(), "group/demo:1.0");
  r = oci::parseReference("busybox");
  EXPECT_EQ(r.registry, "registry-1.docker.io");
  EXPECT_EQ(r.repository, "library/busybox");
  EXPECT_EQ(r.tag, "latest");
  const std::string digest = "sha256:" + std::string(64, 'a');
  r = oci::parseReference("localhost:5000/demo@" + digest);
  EXPECT_EQ(r.registry, "localhost:5000");
  EXPECT_EQ(r.digest, digest);
  EXPECT_TRUE(r.tag.empty());
  EXPECT_THROW(oci::parseReference("host:5000/Demo:1"), ctr::Error);
  EXPECT_THROW(oci::parseReference("demo@sha256:short"), ctr::Error);
  // Docker Hub named by its host: the registry's API host, official images under library/.
  r = oci::parseReference("docker.io/ubuntu:24.04");
  EXPECT_EQ(r.registry, "registry-1.docker.io");
  EXPECT_EQ(r.repository, "library/ubuntu");
  r = oci::parseReference("index.docker.io/nvidia/cuda:12.4.0-base");
  EXPECT_EQ(r.registry, "registry-1.docker.io");
  EXPECT_EQ(r.repository, "nvidia/cuda");
}

TEST(OciPlatform, ChoosesTheHostsEntryOfAManifestList) {
  auto index = nlohmann::json::parse(R"({"manifests":[
    {"digest":"sha256:1","platform":{"os":"linux","architecture":"arm","variant":"v7"}},
    {"digest":"sha256:2","platform":{"os":"linux","architecture":"arm64","variant":"v8"}},
    {"digest":"sha256:3","platform":{"os":"windows","architecture":"amd64"}},
    {"digest":"sha256:4","platform":{"os":"linux","architecture":"amd64"}}]})");
  EXPECT_EQ(oci::choosePlatform(index, {"linux", "amd64", ""}), 3u);
  EXPECT_EQ(oci::choosePlatform(index, {"linux", "arm64", "v8"}), 1u);
  EXPECT_EQ(oci::choosePlatform(index, {"linux", "arm", "v7"}), 0u);
  try {
    oci::choosePlatform(index, {"linux", "riscv64", ""});
    FAIL() << "no error";
  } catch (const ctr::Error& e) {
    EXPECT_EQ(e.oneLine(),
              "no image for linux/riscv64 in the index (it has: linux/arm/v7, linux/arm64/v8, windows/amd64, linux/amd64)");
  }
}

TEST(OciConfig, MapsTheImageConfig) {
  auto blob = nlohmann::json::parse(R"({"architecture":"amd64","os":"linux","config":{
    "Env":["PATH=/usr/bin:/bin","A=1"],"Entrypoint":["/bin/echo"],"Cmd":["x"],"WorkingDir":"/w",
    "Labels":{"k":"v","n":3}}})");
  auto c = oci::parseImageConfig(blob);
  EXPECT_EQ(c.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "A=1"}));
  EXPECT_EQ(c.entrypoint, std::vector<std::string>{"/bin/echo"});
  EXPECT_EQ(c.cmd, std::vector<std::string>{"x"});
  EXPECT_EQ(c.workingDir, "/w");
  EXPECT_EQ(c.labels.at("k"), "v");
  EXPECT_EQ(c.labels.at("n"), "3");
  EXPECT_EQ(c.architecture, "amd64");
  EXPECT_TRUE(oci::parseImageConfig(nlohmann::json::parse(R"({"os":"linux"})")).env.empty());
}

class OciMetadata : public OciLayers {};

TEST_F(OciMetadata, EnvScriptKeepsUserValuesExceptPath) {
  oci::ImageConfig c;
  c.env = {"PATH=/opt/bin:/bin", "GREETING=say \"hi\" $HOME", "BARE", "1BAD=x"};
  oci::writeApptainerMetadata(c, root);
  EXPECT_EQ(readText(root / ".singularity.d/env/10-docker2singularity.sh"),
            "#!/bin/sh\n"
            "export PATH=\"/opt/bin:/bin\"\n"
            "export GREETING=\"${GREETING:-\"say \\\"hi\\\" \\$HOME\"}\"\n"
            "export BARE=\"${BARE:-}\"\n");
  auto r = ctr::runProcess({"/bin/sh", "-c", ". " + (root / ".singularity.d/env/10-docker2singularity.sh").string() + "; echo \"$GREETING\""},
                           capture());
  EXPECT_EQ(r.capturedStdout, "say \"hi\" $HOME\n");
  for (const char* f : {"env/01-base.sh", "env/90-environment.sh", "env/99-base.sh", "actions/run", "actions/exec", "runscript"})
    EXPECT_TRUE(fs::is_regular_file(root / ".singularity.d" / f)) << f;
  EXPECT_EQ(readText(root / ".singularity.d/labels.json"), "{}");
}

// The runscript as Apptainer's: ENTRYPOINT, then the arguments or else CMD.
TEST_F(OciMetadata, RunscriptCombinesEntrypointCmdAndArguments) {
  oci::ImageConfig c;
  c.entrypoint = {"/bin/echo", "it's"};
  c.cmd = {"default arg"};
  c.labels = {{"org.example", "x"}};
  oci::writeApptainerMetadata(c, root);
  const std::string rs = (root / ".singularity.d/runscript").string();
  EXPECT_EQ(ctr::runProcess({"/bin/sh", rs}, capture()).capturedStdout, "it's default arg\n");
  EXPECT_EQ(ctr::runProcess({"/bin/sh", rs, "a b", "c"}, capture()).capturedStdout, "it's a b c\n");
  EXPECT_EQ(ctr::runProcess({"/usr/bin/env", "SINGULARITY_NO_EVAL=1", "/bin/sh", rs}, capture()).capturedStdout,
            "it's default arg\n");
  c.entrypoint.clear();
  c.cmd = {"/bin/echo", "only cmd"};
  oci::writeApptainerMetadata(c, root);
  EXPECT_EQ(ctr::runProcess({"/bin/sh", rs}, capture()).capturedStdout, "only cmd\n");
  EXPECT_EQ(ctr::runProcess({"/bin/sh", rs, "/bin/echo", "override"}, capture()).capturedStdout, "override\n");
  EXPECT_EQ(readText(root / ".singularity.d/labels.json"), "{\n\t\"org.example\": \"x\"\n}");
}

// The WORKDIR, which Apptainer's layout has no place for, in ctr's own file; a config without
// an absolute one leaves none, even where a layer brought one.
TEST_F(OciMetadata, WorkingDirIsRecordedOnlyWhenTheConfigNamesAnAbsoluteOne) {
  oci::ImageConfig c;
  c.workingDir = "/workspace/x y";
  oci::writeApptainerMetadata(c, root);
  EXPECT_EQ(readText(root / ".singularity.d/ctr-workdir"), "/workspace/x y\n");
  for (const std::string& bad : {std::string(), std::string("relative"), std::string("/a\nb")}) {
    oci::writeApptainerMetadata(c, root);
    c.workingDir = bad;
    oci::writeApptainerMetadata(c, root);
    EXPECT_FALSE(fs::exists(root / ".singularity.d/ctr-workdir")) << bad;
    c.workingDir = "/workspace/x y";
  }
}

// A layer's .singularity.d -> /elsewhere leads the writes to the image's own /elsewhere.
TEST_F(OciMetadata, PlantedSymlinksLeadInsideTheImageNeverToTheHost) {
  const fs::path outside = root.string() + "-meta-outside";
  fs::create_directory(outside);
  fs::create_symlink(outside, root / ".singularity.d");
  fs::create_directories(root / "etc");
  fs::create_symlink(outside / "hosts", root / "etc" / "hosts");
  oci::writeApptainerMetadata({}, root);
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_TRUE(fs::is_regular_file(root / outside.relative_path() / "runscript"));
  EXPECT_TRUE(fs::is_symlink(root / "etc" / "hosts"));  // present already: left as it is
  fs::remove_all(outside);
}

}  // namespace

// limits on what a pull fetches and unpacks (issue 24, F7)

namespace {
ctr::config::PullPolicy smallLimits() {
  ctr::config::PullPolicy p;
  p.maxBlobBytes = 1 << 20;
  p.maxTotalBytes = 3 << 20;
  p.maxUnpackedBytes = 1 << 20;
  p.configFile = "/etc/ctr/ctr.conf";
  return p;
}
template <typename F>
std::string errorOfCall(F f) {
  try {
    f();
  } catch (const ctr::Error& e) {
    return e.oneLine();
  }
  return "no error";
}
}  // namespace

TEST(OciLimits, RefusesADeclaredBlobOverTheBlobLimitNamingLayerLimitAndKey) {
  const auto limits = smallLimits();
  EXPECT_EQ(errorOfCall([&] { oci::checkDeclaredSizes({{"layer 1/2 sha256:aa of demo:1", 1 << 20}, {"layer 2/2 sha256:bb of demo:1", (1 << 20) + 1}}, limits, "demo:1"); }),
            "layer 2/2 sha256:bb of demo:1: declared as 1048577 bytes, more than one blob may be (the limit is 1 MiB: "
            "'pull max blob size' in /etc/ctr/ctr.conf)");
}

TEST(OciLimits, RefusesLayersWhoseSumPassesTheTotalLimit) {
  const auto limits = smallLimits();
  std::vector<oci::DeclaredBlob> blobs(3, {"layer", 1 << 20});
  EXPECT_NO_THROW(oci::checkDeclaredSizes(blobs, limits, "demo:1"));  // exactly the limit
  blobs.push_back({"layer", 1});
  EXPECT_EQ(errorOfCall([&] { oci::checkDeclaredSizes(blobs, limits, "demo:1"); }),
            "demo:1: its layers are declared as more than 3 MiB together (the limit is 3 MiB: 'pull max total size' in "
            "/etc/ctr/ctr.conf)");
  // Sizes near 2^64 cannot wrap the sum past the check.
  ctr::config::PullPolicy huge;
  huge.maxBlobBytes = ~std::uint64_t{0};
  EXPECT_NE(errorOfCall([&] { oci::checkDeclaredSizes({{"a", ~std::uint64_t{0} - 1}, {"b", 5}}, huge, "x"); }), "no error");
}

TEST(OciLimits, BuiltInDefaultsAndTheirSettingWithoutAConfigFile) {
  const ctr::config::PullPolicy defaults;
  EXPECT_EQ(defaults.maxBlobBytes, std::uint64_t{16} << 30);
  EXPECT_EQ(defaults.maxTotalBytes, std::uint64_t{64} << 30);
  EXPECT_EQ(defaults.maxUnpackedBytes, std::uint64_t{128} << 30);
  EXPECT_EQ(oci::limitSetting(defaults, defaults.maxBlobBytes, "pull max blob size"),
            "the limit is 16 GiB: 'pull max blob size' in ctr.conf");
}

TEST_F(OciLayers, RefusesALayerThatUnpacksToMoreThanTheLimitBeforeWritingIt) {
  oci::LayerApplier applier(root, smallLimits());
  EXPECT_EQ(errorOf(applier, {{"big", '0', std::string((1 << 20) + 1, 'x')}}, "layer 1/1 sha256:aa of demo:1"),
            "layer 1/1 sha256:aa of demo:1: unpacks to more than 1 MiB (at big); the limit is 1 MiB: 'pull max "
            "unpacked size' in /etc/ctr/ctr.conf");
  EXPECT_FALSE(fs::exists(root / "big"));
}

TEST_F(OciLayers, CountsTheUnpackedSizeAcrossTheLayersOfOneImage) {
  oci::LayerApplier applier(root, smallLimits());
  applier.applyFromMemory(tarOf({{"a", '0', std::string(600 << 10, 'a')}}), "layer 1/2");
  EXPECT_NE(errorOf(applier, {{"b", '0', std::string(600 << 10, 'b')}}, "layer 2/2").find("layer 2/2: unpacks to more than 1 MiB (at b)"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(root / "b"));
}

TEST_F(OciLayers, AnImageArchiveRefusesDevicesAndFifosAsMembers) {
  oci::LayerApplier applier(root, {}, oci::LayerApplier::Members::ArchiveFiles);
  EXPECT_EQ(errorOf(applier, {{"manifest.json", '6', ""}}, "docker-archive x.tar"),
            "docker-archive x.tar: manifest.json: refused: a FIFO in an image archive (it holds only files, directories and links)");
  EXPECT_NE(errorOf(applier, {{"layer.tar", '3', ""}}, "docker-archive x.tar").find("refused: a device in an image archive"),
            std::string::npos);
  EXPECT_NE(errorOf(applier, {{"blk", '4', ""}}, "oci-archive x.tar").find("refused: a device"), std::string::npos);
  EXPECT_FALSE(fs::exists(root / "manifest.json"));
}

// reading an image archive's own files (F9)

class OciArchiveMembers : public OciLayers {
 protected:
  ctr::UniqueFd dir;
  void SetUp() override {
    OciLayers::SetUp();
    oci::LayerApplier applier(root, {}, oci::LayerApplier::Members::ArchiveFiles);
    applier.applyFromMemory(tarOf({{"blobs/", '5', ""},
                                   {"blobs/real", '0', "real"},
                                   {"inside", '2', "blobs/real"},
                                   {"blobs/up", '2', "../blobs/real"},
                                   {"hard", '1', "blobs/real"},
                                   {"absolute", '2', "/etc/passwd"},
                                   {"escape", '2', "../../../../../../etc/passwd"},
                                   {"proc", '2', "/proc/self/root/etc/passwd"},
                                   {"dirlink", '2', "/etc"}}),
                            "archive");
    applier.finish();
    ASSERT_EQ(::mkfifo((root / "fifo").c_str(), 0600), 0);
    dir.reset(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir);
  }
  std::string read(const std::string& rel) {
    return ctr::readCheckedFile(oci::openArchiveMember(dir.get(), rel, "member").get(), 1 << 20, "member");
  }
};

TEST_F(OciArchiveMembers, FollowsLinksBetweenItsOwnMembers) {
  EXPECT_EQ(read("blobs/real"), "real");
  EXPECT_EQ(read("inside"), "real");  // skopeo's docker-archive: <id>/layer.tar -> ../<digest>.tar
  EXPECT_EQ(read("blobs/up"), "real");
  EXPECT_EQ(read("hard"), "real");
}

TEST_F(OciArchiveMembers, NeverFollowsALinkOutOfTheArchive) {
  for (const char* rel : {"absolute", "escape", "proc", "dirlink/passwd", "../" }) {
    const std::string e = errorOfCall([&] { read(rel); });
    EXPECT_NE(e.find("refused: a link that leaves the archive"), std::string::npos) << rel << ": " << e;
  }
}

TEST_F(OciArchiveMembers, RefusesWhatIsNotARegularFileWithoutBlocking) {
  EXPECT_NE(errorOfCall([&] { read("fifo"); }).find("is a FIFO, not a regular file"), std::string::npos);
  EXPECT_NE(errorOfCall([&] { read("blobs"); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(errorOfCall([&] { read("missing"); }).find("member (missing)"), std::string::npos);
}

// token realms (F8)

namespace {
std::string realmError(std::string_view realm, std::string_view scheme = "https", std::string_view registry = "reg.example.org",
                       std::vector<std::string> allowed = {}) {
  ctr::config::PullPolicy p;
  p.tokenRealmHosts = std::move(allowed);
  p.configFile = "/etc/ctr/ctr.conf";
  return errorOfCall([&] { oci::checkTokenRealm(realm, scheme, registry, p); });
}
}  // namespace

TEST(OciTokenRealm, AcceptsHttpsOnTheRegistrysHostAndPort) {
  EXPECT_EQ(realmError("https://reg.example.org/token"), "no error");
  EXPECT_EQ(realmError("https://REG.example.org:443/v2/token?x=1"), "no error");
  EXPECT_EQ(realmError("https://reg.example.org:5000/token", "https", "reg.example.org:5000"), "no error");
  EXPECT_EQ(realmError("https://[::1]:5000/token", "https", "[::1]:5000"), "no error");
  // A local registry spoken to over http may have its token service there too.
  EXPECT_EQ(realmError("http://127.0.0.1:5000/token", "http", "127.0.0.1:5000"), "no error");
}

TEST(OciTokenRealm, RefusesSchemesOtherThanHttps) {
  for (const char* realm : {"file:///dev/zero", "FILE:///etc/shadow", "ftp://reg.example.org/t", "gopher://reg.example.org/",
                            "reg.example.org/token", "//reg.example.org/token", ""}) {
    EXPECT_NE(realmError(realm).find("refused: a token realm must be an https URL"), std::string::npos) << realm;
  }
}

TEST(OciTokenRealm, RefusesPlainHttpUnlessTheRegistryIsHttpOnTheSameHost) {
  EXPECT_NE(realmError("http://reg.example.org/token").find("over plain http is accepted only"), std::string::npos);
  EXPECT_NE(realmError("http://auth.example.org/token", "http", "127.0.0.1:5000", {"auth.example.org"}).find("over plain http"),
            std::string::npos);
  // Same host, another port: http is fine, the port needs the admin's word.
  EXPECT_NE(realmError("http://127.0.0.1:5001/token", "http", "127.0.0.1:5000").find("on another host or port"), std::string::npos);
  EXPECT_EQ(realmError("http://127.0.0.1:5001/token", "http", "127.0.0.1:5000", {"127.0.0.1:5001"}), "no error");
}

TEST(OciTokenRealm, RefusesAnotherHostOrPortUnlessCtrConfListsIt) {
  EXPECT_EQ(realmError("https://auth.example.org/token"),
            "registry reg.example.org sent the token realm 'https://auth.example.org/token': refused: it is on another host "
            "or port than the registry (an admin can allow it with 'pull token realm hosts' in /etc/ctr/ctr.conf)");
  EXPECT_NE(realmError("https://reg.example.org:8443/token").find("another host or port"), std::string::npos);
  EXPECT_NE(realmError("https://reg.example.org.evil.net/token").find("another host or port"), std::string::npos);
  EXPECT_EQ(realmError("https://auth.example.org/token", "https", "reg.example.org", {"auth.example.org"}), "no error");
  EXPECT_EQ(realmError("https://auth.example.org:8443/t", "https", "reg.example.org", {"auth.example.org:8443"}), "no error");
  // A listed host without a port means the scheme's default port only.
  EXPECT_NE(realmError("https://auth.example.org:8443/t", "https", "reg.example.org", {"auth.example.org"}).find("another host"),
            std::string::npos);
  // Docker Hub: the built-in list has its token service.
  EXPECT_EQ(errorOfCall([] { oci::checkTokenRealm("https://auth.docker.io/token", "https", "registry-1.docker.io", {}); }),
            "no error");
}

TEST(OciTokenRealm, RefusesUserInformationAndControlCharacters) {
  EXPECT_NE(realmError("https://user:pw@reg.example.org/token").find("user information"), std::string::npos);
  EXPECT_NE(realmError("https://reg.example.org@evil.net/token").find("user information"), std::string::npos);
  EXPECT_NE(realmError("https://reg.example.org/token\r\nX-Evil: 1").find("holds a control character"), std::string::npos);
  EXPECT_NE(realmError("https://reg.example.org/to ken").find("holds no space"), std::string::npos);
  EXPECT_NE(realmError("https://reg.example.org:0/t").find("not a host[:port]"), std::string::npos);
  EXPECT_NE(realmError("https://reg.example.org:99999/t").find("not a host[:port]"), std::string::npos);
}

TEST(OciTokenRealm, TokensServicesAndScopesCarryNoControlCharacters) {
  EXPECT_NO_THROW(oci::checkTokenText("eyJhbGciOi.eyJpc3Mi-_~+/=", "the token"));
  EXPECT_EQ(errorOfCall([] { oci::checkTokenText("abc\r\nX-Injected: yes", "the token from https://r/t"); }),
            "the token from https://r/t holds a control character: refused");
  EXPECT_NE(errorOfCall([] { oci::checkTokenText("abc def", "the token"); }).find("holds a space"), std::string::npos);
  EXPECT_NE(errorOfCall([] { oci::checkTokenText(std::string("a\0b", 3), "the token"); }).find("control character"), std::string::npos);
  EXPECT_NE(errorOfCall([] { oci::checkNoControlCharacters("registry\n", "the service"); }).find("control character"), std::string::npos);
  EXPECT_NO_THROW(oci::checkNoControlCharacters("repository:team/app:pull", "the scope"));
}

TEST(RegistryMirrors, MirrorsOfTheRegistryComeFirstInOrderThenTheRegistryUnlessOnly) {
  using oci::parseReference;
  using oci::registryEndpoints;
  oci::PullOptions options;
  options.limits.mirrors = {{"docker.io", "https://hub-cache.example/proxy/", false},
                            {"quay.io", "quay-cache.example", false},
                            {"registry-1.docker.io", "http://127.0.0.1:5000", false}};
  const auto hub = registryEndpoints(parseReference("ubuntu:22.04"), options);
  ASSERT_EQ(hub.size(), 3U) << "Docker Hub by any of its names, then Docker Hub itself";
  EXPECT_EQ(hub[0].scheme, "https");
  EXPECT_EQ(hub[0].host, "hub-cache.example");
  EXPECT_EQ(hub[0].prefix, "proxy/");
  EXPECT_TRUE(hub[0].mirror);
  EXPECT_EQ(hub[1].scheme, "http");
  EXPECT_EQ(hub[1].host, "127.0.0.1:5000");
  EXPECT_EQ(hub[1].prefix, "");
  EXPECT_EQ(hub[2].host, "registry-1.docker.io");
  EXPECT_FALSE(hub[2].mirror);

  const auto other = registryEndpoints(parseReference("ghcr.io/org/app:1"), options);
  ASSERT_EQ(other.size(), 1U) << "no mirror of ghcr.io";
  EXPECT_EQ(other[0].host, "ghcr.io");

  options.limits.mirrors[0].only = true;
  const auto only = registryEndpoints(parseReference("docker.io/library/ubuntu:22.04"), options);
  ASSERT_EQ(only.size(), 2U) << "an 'only' entry keeps the registry itself out";
  EXPECT_TRUE(only[0].mirror && only[1].mirror);
}
