// The last steps before execve of the user's program: no_new_privs, drop every
// capability, load the seccomp filter. Call them in that order, inside the container's
// user namespace, after every mount is done (dropping capabilities ends mounting) and
// right before execve:
//
//   setNoNewPrivs();
//   dropAllCapabilities();
//   applySeccomp(profile);   // profile loaded earlier, before the fork/unshare
//   execve(...);
//
// Each throws ctr::Error (with errno) on failure; the caller must not exec then.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::runtime {

// prctl(PR_SET_NO_NEW_PRIVS): setuid/setgid bits and file capabilities stop working for
// this process and everything it execs. Required before an unprivileged seccomp filter.
void setNoNewPrivs();

// Highest capability number the kernel knows: /proc/sys/kernel/cap_last_cap, or, when
// /proc is not readable, probed with PR_CAPBSET_READ.
[[nodiscard]] int lastCapability();

// Empties the bounding set (PR_CAPBSET_DROP for 0..lastCapability()), clears the ambient
// set, then capset() with empty effective/permitted/inheritable, and verifies all of them
// read back empty. An empty bounding set is what keeps a process mapped to uid 0 in the
// user namespace from regaining capabilities through execve.
void dropAllCapabilities();

enum class SeccompAction { Allow, Deny };  // Deny = fail with EPERM

// The rule applies only when (argument `arg` & mask) == value (libseccomp SCMP_CMP_MASKED_EQ).
struct SeccompArgCondition {
  unsigned arg = 0;  // 0..5
  std::uint64_t mask = ~std::uint64_t{0};
  std::uint64_t value = 0;

  bool operator==(const SeccompArgCondition&) const = default;
};

struct SeccompRule {
  std::string syscall;
  SeccompAction action = SeccompAction::Deny;
  int line = 0;  // where it came from, for messages (0 = built in)
  std::optional<SeccompArgCondition> condition;  // none = every call of the syscall

  bool operator==(const SeccompRule&) const = default;
};

struct SeccompProfile {
  std::string source;  // file it was read from; "built-in default" for the default
  SeccompAction defaultAction = SeccompAction::Allow;
  // One rule per syscall and condition (a later line for the same syscall and condition
  // replaces the earlier one), in file order.
  std::vector<SeccompRule> rules;
};

// Profile file format (etc/seccomp-default.conf is the reference):
//   # comment                    ('#' to the end of a line)
//   default-action = allow       (or deny; optional, allow by default)
//   deny kexec_load              (the syscall fails with EPERM)
//   allow perf_event_open
//   deny ioctl arg1 & 0xffffffff == TIOCSTI
//                                (only calls whose argument 1, masked, equals the value;
//                                 "& MASK" is optional; MASK and VALUE are numbers, decimal
//                                 or 0x hex, or the names TIOCSTI and TIOCLINUX)
// Syscall names are those of libseccomp (seccomp_syscall_resolve_name); a name no
// architecture knows is an error. Errors are "FILE:LINE: ...".
[[nodiscard]] SeccompProfile parseSeccompProfile(std::string_view text, const std::string& fileName);

// Reads and parses `path`; an empty path gives defaultSeccompProfile().
[[nodiscard]] SeccompProfile loadSeccompProfile(const std::filesystem::path& path);

// The built-in profile. Its text is defaultSeccompProfileText(), which is byte for byte
// etc/seccomp-default.conf (a unit test keeps the two equal), so the shipped file is both
// documentation and a starting point for an admin's own profile.
[[nodiscard]] SeccompProfile defaultSeccompProfile();
[[nodiscard]] std::string_view defaultSeccompProfileText();

// Loads `profile` as a seccomp filter for this thread and its future children (native
// architecture, plus x86 and x32 on x86_64 and arm on aarch64 so 32-bit programs are
// covered; a syscall from any other architecture kills the process). Needs no_new_privs
// (or CAP_SYS_ADMIN). Rules for syscalls absent on an architecture are skipped there.
// A profile compiled to classic BPF, ready for prctl(PR_SET_SECCOMP): compiling with
// libseccomp costs more than the rest of a warm launch's hand-over, so launches reuse one.
struct SeccompProgram {
  std::string source;  // profile it came from, for messages
  std::string bpf;     // struct sock_filter[], raw bytes
};

[[nodiscard]] SeccompProgram compileSeccomp(const SeccompProfile& profile);

// The program for the profile at `path` (empty = built in), compiled at most once per
// profile text, libseccomp version and architecture: cached as <cacheDir>/seccomp-<hash>.bpf
// when `cacheDir` is a directory owned by the user and writable by no one else (the per-user
// state directory); otherwise compiled in place. A cached file that is not a valid program
// is compiled again and replaced.
[[nodiscard]] SeccompProgram loadSeccompProgram(const std::filesystem::path& path,
                                                const std::string& cacheDir);

// Installs the filter (no_new_privs must be set first).
void installSeccomp(const SeccompProgram& program);

// compileSeccomp + installSeccomp.
void applySeccomp(const SeccompProfile& profile);

}  // namespace ctr::runtime
