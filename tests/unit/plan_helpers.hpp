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

// The NVIDIA driver as the ld.so-cache scan finds it: two libraries (one skipped), nvidia-smi,
// the persistenced socket and the device nodes of GPUs 0, 1 and 2.
inline host::GpuDriver scannedNvidiaDriver() {
  host::GpuDriver d;
  d.version = "535.104.05";
  d.libraries = {{"libcuda.so", "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0x0303},
                 {"libnvidia-ml.so", "libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", 0x0303}};
  d.skipped = {{"libvdpau_nvidia.so", "", "", "not in the ld.so cache"}};
  d.binaries = {{"nvidia-smi", "/usr/bin/nvidia-smi"}};
  d.sockets = {"/var/run/nvidia-persistenced/socket"};
  d.devices = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"};
  return d;
}

// The host's Open MPI as ctr.conf's 'mpi library' and 'mpi path' resolve it, with where each
// file came from.
inline host::HostMpi scannedHostMpi() {
  host::HostMpi mpi;
  mpi.family = host::MpiFamily::OpenMpi;
  mpi.libraries = {{"libmpi.so.40", "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4", "ctr.conf 'mpi library' libmpi.so.40: ld.so cache"}};
  mpi.dependencies = {{"libopen-pal.so.40", "/usr/lib/x86_64-linux-gnu/libopen-pal.so.40.30.3", "DT_NEEDED of libmpi.so.40: ld.so cache"}};
  mpi.paths = {{"/etc/openmpi", "ctr.conf 'mpi path'"}};
  mpi.skipped = {"libgone.so.3 (needed by libopen-pal.so.40): not in the host's ld.so cache"};
  mpi.needsGlibc = "2.34";
  mpi.needsGlibcLibrary = "libmpi.so.40";
  return mpi;
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
