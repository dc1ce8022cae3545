#include "compare.hpp"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ctr/error.hpp"
#include "stats.hpp"

namespace ctr::bench {

namespace {

std::vector<double> logSamples(const SampleList& samples) {
  std::vector<double> out;
  for (const auto& v : samples)
    if (v && *v > 0) out.push_back(std::log(*v));
  return out;
}

template <typename T>
const T* findByName(const std::vector<T>& list, const std::string& name) {
  auto it = std::find_if(list.begin(), list.end(), [&](const T& x) { return x.name == name; });
  return it == list.end() ? nullptr : &*it;
}

class Comparer {
 public:
  explicit Comparer(const CompareOptions& o) : o_(o) { out_.allowMissing = o.allowMissing; }
  void workload(const WorkloadResult& wb, const WorkloadResult* wn);
  Comparison done() { return std::move(out_); }

 private:
  void add(CompareRow row) {
    ++out_.counts[row.verdict];
    out_.rows.push_back(std::move(row));
  }
  // A workload or FOM that BASE measured and NEW did not: the whole workload, or one FOM.
  void absent(const WorkloadResult& wb, const std::string& fom, const std::string& verdict, const std::string& note) {
    CompareRow row;
    row.workload = wb.name;
    row.fom = fom;
    row.side = "-";
    row.verdict = verdict;
    row.note = note;
    add(std::move(row));
  }
  void fom(const WorkloadResult& wb, const FomResult& fb, const FomResult& fn);
  CompareRow side(const WorkloadResult& wb, const FomResult& fb, const SampleList& base, const SampleList& now, const char* side) const;
  void explainUndecided(CompareRow& row, const std::vector<double>& x, const std::vector<double>& y, double worse) const;

