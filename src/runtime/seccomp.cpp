#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <map>
#include <memory>
#include <span>
#include <sstream>

#include "ctr/seccomp_default_profile.hpp"
#include "ctr/strings.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/handover.hpp"
#include "ctr/hash.hpp"
#include "ctr/log.hpp"

namespace ctr::runtime {
namespace {

// The built-in profile is etc/seccomp-default.conf itself, embedded at build time, so the
// shipped file and the default cannot drift apart.
constexpr std::string_view kDefaultProfileText = build::kSeccompDefaultProfile;

SeccompAction parseAction(const std::string& word, const std::string& where) {
  if (word == "allow") return SeccompAction::Allow;
  if (word == "deny") return SeccompAction::Deny;
  throw Error(where + "unknown action '" + word + "' (allow or deny)");
}

// A number (decimal or 0x hex) or one of the ioctl requests the default profile names.
std::uint64_t parseArgValue(const std::string& word, const std::string& where) {
  static const std::map<std::string, std::uint64_t, std::less<>> names{
      {"TIOCSTI", TIOCSTI}, {"TIOCLINUX", TIOCLINUX}};
  if (auto it = names.find(word); it != names.end()) return it->second;
  const bool hex = word.starts_with("0x") || word.starts_with("0X");
  const char* begin = word.data() + (hex ? 2 : 0);
  const char* end = word.data() + word.size();
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value, hex ? 16 : 10);
  if (begin == end || ec != std::errc{} || ptr != end) {
    throw Error(where + "bad value '" + word + "' (a number, TIOCSTI or TIOCLINUX)");
  }
  return value;
}

// "argN == VALUE" or "argN & MASK == VALUE".
SeccompArgCondition parseCondition(std::span<const std::string> words, const std::string& where) {
  const bool masked = words.size() == 5 && words[1] == "&";
  const auto& arg = words[0];
  if (!(masked || words.size() == 3) || words[words.size() - 2] != "==" || arg.size() != 4 ||
      arg[3] < '0' || arg[3] > '5') {
    std::string got;
    for (const auto& w : words) got += (got.empty() ? "" : " ") + w;
    throw Error(where + "bad argument condition '" + got + "' (expected 'argN == VALUE' or " +
                "'argN & MASK == VALUE', N from 0 to 5)");
  }
  SeccompArgCondition condition;
  condition.arg = static_cast<unsigned>(arg[3] - '0');
  if (masked) condition.mask = parseArgValue(words[2], where);
  condition.value = parseArgValue(words.back(), where);
  return condition;
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
  std::map<std::string, size_t> index;  // syscall and condition -> position in rules
  for (const ConfigLine& line : configLines(text)) {
    auto where = fileName + ":" + std::to_string(line.number) + ": ";
    std::vector<std::string> words;
    std::istringstream split{std::string(line.text)};
    for (std::string word; split >> word;) words.push_back(word);
    if (line.hasEquals && words[0] != "allow" && words[0] != "deny") {
      if (line.key != "default-action") throw Error(where + "unknown setting '" + std::string(line.key) + "'");
      profile.defaultAction = parseAction(std::string(line.value), where);
      continue;
    }
    if (words.size() < 2 || (words.size() > 2 && !words[2].starts_with("arg"))) {
      throw Error(where + "expected 'allow NAME' or 'deny NAME', got '" + std::string(line.text) + "'");
    }
    SeccompRule rule{words[1], parseAction(words[0], where), line.number, std::nullopt};
    if (words.size() > 2) rule.condition = parseCondition(std::span(words).subspan(2), where);
    if (seccomp_syscall_resolve_name(rule.syscall.c_str()) == __NR_SCMP_ERROR) {
      throw Error(where + "unknown syscall '" + rule.syscall + "'");
    }
    std::string key = rule.syscall;
    if (rule.condition) {
      key += ' ' + std::to_string(rule.condition->arg) + '&' + std::to_string(rule.condition->mask) +
             '=' + std::to_string(rule.condition->value);
    }
    if (auto it = index.find(key); it != index.end()) {
      profile.rules[it->second] = rule;
    } else {
      index.emplace(key, profile.rules.size());
      profile.rules.push_back(rule);
    }
  }
  return profile;
}

namespace {

// An admin's profile file: a regular file of at most 1 MiB (the default is about 4 KiB).
std::string readProfileFile(const std::filesystem::path& path) {
  return readCheckedFile(path.string(), 1u << 20, "seccomp profile " + path.string());
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
    if (rule.condition) {
      const auto& c = *rule.condition;
      check(seccomp_rule_add(filter.get(), toScmp(rule.action), nr, 1,
                             scmp_arg_cmp{c.arg, SCMP_CMP_MASKED_EQ, c.mask, c.value}),
            "seccomp rule for " + rule.syscall + " (line " + std::to_string(rule.line) + ")");
    } else {
      check(seccomp_rule_add(filter.get(), toScmp(rule.action), nr, 0),
            "seccomp rule for " + rule.syscall);
    }
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
std::string cacheKey(std::uint64_t textHash) {
  const scmp_version* v = seccomp_version();
  const std::string rest = '\0' + std::to_string(v->major) + '.' + std::to_string(v->minor) + '.' +
                           std::to_string(v->micro) + '/' + std::to_string(seccomp_arch_native()) + "/tree";
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
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
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
