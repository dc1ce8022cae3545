#include "progress.hpp"
#include "stats.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>

namespace ctr::bench {

Progress::Progress() : line_(STDERR_FILENO) {}

void Progress::status(const std::string& text) {
  if (line_.tty()) line_.show(text);
  else if (text != last_) line_.print("ctr-bench: " + text);  // block lines change with the block, not each side
  last_ = text;
}

void Progress::line(const std::string& text) { line_.print("ctr-bench: " + text); }

void Progress::done() { line_.clear(); }

std::string Progress::verdictSummary(const std::vector<FomResult>& foms) {
  std::map<std::string, int> counts;
  for (const auto& f : foms)
    if (f.analysis && !f.analysis->verdict.empty()) ++counts[f.analysis->verdict];
  std::string s;
  for (const auto& [k, v] : counts) s += (s.empty() ? " | " : ", ") + k + " " + std::to_string(v);
  return s;
}

namespace {

std::string ms(const std::optional<double>& seconds) {
  return seconds ? std::to_string(*seconds * 1000).substr(0, 6) + " ms" : std::string("-");
}

// One FOM's line: overhead, interval, pairs, delta, verdict; a stack delta as a factor.
void printFomLine(const std::string& workload, const FomResult& f, std::ostream& out) {
  static const Analysis none;
  const Analysis& a = f.analysis ? *f.analysis : none;
  char line[512];
  std::string ci = a.ciLow && a.ciHigh ? "[" + signedPercent(a.ciLow) + ", " + signedPercent(a.ciHigh) + "]" : "-";
  std::snprintf(line, sizeof line, "%-14s %-28s %10s  %-22s %3d %6.1f%%  %s", workload.c_str(), f.name.c_str(),
                signedPercent(a.overhead).c_str(), ci.c_str(), a.nPairs.value_or(0), f.delta.value_or(0) * 100, a.verdict.c_str());
  out << line;
  if (a.speedup && a.speedup->factor && a.speedup->low && a.speedup->high) {
    double x = *a.speedup->factor, lo = *a.speedup->low, hi = *a.speedup->high;
    std::snprintf(line, sizeof line, "  B %.3gx %s [%.3g, %.3g]", x >= 1 ? x : 1 / x, x >= 1 ? "faster" : "slower",
                  x >= 1 ? lo : 1 / hi, x >= 1 ? hi : 1 / lo);
    out << line;
  }
  if (!a.note.empty()) out << "  (" << a.note << ")";
  out << "\n";
}

// The data-source comparisons (compare_source): apart from the overhead lines above.
void printSourceComparisons(const Result& result, std::ostream& out) {
  for (const auto& w : result.workloads) {
    if (!w.sourceComparison) continue;
    const auto& c = *w.sourceComparison;
    out << "data source (not runtime overhead): " << w.name << " against " << c.against << " (ratio " << w.name << "/"
        << c.against << ")";
    if (!c.note.empty()) out << ": " << c.note;
    out << "\n";
    for (const auto& r : c.rows) {
      char line[512];
      std::string ratio = r.ratio ? "x" + std::to_string(*r.ratio).substr(0, 5) : "-";
      std::string ci = r.ciLow && r.ciHigh ? "[" + std::to_string(*r.ciLow).substr(0, 5) + ", " +
                                                 std::to_string(*r.ciHigh).substr(0, 5) + "]"
                                           : "-";
      std::snprintf(line, sizeof line, "  %-28s %-5s %8s  %-16s %2d/%-2d %6.1f%%  %s", r.fom.c_str(),
                    (r.side == "A" ? w.sides().a : w.sides().b).c_str(), ratio.c_str(), ci.c_str(), r.n, r.nAgainst,
                    r.delta.value_or(0) * 100, r.verdict.c_str());
      out << line << (r.note.empty() ? "" : "  (" + r.note + ")") << "\n";
    }
  }
}

}  // namespace

void printSummaryTable(const Result& result, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-28s %10s  %-22s %3s %7s  %s\n", "workload", "FOM", "overhead", "interval", "n",
                "delta", "verdict");
  out << line;
  for (const auto& w : result.workloads) {
    if (w.foms.empty()) {
      out << w.name << ": " << w.status << (w.reason.empty() ? "" : " (" + w.reason + ")") << "\n";
      continue;
    }
    for (const auto& f : w.foms) printFomLine(w.name, f, out);
    if (w.status == "error" && !w.reason.empty()) out << w.name << ": error: " << w.reason << "\n";
  }
  printSourceComparisons(result, out);
  if (result.coldStart && !result.coldStart->medianS.empty()) {
    auto median = [&](const std::string& k) {
      auto it = result.coldStart->medianS.find(k);
      return it == result.coldStart->medianS.end() ? std::nullopt : it->second;
    };
    out << "cold start (median): bare " << ms(median("bare")) << ", warm " << ms(median("warm")) << ", cold "
        << ms(median("cold")) << "\n";
  }
  if (const auto& s = result.summary) {
    auto n = [&](const std::string& k) { return s->counts.contains(k) ? s->counts.at(k) : 0; };
    out << "summary: PASS " << n("PASS") << ", FAIL " << n("FAIL") << ", FASTER " << n("FASTER") << ", INCONCLUSIVE "
        << n("INCONCLUSIVE") << ", ESTIMATE " << n("ESTIMATE") << ", ERROR " << n("ERROR") << ", SKIPPED " << n("SKIPPED")
        << "; exit status " << s->exitStatus.value_or(0) << "\n";
  }
}

}  // namespace ctr::bench
