// Runtime-internal: the per-node, per-user shared image mount (see ctr/runtime.hpp).
#pragma once

#include <string>

#include "ctr/launch.hpp"

namespace ctr::runtime {

// A joined shared image: after joinSharedImage() returns, the calling process is in the
// holder's user namespace and in its own copy of the holder's mount namespace, and the
// holder watches it (a pidfd): the image stays mounted while this process, once the app,
// lives. It holds no fd of the holder's, so the app inherits none.
struct SharedImage {
  std::string imageDir;   // where the image's root is mounted (<state>/mnt/img)
  std::string stageDir;   // empty directory on the holder's tmpfs for this launch's root
  std::string baseDir;    // the holder's prepared root (<state>/mnt/base; see rootfs.hpp)
};

SharedImage joinSharedImage(const launch::LaunchPlan& plan);

}  // namespace ctr::runtime
