#include <seccomp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "ctr/error.hpp"
#include "ctr/handover.hpp"
#include "ctr/log.hpp"

namespace ctr::runtime {
namespace {

// Byte for byte etc/seccomp-default.conf (SeccompProfile.ShippedFileIsTheBuiltInDefault
// checks it): the file documents the list, this copy makes ctr work without it installed.
constexpr std::string_view kDefaultProfileText = R"ctr(# ctr default seccomp profile.
#
# This file is the built-in default, byte for byte (a unit test keeps the copy compiled
# into ctr equal to it). To change the filter, copy it, edit the copy and point
# "seccomp profile" in ctr.conf at it.
#
# Format: "default-action = allow|deny", then one "deny NAME" or "allow NAME" per line;
# '#' starts a comment. A denied syscall fails with EPERM. Names are libseccomp's; a
# later line for the same syscall wins. The filter also covers 32-bit programs (x86 and
# x32 on x86_64, arm on aarch64); a syscall from another architecture kills the process.
#
# The container runs without capabilities and with no_new_privs, so the kernel already
# refuses most of these; the filter is a second wall against kernel bugs in code paths
# that HPC applications never use. It denies only what containers never need.
# Deliberately allowed: ptrace and process_vm_* (debuggers, MPI CMA), perf_event_open
# (perf, PAPI, VTune; the host's kernel.perf_event_paranoid still applies), NUMA calls
# (mbind, set_mempolicy, move_pages, migrate_pages), mount/umount/unshare/setns/clone
# with namespaces (nested containers and build tools; unprivileged, they only act
# inside namespaces the user owns), personality (setarch, gdb), quotactl (users
# querying their own quota), name_to_handle_at (harmless: it only produces a handle).

default-action = allow

# Loading another kernel.
deny kexec_load
deny kexec_file_load

# Kernel modules.
deny init_module
deny finit_module
deny delete_module
deny create_module
deny query_module
deny get_kernel_syms

# Kernel keyring: keys are not namespaced, so a container could read or fill the
# user's host keyring. Sites with Kerberos/AFS keyring credential caches may
# "allow keyctl" in their own profile.
deny keyctl
deny add_key
deny request_key

# eBPF programs and userfaultfd: large kernel attack surface, unused by applications.
deny bpf
deny userfaultfd

# Opening files by handle bypasses the mount namespace ("shocker").
deny open_by_handle_at

# Host administration.
deny acct
deny swapon
deny swapoff
deny reboot
deny nfsservctl
deny lookup_dcookie
deny uselib
deny _sysctl

# The system clock is shared with the host (reading it is unaffected).
deny settimeofday
deny clock_settime
deny clock_settime64
deny stime

# Raw I/O port access and the x86 virtual-8086 mode.
deny iopl
deny ioperm
deny vm86
deny vm86old

# Allowed explicitly, so that a site that wants them denied only changes the word.
allow perf_event_open
allow ptrace
)ctr";

std::string trim(std::string_view s) {
  const char* ws = " \t\r";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

SeccompAction parseAction(const std::string& word, const std::string& where) {
  if (word == "allow") return SeccompAction::Allow;
  if (word == "deny") return SeccompAction::Deny;
  throw Error(where + "unknown action '" + word + "' (allow or deny)");
}

uint32_t toScmp(SeccompAction action) {
  return action == SeccompAction::Allow ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EPERM);
}

struct FilterDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Filter = std::unique_ptr<void, FilterDeleter>;

// libseccomp returns -errno.
void check(int rc, const std::string& what) {
  if (rc < 0) throw sysError(what, -rc);
}

}  // namespace

SeccompProfile parseSeccompProfile(std::string_view text, const std::string& fileName) {
  SeccompProfile profile;
  profile.source = fileName;
  std::map<std::string, size_t> index;  // syscall -> position in rules
  std::istringstream in{std::string(text)};
  std::string raw;
  int lineNo = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    auto where = fileName + ":" + std::to_string(lineNo) + ": ";
    if (auto hash = raw.find('#'); hash != std::string::npos) raw.erase(hash);
    std::string line = trim(raw);
    if (line.empty()) continue;
    if (auto eq = line.find('='); eq != std::string::npos) {
      std::string key = trim(std::string_view(line).substr(0, eq));
      if (key != "default-action") throw Error(where + "unknown setting '" + key + "'");
      profile.defaultAction = parseAction(trim(std::string_view(line).substr(eq + 1)), where);
      continue;
    }
    std::istringstream words(line);
    std::string action, name, extra;
    words >> action >> name >> extra;
    if (name.empty() || !extra.empty()) {
      throw Error(where + "expected 'allow NAME' or 'deny NAME', got '" + line + "'");
    }
    SeccompRule rule{name, parseAction(action, where), lineNo};
    if (seccomp_syscall_resolve_name(name.c_str()) == __NR_SCMP_ERROR) {
      throw Error(where + "unknown syscall '" + name + "'");
    }
    if (auto it = index.find(name); it != index.end()) {
      profile.rules[it->second] = rule;
    } else {
      index.emplace(name, profile.rules.size());
      profile.rules.push_back(rule);
    }
  }
  return profile;
}

SeccompProfile loadSeccompProfile(const std::filesystem::path& path) {
  if (path.empty()) return defaultSeccompProfile();
  std::ifstream file(path);
  if (!file) throw sysError("cannot read seccomp profile " + path.string());
  std::stringstream text;
  text << file.rdbuf();
  return parseSeccompProfile(text.str(), path.string());
}

std::string_view defaultSeccompProfileText() { return kDefaultProfileText; }

SeccompProfile defaultSeccompProfile() {
  return parseSeccompProfile(kDefaultProfileText, "built-in default");
}

void applySeccomp(const SeccompProfile& profile) {
  log::StepTimer timer("loading seccomp profile " + profile.source);
  Filter filter(seccomp_init(toScmp(profile.defaultAction)));
  if (!filter) throw Error("seccomp_init failed");
  // Other ABIs of this CPU (32-bit programs on a 64-bit host) get the same rules; any
  // architecture not added here hits the default bad-arch action, which kills.
  const uint32_t native = seccomp_arch_native();
  std::vector<uint32_t> extra;
  if (native == SCMP_ARCH_X86_64) extra = {SCMP_ARCH_X86, SCMP_ARCH_X32};
  if (native == SCMP_ARCH_AARCH64) extra = {SCMP_ARCH_ARM};
  for (uint32_t arch : extra) {
    int rc = seccomp_arch_add(filter.get(), arch);
    if (rc != 0 && rc != -EEXIST) check(rc, "seccomp_arch_add");
  }
  for (const auto& rule : profile.rules) {
    if (rule.action == profile.defaultAction) continue;  // libseccomp refuses redundant rules
    int nr = seccomp_syscall_resolve_name(rule.syscall.c_str());
    if (nr == __NR_SCMP_ERROR) throw Error(profile.source + ": unknown syscall '" + rule.syscall + "'");
    // Negative numbers are libseccomp pseudo-syscalls (absent natively); it maps them
    // to the architectures that have the call and skips the others.
    check(seccomp_rule_add(filter.get(), toScmp(rule.action), nr, 0),
          "seccomp rule for " + rule.syscall);
  }
  check(seccomp_load(filter.get()), "seccomp_load");
}

}  // namespace ctr::runtime
