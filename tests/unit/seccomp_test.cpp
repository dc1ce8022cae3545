#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <vector>

#include "child_helper.hpp"
#include "platform_probes.hpp"
#include "ctr/error.hpp"
#include "ctr/handover.hpp"

#include <seccomp.h>

using namespace ctr::runtime;
using ctr::test::inChild;

namespace {

std::string expectEperm(const char* what, long rc) {
  int err = errno;
  if (rc == -1 && err == EPERM) return "";
  return std::string(what) + " returned " + std::to_string(rc) + " errno " + std::to_string(err) + "; ";
}

std::string errorOf(std::string_view text) {
  try {
    (void)parseSeccompProfile(text, "test.json");
  } catch (const ctr::Error& e) {
    return e.what();
  }
  return "";
}

bool denies(const SeccompProfile& p, const std::string& name) {
  for (const auto& r : p.rules) {
    if (r.syscall == name && r.conditions.empty()) return r.action.kind == SeccompAction::Kind::Errno;
  }
  return false;
}

const SeccompAction kAllow{SeccompAction::Kind::Allow, 0};
const SeccompAction kEperm{SeccompAction::Kind::Errno, EPERM};

bool hasRule(const SeccompProfile& p, const std::string& name) {
  for (const auto& r : p.rules)
    if (r.syscall == name) return true;
  return false;
}

}  // namespace

TEST(SeccompProfile, ParsesDockerJson) {
  auto p = parseSeccompProfile(R"({
    "defaultAction": "SCMP_ACT_ALLOW",
    "syscalls": [
      {"names": ["kexec_load", "reboot"], "action": "SCMP_ACT_ERRNO", "comment": "why"},
      {"name": "bpf", "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
      {"names": ["ioctl"], "action": "SCMP_ACT_KILL_PROCESS",
       "args": [{"index": 1, "value": 4294967295, "valueTwo": 21522, "op": "SCMP_CMP_MASKED_EQ"},
                {"index": 0, "value": 3, "op": "SCMP_CMP_GT"}]}
    ]})",
                               "test.json");
  EXPECT_EQ(p.defaultAction, kAllow);
  EXPECT_TRUE(p.architectures.empty());
  ASSERT_EQ(p.rules.size(), 4U);
  EXPECT_EQ(p.rules[0], (SeccompRule{"kexec_load", kEperm, {}, "syscalls[0]"}));
  EXPECT_EQ(p.rules[1], (SeccompRule{"reboot", kEperm, {}, "syscalls[0]"}));
  EXPECT_EQ(p.rules[2].action, (SeccompAction{SeccompAction::Kind::Errno, 38}));
  using Op = SeccompArgCondition::Op;
  EXPECT_EQ(p.rules[3].action.kind, SeccompAction::Kind::KillProcess);
  EXPECT_EQ(p.rules[3].conditions, (std::vector<SeccompArgCondition>{{1, Op::MaskedEqual, 0xffffffffU, 21522},
                                                                    {0, Op::Greater, 3, 0}}));
}

TEST(SeccompProfile, LaterEntryForTheSameSyscallAndArgumentsWins) {
  auto p = parseSeccompProfile(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["keyctl"], "action": "SCMP_ACT_ERRNO"},
      {"names": ["keyctl"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]},
      {"names": ["keyctl"], "action": "SCMP_ACT_LOG"}]})",
                               "test.json");
  ASSERT_EQ(p.rules.size(), 2U);
  EXPECT_EQ(p.rules[0].action.kind, SeccompAction::Kind::Log);
  EXPECT_EQ(p.rules[1].conditions.size(), 1U);
}

