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

// Empties the bounding set (PR_CAPBSET_DROP from 0 to the last capability the kernel knows),
// clears the ambient set, then capset() with empty effective/permitted/inheritable, and
// verifies all of them read back empty. An empty bounding set is what keeps a process mapped
// to uid 0 in the user namespace from regaining capabilities through execve.
void dropAllCapabilities();

// What a seccomp rule does to a matching call (libseccomp's SCMP_ACT_*).
struct SeccompAction {
  enum class Kind { Allow, Errno, KillThread, KillProcess, Trap, Log };
  Kind kind = Kind::Allow;
  unsigned errnoValue = 0;  // for Errno: the call fails with this errno

  bool operator==(const SeccompAction&) const = default;
};

// One comparison of a syscall argument (libseccomp's scmp_arg_cmp). For MaskedEqual the
// call matches when (argument & value) == valueTwo, as in Docker's profiles.
struct SeccompArgCondition {
  enum class Op { NotEqual, Less, LessOrEqual, Equal, GreaterOrEqual, Greater, MaskedEqual };
  unsigned index = 0;  // 0..5
  Op op = Op::Equal;
  std::uint64_t value = 0;
  std::uint64_t valueTwo = 0;

  bool operator==(const SeccompArgCondition&) const = default;
};

struct SeccompRule {
  std::string syscall;
  SeccompAction action;
  std::vector<SeccompArgCondition> conditions;  // all must hold; none = every call
  std::string where;                            // "syscalls[3]", for messages

  bool operator==(const SeccompRule&) const = default;
};

struct SeccompProfile {
  std::string source;  // file it was read from; "built-in default" for the default
  SeccompAction defaultAction;
  // libseccomp SCMP_ARCH_* tokens; empty = the native ABI and this CPU's 32-bit ones.
  std::vector<std::uint32_t> architectures;
  // One rule per syscall and conditions (a later entry for the same syscall and conditions
  // replaces the earlier one), in file order. Entries whose includes/excludes leave them
  // out on this node (architecture, capabilities, kernel) are not here.
  std::vector<SeccompRule> rules;
  // Names of the profile that libseccomp does not know (newer than it): skipped, as
  // Docker's and runc's loaders do; said once when the profile is compiled.
  std::vector<std::string> unknownSyscalls;
};

// Profile format: Docker's and the OCI runtime spec's seccomp JSON (etc/seccomp-default.json
// is ctr's default), so a site's existing profiles work unchanged:
//   defaultAction, defaultErrnoRet, architectures or archMap, and syscalls[] with names
//   (or name), action, errnoRet, args[] {index, value, valueTwo, op}, includes/excludes
//   {arches, caps, minKernel}, comment.
// Actions: SCMP_ACT_ALLOW, _ERRNO (EPERM unless errnoRet), _KILL/_KILL_THREAD,
// _KILL_PROCESS, _TRAP, _LOG; _TRACE and _NOTIFY, flags and listenerPath need a tracer or
// a seccomp agent that ctr does not run and are refused. Containers run with no
// capabilities: an entry that includes caps is left out, one that excludes caps is kept.
// Errors name the file and the entry ("FILE: syscalls[3].args[0].op: ...").
[[nodiscard]] SeccompProfile parseSeccompProfile(std::string_view text, const std::string& fileName);

// Reads and parses `path`; an empty path gives defaultSeccompProfile().
[[nodiscard]] SeccompProfile loadSeccompProfile(const std::filesystem::path& path);

// The built-in profile. Its text is defaultSeccompProfileText(), which is byte for byte
// etc/seccomp-default.json (a unit test keeps the two equal), so the shipped file is both
// documentation and a starting point for an admin's own profile.
[[nodiscard]] SeccompProfile defaultSeccompProfile();
[[nodiscard]] std::string_view defaultSeccompProfileText();

// Loads `profile` as a seccomp filter for this thread and its future children (its
// architectures; by default the native one plus x86 and x32 on x86_64 and arm on aarch64
// so 32-bit programs are covered; a syscall from any other architecture kills the
// process). Needs no_new_privs (or CAP_SYS_ADMIN). Rules for syscalls absent on an
// architecture are skipped there.
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
