// /etc/passwd and /etc/group for the container, so that the user's uid and groups have
// names inside (ls -l, id, whoami, ssh and MPI launchers that look the user up).
// buildIdentityFiles is pure; the caller's entries come from host::lookupHostUser.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "ctr/host_facts.hpp"

namespace ctr::launch {

// Which identity file a mount of kind Identity makes (Mount::identity).
enum class IdentityFile { Passwd, Group };

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
                                               const host::HostUser& user);
// One of them from the image's own file of that name (identityFilePath): what a mount of
// kind Identity holds.
[[nodiscard]] std::string identityFileText(IdentityFile which, std::string_view imageText, const host::HostUser& user);
[[nodiscard]] const char* identityFilePath(IdentityFile which);  // "/etc/passwd", "/etc/group"

}  // namespace ctr::launch
