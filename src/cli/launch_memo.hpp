// The launch memo (docs/benchmark-guide.md, "The launch memo"): a launch of a SIF or squashfs
// image, or of a directory image (the planner reads nothing inside one: its top directory's
// identity is the image's), keeps the plan it decided in the user's state directory. The next
// launch with the same command line, working directory, environment and ids, whose every
// file the plan was decided from is as it was (ctr.conf, the image, ctr itself,
// passwd/group/nsswitch.conf, the setuid helper, the directories a FUSE server is looked for
// in, its cgroup; for --nv the driver's version file, ld.so cache, library list, scan
// cache, /dev and the CDI spec directories), executes that plan instead of deciding it
// again: no option parsing, no ctr.conf, image or host reading, no planning. The plan is the same typed plan, executed by
// the same runtime. The launcher's wiring to a rank (OMPI_*, PMIX_*, PMI_*, SLURM_*) is left
// out of the key and swapped into the kept plan's environment, so that the ranks of a job
// and of later jobs run the plan one of them kept (only where the plan passes that wiring
// through as the host has it: launch::EnvProgram::wiringPassesThrough).
//
// CTR_LAUNCH_MEMO=off: no memo is read or kept. CTR_LAUNCH_MEMO=check: a kept plan is
// decided again all the same and the launch fails if the two differ (the tests' mode).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ctr/config.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/image.hpp"
#include "ctr/launch.hpp"
#include "ctr/log.hpp"

namespace ctr::cli {

// What a launch plan was decided from, beyond its command line and environment.
struct PlanInputs {
  const config::Policy& policy;
  const image::ImageSource& image;
  const host::HostFacts& host;
  const host::Needs& needs;
  // The options read files of their own (--env-file, --overlay, --stats' directory), or
  // warned outside the plan (--lazy): not what the memo's key holds, so never kept.
  bool optionsOutsideKey = false;
};

// Why such a plan is not kept ("--nv: the GPU driver's files", ...), or "" where it is:
// only what the memo's key holds may have decided it.
[[nodiscard]] std::string whyNotKept(const launch::LaunchPlan& plan, const PlanInputs& inputs);

class LaunchMemo {
 public:
  // The memo of this command line (`exec`, `run`, `shell`, `test`), or nothing: another
  // command, CTR_LAUNCH_MEMO=off, or no state directory of the user's yet.
  [[nodiscard]] static std::optional<LaunchMemo> of(int argc, char** argv);

  struct Kept {
    launch::LaunchPlan plan;
    log::Verbosity verbosity = log::Verbosity::Normal;
  };
  // The plan kept under this key where nothing it was decided from has changed since. What
  // was found instead is in missed() (for -d, once logging is set up).
  [[nodiscard]] std::optional<Kept> find();
  [[nodiscard]] const std::string& missed() const { return missed_; }
  [[nodiscard]] bool checking() const { return check_; }
  [[nodiscard]] const std::string& file() const { return file_; }

  // Before planning: how the files a plan of `imageArgument` may be decided from are now
  // (what is kept is what the planner read, or older: a file changed meanwhile is a miss).
  void beforePlanning(const std::string& imageArgument);
  // Before the host is looked at for what the needs name: how `paths` (for --nv:
  // host::deviceInputFiles) are now. A kept plan depends on each of them.
  void beforeLooking(const std::vector<std::string>& paths);
  // After planning: keeps `plan` under this key when whyNotKept allows (a failure to write
  // is only logged: the launch goes on). With CTR_LAUNCH_MEMO=check and a kept plan
  // (`kept`), throws ctr::Error where the plan decided now differs from it.
  void afterPlanning(const launch::LaunchPlan& plan, const PlanInputs& inputs, log::Verbosity verbosity,
                     const launch::LaunchPlan* kept);

 private:
  std::string key_;       // the command line, working directory, environment but the wiring, ids, ctr.conf's place
  std::string dir_;       // STATE/memo
  std::string file_;      // STATE/memo/launch-HASH
  std::string missed_;
  std::map<std::string, std::string> before_;  // path -> identity before planning
  std::vector<std::string> looked_;             // beforeLooking's paths
  std::string scopeBefore_;  // holderScopeNow() before planning
  bool check_ = false;
};

}  // namespace ctr::cli
