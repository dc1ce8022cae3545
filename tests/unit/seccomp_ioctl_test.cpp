// The default profile's terminal-injection rules (TIOCSTI, TIOCLINUX) and the profile
// syntax they need (argument conditions): every ABI the filter covers refuses them, and
// the ioctls interactive shells need keep working.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "child_helper.hpp"
#include "ctr/error.hpp"
#include "ctr/handover.hpp"

using namespace ctr::runtime;
using ctr::test::inChild;

namespace {

constexpr std::uint64_t kLow32 = 0xffffffffULL;

// "" when `rc`/errno is what was expected, else a description.
std::string expectResult(const char* what, long rc, int wantErrno) {
  const int err = errno;
  if (wantErrno == 0 ? rc >= 0 : (rc == -1 && err == wantErrno)) return "";
  return std::string(what) + ": rc " + std::to_string(rc) + " errno " + std::strerror(err) +
         " (wanted " + (wantErrno == 0 ? "success" : std::strerror(wantErrno)) + "); ";
}

// Loads the built-in default filter, as every container gets it.
void installDefaultFilter() {
  setNoNewPrivs();
  installSeccomp(compileSeccomp(defaultSeccompProfile()));
}

// A pseudo-terminal that becomes this (forked) process's controlling terminal, as the
// terminal ctr is started from is for the shell; returns the slave fd or -1.
int controllingPty() {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return -1;
  const char* name = ::ptsname(master);
  if (name == nullptr || ::setsid() < 0) return -1;
  int slave = ::open(name, O_RDWR);  // no O_NOCTTY: the first tty a session leader opens
  if (slave < 0 || ::ioctl(slave, TIOCSCTTY, 0) != 0) return -1;
  return slave;
}

bool ptyAvailable() {
  int fd = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

#if defined(__x86_64__)
// An i386 system call from this 64-bit process (int $0x80 takes the 32-bit entry).
long int80(long nr, long a, long b) {
  long ret;
  asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b) : "memory", "r8", "r9", "r10", "r11");
  return ret;
}
constexpr long kI386Getpid = 20;
constexpr long kI386Ioctl = 54;
constexpr long kX32Ioctl = 0x40000000L | 514;  // __X32_SYSCALL_BIT | x32's compat ioctl

// Whether this kernel runs i386 system calls from a 64-bit process: some kernels are built
// or booted without IA-32 emulation, and int $0x80 then kills the caller.
bool i386SyscallsWork() {
  pid_t pid = ::fork();
  if (pid == 0) _exit(int80(kI386Getpid, 0, 0) == ::getpid() ? 0 : 1);
  int status = 0;
  return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
#endif

}  // namespace

TEST(SeccompProfileConditions, DefaultDeniesTerminalInjectionOnLow32Bits) {
  auto p = defaultSeccompProfile();
  int found = 0;
  for (const auto& r : p.rules) {
    if (r.syscall != "ioctl") continue;
    ASSERT_EQ(r.conditions.size(), 1U) << "an ioctl rule in the default profile without exactly one condition";
    const auto& c = r.conditions.front();
    EXPECT_EQ(r.action, (SeccompAction{SeccompAction::Kind::Errno, EPERM}));
    EXPECT_EQ(c.index, 1U);
    EXPECT_EQ(c.op, SeccompArgCondition::Op::MaskedEqual);
    EXPECT_EQ(c.value, kLow32) << "the kernel compares only the low 32 bits of cmd";
    if (c.valueTwo == TIOCSTI || c.valueTwo == TIOCLINUX) ++found;
  }
  EXPECT_EQ(found, 2);
}

TEST(SeccompFilterIoctl, RefusesTiocstiAndTiocLinuxBeforeTheKernelLooksAtTheFd) {
  // Without the filter an invalid fd gives EBADF; the filter answers first, with EPERM.
  EXPECT_EQ(inChild([] { return expectResult("TIOCSTI on fd -1, no filter", ::ioctl(-1, TIOCSTI, "x"), EBADF); }), "");
  EXPECT_EQ(inChild([] {
              installDefaultFilter();
              std::string r = expectResult("TIOCSTI", ::ioctl(-1, TIOCSTI, "x"), EPERM);
              r += expectResult("TIOCLINUX", ::ioctl(-1, TIOCLINUX, "x"), EPERM);
              // Bits above 32 do not reach the tty layer, so they must not slip past either.
              r += expectResult("TIOCSTI | 1 << 32",
                                ::syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, "x"), EPERM);
              r += expectResult("TCGETS", ::ioctl(-1, TCGETS, nullptr), EBADF);
              return r;
            }),
            "");
}

