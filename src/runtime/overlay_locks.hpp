// Runtime-internal: the --overlay layers' directories made ready and locked before a launch
// registers with its image's holder, which keeps the locks (ctr/launch.hpp, RootOverlay).
#pragma once

#include <vector>

#include "ctr/fd.hpp"
#include "ctr/launch.hpp"

namespace ctr::runtime {

// Creates the writable layer's directories the plan says to (as the user: PATH 0755, upper/
// 0755, work/ 0700), then opens each layer's PATH and locks it: exclusively for the writable
// layer, shared for the read-only ones (an ext3 image: the file, opened read-write for the
// writable layer; a squashfs or SIF image layer has no lock and no fd). A lock another container holds is waited for a
// little (a container that just ended may still be in its holder's queue), then the launch
// fails, naming the directory. Where the file system takes no lock (NFS without a lock
// manager), it warns and goes on unlocked. The fds, in the layers' order, are the launch's to
// hand to the holder (and to an ext3 layer's fuse2fs, which so keeps the lock until it ends).
[[nodiscard]] std::vector<UniqueFd> lockOverlayLayers(const launch::RootOverlay& overlay);

}  // namespace ctr::runtime
