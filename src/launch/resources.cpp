// Resource limits and --stats: where the launch's cgroup goes (limits::decidePlacement) and
// whether the runtime admits it against the node's capacity.
#include "ctr/error.hpp"
#include "ctr/limits.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

// A launch's cgroup holds its pid (the sweep of killed launches' cgroups reads it); an
// instance's is named for its user and name, so that stopping it, and launches into it,
// find it after the starting command has gone.
std::string cgroupName(const LaunchOptions& options, const host::HostFacts& host) {
  if (options.command == Command::Instance)
    return "ctr-instance-" + std::to_string(host.user.uid) + "-" + options.instance;
  return "ctr-" + std::to_string(host.pid);
}

}  // namespace

void planLimits(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy, const host::HostFacts& host) {
  if (plan.limits.empty() && plan.limits.denyDevices.empty() && options.statsFile.empty()) return;
  if (!host.limits) throw Error("resource limits asked for, but the node's cgroups were not looked at");
  limits::checkCapacity(options.limits, host.limits->capacity, policy.limitCaps);
  plan.cgroup = limits::decidePlacement(plan.limits, !options.statsFile.empty(), host.limits->mounts, host.cgroups,
                                        host.limits->delegated, host.limits->delegatedWritable, host.user.uid,
                                        cgroupName(options, host));
  if (!options.limits.empty() && plan.cgroup.backend == limits::Backend::None)
    throw Error("cannot apply the resource limits: " + plan.cgroup.reason);
  if (policy.refuseOvercommit && plan.cgroup.backend != limits::Backend::None &&
      (options.limits.cpus || options.limits.memory))
    plan.admitAgainst = host.limits->capacity;
}

}  // namespace ctr::launch
