// Runtime-internal: the private user and mount namespaces of a build step (plan.build).
#pragma once

#include "ctr/launch.hpp"
#include "shared_mount.hpp"

namespace ctr::runtime {

// Unshares a user namespace with the plan's id maps (newuidmap/newgidmap run from a helper
// child when the plan says so, as user_namespaces(7) requires a process outside the
// namespace to write them), becomes root in it, then unshares a private mount namespace.
// Returns where the root and the stage are, as joinSharedImage does for launches.
SharedImage enterBuildNamespaces(const launch::BuildRoot& build);

// Only the user namespace part (the caller keeps the host's mounts); also the --fakeroot
// holder's.
void enterBuildUserNamespace(const launch::FakerootMaps& build);

}  // namespace ctr::runtime
