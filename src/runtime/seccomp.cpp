#include <seccomp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "ctr/seccomp_default_profile.hpp"
#include "ctr/strings.hpp"
#include "ctr/error.hpp"
#include "ctr/handover.hpp"
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
    std::string line(trim(raw));
    if (line.empty()) continue;
    if (auto eq = line.find('='); eq != std::string::npos) {
      std::string key(trim(std::string_view(line).substr(0, eq)));
      if (key != "default-action") throw Error(where + "unknown setting '" + key + "'");
      profile.defaultAction = parseAction(std::string(trim(std::string_view(line).substr(eq + 1))), where);
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
