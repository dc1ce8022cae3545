#include "stats.hpp"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

namespace ctr::bench {

std::string verdictName(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "PASS";
    case Verdict::Fail: return "FAIL";
    case Verdict::Inconclusive: return "INCONCLUSIVE";
    case Verdict::Error: return "ERROR";
  }
  return "ERROR";
}

namespace {

std::vector<double> sorted(std::span<const double> values) {
  std::vector<double> v(values.begin(), values.end());
  if (!v.empty()) gsl_sort(v.data(), 1, v.size());
  return v;
}

double quantileOfSorted(const std::vector<double>& v, double f) {
  return gsl_stats_quantile_from_sorted_data(v.data(), 1, v.size(), f);
}

struct RngDeleter {
  void operator()(gsl_rng* r) const { gsl_rng_free(r); }
};

}  // namespace

double median(std::span<const double> values) {
  if (values.empty()) return std::nan("");
  auto v = sorted(values);
  return gsl_stats_median_from_sorted_data(v.data(), 1, v.size());
}

double coefficientOfVariation(std::span<const double> values) {
  if (values.size() < 2) return 0;
  double mean = gsl_stats_mean(values.data(), 1, values.size());
  if (mean == 0) return 0;
  return gsl_stats_sd_m(values.data(), 1, values.size(), mean) / std::fabs(mean);
}

std::vector<double> pairedLogRatios(std::span<const std::optional<double>> a,
                                    std::span<const std::optional<double>> b, Direction d) {
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!a[i] || !b[i] || *a[i] <= 0 || *b[i] <= 0) continue;
    double r = std::log(*b[i] / *a[i]);
    ratios.push_back(d == Direction::Lower ? r : -r);
  }
  return ratios;
}

Interval bootstrapMedianCI(std::span<const double> values, double confidence, int resamples,
                           std::uint64_t seed) {
  if (values.empty()) return {std::nan(""), std::nan("")};
  std::unique_ptr<gsl_rng, RngDeleter> rng(gsl_rng_alloc(gsl_rng_mt19937));
  gsl_rng_set(rng.get(), static_cast<unsigned long>(seed));
  const size_t n = values.size();
  std::vector<double> medians(static_cast<size_t>(resamples));
  std::vector<double> sample(n);
  for (auto& m : medians) {
    for (auto& s : sample) s = values[gsl_rng_uniform_int(rng.get(), n)];
    gsl_sort(sample.data(), 1, n);
    m = gsl_stats_median_from_sorted_data(sample.data(), 1, n);
  }
  gsl_sort(medians.data(), 1, medians.size());
  double tail = (1 - confidence) / 2;
  return {quantileOfSorted(medians, tail), quantileOfSorted(medians, 1 - tail)};
}

double hodgesLehmann(std::span<const double> values) {
  std::vector<double> walsh;
  for (size_t i = 0; i < values.size(); ++i)
    for (size_t j = i; j < values.size(); ++j) walsh.push_back((values[i] + values[j]) / 2);
  return median(walsh);
}

std::optional<Interval> wilcoxonSignedRankCI(std::span<const double> values, double confidence) {
  const size_t n = values.size();
  if (n == 0) return std::nullopt;
  std::vector<double> walsh;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i; j < n; ++j) walsh.push_back((values[i] + values[j]) / 2);
  gsl_sort(walsh.data(), 1, walsh.size());
  const size_t m = walsh.size();  // n(n+1)/2
  const double alpha = 1 - confidence;
  size_t k = 0;  // CI = [W_(k), W_(m+1-k)], 1-based; 0 = none reaches the confidence
  if (n <= 60) {
    // Exact null distribution of the signed-rank sum T+: counts of subsets of {1..n} by
    // their sum, divided by 2^n.
    std::vector<double> count(m + 1, 0.0);
    count[0] = 1;
    for (size_t r = 1; r <= n; ++r)
      for (size_t t = m; t >= r; --t) count[t] += count[t - r];
    double total = std::ldexp(1.0, static_cast<int>(n));
    double cumulative = 0;
    for (size_t t = 0; t <= m; ++t) {
      cumulative += count[t] / total;
      if (cumulative > alpha / 2) break;
      k = t + 1;  // P(T+ <= t) <= alpha/2
    }
  } else {
    double nn = static_cast<double>(n);
    double sd = std::sqrt(nn * (nn + 1) * (2 * nn + 1) / 24);
    double z = gsl_cdf_ugaussian_Qinv(alpha / 2);
    double kk = std::floor(static_cast<double>(m) / 2 - z * sd);
    k = kk < 1 ? 0 : static_cast<size_t>(kk);
  }
  if (k == 0) return std::nullopt;
  return Interval{walsh[k - 1], walsh[m - k]};
}

double hodgesLehmannShift(std::span<const double> x, std::span<const double> y) {
  std::vector<double> diffs;
  for (double xi : x)
    for (double yj : y) diffs.push_back(yj - xi);
  return median(diffs);
}