TEST(SeccompProfile, IncludesAndExcludesAsDockerAppliesThemToAContainerWithoutCapabilities) {
  auto p = parseSeccompProfile(R"({"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1, "syscalls": [
      {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
      {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
      {"names": ["write"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
      {"names": ["getpid"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["no-such-arch"]}},
      {"names": ["getppid"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["no-such-arch"]}},
      {"names": ["gettid"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "2.6"}},
      {"names": ["getuid"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "999.0"}}]})",
                               "test.json");
  EXPECT_EQ(p.defaultAction, kEperm);
  EXPECT_TRUE(hasRule(p, "read"));
  EXPECT_FALSE(hasRule(p, "mount"));
  EXPECT_TRUE(hasRule(p, "write"));
  EXPECT_FALSE(hasRule(p, "getpid"));
  EXPECT_TRUE(hasRule(p, "getppid"));
  EXPECT_TRUE(hasRule(p, "gettid"));
  EXPECT_FALSE(hasRule(p, "getuid"));
}

TEST(SeccompProfile, ArchMapTakesTheNativeEntryAndItsSubArchitectures) {
  auto p = parseSeccompProfile(R"({"defaultAction": "SCMP_ACT_ALLOW", "archMap": [
      {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
      {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]}]})",
                               "test.json");
  ASSERT_FALSE(p.architectures.empty());
  EXPECT_EQ(p.architectures.front(), seccomp_arch_native());
  EXPECT_EQ(p.architectures.size(), seccomp_arch_native() == SCMP_ARCH_X86_64 ? 3U : 2U);
}

TEST(SeccompProfile, SyscallsUnknownToLibseccompAreSkippedAndListed) {
  // Profiles written for newer kernels name calls this libseccomp lacks: Docker skips them.
  auto p = parseSeccompProfile(
      R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["no_such_call", "bpf"], "action": "SCMP_ACT_ERRNO"}]})",
      "test.json");
  EXPECT_EQ(p.unknownSyscalls, std::vector<std::string>{"no_such_call"});
  ASSERT_EQ(p.rules.size(), 1U);
  EXPECT_NO_THROW((void)compileSeccomp(p));
}

TEST(SeccompProfile, AcceptsSyscallsOnlyAnotherArchitectureHas) {
  // stime and vm86 exist on 32-bit x86 only; the filter covers that ABI too.
  auto p = parseSeccompProfile(
      R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["stime", "vm86"], "action": "SCMP_ACT_ERRNO"}]})",
      "test.json");
  EXPECT_EQ(p.rules.size(), 2U);
  EXPECT_NO_THROW((void)compileSeccomp(p));
}

TEST(SeccompProfile, BadProfilesErrorNamesFileAndEntry) {
  EXPECT_EQ(errorOf("deny kexec_load\n"),
            "test.json: not valid JSON (ctr reads Docker/OCI JSON seccomp profiles; "
            "etc/ctr/seccomp-default.json is one)");
  EXPECT_EQ(errorOf(R"({"syscalls": []})"), "test.json: no defaultAction");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "defaultaction": 1})"),
            "test.json: unknown key 'defaultaction'");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_BLOCK"})"),
            "test.json: defaultAction: unknown action 'SCMP_ACT_BLOCK'");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["bpf"], "action": "SCMP_ACT_NOTIFY"}]})"),
            "test.json: syscalls[0].action: SCMP_ACT_NOTIFY needs a tracer or seccomp agent, which "
            "ctr does not run");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["bpf"], "action": "SCMP_ACT_ERRNO",
                       "args": [{"index": 6, "op": "SCMP_CMP_EQ"}]}]})"),
            "test.json: syscalls[0].args[0].index: a syscall has arguments 0 to 5");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["bpf"], "action": "SCMP_ACT_ERRNO",
                       "args": [{"index": 0, "op": "SCMP_CMP_LIKE"}]}]})"),
            "test.json: syscalls[0].args[0].op: unknown operator 'SCMP_CMP_LIKE'");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"action": "SCMP_ACT_ERRNO"}]})"),
            "test.json: syscalls[0]: no syscall names");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_LOG"]})"),
            "test.json: flags: seccomp filter flags are not supported (ctr installs the filter "
            "with prctl)");
  EXPECT_EQ(errorOf(R"({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_VAX"]})"),
            "test.json: architectures[0]: unknown architecture 'SCMP_ARCH_VAX'");
}

TEST(SeccompProfile, DefaultDeniesWhatContainersNeverNeed) {
  auto p = defaultSeccompProfile();
  EXPECT_EQ(p.defaultAction, kAllow);
  for (const char* name : {"kexec_load", "kexec_file_load", "init_module", "finit_module",
                           "delete_module", "keyctl", "add_key", "request_key", "bpf",
                           "open_by_handle_at", "acct", "swapon", "swapoff", "reboot",
                           "settimeofday", "clock_settime", "iopl", "ioperm", "userfaultfd"}) {
    EXPECT_TRUE(denies(p, name)) << name;
  }
}

