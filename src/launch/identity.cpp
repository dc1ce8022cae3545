#include "ctr/identity.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/log.hpp"
#include "ctr/strings.hpp"

namespace ctr::launch {
namespace {

std::vector<std::string> splitFields(std::string_view line, char sep) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (true) {
    size_t next = line.find(sep, pos);
    fields.emplace_back(line.substr(pos, next == std::string_view::npos ? next : next - pos));
    if (next == std::string_view::npos) break;
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

std::string passwdFor(std::string_view imagePasswd, const host::HostUser& user) {
  bool hasRoot = false;
  std::string kept;
  for (const auto& line : splitLines(imagePasswd)) {
    auto fields = splitFields(line, ':');
    long uid = idField(fields, 2);
    bool isEntry = fields.size() >= 7 && uid >= 0;
    if (isEntry && (static_cast<uid_t>(uid) == user.uid || fields[0] == user.name)) continue;
    if (isEntry && uid == 0) hasRoot = true;
    kept.append(line) += '\n';
  }
  std::string passwd;
  if (!hasRoot && user.uid != 0) passwd += "root:x:0:0:root:/root:/bin/sh\n";
  passwd += kept;
  passwd += user.name + ":x:" + std::to_string(user.uid) + ":" + std::to_string(user.gid) + ":" + user.gecos + ":" +
            user.home + ":" + user.shell + "\n";
  return passwd;
}

std::string groupFor(std::string_view imageGroup, const host::HostUser& user) {
  std::vector<host::HostGroup> wanted;
  if (!user.primaryGroup.name.empty()) wanted.push_back(user.primaryGroup);
  for (const auto& g : user.groups) {
    if (!g.name.empty()) wanted.push_back(g);
  }
  std::string group;
  std::set<gid_t> present;
  for (const auto& line : splitLines(imageGroup)) {
    auto fields = splitFields(line, ':');
    long gid = idField(fields, 2);
    if (fields.size() != 4 || gid < 0) {
      group.append(line) += '\n';
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
    group += fields[0] + ":" + fields[1] + ":" + fields[2] + ":" + fields[3] + "\n";
  }
  for (const auto& g : wanted) {
    if (present.insert(g.gid).second) {
      group += g.name + ":x:" + std::to_string(g.gid) + ":" + user.name + "\n";
    }
  }
  return group;
}

}  // namespace

IdentityFiles buildIdentityFiles(std::string_view imagePasswd, std::string_view imageGroup,
                                 const host::HostUser& user) {
  return {passwdFor(imagePasswd, user), groupFor(imageGroup, user)};
}

std::string identityFileText(IdentityFile which, std::string_view imageText, const host::HostUser& user) {
  return which == IdentityFile::Passwd ? passwdFor(imageText, user) : groupFor(imageText, user);
}

const char* identityFilePath(IdentityFile which) { return which == IdentityFile::Passwd ? "/etc/passwd" : "/etc/group"; }

}  // namespace ctr::launch
