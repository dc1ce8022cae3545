#include "ctr/identity.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>

#include "ctr/error.hpp"
#include "ctr/log.hpp"

namespace ctr::launch {
namespace {

std::vector<std::string> splitLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.emplace_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

std::vector<std::string> splitFields(const std::string& line, char sep) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (true) {
    size_t next = line.find(sep, pos);
    fields.push_back(line.substr(pos, next == std::string::npos ? next : next - pos));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return fields;
}

// The numeric field of a passwd/group entry, or -1 when the line is not such an entry.
long idField(const std::vector<std::string>& fields, size_t index) {
  if (fields.size() <= index || fields[index].empty()) return -1;
  char* end = nullptr;
  long id = std::strtol(fields[index].c_str(), &end, 10);
  return (*end == '\0' && id >= 0) ? id : -1;
}

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

}  // namespace

HostUser lookupHostUser() {
  log::StepTimer timer("looking up the host user");
  HostUser user;
  user.uid = getuid();
  user.gid = getgid();
  struct passwd entry {};
  std::vector<char> buf;
  uid_t uid = user.uid;
  if (lookupWithBuffer<struct passwd>(
          [uid](struct passwd* e, char* b, size_t n, struct passwd** r) { return getpwuid_r(uid, e, b, n, r); },
          entry, buf)) {
    user.name = entry.pw_name;
    user.gecos = entry.pw_gecos ? entry.pw_gecos : "";
    user.home = entry.pw_dir;
    user.shell = entry.pw_shell;
  } else {
    spdlog::warn("no passwd entry for uid {} on this host; calling it uid{}", user.uid, user.uid);
    user.name = "uid" + std::to_string(user.uid);
    const char* home = std::getenv("HOME");
    user.home = home && *home ? home : "/";
  }
  if (user.shell.empty()) user.shell = "/bin/sh";
  user.primaryGroup = lookupGroup(user.gid);

  int count = getgroups(0, nullptr);
  if (count < 0) throw sysError("getgroups");
  std::vector<gid_t> gids(static_cast<size_t>(count));
  count = getgroups(count, gids.data());
  if (count < 0) throw sysError("getgroups");
  gids.resize(static_cast<size_t>(count));
  std::set<gid_t> seen{user.gid};
  for (gid_t gid : gids) {
    if (seen.insert(gid).second) user.groups.push_back(lookupGroup(gid));
  }
  return user;
}

IdentityFiles buildIdentityFiles(std::string_view imagePasswd, std::string_view imageGroup,
                                 const HostUser& user) {
  IdentityFiles out;

  bool hasRoot = false;
  std::string keptPasswd;
  for (const auto& line : splitLines(imagePasswd)) {
    auto fields = splitFields(line, ':');
    long uid = idField(fields, 2);
    bool isEntry = fields.size() >= 7 && uid >= 0;
    if (isEntry && (static_cast<uid_t>(uid) == user.uid || fields[0] == user.name)) continue;
    if (isEntry && uid == 0) hasRoot = true;
    keptPasswd += line + "\n";
  }
  if (!hasRoot && user.uid != 0) out.passwd += "root:x:0:0:root:/root:/bin/sh\n";
  out.passwd += keptPasswd;
  out.passwd += user.name + ":x:" + std::to_string(user.uid) + ":" + std::to_string(user.gid) +
                ":" + user.gecos + ":" + user.home + ":" + user.shell + "\n";

  std::vector<HostGroup> wanted;
  if (!user.primaryGroup.name.empty()) wanted.push_back(user.primaryGroup);
  for (const auto& g : user.groups) {
    if (!g.name.empty()) wanted.push_back(g);
  }
  std::set<gid_t> present;
  for (const auto& line : splitLines(imageGroup)) {
    auto fields = splitFields(line, ':');
    long gid = idField(fields, 2);
    if (fields.size() != 4 || gid < 0) {
      out.group += line + "\n";
      continue;
    }
    bool isUsers = false;
    for (const auto& g : wanted) isUsers = isUsers || g.gid == static_cast<gid_t>(gid);
    if (isUsers) {
      present.insert(static_cast<gid_t>(gid));
      bool listed = false;
      for (const auto& member : splitFields(fields[3], ',')) listed = listed || member == user.name;
      if (!listed) fields[3] += (fields[3].empty() ? "" : ",") + user.name;
    }
    out.group += fields[0] + ":" + fields[1] + ":" + fields[2] + ":" + fields[3] + "\n";
  }
  for (const auto& g : wanted) {
    if (present.insert(g.gid).second) {
      out.group += g.name + ":x:" + std::to_string(g.gid) + ":" + user.name + "\n";
    }
  }
  return out;
}

}  // namespace ctr::launch
