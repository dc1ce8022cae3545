// Statistics of ctr-bench (bench-method.md, "Decision per FOM"): paired log-ratios per
// block, the median overhead and its CI (bootstrap of the median, or Hodges-Lehmann with
// the Wilcoxon signed-rank interval), the verdict against +-delta, and the unpaired
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

namespace ctr::bench {

enum class Direction { Higher, Lower };  // higher-is-better (rates) or lower (times)

enum class Verdict { Pass, Fail, Inconclusive, Error };
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

// Percentile bootstrap of the median of `values`: `resamples` resamples with replacement
// drawn by GSL's MT19937 seeded with `seed`; the (1-confidence)/2 and (1+confidence)/2
// quantiles of the resampled medians.
Interval bootstrapMedianCI(std::span<const double> values, double confidence, int resamples,
                           std::uint64_t seed);

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

struct PairedAnalysis {
  int nPairs = 0;
  double overhead = 0;       // exp(median log-ratio) - 1
  Interval ci;               // of the overhead
  std::string ciMethod;      // "bootstrap-median" or "hodges-lehmann-wilcoxon"
  double hlOverhead = 0;     // Hodges-Lehmann estimate, as an overhead
  std::optional<Interval> hlCi;
};

enum class CiMethod { BootstrapMedian, HodgesLehmann };

struct AnalysisOptions {
  double confidence = 0.90;
  int resamples = 10000;
  std::uint64_t seed = 1;
  CiMethod method = CiMethod::BootstrapMedian;
};

// nullopt when there is no pair to analyse.
std::optional<PairedAnalysis> analysePairs(std::span<const std::optional<double>> a,
                                           std::span<const std::optional<double>> b,
                                           Direction d, const AnalysisOptions& options);

// PASS: the CI's upper bound below +delta (wholly inside +-delta, or an improvement);
// FAIL: its lower bound above +delta; INCONCLUSIVE otherwise.
Verdict decide(const Interval& ci, double delta);

// The note for a baseline too noisy to resolve delta (CV > delta/2), or nullopt.
std::optional<std::string> noiseNote(double baselineCv, double delta);

}  // namespace ctr::bench
