// Runtime-internal: assembling the container's root in the launch's own mount namespace.
#pragma once

#include <functional>
#include <string>

#include "ctr/launch.hpp"
#include "ctr/prepared_root.hpp"
#include "shared_mount.hpp"

namespace ctr::runtime {

// Builds the root from the shared image mount and the plan's mounts, then pivot_root()s
// into it. Afterwards "/" is the container's root; the working directory is "/".
// When the holder's prepared root (image.baseDir) is exactly what the plan asks for (same
// user, every plan mount already there, nothing to detach or add), joins the holder's ready
// namespace instead: no copy, no mount, no pivot. Otherwise, in its own copy of the
// holder's namespace, uses the prepared root when the plan's user matches it and every
// mount target exists there, or builds its own root on a private tmpfs.
void assembleRoot(const launch::LaunchPlan& plan, SharedImage& image);

// Holder side, in the holder's mount namespace once the image is mounted at imageDir:
// mounts a tmpfs on baseDir and prepares baseDir/root, read-only: an overlay of the image
// with the missing targets of the planner's launch-independent mounts (spec.mounts) created
// (the image itself, bound, when none is missing: an overlay slows every path lookup),
// and the /etc/passwd and /etc/group generated for spec.user bound in, then the default,
// admin and host binds made once for all launches. Its manifest (the user, the binds made,
// the targets added; launch::PreparedRootManifest) is written to baseDir/manifest.json last,
// and returned: launches use the prepared root only once it is there. Decides nothing the
// spec does not say (launch::chooseRootStrategy decides for each launch).
// Throws ctr::Error; the caller then unmounts baseDir and launches build their own roots.
// `overlaid` (when given): whether an overlay has the image as its lower layer.
launch::PreparedRootManifest prepareBaseRoot(const std::string& imageDir, const std::string& baseDir,
                                             const launch::PreparedRootSpec& spec, bool* overlaid = nullptr);

// Holder side, once prepareBaseRoot() succeeded: a copy of the holder's mount namespace
// pivoted into `root` (the prepared root, every host mount outside it gone), returned as an
// nsfs fd. A launch whose plan the prepared root satisfies exactly joins it with setns()
// instead of copying the holder's namespace and pivoting. The holder itself stays in its
// own namespace (it enters the copy only to pivot and to run `inside` there, and returns).
UniqueFd makeReadyNamespace(const std::string& root, const std::function<void()>& inside = {});

}  // namespace ctr::runtime
