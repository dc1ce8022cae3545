// Runtime-internal: assembling the container's root in the launch's own mount namespace.
#pragma once

#include "ctr/launch.hpp"
#include "shared_mount.hpp"

namespace ctr::runtime {

// Builds the root from the shared image mount and the plan's mounts, then pivot_root()s
// into it. Afterwards "/" is the container's root; the working directory is "/".
void assembleRoot(const launch::LaunchPlan& plan, const SharedImage& image);

}  // namespace ctr::runtime
