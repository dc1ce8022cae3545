// A decided plan as bytes: what the launch memo stores, so that the next identical launch
// reads its plan back instead of planning again. Plain binary, in the byte order and sizes
// of this machine (a memo is read back by the ctr that wrote it, on the same node).
#pragma once

#include <string>
#include <string_view>

#include "ctr/launch.hpp"

namespace ctr::launch {

// The plan as bytes (the launch memo's), and back: every field of the plan and of its parts.
[[nodiscard]] std::string encodePlan(const LaunchPlan& plan);
// Throws ctr::Error (one line) where `bytes` are not a whole plan (truncated, trailing bytes,
// bad enum value, another format version).
[[nodiscard]] LaunchPlan decodePlan(std::string_view bytes);

}  // namespace ctr::launch
