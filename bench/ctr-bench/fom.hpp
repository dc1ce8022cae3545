// Reading figures of merit from a launch's output: the suite's JSON contract (the last
// stdout line that starts with {"workload":) or a site workload's regexes.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "descriptor.hpp"

namespace ctr::bench {

struct FomValue {
  std::string name;
  std::optional<double> value;  // nullopt: the program named the FOM but gave no number
  std::string unit;
  Direction direction = Direction::Higher;
  double delta = 0.05;
};

struct ParsedOutput {
  std::vector<FomValue> foms;
  nlohmann::json info;          // the program's "info" object (JSON contract), or null
  std::optional<std::string> error;  // why no FOM could be read at all
};

// Descriptor settings (delta, direction, unit) override the program's; `deltaOverrides`
// (--delta NAME=X, NAME a FOM or WORKLOAD/FOM) override both.
// `files`: the contents of the descriptor's output_files (searched after stdout and stderr).
ParsedOutput parseOutput(const Descriptor& d, const std::string& out, const std::string& err,
                         const std::map<std::string, double>& deltaOverrides,
                         const std::vector<std::string>& files = {});

// The default delta when neither program nor descriptor gives one.
inline constexpr double kDefaultDelta = 0.05;

}  // namespace ctr::bench
