#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <span>
#include <vector>

#include "ctr/seccomp_default_profile.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/handover.hpp"
#include "ctr/hash.hpp"
#include "ctr/log.hpp"

namespace ctr::runtime {
namespace {

// The built-in profile is etc/seccomp-default.json itself, embedded at build time, so the
// shipped file and the default cannot drift apart.
constexpr std::string_view kDefaultProfileText = configured::kSeccompDefaultProfile;

std::uint32_t toScmp(const SeccompAction& action) {
  using Kind = SeccompAction::Kind;
  switch (action.kind) {
    case Kind::Allow: return SCMP_ACT_ALLOW;
    case Kind::Errno: return SCMP_ACT_ERRNO(action.errnoValue);
    case Kind::KillThread: return SCMP_ACT_KILL_THREAD;
    case Kind::KillProcess: return SCMP_ACT_KILL_PROCESS;
    case Kind::Trap: return SCMP_ACT_TRAP;
    case Kind::Log: return SCMP_ACT_LOG;
  }
  throw Error("unknown seccomp action");
}

scmp_arg_cmp toScmp(const SeccompArgCondition& c) {
  using Op = SeccompArgCondition::Op;
  switch (c.op) {
    case Op::NotEqual: return {c.index, SCMP_CMP_NE, c.value, 0};
    case Op::Less: return {c.index, SCMP_CMP_LT, c.value, 0};
    case Op::LessOrEqual: return {c.index, SCMP_CMP_LE, c.value, 0};
    case Op::Equal: return {c.index, SCMP_CMP_EQ, c.value, 0};
    case Op::GreaterOrEqual: return {c.index, SCMP_CMP_GE, c.value, 0};
    case Op::Greater: return {c.index, SCMP_CMP_GT, c.value, 0};
    case Op::MaskedEqual: return {c.index, SCMP_CMP_MASKED_EQ, c.value, c.valueTwo};
  }
  throw Error("unknown seccomp comparison");
}

// The profile's architectures, else the native one and this CPU's 32-bit ones.
std::vector<std::uint32_t> filterArchitectures(const SeccompProfile& profile) {
  if (!profile.architectures.empty()) return profile.architectures;
  const std::uint32_t native = seccomp_arch_native();
  if (native == SCMP_ARCH_X86_64) return {native, SCMP_ARCH_X86, SCMP_ARCH_X32};
  if (native == SCMP_ARCH_AARCH64) return {native, SCMP_ARCH_ARM};
  return {native};
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

namespace {

// An admin's profile file: a regular file of at most 1 MiB (the default is about 4 KiB).
std::string readProfileFile(const std::filesystem::path& path) {
  return readCheckedFile(path.string(), 1u << 20, path.string());
}

}  // namespace

SeccompProfile loadSeccompProfile(const std::filesystem::path& path) {
  if (path.empty()) return defaultSeccompProfile();
  return parseSeccompProfile(readProfileFile(path), path.string());
}

std::string_view defaultSeccompProfileText() { return kDefaultProfileText; }

SeccompProfile defaultSeccompProfile() {
  return parseSeccompProfile(kDefaultProfileText, "built-in default");
}

SeccompProgram compileSeccomp(const SeccompProfile& profile) {
  log::StepTimer timer("compiling seccomp profile " + profile.source);
  Filter filter(seccomp_init(toScmp(profile.defaultAction)));
  if (!filter) throw Error("seccomp_init failed");
  check(seccomp_attr_set(filter.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2), "seccomp binary tree");
  // Rules apply to every architecture added; a syscall of one not added hits the default
  // bad-arch action, which kills.
  for (std::uint32_t arch : filterArchitectures(profile)) {
    int rc = seccomp_arch_add(filter.get(), arch);
    if (rc != 0 && rc != -EEXIST) check(rc, "seccomp_arch_add");
  }
  if (!profile.unknownSyscalls.empty()) {
    std::string names;
    for (const auto& name : profile.unknownSyscalls) names += (names.empty() ? "" : ", ") + name;
    const scmp_version* v = seccomp_version();
    spdlog::warn("seccomp profile {}: {} syscall name(s) unknown to libseccomp {}.{}.{} skipped: {}", profile.source,
              profile.unknownSyscalls.size(), v->major, v->minor, v->micro, names);
  }
  for (const auto& rule : profile.rules) {
    if (rule.action == profile.defaultAction) continue;  // libseccomp refuses redundant rules
    const int nr = seccomp_syscall_resolve_name(rule.syscall.c_str());
    if (nr == __NR_SCMP_ERROR) throw Error(profile.source + ": unknown syscall '" + rule.syscall + "'");
    // Negative numbers are libseccomp pseudo-syscalls (absent natively); it maps them
    // to the architectures that have the call and skips the others.
    std::vector<scmp_arg_cmp> conditions;
    for (const auto& c : rule.conditions) conditions.push_back(toScmp(c));
    check(seccomp_rule_add_array(filter.get(), toScmp(rule.action), nr, static_cast<unsigned>(conditions.size()),
                                 conditions.data()),
          profile.source + ": " + rule.where + ": rule for " + rule.syscall);
  }
  // libseccomp 2.5 exports only to a file descriptor.
  UniqueFd mem(::memfd_create("ctr-seccomp", MFD_CLOEXEC));
  if (!mem) throw sysError("memfd_create");
  check(seccomp_export_bpf(filter.get(), mem.get()), "seccomp_export_bpf");
  SeccompProgram program{profile.source, {}};
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0) throw Error("seccomp_export_bpf wrote nothing");
  program.bpf.resize(static_cast<size_t>(size));
  if (readAt(mem.get(), 0, std::span<char>(program.bpf)) != program.bpf.size())
    throw Error("cannot read the exported seccomp filter");
  return program;
}

namespace {

bool validProgram(std::string_view bpf) {
  return !bpf.empty() && bpf.size() % sizeof(sock_filter) == 0 &&
         bpf.size() / sizeof(sock_filter) <= BPF_MAXINSNS;
}

// A hash of everything the compiled program depends on.
// `textHash`: fnv1a64 of the profile's text; the key hashes on from it (FNV-1a runs byte by
// byte, so this is the hash of the text followed by the rest).
// The kernel release counts because a profile's minKernel entries depend on it.
std::string cacheKey(std::uint64_t textHash) {
  const scmp_version* v = seccomp_version();
  utsname u{};
  const std::string kernel = ::uname(&u) == 0 ? u.release : "";
  const std::string rest = '\0' + std::to_string(v->major) + '.' + std::to_string(v->minor) + '.' +
                           std::to_string(v->micro) + '/' + std::to_string(seccomp_arch_native()) + '/' + kernel +
                           "/tree";
  return toHex16(fnv1a64(rest, textHash));
}

// The built-in profile's hash, computed by the compiler: not 5 KB hashed in every launch.
constexpr std::uint64_t kDefaultProfileHash = fnv1a64(kDefaultProfileText);

// The state directory is trusted for the cache only if it is the user's alone.
bool usableCacheDir(const std::string& dir) {
  struct stat st {};
  return !dir.empty() && ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         st.st_uid == ::getuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::string readWholeFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > static_cast<off_t>(BPF_MAXINSNS * sizeof(sock_filter)))
    return {};
  std::string data(static_cast<size_t>(st.st_size), '\0');
  if (readAt(fd.get(), 0, std::span<char>(data)) != data.size()) return {};
  return data;
}

// The file gets its name only once complete (O_TMPFILE + linkat), so a launch killed
// half-way leaves nothing behind.
void storeInCache(const std::string& dir, const std::string& path, const std::string& bpf) {
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (!fd) return;  // a cache is an optimisation: never fail a launch over it
  if (::write(fd.get(), bpf.data(), bpf.size()) != static_cast<ssize_t>(bpf.size())) return;
  const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
      errno == EEXIST) {
    // The file we just refused as corrupt: replace it. If another launch links a good one
    // in between, ours fails with EEXIST, which is as good.
    ::unlink(path.c_str());
    (void)::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
  }
}

}  // namespace