TEST(SeccompProfile, DefaultKeepsDebuggersProfilersNumaAndNestedContainersWorking) {
  auto p = defaultSeccompProfile();
  for (const char* name : {"ptrace", "perf_event_open", "process_vm_readv", "mbind",
                           "set_mempolicy", "move_pages", "mount", "unshare", "setns",
                           "personality", "clone", "clone3"}) {
    EXPECT_FALSE(denies(p, name)) << name;
  }
}

TEST(SeccompProfile, ShippedFileIsTheBuiltInDefault) {
  std::ifstream file(std::string(CTR_SOURCE_DIR) + "/etc/seccomp-default.json");
  ASSERT_TRUE(file) << "etc/seccomp-default.json missing";
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), defaultSeccompProfileText())
      << "the built-in profile is not etc/seccomp-default.json";
}

TEST(SeccompProfile, EmptyPathLoadsTheBuiltInDefault) {
  auto p = loadSeccompProfile("");
  EXPECT_EQ(p.source, "built-in default");
  EXPECT_EQ(p.rules, defaultSeccompProfile().rules);
}

TEST(SeccompProfile, MissingFileIsAnErrorNamingIt) {
  try {
    (void)loadSeccompProfile("/nonexistent/seccomp.json");
    FAIL();
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/seccomp.json"), std::string::npos);
  }
}

TEST(SeccompFilter, DefaultFilterDeniesKexecKeyctlAndBpfWithEperm) {
  auto message = inChild([] {
    setNoNewPrivs();
    applySeccomp(defaultSeccompProfile());
    std::string failures;
    failures += expectEperm("kexec_load", syscall(SYS_kexec_load, 0, 0, nullptr, 0));
    // Unfiltered, this keyctl succeeds for any user (it reads the session keyring id).
    failures += expectEperm("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                                              KEY_SPEC_SESSION_KEYRING, 0));
    failures += expectEperm("bpf", syscall(SYS_bpf, 0, nullptr, 0));
    failures += expectEperm("init_module", syscall(SYS_init_module, nullptr, 0, ""));
    // Ordinary calls keep working.
    if (getpid() <= 0) failures += "getpid failed; ";
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) failures += "getcwd failed; ";
    int fds[2];
    if (pipe(fds) != 0) failures += "pipe failed; ";
    return failures;
  });
  EXPECT_EQ(message, "");
}

TEST(SeccompFilter, CustomProfileDeniesAnEverydaySyscall) {
  // getppid cannot fail on its own: EPERM proves the filter is what answered.
  auto message = inChild([] {
    setNoNewPrivs();
    applySeccomp(parseSeccompProfile(
        R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ERRNO"}]})",
        "test.json"));
    return expectEperm("getppid", syscall(SYS_getppid));
  });
  EXPECT_EQ(message, "");
}

TEST(SeccompFilter, DefaultDenyProfileAllowsOnlyListedSyscalls) {
  auto message = inChild([] {
    setNoNewPrivs();
    applySeccomp(parseSeccompProfile(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
        {"names": ["write", "exit_group", "exit", "getpid"], "action": "SCMP_ACT_ALLOW"}]})",
                                     "test.json"));
    std::string failures = expectEperm("getppid", syscall(SYS_getppid));
    if (syscall(SYS_getpid) <= 0) failures += "getpid denied; ";
    return failures;
  });
  EXPECT_EQ(message, "");
}

TEST(SeccompFilter, AppliesToThirtyTwoBitSyscallsToo) {
  if (auto why = ctr::test::i386SyscallsUnavailable(); !why.empty()) CTR_SKIP_BECAUSE(why);
#if defined(__x86_64__)
  // int $0x80 enters the kernel with the i386 ABI: keyctl is 288 there.
  auto message = inChild([] {
    setNoNewPrivs();
    applySeccomp(defaultSeccompProfile());
    long rc;
    asm volatile("int $0x80" : "=a"(rc) : "a"(288L), "b"(0L), "c"(-3L) : "memory");
    return rc == -EPERM ? std::string() : "i386 keyctl returned " + std::to_string(rc);
  });
  EXPECT_EQ(message, "");
#endif
}

