// Runtime-internal: the pieces of an instance that the launch path (execute.cpp) runs;
// instance.cpp holds the rest (start, stop, list, the record files).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ctr/fd.hpp"
#include "ctr/handover.hpp"
#include "ctr/launch.hpp"

namespace ctr::runtime {

class LaunchCgroup;

// The start time of process `pid` (/proc/PID/stat field 22, clock ticks after boot), 0 when
// there is no such process: with the pid, what tells a process from a later one that got
// its recycled pid.
[[nodiscard]] std::uint64_t processStartTime(pid_t pid);

// Enters the running instance's namespaces (setns, in the plan's order) after checking its
// keeper is the recorded process, all but its PID namespace, whose fd is returned (empty
// when it has none): only children can enter that one. Throws ctr::Error (one line) when
// the instance has ended.
[[nodiscard]] UniqueFd enterInstance(const launch::JoinPlan& join);

// Instance start, in the keeper once the container is ready: "ok" and what the join record
// takes from inside (the evaluated environment, the working directory) on `report`, which
// it closes (and sets to -1).
void reportInstanceReady(int& report, const std::vector<std::string>& environment);

// The instance's directory as the host sees it, opened before the keeper enters the
// container, and its files' names: what the keeper removes when it ends.
struct InstanceFiles {
  UniqueFd parent;  // the state directory, from which the emptied instances directory goes
  UniqueFd dir;
  launch::InstancePlan plan;
};
[[nodiscard]] InstanceFiles openInstanceFiles(const launch::InstancePlan& plan);
// In the keeper, as it ends: its record, logs and seccomp file removed, and its lock file,
// if the record is still its own (its start time) and no start or stop holds the lock (one
// that does removes them itself). Never blocks.
void removeOwnInstanceFiles(const InstanceFiles& files);

// Instance start, in the process forked for it: execute() with the plan's instance (its
// PID namespace, its root, its startscript), telling `report` the keeper's pid ("pid N"),
// then "ok ..." (reportInstanceReady) or nothing (the error then goes to the caller).
// `cgroup`: the instance's limits (null: none), entered by the keeper at its hand-over; its
// stand-in removes it once the keeper has ended.
[[noreturn]] void executeInstance(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, int report);

// Instance start --stay: the same path in this process, which keeps the instance; where the
// forked keeper reports "ok", `ready` is called with what the record takes from inside (the
// evaluated environment) and the filter the keeper loaded (null: none). Throws what the
// launch path throws until then.
using InstanceReady = std::function<void(const std::vector<std::string>& environment, const SeccompProgram* seccomp)>;
[[noreturn]] void executeInstanceHere(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup,
                                      const InstanceReady& ready);

}  // namespace ctr::runtime
