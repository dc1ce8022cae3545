// The caller as the node knows it: the passwd and group entries (read from /etc with
// glibc's own parsers where NSS would answer from the files, else through NSS) and the
// subordinate id ranges.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/log.hpp"
#include "ctr/strings.hpp"

namespace ctr::host {
namespace {

// getpwuid_r/getgrgid_r want a caller buffer; ERANGE means "bigger" (large LDAP groups).
template <typename Entry, typename Lookup>
bool lookupWithBuffer(Lookup lookup, Entry& entry, std::vector<char>& buf) {
  buf.resize(4096);
  while (true) {
    Entry* result = nullptr;
    int rc = lookup(&entry, buf.data(), buf.size(), &result);
    if (rc == ERANGE && buf.size() < (1U << 24)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    return rc == 0 && result != nullptr;
  }
}

HostGroup lookupGroup(gid_t gid) {
  struct group entry {};
  std::vector<char> buf;
  bool found = lookupWithBuffer<struct group>(
      [gid](struct group* e, char* b, size_t n, struct group** r) { return getgrgid_r(gid, e, b, n, r); },
      entry, buf);
  return {gid, found ? std::string(entry.gr_name) : std::string()};
}

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

// The number in the `index`th ':'-separated field of an /etc line, read with strtoul as
// glibc's parser reads ids, or nullopt. A cheap look to pick lines: a line it picks still
// goes through glibc's parser, which has the last word.
std::optional<unsigned long> lineId(std::string_view line, int index) {
  size_t start = 0;
  for (int i = 0; i < index; ++i) {
    start = line.find(':', start);
    if (start == std::string_view::npos) return std::nullopt;
    ++start;
  }
  const std::string field(line.substr(start, line.find(':', start) - start));
  char* end = nullptr;
  const unsigned long value = std::strtoul(field.c_str(), &end, 10);
  if (end == field.c_str()) return std::nullopt;
  return value;
}

// One line parsed with glibc's parser for its format (`parse`: fgetpwent_r, fgetgrent_r,
// what NSS's files service uses), over a stream in memory. False when glibc skips the line
// (a comment, a malformed entry).
template <typename Entry, typename Parse>
bool parseEtcLine(std::string_view line, Entry& entry, std::vector<char>& buf, Parse parse) {
  std::string copy(line);
  copy += '\n';
  File file(fmemopen(copy.data(), copy.size(), "r"), &std::fclose);
  if (!file) return false;
  while (true) {
    Entry* result = nullptr;
    const int rc = parse(file.get(), &entry, buf.data(), buf.size(), &result);
    if (rc == ERANGE && buf.size() < (1U << 24)) {
      buf.resize(buf.size() * 2);  // glibc went back to the line's start: read it again
      continue;
    }
    return rc == 0 && result != nullptr;
  }
}

std::optional<std::uint32_t> parseId(std::string_view text) {
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

bool passwdEntryFromText(std::string_view text, uid_t uid, HostUser& user) {
  struct passwd entry {};
  std::vector<char> buf(4096);
  for (std::string_view line : splitLines(text)) {
    const auto id = lineId(line, 2);
    if (!id || static_cast<uid_t>(*id) != uid || !parseEtcLine(line, entry, buf, fgetpwent_r) || entry.pw_uid != uid)
      continue;
    user.name = entry.pw_name;
    user.gecos = entry.pw_gecos ? entry.pw_gecos : "";
    user.home = entry.pw_dir ? entry.pw_dir : "";
    user.shell = entry.pw_shell ? entry.pw_shell : "";
    return true;
  }
  return false;
}

void groupNamesFromText(std::string_view text, std::map<gid_t, std::string>& names) {
  struct group entry {};
  std::vector<char> buf(4096);
  for (std::string_view line : splitLines(text)) {
    const auto id = lineId(line, 2);
    if (!id) continue;
    auto it = names.find(static_cast<gid_t>(*id));
    if (it == names.end() || !it->second.empty() || !parseEtcLine(line, entry, buf, fgetgrent_r) ||
        entry.gr_gid != it->first)
      continue;
    it->second = entry.gr_name;
  }
}

bool filesAnswerFirst(std::string_view nsswitch, std::string_view database) {
  std::string_view services;
  int lines = 0;
  for (std::string_view line : splitLines(nsswitch)) {
    line = trim(line.substr(0, line.find('#')));
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || trim(line.substr(0, colon)) != database) continue;
    services = trim(line.substr(colon + 1));
    ++lines;
  }
  if (lines != 1) return false;  // absent (glibc's built-in default applies) or said twice
  std::string_view first = services.substr(0, services.find_first_of(" \t"));
  if (first != "files") return false;
  std::string_view rest = trim(services.substr(first.size()));
  return rest.empty() || rest.front() != '[';  // an action could change "SUCCESS=return"
}

HostUser lookupHostUser(bool* answeredByFiles) {
  log::StepTimer timer("looking up the host user");
  HostUser user;
  user.uid = getuid();
  user.gid = getgid();

  int count = getgroups(0, nullptr);
  if (count < 0) throw sysError("getgroups");
  std::vector<gid_t> gids(static_cast<size_t>(count));
  count = getgroups(count, gids.data());
  if (count < 0) throw sysError("getgroups");
  gids.resize(static_cast<size_t>(count));

  // Through NSS, a fresh process probes nscd twice and parses nsswitch.conf before it reads
  // a file (~0.1 ms, in every rank). Where nsswitch.conf has the files answer first and
  // they hold the entry, NSS would return exactly that entry, so read it there directly.
  // Whatever the files lack still goes through NSS (LDAP, sssd, systemd).
  std::string nsswitch = readFileIfPresent("/etc/nsswitch.conf");
  bool found = filesAnswerFirst(nsswitch, "passwd") && passwdEntryFromText(readFileIfPresent("/etc/passwd"), user.uid, user);
  bool fromFiles = found;
  struct passwd entry {};
  std::vector<char> buf;
  uid_t uid = user.uid;
  if (!found &&
      lookupWithBuffer<struct passwd>(
          [uid](struct passwd* e, char* b, size_t n, struct passwd** r) { return getpwuid_r(uid, e, b, n, r); },
          entry, buf)) {
    found = true;
    user.name = entry.pw_name;
    user.gecos = entry.pw_gecos ? entry.pw_gecos : "";
    user.home = entry.pw_dir;
    user.shell = entry.pw_shell;
  }
  if (!found) {
    spdlog::warn("no passwd entry for uid {} on this host; calling it uid{}", user.uid, user.uid);
    user.name = "uid" + std::to_string(user.uid);
    const char* home = std::getenv("HOME");
    user.home = home && *home ? home : "/";
  }
  if (user.shell.empty()) user.shell = "/bin/sh";

  std::map<gid_t, std::string> names{{user.gid, {}}};
  for (gid_t gid : gids) names.emplace(gid, std::string());
  if (filesAnswerFirst(nsswitch, "group")) groupNamesFromText(readFileIfPresent("/etc/group"), names);
  for (auto& [gid, name] : names) {
    fromFiles = fromFiles && !name.empty();
    if (name.empty()) name = lookupGroup(gid).name;
  }
  if (answeredByFiles) *answeredByFiles = fromFiles;
  user.primaryGroup = {user.gid, names[user.gid]};
  std::set<gid_t> seen{user.gid};
  for (gid_t gid : gids) {
    if (seen.insert(gid).second) user.groups.push_back({gid, names[gid]});
  }
  return user;
}

std::optional<IdRange> parseSubordinateRange(std::string_view text, std::string_view name, std::uint32_t id) {
  const std::string idText = std::to_string(id);
  for (auto line : split(text, '\n')) {
    auto fields = split(line, ':');
    if (fields.size() != 3 || (fields[0] != name && fields[0] != idText)) continue;
    auto start = parseId(fields[1]);
    auto count = parseId(fields[2]);
    if (!start || !count || *count == 0) continue;
    return IdRange{0, *start, *count};
  }
  return std::nullopt;
}

SubordinateIds discoverSubordinateIds(const HostUser& user) {
  SubordinateIds ids;
  auto read = [&](const char* path, std::uint32_t id) -> std::optional<IdRange> {
    std::string text;
    try {
      text = readCheckedFile(path, 4u << 20, path);
    } catch (const Error&) {
      return std::nullopt;
    }
    return parseSubordinateRange(text, user.name, id);
  };
  ids.uids = read("/etc/subuid", user.uid);
  ids.gids = read("/etc/subgid", user.uid);
  return ids;
}

}  // namespace ctr::host
