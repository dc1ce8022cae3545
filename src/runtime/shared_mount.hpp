// Runtime-internal: the per-node, per-user shared image mount (see ctr/runtime.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ctr/fd.hpp"
#include "ctr/launch.hpp"
#include "image_env_scripts.hpp"

namespace ctr::runtime {

// A joined shared image: after joinSharedImage() returns, the calling process is in the
// holder's user and mount namespaces, and the holder watches it (a pidfd): the image stays
// mounted while this process, once the app, lives. assembleRoot() then either joins the
// holder's ready namespace (readyNamespace) or takes its own copy of the holder's mount
// namespace (ownCopy() below) before it mounts anything. The app inherits no fd of the
// holder's: readyNamespace is O_CLOEXEC and closed once used.
struct SharedImage {
  std::string imageDir;   // where the image's root is mounted (<state>/mnt/img)
  std::string stageDir;   // empty directory on the holder's tmpfs for this launch's root
  std::string baseDir;    // the holder's prepared root (<state>/mnt/base; see rootfs.hpp)
  // The holder's mount namespace whose root is the prepared root, already pivoted into
  // (see makeReadyNamespace in rootfs.hpp); empty when the holder has none.
  UniqueFd readyNamespace;
  // Whether this process is still in a mount namespace it shares (the holder's): it must
  // unshare before mounting. False for a build step, which made its own.
  bool sharedMountNamespace = false;
  // The image's env scripts as the holder read them in its ready namespace, when this
  // launch joined it (assembleRoot); else empty, and the hand-over reads the image's files.
  std::optional<std::vector<EnvScript>> envScripts;
  // The --overlay layers' locked fds (lockOverlayLayers, in the layers' order): an ext3
  // layer's fuse2fs inherits its own, so the lock lasts until it has written the image back.
  std::vector<UniqueFd> overlayLocks;
};

SharedImage joinSharedImage(const launch::LaunchPlan& plan);

}  // namespace ctr::runtime
