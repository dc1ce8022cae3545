// The cgroup of one supervised launch, exactly as the plan places it (plan.cgroup): created
// with the plan's limits before the app's process is forked, entered by that process right
// before execve (after it started or joined the image holder, which is shared by every
// launch of the image and must stay outside), emptied and removed when the app has ended.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ctr/fd.hpp"
#include "ctr/launch.hpp"

namespace ctr::runtime {

// What the cgroup counted, for --stats (absent where the backend has no such file).
struct CgroupUsage {
  std::optional<double> cpuSeconds;
  std::optional<std::uint64_t> peakMemoryBytes;
};

class LaunchCgroup {
 public:
  LaunchCgroup() = default;
  // Creates the plan's directories and writes its limits; throws ctr::Error naming the file
  // and the value, leaving nothing behind. An empty placement gives an empty object.
  static LaunchCgroup create(const launch::LaunchPlan& plan);
  ~LaunchCgroup();
  LaunchCgroup(LaunchCgroup&&) noexcept = default;
  LaunchCgroup& operator=(LaunchCgroup&&) noexcept = default;
  LaunchCgroup(const LaunchCgroup&) = delete;
  LaunchCgroup& operator=(const LaunchCgroup&) = delete;

  explicit operator bool() const { return !dirs_.empty(); }
  // Moves the calling process into the cgroup (through descriptors opened by create(), so
  // it works after the process changed namespaces). Throws ctr::Error.
  void enter() const;
  // Whether the kernel's OOM killer killed a process of this cgroup.
  [[nodiscard]] bool oomKilled() const;
  [[nodiscard]] CgroupUsage usage() const;
  // Kills whatever is left in it and removes the directories (also done on destruction).
  void remove();
  // The directories as created (controller, "" on v2, -> directory).
  [[nodiscard]] const std::map<std::string, std::string>& dirs() const { return dirs_; }
  // Lets go of the directories without removing them: an instance's cgroup outlives the
  // command that started it (its record names them; stopping it removes them).
  void release();

 private:
  std::map<std::string, std::string> dirs_;  // controller ("" on v2) -> directory, as created
  std::vector<UniqueFd> procs_;              // each directory's cgroup.procs, open for writing
  bool v2_ = false;
};

// Removes the cgroups of launches whose supervisor died (SIGKILL): the ctr-<pid> directories
// in plan.cgroup.sweepDirs whose pid no longer exists (their processes are killed first),
// and the empty ctr-instance-* directories of instances that ended.
void sweepStaleCgroups(const launch::LaunchPlan& plan);

// An instance's cgroup directories (its record's): everything left in them killed, then
// removed. Where a directory cannot be removed, a warning.
void removeCgroupDirs(const std::map<std::string, std::string>& dirs);

// Moves the calling process into each directory (a launch into an instance started with
// limits). Throws ctr::Error naming the directory.
void enterCgroupDirs(const std::vector<std::string>& dirs);

}  // namespace ctr::runtime