MannWhitney mannWhitney(std::span<const double> x, std::span<const double> y, double confidence) {
  MannWhitney result;
  const size_t m = x.size(), n = y.size();
  if (m == 0 || n == 0) return result;
  std::vector<double> diffs;
  for (double xi : x)
    for (double yj : y) {
      diffs.push_back(yj - xi);
      result.u += yj > xi ? 1.0 : (yj == xi ? 0.5 : 0.0);
    }
  gsl_sort(diffs.data(), 1, diffs.size());
  result.shift = gsl_stats_median_from_sorted_data(diffs.data(), 1, diffs.size());

  // p-value: normal approximation with the tie correction of the variance.
  std::vector<double> all(x.begin(), x.end());
  all.insert(all.end(), y.begin(), y.end());
  gsl_sort(all.data(), 1, all.size());
  double tieTerm = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    double t = static_cast<double>(j - i);
    tieTerm += t * t * t - t;
    i = j;
  }
  const double dm = static_cast<double>(m), dn = static_cast<double>(n), big = dm + dn;
  double var = dm * dn / 12 * ((big + 1) - tieTerm / (big * (big - 1)));
  if (var > 0) {
    double z = (std::fabs(result.u - dm * dn / 2) - 0.5) / std::sqrt(var);
    result.pValue = std::min(1.0, 2 * gsl_cdf_ugaussian_Q(std::max(0.0, z)));
  }

  // CI of the shift: [D_(k), D_(mn+1-k)] with k from the null distribution of U.
  const double alpha = 1 - confidence;
  const size_t mn = m * n;
  size_t k = 0;
  if (mn <= 20000) {
    // Counts of U = u are the coefficients of the Gaussian binomial [m+n choose m]_q =
    // prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); each division is exact.
    std::vector<double> c(mn + 1, 0.0);
    c[0] = 1;
    for (size_t i = 1; i <= m; ++i) {
      for (size_t t = mn; t >= n + i && t <= mn; --t) c[t] -= c[t - n - i];
      for (size_t t = i; t <= mn; ++t) c[t] += c[t - i];
    }
    double total = 0;
    for (double v : c) total += v;
    double cumulative = 0;
    for (size_t u = 0; u <= mn; ++u) {
      cumulative += c[u] / total;
      if (cumulative > alpha / 2) break;
      k = u + 1;
    }
  } else {
    double z = gsl_cdf_ugaussian_Qinv(alpha / 2);
    double kk = std::floor(dm * dn / 2 - z * std::sqrt(dm * dn * (big + 1) / 12));
    k = kk < 1 ? 0 : static_cast<size_t>(kk);
  }
  if (k > 0) result.ci = Interval{diffs[k - 1], diffs[mn - k]};
  return result;
}

std::optional<PairedAnalysis> analysePairs(std::span<const std::optional<double>> a,
                                           std::span<const std::optional<double>> b,
                                           Direction d, const AnalysisOptions& options) {
  auto ratios = pairedLogRatios(a, b, d);
  if (ratios.empty()) return std::nullopt;
  auto asOverhead = [](double logRatio) { return std::expm1(logRatio); };
  PairedAnalysis out;
  out.nPairs = static_cast<int>(ratios.size());
  out.overhead = asOverhead(median(ratios));
  out.hlOverhead = asOverhead(hodgesLehmann(ratios));
  if (auto hl = wilcoxonSignedRankCI(ratios, options.confidence))
    out.hlCi = Interval{asOverhead(hl->lo), asOverhead(hl->hi)};
  if (options.method == CiMethod::HodgesLehmann) {
    out.ciMethod = "hodges-lehmann-wilcoxon";
    out.overhead = out.hlOverhead;
    // Too few pairs for the signed-rank interval at this confidence: the widest possible.
    out.ci = out.hlCi.value_or(Interval{-INFINITY, INFINITY});
  } else {
    out.ciMethod = "bootstrap-median";
    auto ci = bootstrapMedianCI(ratios, options.confidence, options.resamples, options.seed);
    out.ci = {asOverhead(ci.lo), asOverhead(ci.hi)};
  }
  return out;
}

Verdict decide(const Interval& ci, double delta) {
  if (std::isnan(ci.lo) || std::isnan(ci.hi)) return Verdict::Error;
  if (ci.lo > delta) return Verdict::Fail;
  if (ci.hi < delta) return Verdict::Pass;
  return Verdict::Inconclusive;
}

std::optional<std::string> noiseNote(double baselineCv, double delta) {
  if (baselineCv <= delta / 2) return std::nullopt;
  char buf[128];
  std::snprintf(buf, sizeof buf, "too noisy to resolve delta %.1f%% (baseline CV %.1f%%)",
                delta * 100, baselineCv * 100);
  return std::string(buf);
}

}  // namespace ctr::bench
