// The --overlay layers' locks (overlay_locks.hpp).
#include "overlay_locks.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <spdlog/spdlog.h>

#include "ctr/error.hpp"

namespace ctr::runtime {

namespace {

// How long a launch waits for a layer's lock. A container that ended a moment ago still
// holds it until its image's holder takes its registration (at most a second) and sees it
// gone; a container that runs holds it until it ends, and waiting longer would only hang.
constexpr auto kLockWait = std::chrono::milliseconds(2500);

void createDirectory(const std::string& path, mode_t mode, const std::string& what) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return;
  throw Error("--overlay " + what + ": cannot create " + path + ": " + std::strerror(errno)).withStatus(1);
}

// flock(2) on the layer's directory or image file: exclusive for the writable layer, shared
// for a read-only one, waited for kLockWait at most.
void takeLock(int fd, const launch::OverlayLayer& layer) {
  const int operation = (layer.writable ? LOCK_EX : LOCK_SH) | LOCK_NB;
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  for (;;) {
    if (::flock(fd, operation) == 0) break;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      spdlog::warn("--overlay {}: cannot lock it on this file system ({}): not protected against a second writer",
                   layer.path, std::strerror(errno));
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error("--overlay " + layer.path +
                  (layer.writable ? ": in use by another container (a writable overlay is one container's alone); "
                                    "try again once it has ended"
                                  : ": open writable in another container; try again once it has ended"))
          .withStatus(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::vector<UniqueFd> lockOverlayLayers(const launch::RootOverlay& overlay) {
  std::vector<UniqueFd> locks;
  for (const auto& layer : overlay.layers) {
    if (layer.image) continue;  // a read-only image: it cannot change under a reader
    if (layer.ext3) {
      // The image file itself: fuse2fs writes into it (writable) or reads it (:ro).
      UniqueFd fd(::open(layer.path.c_str(), (layer.writable ? O_RDWR : O_RDONLY) | O_CLOEXEC));
      if (!fd)
        throw Error("--overlay " + layer.path + ": " + std::strerror(errno) +
                    (layer.writable && errno == EACCES ? "; give it :ro to stack it read-only" : ""))
            .withStatus(1);
      takeLock(fd.get(), layer);
      locks.push_back(std::move(fd));
      continue;
    }
    if (layer.create) {
      createDirectory(layer.path, 0755, layer.path);
      createDirectory(layer.dir, 0755, layer.path);
      createDirectory(layer.workDir, 0700, layer.path);
    }
    UniqueFd fd(::open(layer.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) throw Error("--overlay " + layer.path + ": " + std::strerror(errno)).withStatus(1);
    if (layer.writable && ::access(layer.dir.c_str(), W_OK) != 0)
      throw Error("--overlay " + layer.path + ": cannot write its upper layer " + layer.dir + " (" +
                  std::strerror(errno) + "); give it :ro to stack it read-only")
          .withStatus(1);
    takeLock(fd.get(), layer);
    locks.push_back(std::move(fd));
  }
  return locks;
}

}  // namespace ctr::runtime
