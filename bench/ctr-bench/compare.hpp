// `ctr-bench compare BASE NEW`: did the container (B) or bare metal (A) get worse between
// two runs? Per workload and FOM of BASE, unpaired (the runs are not interleaved):
// Mann-Whitney and the Hodges-Lehmann shift of the log values with its 90% CI, against the
// FOM's delta or --tolerance. A workload or FOM of BASE that NEW lacks, skipped or errored
// is a regression too (a CI job must not pass because the benchmark stopped running),
// unless --allow-missing.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>

namespace ctr::bench {

struct CompareOptions {
  std::optional<double> tolerance;  // instead of each FOM's delta
  double confidence = 0.90;
  bool allowMissing = false;
};

// The comparison as JSON ({"rows": [...], "summary": {...}}); rows have workload, fom,
// side, change (positive = worse), ci, p_value, tolerance, verdict (OK | REGRESSION |
// INCONCLUSIVE | MISSING | ERROR), note, samples_needed (for INCONCLUSIVE). Throws
// ctr::Error when the runs cannot be compared (different modes).
nlohmann::json compareResults(const nlohmann::json& base, const nlohmann::json& now, const CompareOptions& o);

// Prints the rows as a table; returns the exit status: 0 no regression, 1 a regression (a
// missing or errored workload or FOM counts unless allowed), 2 only inconclusive ones.
int printComparison(const nlohmann::json& comparison, std::ostream& out);

}  // namespace ctr::bench
