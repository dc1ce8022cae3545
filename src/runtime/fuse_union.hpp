// Runtime-internal: an overlay root with ext3 layers (launch::UnionDriver::FuseOverlayfs).
// Each ext3 image is mounted by fuse2fs and the layers are stacked by fuse-overlayfs, both
// started by this launch before it pivots into the root, each in a mount namespace of its
// own whose mounts reach the launch's through its shared stage directory (so the pivot
// leaves their root where it was: see execFuseServer in fuse_union.cpp): they end
// (SIGTERM, PR_SET_PDEATHSIG) when the launch's process, the app after execve, ends, and
// fuse2fs writes the image back as it ends; an image's lock (overlay_locks.hpp) stays with
// its fuse2fs until then, so the next launch that locks it waits for a written-back image.
// In a PID namespace they are its init's children, and the init ends them (endFuseServers)
// before it exits with the app's status.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "ctr/fd.hpp"
#include "ctr/launch.hpp"

namespace ctr::runtime {

// Mounts each ext3 layer of `overlay` at stageDir/ext3-I (I: its index), read-only for a
// read-only layer; returns each layer's mount (empty for the other layers). `locks` are
// lockOverlayLayers's fds. Throws ctr::Error naming the Debian package when fuse2fs is
// missing, or when a server ends before its mount is there.
[[nodiscard]] std::vector<std::string> mountExt3Layers(const launch::RootOverlay& overlay,
                                                       const std::vector<UniqueFd>& locks,
                                                       const std::string& stageDir);

// Sends SIGTERM to every FUSE server this process started and waits (up to a minute) for
// each to end, fuse2fs having written its image back. For a PID namespace's init, whose end
// would SIGKILL them first: without one they end with the app's process (PR_SET_PDEATHSIG).
void endFuseServers();

// Mounts fuse-overlayfs at `target` with `layerOptions` (lowerdir=...[,upperdir=...,workdir=...]),
// every file shown as uid:gid's.
void mountFuseOverlayfs(const std::string& layerOptions, const std::string& target, uid_t uid, gid_t gid);

// Starts the watchdog of the FUSE servers this process started (after the last of them):
// a process of its own, ending with this one (PR_SET_PDEATHSIG), that looks every half
// second at this process and its descendants. One the kernel has killed (SIGKILL pending:
// a fatal SIGTERM, SIGINT or SIGKILL was sent) but that has been in an uninterruptible
// sleep for `grace` waits on a FUSE server that no longer answers (a FUSE request already
// read by its server can only end with an answer or with the connection's end): the
// watchdog says so on stderr, aborts the servers' connections where the fusectl file
// system is mounted, and SIGKILLs the servers, whose connections end with them, so the
// container ends. Nothing is started for a grace of 0 or without servers.
void startFuseWatchdog(std::chrono::seconds grace);

}  // namespace ctr::runtime
