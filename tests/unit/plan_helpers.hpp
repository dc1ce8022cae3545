// The planner's tests' fixtures (an image, a command) and small readers of a LaunchPlan.
#pragma once

#include <string>

#include "ctr/launch.hpp"

namespace ctr::testing {

// User alice (1000:1000, home /home/alice) working in /scratch/alice/run1, as an MPI rank
// would see her environment.
// Both FUSE servers installed, as in a package install.
inline host::SquashfsServers installedSquashfsServers() {
  host::SquashfsServers servers;
  servers.ctrSquashfs = "/usr/libexec/ctr/ctr-squashfs";
  servers.squashfuse = "/usr/bin/squashfuse_ll";
  return servers;
}

inline host::HostFacts alice() {
  host::HostFacts facts;
  facts.user.uid = 1000;
  facts.user.gid = 1000;
  facts.user.name = "alice";
  facts.user.home = "/home/alice";
  facts.home = "/home/alice";
  facts.cwd = "/scratch/alice/run1";
  facts.env = {"HOME=/home/alice", "USER=alice", "PATH=/usr/bin:/bin", "OMPI_COMM_WORLD_RANK=3"};
  facts.squashfsServers = installedSquashfsServers();
  return facts;
}

// A SIF at /images/app.sif whose squashfs starts at 32 KiB.
inline image::ImageSource sifImage() {
  image::ImageSource source;
  source.path = "/images/app.sif";
  source.kind = image::ImageKind::Sif;
  source.offset = 32768;
  source.size = 4096;
  return source;
}

// A squashfs dataset image at `path` (--bind PATH:DST:image-src=...), as the CLI resolves it.
inline image::ImageSource squashfsDataset(const std::string& path, ino_t inode = 0) {
  image::ImageSource source;
  source.path = path;
  source.kind = image::ImageKind::Squashfs;
  source.size = 4096;
  source.fileBytes = 4096;
  source.inode = inode;
  return source;
}

// `ctr exec /images/app.sif /bin/true`
inline launch::LaunchOptions execTrue() {
  launch::LaunchOptions o;
  o.image = "/images/app.sif";
  o.args = {"/bin/true"};
  return o;
}

// The plan's mount at `destination`, or nullptr.
inline const launch::Mount* findMount(const launch::LaunchPlan& plan, const std::string& destination) {
  for (const auto& m : plan.mounts)
    if (m.destination == destination) return &m;
  return nullptr;
}

// The value of `key` in the plan's environment, or "<unset>".
inline std::string envOf(const launch::LaunchPlan& plan, const std::string& key) {
  for (const auto& kv : plan.environment)
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  return "<unset>";
}

}  // namespace ctr::testing