  const CompareOptions& o_;
  Comparison out_;
};

void Comparer::workload(const WorkloadResult& wb, const WorkloadResult* wn) {
  if (wb.status != "ok") return;  // nothing measured in BASE to hold NEW to
  if (!wn) return absent(wb, "*", "MISSING", "not in the new run");
  const std::string reason = wn->reason.empty() ? "no reason" : wn->reason;
  if (wn->status == "skipped") return absent(wb, "*", "MISSING", "skipped in the new run: " + reason);
  if (wn->status == "error" && wn->foms.empty()) return absent(wb, "*", "ERROR", "error in the new run: " + reason);
  for (const auto& fb : wb.foms) {
    const FomResult* fn = findByName(wn->foms, fb.name);
    if (!fn) {
      absent(wb, fb.name, "MISSING", "FOM not in the new run");
    } else if (!fn->errors.empty()) {
      absent(wb, fb.name, "ERROR",
             std::to_string(fn->errors.size()) + " failed launch(es) in the new run; first: " +
                 (fn->errors[0].message.empty() ? "?" : fn->errors[0].message));
    } else {
      fom(wb, fb, *fn);
    }
  }
}

void Comparer::fom(const WorkloadResult& wb, const FomResult& fb, const FomResult& fn) {
  add(side(wb, fb, fb.samplesA, fn.samplesA, "A"));
  add(side(wb, fb, fb.samplesB, fn.samplesB, "B"));
}

CompareRow Comparer::side(const WorkloadResult& wb, const FomResult& fb, const SampleList& base, const SampleList& now,
                          const char* side) const {
  const bool higher = fb.direction.empty() || fb.direction == "higher";
  auto x = logSamples(base);
  auto y = logSamples(now);
  CompareRow row;
  row.workload = wb.name;
  row.fom = fb.name;
  row.side = side;
  row.unit = fb.unit;
  row.nBase = x.size();
  row.nNew = y.size();
  row.tolerance = o_.tolerance.value_or(fb.delta.value_or(0.05));
  row.verdict = "INCONCLUSIVE";
  if (x.size() < 2 || y.size() < 2) {
    row.note = "fewer than 2 samples on a side";
    return row;
  }
  auto mw = mannWhitney(x, y, o_.confidence);
  // The shift is log(new/base); worse = slower (times) or lower (rates).
  const double sign = higher ? -1 : 1;
  const double worse = sign * mw.shift;
  row.change = std::expm1(worse);
  row.pValue = mw.pValue;
  if (mw.ci) {
    row.ciLow = std::expm1(std::min(sign * mw.ci->lo, sign * mw.ci->hi));
    row.ciHigh = std::expm1(std::max(sign * mw.ci->lo, sign * mw.ci->hi));
    if (*row.ciLow > *row.tolerance) row.verdict = "REGRESSION";
    else if (*row.ciHigh < *row.tolerance) row.verdict = "OK";
  }
  if (row.verdict == "INCONCLUSIVE") explainUndecided(row, x, y, worse);
  return row;
}

// Samples per run for the interval to clear the tolerance (80% power at this change and
// spread; Mann-Whitney's efficiency 3/pi against the t-test).
void Comparer::explainUndecided(CompareRow& row, const std::vector<double>& x, const std::vector<double>& y, double worse) const {
  const double tol = *row.tolerance;
  std::vector<double> xs(x), ys(y), work(std::max(x.size(), y.size()));
  double s = (gsl_stats_mad(xs.data(), 1, xs.size(), work.data()) + gsl_stats_mad(ys.data(), 1, ys.size(), work.data())) / 2;
  double margin = std::fabs(std::log1p(tol) - worse);
  double z = gsl_cdf_ugaussian_Qinv((1 - o_.confidence) / 2) + gsl_cdf_ugaussian_Qinv(0.2);
  char note[200];
  if (margin > 0.1 * tol) {
    int n = std::max(10, static_cast<int>(std::ceil(2 * z * z * s * s / (margin * margin) * M_PI / 3)));
    row.samplesNeeded = n;
    std::snprintf(note, sizeof note, "cannot resolve tolerance %.1f%% with %zu/%zu samples: about %d per run would",
                  tol * 100, x.size(), y.size(), n);
  } else {
    std::snprintf(note, sizeof note, "the change sits on the tolerance %.1f%%: no sample count resolves it quickly", tol * 100);
  }
  row.note = note;
}

}  // namespace

Comparison compareResults(const Result& base, const Result& now, const CompareOptions& o) {
  if (base.mode != now.mode)
    throw Error("the runs measure different things (mode " + (base.mode.empty() ? "?" : base.mode) + " vs " +
                (now.mode.empty() ? "?" : now.mode) + "): a stack delta is never compared with a runtime overhead");
  Comparer c(o);
  for (const auto& wb : base.workloads) c.workload(wb, findByName(now.workloads, wb.name));
  return c.done();
}

int printComparison(const Comparison& c, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-28s %-5s %10s  %-22s %7s  %s\n", "workload", "FOM", "side", "change",
                "90% CI", "tol", "verdict");
  out << line;
  for (const auto& r : c.rows) {
    std::string ci = r.ciLow && r.ciHigh ? "[" + signedPercent(r.ciLow) + ", " + signedPercent(r.ciHigh) + "]" : "-";
    std::string side = r.side == "A" ? "bare" : r.side == "B" ? "ctr" : "-";
    std::string tol = r.tolerance ? signedPercent(r.tolerance).substr(1) : "-";
    std::snprintf(line, sizeof line, "%-14s %-28s %-5s %10s  %-22s %7s  %s\n", r.workload.c_str(), r.fom.c_str(),
                  side.c_str(), signedPercent(r.change).c_str(), ci.c_str(), tol.c_str(), r.verdict.c_str());
    out << line;
    if (!r.note.empty()) out << "    " << r.note << "\n";
  }
  out << "summary: OK " << c.count("OK") << ", REGRESSION " << c.count("REGRESSION") << ", INCONCLUSIVE "
      << c.count("INCONCLUSIVE") << ", MISSING " << c.count("MISSING") << ", ERROR " << c.count("ERROR")
      << (c.allowMissing ? " (missing and errored allowed by --allow-missing)" : "") << "\n";
  if (c.count("REGRESSION") > 0) return 1;
  if (!c.allowMissing && c.count("MISSING") + c.count("ERROR") > 0) return 1;
  if (c.count("INCONCLUSIVE") > 0) return 2;
  return 0;
}

}  // namespace ctr::bench
