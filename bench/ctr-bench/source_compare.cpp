#include "source_compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "stats.hpp"

namespace ctr::bench {

namespace {

std::vector<double> positive(const SampleList& samples) {
  std::vector<double> out;
  for (const auto& v : samples)
    if (v && std::isfinite(*v) && *v > 0) out.push_back(*v);
  return out;
}

std::vector<double> logs(const std::vector<double>& values) {
  std::vector<double> out;
  for (double v : values) out.push_back(std::log(v));
  return out;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100);
  return text;
}

SourceRow compareSide(const FomResult& f, const FomResult& other, const std::string& side, const std::string& againstName,
                      double alpha) {
  SourceRow row;
  row.fom = f.name;
  row.side = side;
  row.unit = f.unit;
  row.direction = f.direction;
  row.delta = f.delta;
  const auto y = positive(side == "A" ? f.samplesA : f.samplesB);
  const auto x = positive(side == "A" ? other.samplesA : other.samplesB);
  row.n = static_cast<int>(y.size());
  row.nAgainst = static_cast<int>(x.size());
  row.verdict = "INCONCLUSIVE";
  if (!y.empty()) row.median = median(y);
  if (!x.empty()) row.medianAgainst = median(x);
  if (x.size() < 2 || y.size() < 2) {
    row.note = "fewer than 2 samples on a side";
    return row;
  }
  const double confidence = 1 - 2 * alpha;
  const auto mw = mannWhitney(logs(x), logs(y), confidence);
  row.ratio = std::exp(mw.shift);
  row.spread = std::max(robustRelativeSpread(x), robustRelativeSpread(y));
  if (mw.ci) {
    row.ciLow = std::exp(mw.ci->lo);
    row.ciHigh = std::exp(mw.ci->hi);
    row.ciLevel = confidence;
  }
  if (row.n < kSourceMinSamples || row.nAgainst < kSourceMinSamples) {
    row.note = std::to_string(row.n) + "/" + std::to_string(row.nAgainst) + " samples: a verdict needs at least " +
               std::to_string(kSourceMinSamples) + " on each side";
    return row;
  }
  if (!mw.ci) {
    row.note = "too few samples for an interval at this alpha";
    return row;
  }
  // The change in the FOM's worse direction: log(this/against) for times, its negative for rates.
  const bool higher = f.direction.empty() || f.direction == "higher";
  const double lo = higher ? -mw.ci->hi : mw.ci->lo, hi = higher ? -mw.ci->lo : mw.ci->hi;
  const double delta = f.delta.value_or(0.05);
  const Verdict v = decide(Interval{std::expm1(lo), std::expm1(hi)}, delta);
  // As the pairs' rule: a clear difference stands whatever the noise; "no difference" needs
  // samples whose own spread is within delta.
  if (v == Verdict::Fail) row.verdict = "SLOWER";
  else if (v == Verdict::Faster) row.verdict = "FASTER";
  else if (*row.spread > delta)
    row.note = "too noisy to say: the samples' own spread " + percent(*row.spread) + " exceeds delta " + percent(delta);
  else if (v == Verdict::Pass) row.verdict = "NO-DIFFERENCE";
  else row.note = "the interval straddles delta " + percent(delta) + " against " + againstName;
  return row;
}

}  // namespace

SourceComparison compareSources(const WorkloadResult& w, const WorkloadResult* against, const std::string& againstName,
                                double alpha) {
  SourceComparison out;
  out.against = againstName;
  if (w.status != "ok") {
    out.note = "this workload did not run ok";
    return out;
  }
  if (!against) {
    out.note = againstName + " is not in this run (give it to --workloads as well)";
    return out;
  }
  if (against->status != "ok") {
    out.note = againstName + " did not run ok in this run (" + against->status +
               (against->reason.empty() ? "" : ": " + against->reason) + ")";
    return out;
  }
  for (const auto& f : w.foms) {
    auto other = std::find_if(against->foms.begin(), against->foms.end(), [&](const FomResult& o) { return o.name == f.name; });
    if (other == against->foms.end()) continue;
    for (const char* side : {"A", "B"}) out.rows.push_back(compareSide(f, *other, side, againstName, alpha));
  }
  if (out.rows.empty()) out.note = "no FOM in common with " + againstName;
  return out;
}

}  // namespace ctr::bench
