// `ctr-bench calibrate`: the decision rule proved on this node through the real harness.
// A busy loop (bench/workloads/busy.c) does a known amount more work when it sees it runs in
// a container: none (placebo), delta/2, 2 delta and 10 delta. Each level is a workload of an
// ordinary `ctr-bench run`; the table then says which injected overhead the suite resolved
// here, and whether each interval holds the injected value.
#pragma once

#include "runner.hpp"

namespace ctr::bench {

struct CalibrateOptions {
  RunOptions run;               // ctr, ctr args, out, seed, budget, alpha, blocks
  double delta = 0.02;          // the delta the levels are multiples of
  long long iterations = 20000000;  // per bare launch (about 20-40 ms)
};

// Returns 0 when the placebo gave no FAIL and 10 delta a FAIL of the CPU-time FOM whose
// interval holds the injected overhead, 1 otherwise, 3 on an error, 130 when interrupted.
int runCalibration(CalibrateOptions options);

}  // namespace ctr::bench