TEST(SeccompFilterIoctl, TiocstiOnTheControllingTerminalFailsAndJobControlWorks) {
  if (!ptyAvailable()) GTEST_SKIP() << "no pseudo-terminals here (posix_openpt failed: /dev/ptmx)";
  EXPECT_EQ(inChild([] {
              int tty = controllingPty();
              if (tty < 0) return std::string("cannot set up a controlling pty: ") + std::strerror(errno);
              installDefaultFilter();
              char c = 'x';
              std::string r = expectResult("TIOCSTI on the controlling tty", ::ioctl(tty, TIOCSTI, &c), EPERM);
              struct winsize ws {};
              r += expectResult("TIOCGWINSZ", ::ioctl(tty, TIOCGWINSZ, &ws), 0);
              r += expectResult("TIOCSWINSZ", ::ioctl(tty, TIOCSWINSZ, &ws), 0);
              struct termios t {};
              r += expectResult("TCGETS", ::ioctl(tty, TCGETS, &t), 0);
              r += expectResult("TCSETS", ::ioctl(tty, TCSETS, &t), 0);
              // What a shell's job control does: read and set the foreground process group.
              pid_t pgrp = 0;
              r += expectResult("TIOCGPGRP", ::ioctl(tty, TIOCGPGRP, &pgrp), 0);
              pid_t self = ::getpgrp();
              r += expectResult("TIOCSPGRP", ::ioctl(tty, TIOCSPGRP, &self), 0);
              return r;
            }),
            "");
}

TEST(SeccompFilterIoctl, TiocstiWorksWithoutTheFilterSoTheRefusalIsTheFilters) {
  if (!ptyAvailable()) GTEST_SKIP() << "no pseudo-terminals here (posix_openpt failed: /dev/ptmx)";
  std::ifstream legacy("/proc/sys/dev/tty/legacy_tiocsti");
  int enabled = 1;  // kernels before 6.2 have no switch: TIOCSTI always works there
  if (legacy) legacy >> enabled;
  if (enabled == 0 && ::geteuid() != 0)
    GTEST_SKIP() << "dev.tty.legacy_tiocsti = 0: the kernel refuses TIOCSTI to ordinary users anyway";
  EXPECT_EQ(inChild([] {
              int tty = controllingPty();
              if (tty < 0) return std::string("cannot set up a controlling pty: ") + std::strerror(errno);
              char c = 'x';
              return expectResult("TIOCSTI without a filter", ::ioctl(tty, TIOCSTI, &c), 0);
            }),
            "");
}

#if defined(__x86_64__)
TEST(SeccompFilterIoctl, RefusesTiocstiFromI386Programs) {
  if (!i386SyscallsWork())
    GTEST_SKIP() << "this kernel does not run i386 system calls (int $0x80 from a 64-bit process "
                    "failed without a filter: no IA-32 emulation)";
  EXPECT_EQ(inChild([] {
              installDefaultFilter();
              std::string r;
              if (long rc = int80(kI386Ioctl, -1, TIOCSTI); rc != -EPERM)
                r += "i386 TIOCSTI returned " + std::to_string(rc) + "; ";
              if (long rc = int80(kI386Ioctl, -1, TIOCLINUX); rc != -EPERM)
                r += "i386 TIOCLINUX returned " + std::to_string(rc) + "; ";
              if (long rc = int80(kI386Ioctl, -1, TCGETS); rc != -EBADF)
                r += "i386 TCGETS returned " + std::to_string(rc) + " (wanted -EBADF); ";
              return r;
            }),
            "");
}

TEST(SeccompFilterIoctl, RefusesTiocstiFromX32Programs) {
  // The filter sees x32 calls whether or not the kernel would run them (it answers
  // before dispatch), so no probe: TCGETS shows EBADF where x32 runs, ENOSYS where not.
  EXPECT_EQ(inChild([] {
              installDefaultFilter();
              std::string r = expectResult("x32 TIOCSTI", ::syscall(kX32Ioctl, -1, TIOCSTI, 0), EPERM);
              r += expectResult("x32 TIOCLINUX", ::syscall(kX32Ioctl, -1, TIOCLINUX, 0), EPERM);
              long rc = ::syscall(kX32Ioctl, -1, TCGETS, 0);
              if (rc != -1 || (errno != EBADF && errno != ENOSYS))
                r += "x32 TCGETS: rc " + std::to_string(rc) + " errno " + std::strerror(errno) + "; ";
              return r;
            }),
            "");
}
#endif
