// The steps of planLaunch (src/launch/plan.cpp), one concern a file: mounts.cpp, devices.cpp,
// resources.cpp, mpi.cpp. Private to the plan module; pure functions of the options, the
// policy and the host facts, which fill parts of one LaunchPlan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ctr/launch.hpp"

namespace ctr::launch {

// The container's home: --home SRC[:DST], else the host $HOME at the same path.
struct HomeDirs {
  std::string source;
  std::string destination;
};

// mounts.cpp
[[nodiscard]] Mount bindMount(std::string source, std::string destination, bool readOnly, MountOrigin origin);
[[nodiscard]] Mount tmpfsMount(std::string destination, MountOrigin origin, unsigned mode);
// A tmpfs that holds only the targets of binds into it (the injected host libraries): 0755,
// and small: its entries are empty files and directories, the mounts' targets.
inline constexpr std::uint64_t kTargetsTmpfsBytes = 1u << 20;
[[nodiscard]] Mount targetsTmpfs(std::string destination);
// A later mount at the same destination replaces an earlier one (user binds win over
// defaults), keeping the earlier position so parents are still mounted before children.
void addMount(std::vector<Mount>& mounts, Mount mount);
// /proc, /sys (and the read-only kernel paths), /dev (private with --contain), /etc files.
void addSystemMounts(std::vector<Mount>& mounts, bool ownPid, bool ownNet, const KernelInterfaces& kernel,
                     bool contain);
// /tmp and /var/tmp (from --workdir, a tmpfs with --contain, else the host's) and the home.
void addTmpAndHomeMounts(std::vector<Mount>& mounts, const LaunchOptions& options, const HomeDirs& home,
                         const std::string& workdir, bool contain);
// ctr.conf's 'bind path' and, with a private /dev, the fabric's devices.
void addSiteMounts(std::vector<Mount>& mounts, const LaunchOptions& options, const config::Policy& policy,
                   bool contain);
// `userBinds` (userBindSpecs: $CTR_BIND and friends, --bind), --mount and --scratch; a
// dataset image's bind takes its directory from the holder's mount of it (`datasets`,
// planDatasets).
void addUserMounts(std::vector<Mount>& mounts, const LaunchOptions& options, const std::vector<BindSpec>& userBinds,
                   const config::Policy& policy, const std::string& workdir, const std::vector<DatasetImage>& datasets);
// The current directory, unless contained or already under a bound path.
void addCwdMount(std::vector<Mount>& mounts, const std::string& cwd, bool contain);
// /etc/passwd and /etc/group, filled by the runtime from the image's own files.
void addIdentityMounts(std::vector<Mount>& mounts);
// --no-mount: which default mounts to leave out. Throws ctr::Error naming a word it does not know.
struct NoMount {
  bool proc = false, sys = false, dev = false, devpts = false, home = false, tmp = false, cwd = false,
       bindPaths = false;
  std::vector<std::string> paths;  // destinations of default or site binds
  [[nodiscard]] bool any() const { return proc || sys || dev || devpts || home || tmp || cwd || bindPaths || !paths.empty(); }
};
[[nodiscard]] NoMount parseNoMount(const std::vector<std::string>& specs);
// Removes what `no` names from the default, --contain, site and current-directory mounts
// (never the user's binds, the host's injected files or the identity files); returns the
// destinations removed.
std::vector<std::string> removeMounts(std::vector<Mount>& mounts, const NoMount& no);
// build_step.cpp: root's identity (home /root) and capabilities in a user namespace where
// the caller is root: a build step's, a --fakeroot launch's, a join of a --fakeroot instance.
void becomeFakeroot(LaunchPlan& plan, const host::HostFacts& host);
// overlays.cpp: --writable (root mode Writable), --overlay and --writable-tmpfs: plan.overlay,
// and root mode Overlay when it has a layer. Throws ctr::Error (one line) for a spec it
// cannot stack, or --writable of an image that is not a directory.
void planOverlay(LaunchPlan& plan, const LaunchOptions& options, const host::HostFacts& host);
// ctr.conf's execution control (execution.cpp): plan.execution when a rule took the image;
// throws ctr::Error, one line with the rule and the reason, when it refuses it.
void planExecution(LaunchPlan& plan, const config::Policy& policy, const host::HostFacts& host);
// A parent before its children: a mount given before one of its ancestors moves right after it.
void orderParentsFirst(std::vector<Mount>& mounts);

// devices.cpp: --nv, --rocm, --gpus and --device into mounts, device rules, plan.devices;
// what they add to the environment and to LD_LIBRARY_PATH is returned.
struct DeviceEnvironment {
  std::vector<EnvVar> env;
  std::vector<std::string> libraryDirs;
};
[[nodiscard]] DeviceEnvironment planDevices(LaunchPlan& plan, const LaunchOptions& options,
                                            const config::Policy& policy, const host::HostFacts& host, bool contain);

// resources.cpp: the cgroup placement of the limits, --stats and the GPUs --gpus left out.
void planLimits(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy, const host::HostFacts& host);

// mpi.cpp: --mpi=bind into mounts and plan.mpi; returns the directories that go first on
// LD_LIBRARY_PATH.
[[nodiscard]] std::vector<std::string> planMpi(LaunchPlan& plan, const LaunchOptions& options,
                                               const config::Policy& policy, const host::HostFacts& host);

// plan.cpp, with decideDriver. Why ctr-mount-helper would refuse `image` by the checks it
// makes that need no privilege (format, file system, link count, owner, directory), or
// empty: the planner's prediction (the helper checks again). An owner named in 'setuid image owners' by another user's name
// is taken as allowed: the helper looks the name up.
[[nodiscard]] std::string whyHelperRefuses(const config::Policy& policy, const host::HostFacts& host,
                                           const image::ImageSource& image);
// The image file the helper would open for `image`: its node-local copy (the user's own
// file, in the stage directory) where the plan stages it, else itself.
[[nodiscard]] image::ImageSource fileMounted(const LaunchPlan& plan, const host::HostFacts& host,
                                             const image::ImageSource& image);
// Each dataset image's driver: kernel squashfs through the setuid helper when the launch's
// image goes through it and the helper would take the dataset too, else the image server.
void planDatasetDrivers(LaunchPlan& plan, const config::Policy& policy, const host::HostFacts& host);

// staging.cpp: --stage, --no-stage and 'stage images' into plan.staging; the image's and the
// datasets' paths become their copies', and a setuid-helper driver that would refuse the
// user's own copy gives way to squashfuse. Before planImageServer.
void planStaging(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy,
                 const host::HostFacts& host);

}  // namespace ctr::launch
