// `ctr-bench compare BASE NEW`: did the container (B) or bare metal (A) get worse between
// two runs? Per workload and FOM of BASE, unpaired (the runs are not interleaved):
// Mann-Whitney and the Hodges-Lehmann shift of the log values with its 90% CI, against the
// FOM's delta or --tolerance. A workload or FOM of BASE that NEW lacks, skipped or errored
// is a regression too (a CI job must not pass because the benchmark stopped running),
// unless --allow-missing.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "result.hpp"

namespace ctr::bench {

struct CompareOptions {
  std::optional<double> tolerance;  // instead of each FOM's delta
  double confidence = 0.90;
  bool allowMissing = false;
};

// One FOM on one side (A bare, B container; "-" for a whole workload), BASE against NEW.
struct CompareRow {
  std::string workload, fom, side, unit;
  std::optional<double> change;  // positive = worse
  std::optional<double> ciLow, ciHigh, pValue, tolerance;
  std::optional<int> samplesNeeded;  // for INCONCLUSIVE: samples per run that would decide
  size_t nBase = 0, nNew = 0;
  std::string verdict;  // OK, REGRESSION, INCONCLUSIVE, MISSING or ERROR
  std::string note;
};

struct Comparison {
  std::vector<CompareRow> rows;
  std::map<std::string, int> counts;  // verdict -> rows
  bool allowMissing = false;
  [[nodiscard]] int count(const std::string& verdict) const {
    auto it = counts.find(verdict);
    return it == counts.end() ? 0 : it->second;
  }
};

// Throws ctr::Error when the runs cannot be compared (different modes).
Comparison compareResults(const Result& base, const Result& now, const CompareOptions& o);

// Prints the rows as a table; returns the exit status: 0 no regression, 1 a regression (a
// missing or errored workload or FOM counts unless allowed), 2 only inconclusive ones.
int printComparison(const Comparison& comparison, std::ostream& out);

}  // namespace ctr::bench
