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

std::string signedPercent(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", *v * 100);
  return buf;
}

std::string verdictName(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "PASS";
    case Verdict::Fail: return "FAIL";
    case Verdict::Faster: return "FASTER";
    case Verdict::Inconclusive: return "INCONCLUSIVE";
    case Verdict::Estimate: return "ESTIMATE";
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

std::string ciMethodName(CiMethod m) {
  return m == CiMethod::HodgesLehmann ? "hodges-lehmann-wilcoxon" : "order-statistic-median";
}

int minimumPairs(const DecisionPlan& plan) {
  // The widest order-statistic interval, [min, max], misses the median on one side with
  // probability 2^-n: below that n no interval exists at alpha_look.
  int n = static_cast<int>(std::ceil(std::log2(1 / plan.alphaPerLook())));
  return std::max(10, n);
}

LookSchedule planLooks(int first, int cap, double alpha, CiMethod method) {
  first = std::max(first, 1);
  cap = std::max(cap, first);
  // The count of looks sets alpha per look, which sets the minimum pairs, which decides what
  // counts as a look: iterate to the fixed point (two rounds at most in practice).
  LookSchedule s;
  s.plan = {alpha, 1, method};
  for (int round = 0; round < 8; ++round) {
    const int minPairs = minimumPairs(s.plan);
    std::vector<int> looks;
    for (int n = first; n <= cap; n += first)
      if (n >= minPairs) looks.push_back(n);
    const int count = std::max<int>(1, static_cast<int>(looks.size()));
    const bool stable = count == s.plan.looks;
    s.pairs = looks;
    s.plan.looks = count;
    if (stable) break;
  }
  return s;
}

std::optional<Interval> medianOrderStatisticCI(std::span<const double> values, double alphaSide, double* level) {
  const size_t n = values.size();
  if (n == 0) return std::nullopt;
  // k: the largest with P(Bin(n, 1/2) <= k-1) <= alphaSide; the interval [x_(k), x_(n+1-k)].
  size_t k = 0;
  double tail = 0;
  for (size_t j = 1; j <= (n + 1) / 2; ++j) {
    double p = gsl_cdf_binomial_P(static_cast<unsigned>(j - 1), 0.5, static_cast<unsigned>(n));
    if (p > alphaSide) break;
    k = j;
    tail = p;
  }
  if (k == 0) return std::nullopt;
  auto v = sorted(values);
  if (level) *level = 1 - 2 * tail;
  return Interval{v[k - 1], v[n - k]};
}

double robustRelativeSpread(std::span<const double> values) {
  if (values.size() < 2) return 0;
  auto v = sorted(values);
  std::vector<double> work(v.size());
  double med = gsl_stats_median_from_sorted_data(v.data(), 1, v.size());
  if (med == 0) return 0;
  // gsl_stats_mad: 1.4826 * median |x - median|.
  return gsl_stats_mad(v.data(), 1, v.size(), work.data()) / std::fabs(med);
}

namespace {

// Robust standard deviation of the log-ratios (1.4826 MAD), the spread that sets the width
// of the median's interval.
double robustSd(std::span<const double> values) {
  if (values.size() < 2) return 0;
  std::vector<double> v(values.begin(), values.end()), work(values.size());
  return gsl_stats_mad(v.data(), 1, v.size(), work.data());
}

}  // namespace

std::optional<int> pairsNeeded(std::span<const double> logRatios, double delta, const DecisionPlan& plan) {
  // The median's standard error is sqrt(pi/2) s / sqrt(n) (normal noise); the interval must
  // clear the nearer boundary +-log(1+delta) from the estimate with 80% power.
  const double m = median(logRatios);
  const double s = robustSd(logRatios);
  const double up = std::log1p(delta), down = std::log1p(-delta);
  double margin = std::min(std::fabs(up - m), std::fabs(m - down));
  if (m > up || m < down) margin = m > up ? m - up : down - m;
  if (margin < 0.1 * delta) return std::nullopt;
  const double z = gsl_cdf_ugaussian_Qinv(plan.alphaPerLook()) + gsl_cdf_ugaussian_Qinv(0.2);
  const double n = M_PI / 2 * (z * s / margin) * (z * s / margin);
  return std::max(minimumPairs(plan), static_cast<int>(std::ceil(n)));
}

std::optional<Decision> decidePairs(std::span<const std::optional<double>> a,
                                    std::span<const std::optional<double>> b, Direction d, double delta,
                                    const DecisionPlan& plan) {
  auto ratios = pairedLogRatios(a, b, d);
  if (ratios.empty()) return std::nullopt;
  std::vector<double> bare;
  for (const auto& x : a)
    if (x) bare.push_back(*x);
  auto asOverhead = [](const Interval& i) { return Interval{std::expm1(i.lo), std::expm1(i.hi)}; };
  const double alphaSide = plan.alphaPerLook();
  Decision out;
  out.nPairs = static_cast<int>(ratios.size());
  out.baselineSpread = robustRelativeSpread(bare);
  if (plan.method == CiMethod::HodgesLehmann) {
    out.overhead = std::expm1(hodgesLehmann(ratios));
    if (auto hl = wilcoxonSignedRankCI(ratios, 1 - 2 * alphaSide)) out.ci = asOverhead(*hl);
    out.ciLevel = out.ci ? 1 - 2 * alphaSide : 0;
  } else {
    out.overhead = std::expm1(median(ratios));
    if (auto ci = medianOrderStatisticCI(ratios, alphaSide, &out.ciLevel)) out.ci = asOverhead(*ci);
  }
  char buf[240];
  const int minPairs = minimumPairs(plan);
  if (out.nPairs < minPairs || !out.ci) {
    out.verdict = Verdict::Inconclusive;
    std::snprintf(buf, sizeof buf, "%d pair(s): a verdict needs at least %d", out.nPairs, minPairs);
    out.note = buf;
    return out;
  }
  out.verdict = decide(*out.ci, delta);
  if (out.verdict == Verdict::Pass && out.baselineSpread > delta) {
    out.verdict = Verdict::Inconclusive;
    std::snprintf(buf, sizeof buf, "too noisy to say: the bare runs' own spread %.1f%% exceeds delta %.1f%%",
                  out.baselineSpread * 100, delta * 100);
    out.note = buf;
  }
  if (out.verdict == Verdict::Faster) {
    std::snprintf(buf, sizeof buf, "the container is faster than bare beyond delta: worth a look (different code path?)");
    out.note = buf;
  }
  if (out.verdict == Verdict::Inconclusive && out.note.empty() && out.baselineSpread > delta) {
    // No number of pairs gives a PASS here: only a FAIL or FASTER could still come of it.
    std::snprintf(buf, sizeof buf,
                  "too noisy to say: the bare runs' own spread %.1f%% exceeds delta %.1f%%, and the interval "
                  "straddles it (a quieter node, not more pairs, can show no overhead)",
                  out.baselineSpread * 100, delta * 100);
    out.note = buf;
  }
  if (out.verdict == Verdict::Inconclusive && out.note.empty()) {
    // The interval straddles a delta boundary: more pairs would narrow it.
    out.pairsNeeded = pairsNeeded(ratios, delta, plan);
    if (out.pairsNeeded)
      std::snprintf(buf, sizeof buf, "the interval straddles a delta boundary; about %d pairs would resolve delta %.1f%%",
                    *out.pairsNeeded, delta * 100);
    else
      std::snprintf(buf, sizeof buf, "the interval straddles a delta boundary, and the estimate sits on it");
    out.note = buf;
  }
  return out;
}

Verdict decide(const Interval& ci, double delta) {
  if (std::isnan(ci.lo) || std::isnan(ci.hi)) return Verdict::Error;
  if (ci.lo > delta) return Verdict::Fail;
  if (ci.hi < -delta) return Verdict::Faster;
  if (ci.lo > -delta && ci.hi < delta) return Verdict::Pass;
  return Verdict::Inconclusive;
}

}  // namespace ctr::bench
