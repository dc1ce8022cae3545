// Probes for platform features a test relies on. Machines of the same kind differ (one
// kernel here does not execute `int $0x80` at all), so a test that needs such a feature asks
// first and skips with the probe's reason instead of failing or passing silently.
#pragma once

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

// Skips the current test with `reason`, also printed as one "SKIP: Suite.Test: reason" line
// that tests/run-all.sh collects into its summary (ctest itself shows only "Skipped").
#define CTR_SKIP_BECAUSE(reason)                                                        \
  do {                                                                                  \
    const std::string ctrSkipReason_ = (reason);                                        \
    const auto* ctrSkipInfo_ = ::testing::UnitTest::GetInstance()->current_test_info(); \
    std::printf("SKIP: %s.%s: %s\n", ctrSkipInfo_->test_suite_name(), ctrSkipInfo_->name(), \
                ctrSkipReason_.c_str());                                                \
    GTEST_SKIP() << ctrSkipReason_;                                                     \
  } while (0)

namespace ctr::test {

// Whether this kernel runs i386 system calls from a 64-bit process (`int $0x80`), checked
// in a child without any seccomp filter: getpid through the i386 entry must return the
// pid. Empty when it does; otherwise why not (for GTEST_SKIP).
inline std::string i386SyscallsUnavailable() {
#if defined(__x86_64__)
  pid_t pid = ::fork();
  if (pid < 0) return "fork failed while probing the i386 system call ABI";
  if (pid == 0) {
    long rc;
    asm volatile("int $0x80" : "=a"(rc) : "a"(20L) : "memory");  // i386 getpid
    ::_exit(rc == static_cast<long>(::syscall(SYS_getpid)) ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFSIGNALED(status))
    return "this kernel does not run i386 system calls (int $0x80 getpid killed the probe with "
           "signal " + std::to_string(WTERMSIG(status)) + "; CONFIG_IA32_EMULATION off or ia32_emulation=0)";
  return "this kernel does not run i386 system calls (int $0x80 getpid did not return the pid)";
#else
  return "the i386 system call ABI exists only on x86_64";
#endif
}

}  // namespace ctr::test
