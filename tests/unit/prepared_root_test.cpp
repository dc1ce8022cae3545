#include "ctr/prepared_root.hpp"

#include <gtest/gtest.h>

#include <set>

#include "ctr/error.hpp"
#include "plan_helpers.hpp"

namespace {

using namespace ctr::launch;
using ctr::testing::execTrue;
using ctr::testing::sifImage;
using ctr::testing::findMount;

// ctr::testing::alice, with her groups, working under her home (no bind of its own).
ctr::host::HostFacts alice() {
  ctr::host::HostFacts host = ctr::testing::alice();
  host.user.primaryGroup = {1000, "alice"};
  host.user.groups = {{27, "sudo"}};
  host.cwd = "/home/alice/project";
  host.env = {"HOME=/home/alice", "USER=alice", "PATH=/usr/bin:/bin"};
  return host;
}

LaunchPlan planFor(const LaunchOptions& options, const ctr::host::HostFacts& host = alice()) {
  return planLaunch(options, {}, sifImage(), host);
}

// What a holder made for `plan`: the plan's mounts at `prebound`, and `created` added to the image.
PreparedRootManifest preparedFor(const LaunchPlan& plan, const std::vector<std::string>& prebound,
                                 std::vector<std::string> created = {}) {
  PreparedRootManifest manifest;
  manifest.user = plan.user;
  for (const auto& destination : prebound) {
    const Mount* m = findMount(plan, destination);
    if (m == nullptr) throw std::logic_error("no mount at " + destination + " in the plan");
    manifest.prebound.push_back(preboundOf(*m));
  }
  manifest.created = std::move(created);
  return manifest;
}

// The default launch's binds, as a holder pre-binds them.
const std::vector<std::string> kDefaultBinds = {"/proc", "/sys", "/dev", "/etc/hosts", "/etc/resolv.conf",
                                                "/etc/localtime", "/tmp", "/var/tmp", "/home/alice"};

SourcePresent allPresent() {
  return [](std::size_t) { return true; };
}

// Every source there but the ones at `absent` (by destination).
SourcePresent absentAt(const LaunchPlan& plan, std::set<std::string> absent) {
  return [&plan, absent](std::size_t i) { return absent.count(plan.mounts.at(i).destination) == 0; };
}

std::size_t indexOf(const LaunchPlan& plan, const std::string& destination) {
  for (std::size_t i = 0; i < plan.mounts.size(); ++i)
    if (plan.mounts[i].destination == destination) return i;
  throw std::logic_error("no mount at " + destination);
}

Mount bindAt(const std::string& source, const std::string& destination, bool readOnly, MountOrigin origin) {
  Mount m;
  m.source = source;
  m.destination = destination;
  m.readOnly = readOnly;
  m.origin = origin;
  return m;
}

}  // namespace

TEST(PreparedRootManifest, RoundTripsThroughJson) {
  PreparedRootManifest manifest;
  manifest.user = alice().user;
  manifest.user.gecos = "Alice, Room 12";
  manifest.user.shell = "/bin/bash";
  manifest.prebound = {{MountKind::Bind, "/proc", "/proc", false, true, 0, {}},
                       {MountKind::Bind, "/etc/hosts", "/etc/hosts", true, false, 0, {}},
                       {MountKind::Tmpfs, "/.singularity.d/libs", "", false, true, 0755, 1u << 20},
                       {MountKind::Bind, "/.singularity.d/libs/libcuda.so.1", "/usr/lib/libcuda.so.1", true, false, 0, {}}};
  manifest.created = {"/home/alice", "/scratch"};
  const PreparedRootManifest back = preparedRootManifestFromJson(toJson(manifest));
  EXPECT_EQ(back, manifest);
}