SeccompProgram loadSeccompProgram(const std::filesystem::path& path, const std::string& cacheDir) {
  std::string source = path.empty() ? std::string("built-in default") : path.string();
  const std::string fileText = path.empty() ? std::string() : readProfileFile(path);
  const std::string_view text = path.empty() ? kDefaultProfileText : std::string_view(fileText);
  const bool cache = usableCacheDir(cacheDir);
  const std::string cached =
      cacheDir + "/seccomp-" + cacheKey(path.empty() ? kDefaultProfileHash : fnv1a64(text)) + ".bpf";
  if (cache) {
    std::string bpf = readWholeFile(cached);
    if (validProgram(bpf)) {
      log::StepTimer hit("seccomp filter from " + cached);
      return {source, std::move(bpf)};
    }
  }
  SeccompProgram program = compileSeccomp(parseSeccompProfile(text, source));
  if (cache) storeInCache(cacheDir, cached, program.bpf);
  return program;
}

void installSeccomp(const SeccompProgram& program) {
  if (!validProgram(program.bpf)) throw Error("invalid seccomp filter from " + program.source);
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.bpf.size() / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(program.bpf.data()));
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    throw sysError("install seccomp filter from " + program.source);
}

void applySeccomp(const SeccompProfile& profile) { installSeccomp(compileSeccomp(profile)); }

}  // namespace ctr::runtime
