// /etc/passwd and /etc/group for the container, so that the user's uid and groups have
// names inside (ls -l, id, whoami, ssh and MPI launchers that look the user up).
// buildIdentityFiles is pure; lookupHostUser does the host's NSS lookups (possibly LDAP),
// so call it once per launch, in the planner, never per rank in a loop.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::launch {

struct HostGroup {
  gid_t gid = 0;
  std::string name;  // empty when the host has no name for it (the gid is then left out)

  bool operator==(const HostGroup&) const = default;
};

struct HostUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string gecos;
  std::string home;
  std::string shell;
  HostGroup primaryGroup;           // gid and its name
  std::vector<HostGroup> groups;    // supplementary groups, primary excluded

  bool operator==(const HostUser&) const = default;
};

// Whether NSS answers `database` ("passwd", "group") from the /etc files first and stops
// there when they hold the entry: its one line in `nsswitch` (nsswitch.conf's text) names
// "files" first, with no action after it that could change SUCCESS=return. False when the
// line is absent (glibc's built-in default applies) or appears twice.
[[nodiscard]] bool filesAnswerFirst(std::string_view nsswitch, std::string_view database);

// The first entry for `uid` in a passwd file's text, read as NSS's files service reads it
// (glibc's own parser; only lines whose uid field reads as `uid` are parsed): fills the
// user's name, gecos, home and shell, or returns false.
[[nodiscard]] bool passwdEntryFromText(std::string_view passwd, uid_t uid, HostUser& user);

// For each gid of `names` still without a name: the name of its first entry in a group
// file's text, read the same way.
void groupNamesFromText(std::string_view group, std::map<gid_t, std::string>& names);

// The calling user: getuid/getgid/getgroups, then the passwd and group entries. Where
// filesAnswerFirst holds, entries are read from /etc/passwd and /etc/group with glibc's own
// parser (what NSS would return, without its nscd probes and per-lookup set-up); anything
// the files lack goes through getpwuid_r/getgrgid_r (LDAP, sssd, systemd). When the host has no
// passwd entry (a uid from a container-less scheduler, broken LDAP) it falls back to
// name "uid<N>", $HOME or "/", shell "/bin/sh", rather than failing the launch.
[[nodiscard]] HostUser lookupHostUser();

struct IdentityFiles {
  std::string passwd;
  std::string group;
};

// Starts from the image's files (empty when the image has none) and:
//  - passwd: drops every entry with the user's uid or name, appends the user's entry
//    ("name:x:uid:gid:gecos:home:shell"); adds "root:x:0:0:root:/root:/bin/sh" when the image
//    has no uid 0 entry, so tools that look root up keep working;
//  - group: for the primary and each supplementary group, an image entry with that gid gets
//    the user added to its member list; a gid the image lacks is appended as
//    "name:x:gid:user". Groups without a host name are skipped.
// Other lines (comments, malformed ones) are kept unchanged, in order. Output ends in '\n'.
[[nodiscard]] IdentityFiles buildIdentityFiles(std::string_view imagePasswd,
                                               std::string_view imageGroup,
                                               const HostUser& user);

}  // namespace ctr::launch
