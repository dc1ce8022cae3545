// Small readers of a LaunchPlan for the planner's tests.
#pragma once

#include <string>

#include "ctr/launch.hpp"

namespace ctr::testing {

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