namespace {

// A private, user-owned 0700 directory, as the per-user state directory is.
struct CacheDir {
  std::string path;
  CacheDir() {
    char tmpl[] = "/tmp/ctr-seccomp-cache.XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~CacheDir() { std::filesystem::remove_all(path); }
  std::vector<std::string> bpfFiles() const {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(path)) files.push_back(e.path());
    return files;
  }
};

}  // namespace

TEST(SeccompCache, CompilesOnceAndReusesTheCachedProgram) {
  CacheDir dir;
  auto first = loadSeccompProgram("", dir.path);
  auto files = dir.bpfFiles();
  ASSERT_EQ(files.size(), 1U);
  EXPECT_EQ(first.bpf, compileSeccomp(defaultSeccompProfile()).bpf);
  auto second = loadSeccompProgram("", dir.path);
  EXPECT_EQ(second.bpf, first.bpf);
  EXPECT_EQ(dir.bpfFiles(), files);
}

TEST(SeccompCache, CachedProgramStillDeniesKeyctl) {
  CacheDir dir;
  (void)loadSeccompProgram("", dir.path);
  auto cached = loadSeccompProgram("", dir.path);
  auto message = inChild([&] {
    setNoNewPrivs();
    installSeccomp(cached);
    return expectEperm("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
  });
  EXPECT_EQ(message, "");
}

TEST(SeccompCache, CorruptCacheFileIsCompiledAgainAndReplaced) {
  CacheDir dir;
  auto good = loadSeccompProgram("", dir.path);
  auto file = dir.bpfFiles().at(0);
  std::ofstream(file, std::ios::trunc) << "garbage";  // 7 bytes: not a whole instruction
  auto again = loadSeccompProgram("", dir.path);
  EXPECT_EQ(again.bpf, good.bpf);
  std::ifstream in(file, std::ios::binary);
  std::string stored((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(stored, good.bpf);
}

TEST(SeccompCache, DirectoryWritableByOthersIsNotUsed) {
  CacheDir dir;
  std::filesystem::permissions(dir.path, std::filesystem::perms::all);
  auto program = loadSeccompProgram("", dir.path);
  EXPECT_FALSE(program.bpf.empty());
  EXPECT_TRUE(dir.bpfFiles().empty());
}

TEST(SeccompCache, DifferentProfilesGetDifferentPrograms) {
  CacheDir dir;
  auto profile = dir.path + "/../ctr-seccomp-profile-" + std::to_string(::getpid()) + ".json";
  std::ofstream(profile) << R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ERRNO"}]})";
  auto custom = loadSeccompProgram(profile, dir.path);
  auto builtin = loadSeccompProgram("", dir.path);
  std::filesystem::remove(profile);
  EXPECT_NE(custom.bpf, builtin.bpf);
  EXPECT_EQ(dir.bpfFiles().size(), 2U);
}

TEST(SeccompProfile, ReadsAndCompilesPodmansDefaultProfile) {
  // A real default-deny Docker-format profile, as sites keep them (containers-common).
  const char* path = "/usr/share/containers/seccomp.json";
  if (::access(path, R_OK) != 0) CTR_SKIP_BECAUSE(std::string(path) + " is not installed (containers-common)");
  auto p = loadSeccompProfile(path);
  EXPECT_EQ(p.defaultAction, (SeccompAction{SeccompAction::Kind::Errno, ENOSYS}));
  if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
    EXPECT_EQ(p.architectures, (std::vector<std::uint32_t>{SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32}));
  }
  EXPECT_TRUE(denies(p, "open_by_handle_at")) << "its caps-excluded EPERM entry applies without capabilities";
  EXPECT_TRUE(denies(p, "bpf"));
  int personality = 0;
  for (const auto& r : p.rules) personality += r.syscall == "personality" && r.conditions.size() == 1;
  EXPECT_GE(personality, 4);
  auto message = inChild([&] {
    setNoNewPrivs();
    applySeccomp(p);
    std::string failures;
    if (syscall(SYS_getppid) <= 0) failures += "getppid denied; ";
    return failures + expectEperm("bpf", syscall(SYS_bpf, 0, nullptr, 0));
  });
  EXPECT_EQ(message, "");
}