TEST(PreparedRootManifest, RefusesWhatIsNotAManifestOfThisVersion) {
  PreparedRootManifest manifest;
  manifest.user = alice().user;
  manifest.prebound = {{MountKind::Bind, "/tmp", "/tmp", false, true, 0, {}}};
  std::string text = toJson(manifest);
  EXPECT_NO_THROW((void)preparedRootManifestFromJson(text));

  EXPECT_THROW((void)preparedRootManifestFromJson(""), ctr::Error);
  EXPECT_THROW((void)preparedRootManifestFromJson(text.substr(0, text.size() / 2)), ctr::Error);  // cut short
  EXPECT_THROW((void)preparedRootManifestFromJson("[]"), ctr::Error);
  EXPECT_THROW((void)preparedRootManifestFromJson("/tmp\t/tmp\trw\trbind\n"), ctr::Error);  // the old text file

  auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    if (at == std::string::npos) throw std::logic_error("no " + from + " in " + t);
    return t.replace(at, from.size(), to);
  };
  const std::string version = "\"version\": " + std::to_string(kPreparedRootManifestVersion);
  try {
    (void)preparedRootManifestFromJson(edited(version, "\"version\": 99"));
    FAIL() << "a manifest of another version was read";
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 99"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)preparedRootManifestFromJson(edited(version, "\"versio\": 1")), ctr::Error);
  EXPECT_THROW((void)preparedRootManifestFromJson(edited("\"bind\"", "\"overlay\"")), ctr::Error);
  EXPECT_THROW((void)preparedRootManifestFromJson(edited("\"destination\": \"/tmp\"", "\"destination\": \"tmp\"")),
               ctr::Error);
  EXPECT_THROW((void)preparedRootManifestFromJson(edited("\"destination\": \"/tmp\"", "\"destination\": \"/../x\"")),
               ctr::Error);
  EXPECT_THROW((void)preparedRootManifestFromJson(edited("\"readonly\": false", "\"readonly\": \"no\"")), ctr::Error);
}

TEST(PreparedRootManifest, PreboundMatchesTheSameBindOrTheSameTmpfsAtTheSamePlace) {
  const Mount hosts = bindAt("/etc/hosts", "/etc/hosts", true, MountOrigin::Default);
  EXPECT_TRUE(isPrebound(preboundOf(hosts), hosts));
  Mount writable = hosts;
  writable.readOnly = false;
  EXPECT_FALSE(isPrebound(preboundOf(hosts), writable));
  Mount otherSource = hosts;
  otherSource.source = "/etc/hosts.site";
  EXPECT_FALSE(isPrebound(preboundOf(hosts), otherSource));
  Mount notRecursive = hosts;
  notRecursive.recursive = false;
  EXPECT_FALSE(isPrebound(preboundOf(hosts), notRecursive));

  Mount libs;
  libs.kind = MountKind::Tmpfs;
  libs.destination = "/.singularity.d/libs";
  libs.tmpfsMode = 0755;
  libs.tmpfsSizeBytes = 1u << 20;
  EXPECT_TRUE(isPrebound(preboundOf(libs), libs));
  EXPECT_TRUE(isPrebound({MountKind::Tmpfs, "/.singularity.d/libs", "", false, true, 0755, 1u << 20}, libs));
  EXPECT_FALSE(isPrebound({MountKind::Tmpfs, "/.singularity.d/libs", "", false, true, 0700, 1u << 20}, libs));
  EXPECT_FALSE(isPrebound({MountKind::Tmpfs, "/.singularity.d/libs", "", false, true, 0755, {}}, libs));
  EXPECT_FALSE(isPrebound({MountKind::Bind, "/.singularity.d/libs", "/x", false, true, 0, {}}, libs));
}

TEST(PreparedRootManifest, KnowsWhenABindReachesTheEnvScripts) {
  PreparedRootManifest manifest;
  manifest.prebound = {{MountKind::Bind, "/tmp", "/tmp", false, true, 0, {}}, {MountKind::Tmpfs, "/.singularity.dx", "", false, true, 0, {}}};
  EXPECT_FALSE(preboundReachesEnvScripts(manifest));
  for (const char* destination : {"/", "/environment", "/.singularity.d", "/.singularity.d/env"}) {
    auto reaching = manifest;
    reaching.prebound.push_back({MountKind::Bind, destination, "/site", true, true, 0, {}});
    EXPECT_TRUE(preboundReachesEnvScripts(reaching)) << destination;
  }
}

TEST(RootStrategy, ExactFitJoinsTheReadyNamespace) {
  const auto plan = planFor(execTrue());
  const auto manifest = preparedFor(plan, kDefaultBinds);
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::JoinReady) << s.reason;
}

TEST(RootStrategy, ExactFitWithoutReadyNamespaceUsesThePreparedRootAsItIs) {
  const auto plan = planFor(execTrue());
  const auto manifest = preparedFor(plan, kDefaultBinds);
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), false);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  EXPECT_EQ(s.mount, std::vector<bool>(plan.mounts.size(), false));
  EXPECT_TRUE(s.detach.empty());
  EXPECT_NE(s.reason.find("no ready namespace"), std::string::npos) << s.reason;
}

