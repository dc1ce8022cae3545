// Statistics of ctr-bench (bench-method.md, "Decision per FOM"): paired log-ratios per
// block, the median overhead and its distribution-free interval (order statistics, or
// Hodges-Lehmann with the Wilcoxon signed-rank interval), the sequential verdict against
// +-delta, and the unpaired
// comparison of two runs (Mann-Whitney + Hodges-Lehmann shift) for `compare`.
// GSL does the sorting, quantiles, moments and the random numbers; the rank statistics it
// lacks are written here on top of it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gsl/gsl_rng.h>

namespace ctr::bench {

// For std::unique_ptr<gsl_rng, RngDeleter>.
struct RngDeleter {
  void operator()(gsl_rng* r) const { gsl_rng_free(r); }
};

// "+1.25%" for 0.0125, "-" when there is no value.
std::string signedPercent(const std::optional<double>& v);

enum class Direction { Higher, Lower };  // higher-is-better (rates) or lower (times)

// ESTIMATE: a stack delta (image-vs-host, image-vs-image), reported with no verdict.
enum class Verdict { Pass, Fail, Faster, Inconclusive, Estimate, Error };
std::string verdictName(Verdict v);  // "PASS", ...

struct Interval {
  double lo = 0;
  double hi = 0;
};

double median(std::span<const double> values);
// Coefficient of variation (sample standard deviation / mean); 0 for fewer than 2 values.
double coefficientOfVariation(std::span<const double> values);

// Log of the container's cost relative to bare metal per pair: log(B/A) for times,
// log(A/B) for rates, so positive = container worse. Pairs where either is missing or not
// positive are left out.
std::vector<double> pairedLogRatios(std::span<const std::optional<double>> a,
                                    std::span<const std::optional<double>> b, Direction d);

// Hodges-Lehmann one-sample estimate: the median of the Walsh averages (x_i+x_j)/2, i<=j.
double hodgesLehmann(std::span<const double> values);
// The distribution-free CI for it from the Wilcoxon signed-rank statistic (exact for
// n <= 60, normal approximation above); nullopt when n is too small for that confidence.
std::optional<Interval> wilcoxonSignedRankCI(std::span<const double> values, double confidence);

// Two-sample Hodges-Lehmann shift: the median of all y_j - x_i.
double hodgesLehmannShift(std::span<const double> x, std::span<const double> y);
struct MannWhitney {
  double u = 0;        // U statistic of y over x (count of y_j > x_i, ties counting 1/2)
  double pValue = 1;   // two-sided, normal approximation with tie correction
  double shift = 0;    // Hodges-Lehmann shift y - x
  std::optional<Interval> ci;  // CI of the shift (exact for small samples)
};
MannWhitney mannWhitney(std::span<const double> x, std::span<const double> y, double confidence);

// The decision rule (docs/benchmark-guide.md, "Decision per FOM")
//
// Per block the log-ratio r = log(B/A) for times, log(A/B) for rates (positive = the
// container is worse); the parameter is the median m of r, the overhead exp(m) - 1. Its
// interval is distribution-free: the order statistics [r_(k), r_(n+1-k)] with k the largest
// such that P(Binomial(n, 1/2) <= k-1) <= alpha_look, so each side misses m with probability
// at most alpha_look, whatever the noise (the sign-test interval). The looks of a run are
// planned before any data (pairs n1, n1+step, ... up to the cap) and alpha is split evenly
// over them (alpha_look = alpha / looks, Bonferroni): a run that adds blocks and looks again
// keeps each error below alpha overall (union bound), whichever look it stops at.
//
//   FAIL    lower bound > +delta               (P <= alpha when the true overhead is <= delta)
//   FASTER  upper bound < -delta               (the container faster beyond delta: not PASS)
//   PASS    -delta < lower, upper < +delta, and the baseline's own spread <= delta
//                                              (P <= alpha when the true |overhead| >= delta)
//   INCONCLUSIVE otherwise, and always below the minimum number of pairs.

enum class CiMethod { OrderStatisticMedian, HodgesLehmann };
std::string ciMethodName(CiMethod m);  // "order-statistic-median", "hodges-lehmann-wilcoxon"

// The sequential plan: fixed before the first block.
struct DecisionPlan {
  double alpha = 0.05;  // each error (false PASS, false FAIL) over the whole run
  int looks = 1;        // planned looks
  CiMethod method = CiMethod::OrderStatisticMedian;
  [[nodiscard]] double alphaPerLook() const { return alpha / looks; }
};

// The fewest pairs that may give any verdict: the order-statistic interval needs
// 2^-n <= alpha_look to exist at all; bench-method.md asks for at least 10.
int minimumPairs(const DecisionPlan& plan);

// The planned looks, as numbers of pairs: first, first+step, ... <= cap, counting only those
// with at least minimumPairs (the others are no looks: they decide nothing). `looks` of the
// returned plan is their count (at least 1).
struct LookSchedule {
  std::vector<int> pairs;
  DecisionPlan plan;
};
LookSchedule planLooks(int first, int cap, double alpha, CiMethod method);

// The order-statistic interval of the median at one-sided level alphaSide; nullopt when n is
// too small for it. `level` gets the attained two-sided coverage 1 - 2 P(Bin <= k-1).
std::optional<Interval> medianOrderStatisticCI(std::span<const double> values, double alphaSide,
                                               double* level = nullptr);

// Robust spread of a sample, relative to its median: 1.4826 MAD / median (equal to the CV
// for normal noise, but one stray launch does not inflate it).
double robustRelativeSpread(std::span<const double> values);

// Pairs needed to decide against delta (80% power at the current estimate and spread),
// nullopt when the estimate sits on +-delta (no count of pairs decides it quickly).
std::optional<int> pairsNeeded(std::span<const double> logRatios, double delta, const DecisionPlan& plan);

struct Decision {
  int nPairs = 0;
  double overhead = 0;             // exp(median r) - 1, or with HodgesLehmann its estimate
  std::optional<Interval> ci;      // of the overhead; nullopt below the pairs an interval needs
  double ciLevel = 0;              // attained two-sided coverage of `ci`
  double baselineSpread = 0;       // robustRelativeSpread of A
  std::optional<int> pairsNeeded;  // for an INCONCLUSIVE
  Verdict verdict = Verdict::Inconclusive;
  std::string note;                // why, for anything but a plain PASS/FAIL
};

// The rule applied to samples A (bare) and B (container), index = block. nullopt when no
// complete pair exists.
std::optional<Decision> decidePairs(std::span<const std::optional<double>> a,
                                    std::span<const std::optional<double>> b, Direction d, double delta,
                                    const DecisionPlan& plan);

// The verdict of an interval against delta (no pair-count or noise gate: decidePairs adds them).
Verdict decide(const Interval& ci, double delta);

}  // namespace ctr::bench
