// Definition builds (issue 9), the pure parts: a build step's plan (identity, mounts,
// environment), the subordinate id ranges, the metadata layout, the labels, the host's apt
// mirror, and the bootstrap agent table.
#include "ctr/build.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "../../src/builder/build_progress.hpp"

#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/launch.hpp"

namespace {

using namespace ctr;
namespace deffile = ctr::builder::deffile;

host::HostFacts userHost(uid_t uid = 1001) {
  host::HostFacts host;
  host.user.uid = uid;
  host.user.gid = uid;
  host.user.name = uid == 0 ? "root" : "alice";
  host.user.home = "/home/alice";
  host.env = {"TERM=xterm", "HOME=/home/alice", "SECRET_TOKEN=x", "http_proxy=http://proxy:3128"};
  return host;
}

launch::BuildStepOptions postStep() {
  launch::BuildStepOptions step;
  step.sandbox = "/tmp/out.build/rootfs-0";
  step.stageDir = "/tmp/out.build/mnt";
  step.argv = {"/bin/sh", "-ex", "/.post.script"};
  return step;
}

host::SubordinateIds ranges() {
  return {host::IdRange{0, 100000, 65536}, host::IdRange{0, 200000, 65536}};
}

bool hasEnv(const launch::LaunchPlan& plan, const std::string& kv) {
  return std::find(plan.environment.begin(), plan.environment.end(), kv) != plan.environment.end();
}

TEST(BuildStepPlan, CallerIsRootOfAPrivateNamespaceOverTheSandbox) {
  auto plan = launch::planBuildStep(postStep(), config::Policy{}, userHost(), {});
  ASSERT_TRUE(plan.build);
  EXPECT_EQ(plan.rootMode, launch::RootMode::Sandbox);
  EXPECT_FALSE(plan.namespaces.sharedUser);
  EXPECT_EQ(plan.build->sandbox, "/tmp/out.build/rootfs-0");
  EXPECT_EQ(plan.build->uidMap, (std::vector<host::IdRange>{{0, 1001, 1}}));
  EXPECT_EQ(plan.build->gidMap, (std::vector<host::IdRange>{{0, 1001, 1}}));
  EXPECT_FALSE(plan.build->mapHelpers);
  EXPECT_NE(plan.build->mapNote.find("/etc/subuid"), std::string::npos) << plan.build->mapNote;
  EXPECT_EQ(plan.user.uid, 0u);
  EXPECT_TRUE(plan.handover.keepCapabilities);
  EXPECT_FALSE(plan.handover.seccomp);
  EXPECT_EQ(plan.argv, postStep().argv);
  EXPECT_EQ(plan.workdir, "/");
  // Its own PID namespace and /proc; an interrupting signal reaches every process of it.
  EXPECT_TRUE(plan.namespaces.pid);
  EXPECT_TRUE(plan.namespaces.pidInit);
  EXPECT_TRUE(plan.namespaces.signalAll);
  ASSERT_FALSE(plan.mounts.empty());
  EXPECT_EQ(plan.mounts.front().kind, launch::MountKind::Proc);
  EXPECT_EQ(plan.mounts.front().destination, "/proc");
}

TEST(BuildStepPlan, SubordinateRangesAreMappedAboveRootThroughTheHelpers) {
  auto plan = launch::planBuildStep(postStep(), config::Policy{}, userHost(), ranges());
  ASSERT_TRUE(plan.build);
  EXPECT_TRUE(plan.build->mapHelpers);
  EXPECT_EQ(plan.build->uidMap, (std::vector<host::IdRange>{{0, 1001, 1}, {1, 100000, 65536}}));
  EXPECT_EQ(plan.build->gidMap, (std::vector<host::IdRange>{{0, 1001, 1}, {1, 200000, 65536}}));
}

TEST(BuildStepPlan, RootMapsTheWholeIdSpaceToItself) {
  auto plan = launch::planBuildStep(postStep(), config::Policy{}, userHost(0), ranges());
  ASSERT_TRUE(plan.build);
  EXPECT_FALSE(plan.build->mapHelpers);
  EXPECT_EQ(plan.build->uidMap, (std::vector<host::IdRange>{{0, 0, 4294967295u}}));
}

TEST(BuildStepPlan, ApptainersMountsAndNothingOfTheUsers) {
  auto plan = launch::planBuildStep(postStep(), config::Policy{}, userHost(), {});
  std::vector<std::string> destinations;
  for (const auto& m : plan.mounts) destinations.push_back(m.destination);
  EXPECT_EQ(destinations, (std::vector<std::string>{"/proc", "/sys", "/dev", "/etc/resolv.conf", "/etc/hosts"}));
  for (const auto& m : plan.mounts) EXPECT_FALSE(m.required) << m.destination;
}

TEST(BuildStepPlan, TestSeesTheTreeReadOnlyOrOverATmpfs) {
  auto step = postStep();
  EXPECT_FALSE(launch::planBuildStep(step, config::Policy{}, userHost(), {}).rootReadOnly) << "%post writes the tree";
  step.section = launch::BuildSection::Test;
  auto plan = launch::planBuildStep(step, config::Policy{}, userHost(), {});
  EXPECT_TRUE(plan.rootReadOnly) << "nothing %test writes may go into the image";
  EXPECT_EQ(plan.rootMode, launch::RootMode::Sandbox);
  ASSERT_GE(plan.mounts.size(), 2U);
  EXPECT_EQ(plan.mounts[plan.mounts.size() - 2].destination, "/tmp");
  EXPECT_EQ(plan.mounts.back().kind, launch::MountKind::Tmpfs);
  step.writableTmpfs = true;
  plan = launch::planBuildStep(step, config::Policy{}, userHost(), {});
  EXPECT_EQ(plan.rootMode, launch::RootMode::Overlay);
  EXPECT_TRUE(plan.overlay.tmpfsUpper) << "--writable-tmpfs: the writes go to a tmpfs that vanishes";
  EXPECT_FALSE(plan.rootReadOnly);
}

TEST(BuildStepPlan, CleanEnvironmentWithTheBuildVariables) {
  auto step = postStep();
  step.hostEnv = userHost().env;
  auto plan = launch::planBuildStep(step, config::Policy{}, userHost(), {});
  EXPECT_TRUE(hasEnv(plan, "APPTAINER_ENVIRONMENT=/.singularity.d/env/91-environment.sh"));
  EXPECT_TRUE(hasEnv(plan, "SINGULARITY_ENVIRONMENT=/.singularity.d/env/91-environment.sh"));
  EXPECT_TRUE(hasEnv(plan, "APPTAINER_LABELS=/.build.labels"));
  EXPECT_TRUE(hasEnv(plan, "APPTAINER_ROOTFS=/"));
  EXPECT_TRUE(hasEnv(plan, "TERM=xterm"));
  EXPECT_TRUE(hasEnv(plan, "http_proxy=http://proxy:3128"));
  EXPECT_FALSE(hasEnv(plan, "SECRET_TOKEN=x"));
  EXPECT_TRUE(hasEnv(plan, "HOME=/root"));
  EXPECT_FALSE(plan.sourceEnvScripts);  // %environment applies at run time, not in %post
}

TEST(BuildStepPlan, TestSectionSourcesTheImagesEnvironment) {
  auto step = postStep();
  step.section = launch::BuildSection::Test;
  step.argv = {"/.singularity.d/test"};
  auto plan = launch::planBuildStep(step, config::Policy{}, userHost(), {});
  EXPECT_TRUE(plan.sourceEnvScripts);
}

TEST(BuildStepPlan, RefusedWhenUserNamespacesAreDisabled) {
  config::Policy policy;
  policy.allowUserNamespaces = false;
  EXPECT_THROW((void)launch::planBuildStep(postStep(), policy, userHost(), {}), Error);
}

TEST(BuildStepPlan, ExplainShowsTheMapsAndTheSandbox) {
  auto text = launch::toText(launch::planBuildStep(postStep(), config::Policy{}, userHost(), ranges()));
  EXPECT_NE(text.find("sandbox"), std::string::npos) << text;
  EXPECT_NE(text.find("1 -> 100000 (65536)"), std::string::npos) << text;
  EXPECT_NE(text.find("newuidmap"), std::string::npos) << text;
}

TEST(SubordinateIds, FirstRangeOfTheUserByNameOrUid) {
  const std::string text = "bob:100000:65536\nalice:165536:1000\n1001:300000:5\n";
  EXPECT_EQ(host::parseSubordinateRange(text, "alice", 1001), (host::IdRange{0, 165536, 1000}));
  EXPECT_EQ(host::parseSubordinateRange("1001:300000:5\n", "alice", 1001), (host::IdRange{0, 300000, 5}));
  EXPECT_FALSE(host::parseSubordinateRange(text, "carol", 1002));
}

TEST(SubordinateIds, MalformedLinesAreSkipped) {
  EXPECT_FALSE(host::parseSubordinateRange("alice:x:65536\nalice:1:0\nalice:5\n", "alice", 1001));
  EXPECT_EQ(host::parseSubordinateRange("alice:x:1\nalice:7:9", "alice", 1001), (host::IdRange{0, 7, 9}));
}

deffile::Definition stageOf(const std::string& text) {
  return deffile::parseDefinition(text, "t.def", {}).stages.back();
}

const builder::MetadataFile* findFile(const std::vector<builder::MetadataFile>& files, const std::string& path) {
  for (const auto& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

TEST(MetadataLayout, ApptainersSingularityDirectory) {
  auto stage = stageOf(
      "Bootstrap: scratch\n%runscript\n    echo run\n%environment\n    export A=1\n%test\n    true\n"
      "%startscript\n    echo start\n%help\n    Some help.\n");
  auto files = builder::metadataFiles(stage, "STORED");
  const auto* run = findFile(files, ".singularity.d/runscript");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->mode, 0755u);
  EXPECT_EQ(run->content.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(run->content.find("echo run"), std::string::npos);
  const auto* env = findFile(files, ".singularity.d/env/90-environment.sh");
  ASSERT_TRUE(env);
  EXPECT_EQ(env->content, "#!/bin/sh\n\n    export A=1\n");
  EXPECT_TRUE(env->appendIfPresent);
  ASSERT_TRUE(findFile(files, ".singularity.d/Singularity"));
  EXPECT_EQ(findFile(files, ".singularity.d/Singularity")->content, "STORED");
  EXPECT_TRUE(findFile(files, ".singularity.d/test"));
  EXPECT_TRUE(findFile(files, ".singularity.d/startscript"));
  ASSERT_TRUE(findFile(files, ".singularity.d/runscript.help"));
  EXPECT_EQ(findFile(files, ".singularity.d/runscript.help")->mode, 0644u);
}

TEST(MetadataLayout, AbsentSectionsWriteNothing) {
  auto files = builder::metadataFiles(stageOf("Bootstrap: scratch\n"), "S");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, ".singularity.d/Singularity");
}

TEST(MetadataLayout, AppsUnderScif) {
  auto stage = stageOf("Bootstrap: scratch\n%apprun tool\n    echo tool\n%applabels tool\n    V 1\n"
                       "%appenv tool\n    export T=1\n");
  auto files = builder::metadataFiles(stage, "S");
  EXPECT_TRUE(findFile(files, "scif/apps/tool/scif/runscript"));
  EXPECT_TRUE(findFile(files, "scif/apps/tool/scif/env/01-base.sh"));
  EXPECT_TRUE(findFile(files, "scif/apps/tool/scif/env/90-environment.sh"));
  ASSERT_TRUE(findFile(files, "scif/apps/tool/scif/labels.json"));
  EXPECT_NE(findFile(files, "scif/apps/tool/scif/labels.json")->content.find("\"V\": \"1\""), std::string::npos);
  const auto* base = findFile(files, ".singularity.d/env/94-appsbase.sh");
  ASSERT_TRUE(base);
  EXPECT_NE(base->content.find("SCIF_APPRUN_tool"), std::string::npos);
}

TEST(Labels, ImageThenPostThenBuildThenDefinitionSortedAndTabIndented) {
  auto stage = stageOf("Bootstrap: scratch\n%labels\n    Owner def\n    Shared from-def\n");
  nlohmann::json existing = {{"Base", "image"}, {"Shared", "image"}};
  auto text = builder::labelsJson(existing, "Posted value with spaces\nShared from-post\n", stage, 0, "amd64");
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["Base"], "image");
  EXPECT_EQ(j["Posted"], "value with spaces");
  EXPECT_EQ(j["Shared"], "from-def");
  EXPECT_EQ(j["org.label-schema.build-date"], "1970-01-01T00:00:00Z");
  EXPECT_EQ(j["org.label-schema.usage.singularity.deffile.bootstrap"], "scratch");
  EXPECT_EQ(j["org.label-schema.build-arch"], "amd64");
  EXPECT_NE(text.find("\n\t\""), std::string::npos) << text;
  EXPECT_LT(text.find("\"Base\""), text.find("\"Owner\""));
}

TEST(AptMirror, OneLineSourcesFirst) {
  EXPECT_EQ(builder::hostAptMirror("# comment\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n", {}),
            "http://mirror.example/debian");
}

TEST(AptMirror, Deb822SkipsSecurity) {
  const std::string sources =
      "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\n"
      "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n";
  EXPECT_EQ(builder::hostAptMirror("", {sources}), "http://deb.debian.org/debian");
  EXPECT_EQ(builder::hostAptMirror("", {}), "");
}

TEST(BootstrapAgents, TableHoldsTheBuiltInsAndTakesMore) {
  auto names = builder::bootstrapAgentNames();
  for (const char* name : {"debootstrap", "localimage", "scratch"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  EXPECT_EQ(builder::findBootstrapAgent("no-such-agent"), nullptr);
  bool called = false;
  builder::registerBootstrapAgent("unit-test-agent", [&called](const builder::BootstrapContext&) { called = true; });
  const auto* agent = builder::findBootstrapAgent("unit-test-agent");
  ASSERT_NE(agent, nullptr);
  (*agent)(builder::BootstrapContext{});
  EXPECT_TRUE(called);
}

// %files glob patterns (Apptainer expands a source as a shell word with globstar)

class FilesGlob : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ctr-unit-glob.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    for (const char* dir : {"src", "src/sub", "src/sub/deep", "src/.hidden", "docs"})
      std::filesystem::create_directories(root_ / dir);
    for (const char* file : {"src/a.c", "src/b.c", "src/b.h", "src/.dot.c", "src/sub/c.c", "src/sub/deep/d.c",
                             "src/.hidden/e.c", "docs/x[1].txt", "docs/x1.txt"})
      std::ofstream(root_ / file) << file;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::vector<std::string> expand(const std::string& pattern) { return builder::expandFilesSource(pattern, root_); }
  std::filesystem::path root_;
};

TEST_F(FilesGlob, PlainSourcesAreNotPatterns) {
  EXPECT_FALSE(builder::isFilesPattern("src/a.c"));
  EXPECT_FALSE(builder::isFilesPattern("src/x\\*.c"));
  EXPECT_FALSE(builder::isFilesPattern("a[b"));
  EXPECT_TRUE(builder::isFilesPattern("src/*.c"));
  EXPECT_TRUE(builder::isFilesPattern("src/?.c"));
  EXPECT_TRUE(builder::isFilesPattern("src/[ab].c"));
  // Returned unchanged even when missing: the copy reports a missing plain source.
  EXPECT_EQ(expand("no/such/file"), std::vector<std::string>{"no/such/file"});
}

TEST_F(FilesGlob, StarQuestionAndBracketsWithinOneComponentSorted) {
  EXPECT_EQ(expand("src/*.c"), (std::vector<std::string>{"src/a.c", "src/b.c"}));
  EXPECT_EQ(expand("src/b.?"), (std::vector<std::string>{"src/b.c", "src/b.h"}));
  EXPECT_EQ(expand("src/[a-b].c"), (std::vector<std::string>{"src/a.c", "src/b.c"}));
  EXPECT_EQ(expand("*/sub"), (std::vector<std::string>{"src/sub"}));
  EXPECT_EQ(expand("s*/*/c.c"), (std::vector<std::string>{"src/sub/c.c"}));
}

TEST_F(FilesGlob, LeadingDotOnlyMatchedByAPatternWithOne) {
  EXPECT_EQ(expand("src/.*.c"), (std::vector<std::string>{"src/.dot.c"}));
  EXPECT_THROW((void)expand("src/*/e.c"), Error);  // src/.hidden is not matched by '*'
  EXPECT_EQ(expand("src/.h*/e.c"), (std::vector<std::string>{"src/.hidden/e.c"}));
}

TEST_F(FilesGlob, GlobstarAnyDepthNotIntoHiddenDirectories) {
  EXPECT_EQ(expand("src/**/*.c"),
            (std::vector<std::string>{"src/a.c", "src/b.c", "src/sub/c.c", "src/sub/deep/d.c"}));
  EXPECT_EQ(expand("**/d.c"), (std::vector<std::string>{"src/sub/deep/d.c"}));
  EXPECT_EQ(expand("src/sub/**"),
            (std::vector<std::string>{"src/sub/c.c", "src/sub/deep", "src/sub/deep/d.c"}));
}

TEST_F(FilesGlob, AbsolutePatternsStayAbsoluteAndTrailingSlashKeepsDirectories) {
  // Apptainer's %files from STAGE: absolute paths in the stage's root.
  EXPECT_EQ(expand("/src/s*"), (std::vector<std::string>{"/src/sub"}));
  EXPECT_EQ(expand("/src/*/"), (std::vector<std::string>{"/src/sub/"}));
  EXPECT_EQ(expand("/d*/x[[]1].txt"), (std::vector<std::string>{"/docs/x[1].txt"}));
  EXPECT_EQ(expand("/docs/x\\[1].txt"), (std::vector<std::string>{"/docs/x\\[1].txt"}));  // not a pattern
  EXPECT_EQ(expand("/docs/*\\[1].txt"), (std::vector<std::string>{"/docs/x[1].txt"}));
}

TEST_F(FilesGlob, APatternThatMatchesNothingIsAnError) {
  try {
    (void)expand("src/*.f90");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "'src/*.f90' matches nothing");
  }
  EXPECT_THROW((void)expand("nodir/*.c"), Error);
  EXPECT_THROW((void)expand("src/a.c/*"), Error);  // a file is not a directory
  EXPECT_THROW((void)expand("src/*.c/"), Error);   // only directories with a trailing '/'
}

// the build's progress line

TEST(PhaseDisplay, RenderShowsPhaseSecondsAndTheLogsLastLineCutToTheTerminal) {
  EXPECT_EQ(builder::PhaseDisplay::render("ctr build", "%post", 12.4, "Unpacking gcc (12.2)", 80),
            "ctr build: %post [12 s]  Unpacking gcc (12.2)");
  EXPECT_EQ(builder::PhaseDisplay::render("ctr build", "%post", 3, "", 80), "ctr build: %post [3 s]");
  EXPECT_EQ(builder::PhaseDisplay::render("ctr build", "%post", 3, "a\tb\x1b[1mc", 80), "ctr build: %post [3 s]  a b[1mc");
  EXPECT_EQ(builder::PhaseDisplay::render("ctr build", "%post", 3, "0123456789", 25), "ctr build: %post [3 s]  ");
  // Never half a UTF-8 character.
  EXPECT_EQ(builder::PhaseDisplay::render("b", "p", 0, "\xc3\xa9\xc3\xa9", 14), "b: p [0 s]  ");
  EXPECT_EQ(builder::PhaseDisplay::render("b", "p", 0, "\xc3\xa9\xc3\xa9", 15), "b: p [0 s]  \xc3\xa9");
}

TEST(PhaseDisplay, LastLineSkipsBlankLinesAndKeepsACarriageReturnsLastVersion) {
  EXPECT_EQ(builder::PhaseDisplay::lastLine("one\ntwo\n\n  \n"), "two");
  EXPECT_EQ(builder::PhaseDisplay::lastLine("Progress 10%\rProgress 50%\n"), "Progress 50%");
  EXPECT_EQ(builder::PhaseDisplay::lastLine("crlf\r\n"), "crlf\r");
  EXPECT_EQ(builder::PhaseDisplay::lastLine(""), "");
}

TEST(PhaseDisplay, NotATerminalGivesOnePlainLinePerPhase) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    builder::PhaseDisplay display(fds[1], "ctr build", "/nonexistent.log");
    EXPECT_FALSE(display.tty());
    display.phase("%post");
    display.line("ctr build: warning: w");
    display.suspend();
    display.phase("%test");
  }
  ::close(fds[1]);
  char buf[256] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0),
            "ctr build: %post\nctr build: warning: w\nctr build: %test\n");
}

}  // namespace
