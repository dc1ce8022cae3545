// Scenarios (issue 10, item 6, from a GPU-sharing study): how one workload's FOMs move in
// the container under stepped limits (`ctr exec --cpus`, `--memory`) and with N copies
// sharing the node. Report sections, not verdicts: the points are what an admin sizes
// limits and packing with.
#pragma once

#include <gsl/gsl_rng.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "descriptor.hpp"
#include "progress.hpp"
#include "result.hpp"

namespace ctr::bench {

struct ScenarioContext {
  const Descriptor* workload = nullptr;
  // B's command line with these options added to `ctr exec`.
  std::function<std::vector<std::string>(const std::vector<std::string>&)> containerCommand;
  std::vector<std::string> env;
  std::filesystem::path cwd;
  Profile profile = Profile::Quick;
  std::map<std::string, double> deltas;
  Progress* progress = nullptr;
  gsl_rng* rng = nullptr;
};

inline const std::vector<std::string> kScenarios{"cpu-steps", "memory-steps", "concurrent"};

// Runs scenario `name`; a scenario that cannot run here (no cgroup limits for this user,
// an MPI workload for `concurrent`) comes back with "skipped" and the reason.
ScenarioResult runScenario(const std::string& name, const ScenarioContext& c);

}  // namespace ctr::bench