TEST(RootStrategy, NoManifestMeansOwnRoot) {
  const auto plan = planFor(execTrue());
  const auto s = chooseRootStrategy(plan, nullptr, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_EQ(s.reason, "no prepared root");
}

TEST(RootStrategy, AnotherUsersPreparedRootIsNotUsed) {
  const auto plan = planFor(execTrue());
  auto manifest = preparedFor(plan, kDefaultBinds);
  manifest.user.uid = 1001;
  manifest.user.name = "bob";
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_NE(s.reason.find("for user bob (1001)"), std::string::npos) << s.reason;
}

TEST(RootStrategy, APreparedRootForAnotherHomeIsNotUsed) {
  const auto plan = planFor(execTrue());
  auto manifest = preparedFor(plan, kDefaultBinds);
  manifest.user.home = "/work/alice";
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_NE(s.reason.find("home /work/alice"), std::string::npos) << s.reason;
}

TEST(RootStrategy, OtherGroupsMeanOtherIdentityFiles) {
  const auto plan = planFor(execTrue());
  auto manifest = preparedFor(plan, kDefaultBinds);
  manifest.user.groups.push_back({44, "video"});
  EXPECT_EQ(chooseRootStrategy(plan, &manifest, allPresent(), true).kind, RootStrategyKind::OwnRoot);
}

TEST(RootStrategy, AnOverlayRootIsAlwaysOwnRoot) {
  auto o = execTrue();
  o.writableTmpfs = true;
  const auto plan = planFor(o);
  ASSERT_EQ(plan.rootMode, RootMode::Overlay);
  const auto manifest = preparedFor(plan, kDefaultBinds);
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_NE(s.reason.find("overlay"), std::string::npos) << s.reason;
}

TEST(RootStrategy, APreboundBindTheLaunchLacksIsDetachedWithWhatIsInside) {
  const auto plan = planFor(execTrue());
  auto manifest = preparedFor(plan, kDefaultBinds);
  // An admin bind of an earlier policy, a host tmpfs and a library in it.
  manifest.prebound.push_back({MountKind::Bind, "/opt/site", "/opt/site", true, true, 0, {}});
  manifest.prebound.push_back({MountKind::Tmpfs, "/.singularity.d/libs", "", false, true, 0, {}});
  manifest.prebound.push_back({MountKind::Bind, "/.singularity.d/libs/libcuda.so.1", "/usr/lib/libcuda.so.1", true, false, 0, {}});
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  EXPECT_EQ(s.detach, (std::vector<std::string>{"/opt/site", "/.singularity.d/libs"}));
  EXPECT_EQ(s.mount, std::vector<bool>(plan.mounts.size(), false));
  EXPECT_NE(s.reason.find("/opt/site"), std::string::npos) << s.reason;
}

TEST(RootStrategy, ALaunchWithoutACreatedTargetBuildsItsOwnRoot) {
  // The image has no /home: the holder created /home/alice for its bind. A --no-home launch
  // would show that empty directory.
  auto o = execTrue();
  o.noHome = true;
  const auto plan = planFor(o);
  ASSERT_EQ(findMount(plan, "/home/alice"), nullptr);
  const auto manifest = preparedFor(planFor(execTrue()), kDefaultBinds, {"/home/alice"});
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_EQ(s.reason, "the prepared root has /home/alice, which this launch does not mount");
}

TEST(RootStrategy, ACreatedTargetWhoseSourceIsAbsentIsNotCovered) {
  const auto plan = planFor(execTrue());
  const auto manifest = preparedFor(plan, kDefaultBinds, {"/etc/localtime"});
  EXPECT_NE(chooseRootStrategy(plan, &manifest, allPresent(), true).kind, RootStrategyKind::OwnRoot);
  const auto s = chooseRootStrategy(plan, &manifest, absentAt(plan, {"/etc/localtime"}), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_NE(s.reason.find("/etc/localtime"), std::string::npos) << s.reason;
}

TEST(RootStrategy, MpiReplacementNeverJoinsTheReadyNamespace) {
  auto plan = planFor(execTrue());
  const auto manifest = preparedFor(plan, kDefaultBinds);
  plan.mpi = MpiInjection{};
  plan.mpi->replace.push_back({"libmpi.so.40", "/opt/openmpi/lib/libmpi.so.40", "ctr.conf"});
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  EXPECT_EQ(s.mount, std::vector<bool>(plan.mounts.size(), false));
  EXPECT_NE(s.reason.find("--mpi=bind"), std::string::npos) << s.reason;
}

TEST(RootStrategy, AnAbsentOptionalSourceNeedsNoMount) {
  const auto plan = planFor(execTrue());
  // The holder found no /etc/localtime either: it did not bind it.
  auto withoutLocaltime = kDefaultBinds;
  std::erase(withoutLocaltime, "/etc/localtime");
  const auto manifest = preparedFor(plan, withoutLocaltime);
  const auto joined = chooseRootStrategy(plan, &manifest, absentAt(plan, {"/etc/localtime"}), true);
  EXPECT_EQ(joined.kind, RootStrategyKind::JoinReady) << joined.reason;

  // It is there now: this launch binds it, on the prepared root.
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  std::vector<bool> expected(plan.mounts.size(), false);
  expected[indexOf(plan, "/etc/localtime")] = true;
  EXPECT_EQ(s.mount, expected);
  EXPECT_TRUE(s.detach.empty());
}

TEST(RootStrategy, AUserBindOverAPreboundOneIsMountedOverIt) {
  auto o = execTrue();
  o.binds = {"/scratch/alice:/tmp"};
  const auto plan = planFor(o);
  const auto manifest = preparedFor(planFor(execTrue()), kDefaultBinds);
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  EXPECT_TRUE(s.detach.empty());  // something is mounted there: not detached
  for (std::size_t i = 0; i < plan.mounts.size(); ++i)
    EXPECT_EQ(s.mount[i], plan.mounts[i].source == "/scratch/alice") << plan.mounts[i].destination;
}

TEST(RootStrategy, SatisfiedSourcesAreNotAskedFor) {
  // A host library bound by the holder is required; were it stat'ed (and gone), the launch
  // would fail. The prepared root has it: nothing to ask.
  const auto plan = planFor(execTrue());
  const auto manifest = preparedFor(plan, kDefaultBinds);
  std::vector<std::string> asked;
  const auto s = chooseRootStrategy(
      plan, &manifest, [&](std::size_t i) { asked.push_back(plan.mounts[i].destination); return true; }, true);
  EXPECT_EQ(s.kind, RootStrategyKind::JoinReady);
  EXPECT_TRUE(asked.empty()) << asked.front();
}

TEST(RootStrategy, APreboundBindInsideAMountMadeAnewIsMadeAgain) {
  // --pid: a procfs of the launch's own over /proc, which hides the holder's /proc/sys bind.
  const auto base = planFor(execTrue());
  auto prepared = base;
  prepared.mounts.insert(prepared.mounts.begin() + 1, bindAt("/proc/sys", "/proc/sys", true, MountOrigin::Default));
  auto manifest = preparedFor(prepared, kDefaultBinds);
  manifest.prebound.insert(manifest.prebound.begin() + 1, preboundOf(prepared.mounts[1]));

  auto o = execTrue();
  o.pid = true;
  auto plan = planFor(o);
  ASSERT_EQ(plan.mounts[0].kind, MountKind::Proc);
  plan.mounts.insert(plan.mounts.begin() + 1, prepared.mounts[1]);
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  EXPECT_EQ(s.kind, RootStrategyKind::OwnRoot);
  EXPECT_EQ(s.reason, "mount target /proc/sys is inside /proc, which this launch mounts");
}

TEST(RootStrategy, ABindShowingWhatItsNewParentShowsNeedsNoMount) {
  // --bind /etc:/etc:ro: the default /etc/localtime, prebound, is hidden by it, but the
  // user's /etc shows the same host file there, as read-only.
  auto o = execTrue();
  o.binds = {"/etc:/etc:ro"};
  const auto plan = planFor(o);
  ASSERT_LT(indexOf(plan, "/etc"), indexOf(plan, "/etc/localtime"));
  const auto manifest = preparedFor(planFor(execTrue()), kDefaultBinds);
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  EXPECT_TRUE(s.mount[indexOf(plan, "/etc")]);
  EXPECT_FALSE(s.mount[indexOf(plan, "/etc/localtime")]);
  EXPECT_FALSE(s.mount[indexOf(plan, "/etc/hosts")]);

  // Read-only files inside a writable /etc, or another host directory: their targets would
  // be under the new /etc.
  for (const char* bind : {"/etc:/etc", "/srv/etc:/etc:ro"}) {
    o.binds = {bind};
    const auto other = planFor(o);
    const auto s2 = chooseRootStrategy(other, &manifest, allPresent(), true);
    EXPECT_EQ(s2.kind, RootStrategyKind::OwnRoot) << bind;
    EXPECT_NE(s2.reason.find(" is inside /etc, which this launch mounts"), std::string::npos) << s2.reason;
  }
}

TEST(RootStrategy, ContainsDevIsMadeOnThePreparedRootWithWhatIsInsideIt) {
  // --contain: a tmpfs /dev of the launch's own, its device binds, /dev/shm and the /dev/fd
  // links in it. The holder pre-binds the default binds; the launch mounts the tmpfs on the
  // prepared root and makes the targets in it afterwards (late), not a root of its own.
  auto o = execTrue();
  o.contain = true;
  const auto plan = planFor(o);
  const auto manifest = preparedFor(plan, {"/proc", "/sys", "/etc/hosts", "/etc/resolv.conf", "/etc/localtime"});
  const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
  ASSERT_EQ(s.kind, RootStrategyKind::UsePrepared) << s.reason;
  ASSERT_EQ(s.late.size(), plan.mounts.size());
  EXPECT_TRUE(s.mount[indexOf(plan, "/dev")]);
  EXPECT_FALSE(s.late[indexOf(plan, "/dev")]);
  for (const char* inside : {"/dev/null", "/dev/pts", "/dev/shm", "/dev/fd"}) {
    EXPECT_TRUE(s.mount[indexOf(plan, inside)]) << inside;
    EXPECT_TRUE(s.late[indexOf(plan, inside)]) << inside;
  }
  for (const char* own : {"/tmp", "/var/tmp", "/home/alice"}) {
    EXPECT_TRUE(s.mount[indexOf(plan, own)]) << own;
    EXPECT_FALSE(s.late[indexOf(plan, own)]) << own;
  }
  EXPECT_FALSE(s.mount[indexOf(plan, "/etc/hosts")]);
  // An absent optional device is neither mounted nor made.
  const auto s2 = chooseRootStrategy(plan, &manifest, absentAt(plan, {"/dev/tty"}), true);
  ASSERT_EQ(s2.kind, RootStrategyKind::UsePrepared) << s2.reason;
  EXPECT_FALSE(s2.mount[indexOf(plan, "/dev/tty")]);
}

TEST(JoinMemo, RoundTripsAsLinesAndSkipsWhatIsNotOne) {
  const JoinMemo a{0x0123456789abcdefULL, {{3, true}, {17, false}}}, b{0xfedcba9876543210ULL, {}};
  const std::string text = toLine(a) + toLine(b);
  EXPECT_EQ(text, "0123456789abcdef 3:1 17:0\nfedcba9876543210\n");
  EXPECT_EQ(parseJoinMemos(text), (std::vector<JoinMemo>{a, b}));
  for (const char* bad : {"0123456789abcde 3:1\n", "0123456789abcdefg\n", "0123456789abcdef 3:2\n",
                          "0123456789abcdef :1\n", "0123456789abcdef 3:1:1\n", "0123456789abcdef  3:1\n",
                          "0123456789abcdef 3:1 \n", "0123456789abcdef x:1\n", "\n"})
    EXPECT_EQ(parseJoinMemos(std::string(bad) + toLine(b)), std::vector<JoinMemo>{b}) << bad;
  // A last line without its newline is one still being written: not read.
  EXPECT_EQ(parseJoinMemos(toLine(b) + "0123456789abcdef 3:1"), std::vector<JoinMemo>{b});
}

// The memo gives a plan the decision of an earlier one with the same key: so every change
// of what the decision reads must change the key, and a change that changes the decision
// most of all.
TEST(RootStrategy, EveryChangeTheDecisionReadsChangesTheKey) {
  const auto base = planFor(execTrue());
  const auto manifest = preparedFor(base, kDefaultBinds);
  const auto decided = chooseRootStrategy(base, &manifest, allPresent(), true);
  ASSERT_EQ(decided.kind, RootStrategyKind::JoinReady) << decided.reason;
  EXPECT_EQ(rootStrategyKey(base), rootStrategyKey(planFor(execTrue())));

  std::vector<std::pair<std::string, std::function<void(LaunchPlan&)>>> changes = {
      {"root mode", [](LaunchPlan& p) { p.rootMode = RootMode::Overlay; }},
      {"uid", [](LaunchPlan& p) { p.user.uid += 1; }},
      {"gid", [](LaunchPlan& p) { p.user.gid += 1; }},
      {"name", [](LaunchPlan& p) { p.user.name += "x"; }},
      {"gecos", [](LaunchPlan& p) { p.user.gecos += "x"; }},
      {"home", [](LaunchPlan& p) { p.user.home += "x"; }},
      {"shell", [](LaunchPlan& p) { p.user.shell += "x"; }},
      {"primary group", [](LaunchPlan& p) { p.user.primaryGroup.name += "x"; }},
      {"a group", [](LaunchPlan& p) { p.user.groups.push_back({44, "video"}); }},
      {"a mount more", [](LaunchPlan& p) { p.mounts.push_back(bindAt("/opt", "/opt", true, MountOrigin::User)); }},
      {"a mount less", [](LaunchPlan& p) { p.mounts.pop_back(); }},
      {"mpi replacement", [](LaunchPlan& p) {
         p.mpi.emplace();
         p.mpi->replace.push_back({});
       }},
  };
  for (std::size_t i = 0; i < base.mounts.size(); ++i) {
    const std::string at = " of " + base.mounts[i].destination;
    auto change = [&changes, i, at](const std::string& what, std::function<void(Mount&)> edit) {
      changes.emplace_back(what + at, [i, edit](LaunchPlan& p) { edit(p.mounts[i]); });
    };
    change("kind", [](Mount& m) { m.kind = m.kind == MountKind::Bind ? MountKind::Tmpfs : MountKind::Bind; });
    change("source", [](Mount& m) { m.source += "x"; });
    change("destination", [](Mount& m) { m.destination += "x"; });
    change("content", [](Mount& m) { m.content += "x"; });
    change("read-only", [](Mount& m) { m.readOnly = !m.readOnly; });
    change("recursive", [](Mount& m) { m.recursive = !m.recursive; });
    change("required", [](Mount& m) { m.required = !m.required; });
    change("tmpfs mode", [](Mount& m) { m.tmpfsMode ^= 1; });
    change("tmpfs size", [](Mount& m) { m.tmpfsSizeBytes = m.tmpfsSizeBytes.value_or(0) + 1; });
    change("identity file", [](Mount& m) {
      m.identity = m.identity == IdentityFile::Passwd ? IdentityFile::Group : IdentityFile::Passwd;
    });
  }
  std::set<std::uint64_t> keys{rootStrategyKey(base)};
  int decisionsChanged = 0;
  for (const auto& [what, edit] : changes) {
    auto plan = base;
    edit(plan);
    EXPECT_TRUE(keys.insert(rootStrategyKey(plan)).second) << what << ": the same key as another plan";
    const auto s = chooseRootStrategy(plan, &manifest, allPresent(), true);
    decisionsChanged += s.kind != decided.kind;
  }
  EXPECT_GT(decisionsChanged, 20);  // the changes are ones the decision sees
}

// A memo answers for its key alone, and only while every source it asked about answers the
// same (a bind that appeared, or went, means deciding again).
TEST(RootStrategy, ARememberedJoinHoldsForItsKeyWhileItsSourcesAnswerTheSame) {
  const std::vector<JoinMemo> memos = {{7, {{2, false}, {5, true}}}, {9, {}}};
  int asked = 0;
  auto answers = [&asked](std::set<std::size_t> present) {
    return SourcePresent([&asked, present](std::size_t i) {
      ++asked;
      return present.count(i) > 0;
    });
  };
  const auto joined = rememberedJoin(memos, 7, 6, answers({5}));
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->kind, RootStrategyKind::JoinReady);
  EXPECT_NE(joined->reason.find("remembered"), std::string::npos) << joined->reason;
  EXPECT_FALSE(rememberedJoin(memos, 7, 6, answers({2, 5}))) << "a source that appeared";
  EXPECT_FALSE(rememberedJoin(memos, 7, 6, answers({}))) << "a source that went";
  EXPECT_FALSE(rememberedJoin(memos, 8, 6, answers({5}))) << "another plan";
  EXPECT_FALSE(rememberedJoin(memos, 7, 5, answers({5}))) << "an index past this plan's mounts";
  asked = 0;
  EXPECT_TRUE(rememberedJoin(memos, 9, 6, answers({})));
  EXPECT_EQ(asked, 0) << "a memo that asked nothing asks nothing";
  EXPECT_FALSE(rememberedJoin({}, 7, 6, answers({5})));
}
