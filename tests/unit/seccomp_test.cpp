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
    (void)parseSeccompProfile(text, "test.conf");
  } catch (const ctr::Error& e) {
    return e.what();
  }
  return "";
}

bool denies(const SeccompProfile& p, const std::string& name) {
  for (const auto& r : p.rules) {
    if (r.syscall == name) return r.action == SeccompAction::Deny;
  }
  return false;
}

}  // namespace

TEST(SeccompProfile, ParsesDefaultActionRulesAndComments) {
  auto p = parseSeccompProfile(
      "# comment\n"
      "default-action = allow\n"
      "deny kexec_load   # trailing\n"
      "\n"
      "allow perf_event_open\n",
      "test.conf");
  EXPECT_EQ(p.defaultAction, SeccompAction::Allow);
  ASSERT_EQ(p.rules.size(), 2U);
  EXPECT_EQ(p.rules[0], (SeccompRule{"kexec_load", SeccompAction::Deny, 3, std::nullopt}));
  EXPECT_EQ(p.rules[1], (SeccompRule{"perf_event_open", SeccompAction::Allow, 5, std::nullopt}));
}

TEST(SeccompProfile, LaterLineForTheSameSyscallWins) {
  auto p = parseSeccompProfile("deny keyctl\nallow keyctl\n", "test.conf");
  ASSERT_EQ(p.rules.size(), 1U);
  EXPECT_EQ(p.rules[0].action, SeccompAction::Allow);
}

TEST(SeccompProfile, AcceptsSyscallsOnlyAnotherArchitectureHas) {
  // stime and vm86 exist on 32-bit x86 only; the filter covers that ABI too.
  EXPECT_NO_THROW((void)parseSeccompProfile("deny stime\ndeny vm86\n", "test.conf"));
}

TEST(SeccompProfile, UnknownSyscallErrorNamesFileAndLine) {
  EXPECT_EQ(errorOf("deny kexec_load\ndeny no_such_call\n"), "test.conf:2: unknown syscall 'no_such_call'");
}

TEST(SeccompProfile, BadLinesErrorNamesFileAndLine) {
  EXPECT_EQ(errorOf("block kexec_load\n"), "test.conf:1: unknown action 'block' (allow or deny)");
  EXPECT_EQ(errorOf("deny\n"), "test.conf:1: expected 'allow NAME' or 'deny NAME', got 'deny'");
  EXPECT_EQ(errorOf("deny a b\n"), "test.conf:1: expected 'allow NAME' or 'deny NAME', got 'deny a b'");
  EXPECT_EQ(errorOf("\ndefault = deny\n"), "test.conf:2: unknown setting 'default'");
  EXPECT_EQ(errorOf("default-action = kill\n"), "test.conf:1: unknown action 'kill' (allow or deny)");
}

TEST(SeccompProfile, DefaultDeniesWhatContainersNeverNeed) {
  auto p = defaultSeccompProfile();
  EXPECT_EQ(p.defaultAction, SeccompAction::Allow);
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
  std::ifstream file(std::string(CTR_SOURCE_DIR) + "/etc/seccomp-default.conf");
  ASSERT_TRUE(file) << "etc/seccomp-default.conf missing";
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), defaultSeccompProfileText())
      << "the built-in profile is not etc/seccomp-default.conf";
}

TEST(SeccompProfile, EmptyPathLoadsTheBuiltInDefault) {
  auto p = loadSeccompProfile("");
  EXPECT_EQ(p.source, "built-in default");
  EXPECT_EQ(p.rules, defaultSeccompProfile().rules);
}

TEST(SeccompProfile, MissingFileIsAnErrorNamingIt) {
  try {
    (void)loadSeccompProfile("/nonexistent/seccomp.conf");
    FAIL();
  } catch (const ctr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/seccomp.conf"), std::string::npos);
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
    applySeccomp(parseSeccompProfile("deny getppid\n", "test.conf"));
    return expectEperm("getppid", syscall(SYS_getppid));
  });
  EXPECT_EQ(message, "");
}

TEST(SeccompFilter, DefaultDenyProfileAllowsOnlyListedSyscalls) {
  auto message = inChild([] {
    setNoNewPrivs();
    applySeccomp(parseSeccompProfile(
        "default-action = deny\nallow write\nallow exit_group\nallow exit\nallow getpid\n",
        "test.conf"));
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
  auto profile = dir.path + "/../ctr-seccomp-profile-" + std::to_string(::getpid()) + ".conf";
  std::ofstream(profile) << "deny getppid\n";
  auto custom = loadSeccompProgram(profile, dir.path);
  auto builtin = loadSeccompProgram("", dir.path);
  std::filesystem::remove(profile);
  EXPECT_NE(custom.bpf, builtin.bpf);
  EXPECT_EQ(dir.bpfFiles().size(), 2U);
}
