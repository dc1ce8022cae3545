// The data-source comparison of a run (descriptor key compare_source): one workload's samples
// against another's of the same run, bare with bare and container with container: the same
// reader over a dataset image against the same tree as a directory, say. It answers "what
// does this source cost", apart from the runtime overhead each workload's own pairs answer,
// as image-vs-host keeps a stack delta apart. The two workloads run one after the other, not
// in interleaved blocks, so the samples are compared unpaired: the Hodges-Lehmann ratio of
// the log values and its exact Mann-Whitney interval, at the run's alpha on each side.
#pragma once

#include <string>

#include "result.hpp"

namespace ctr::bench {

// Verdicts, against each FOM's delta: NO-DIFFERENCE (the interval within +-delta and both
// sides' own spread at most delta), SLOWER / FASTER (the interval beyond +delta / -delta,
// slower meaning worse in the FOM's direction), else INCONCLUSIVE with the reason; always
// INCONCLUSIVE below kSourceMinSamples samples on a side.
inline constexpr int kSourceMinSamples = 10;

// `w` against `against` (nullptr: not in this run), FOM by FOM that both reported.
[[nodiscard]] SourceComparison compareSources(const WorkloadResult& w, const WorkloadResult* against,
                                              const std::string& againstName, double alpha);

}  // namespace ctr::bench
