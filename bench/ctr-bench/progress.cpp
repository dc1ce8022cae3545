#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>

namespace ctr::bench {

Progress::Progress() : tty_(::isatty(STDERR_FILENO) != 0) {}

void Progress::status(const std::string& text) {
  if (tty_) {
    std::string shown = text;
    if (shown.size() > 150) shown = shown.substr(0, 147) + "...";
    std::cerr << "\r\033[K" << shown << std::flush;
    dirty_ = true;
  } else if (text != last_) {
    // Plain output: block lines only change with the block, not with every side.
    std::cerr << "ctr-bench: " << text << "\n";
  }
  last_ = text;
}

void Progress::line(const std::string& text) {
  if (tty_ && dirty_) std::cerr << "\r\033[K";
  dirty_ = false;
  std::cerr << "ctr-bench: " << text << "\n";
}

void Progress::done() {
  if (tty_ && dirty_) std::cerr << "\r\033[K" << std::flush;
  dirty_ = false;
}

std::string Progress::verdictSummary(const nlohmann::json& workload) {
  std::map<std::string, int> counts;
  if (workload.contains("foms"))
    for (const auto& f : workload["foms"])
      if (f.contains("analysis") && f["analysis"].contains("verdict")) ++counts[f["analysis"]["verdict"].get<std::string>()];
  std::string s;
  for (const auto& [k, v] : counts) s += (s.empty() ? " | " : ", ") + k + " " + std::to_string(v);
  return s;
}

namespace {

std::string pct(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", v.get<double>() * 100);
  return buf;
}

}  // namespace

void printSummaryTable(const nlohmann::json& result, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-28s %10s  %-22s %3s %7s  %s\n", "workload", "FOM", "overhead", "interval", "n",
                "delta", "verdict");
  out << line;
  for (const auto& w : result["workloads"]) {
    std::string name = w["name"];
    if (w["foms"].empty()) {
      out << name << ": " << w["status"].get<std::string>()
          << (w["reason"].is_string() ? " (" + w["reason"].get<std::string>() + ")" : "") << "\n";
      continue;
    }
    for (const auto& f : w["foms"]) {
      const auto& a = f["analysis"];
      std::string ci = a["ci"].is_array() ? "[" + pct(a["ci"][0]) + ", " + pct(a["ci"][1]) + "]" : "-";
      std::string fom = f["name"].get<std::string>();
      std::snprintf(line, sizeof line, "%-14s %-28s %10s  %-22s %3d %6.1f%%  %s", name.c_str(), fom.c_str(),
                    pct(a["overhead"]).c_str(), ci.c_str(), a.value("n_pairs", 0), f["delta"].get<double>() * 100,
                    a["verdict"].get<std::string>().c_str());
      out << line;
      if (a.contains("speedup") && a["speedup"]["ci"].is_array()) {
        // A stack delta: B's build against A's, as a factor.
        double x = a["speedup"]["factor"], lo = a["speedup"]["ci"][0], hi = a["speedup"]["ci"][1];
        std::snprintf(line, sizeof line, "  B %.3gx %s [%.3g, %.3g]", x >= 1 ? x : 1 / x, x >= 1 ? "faster" : "slower",
                      x >= 1 ? lo : 1 / hi, x >= 1 ? hi : 1 / lo);
        out << line;
      }
      if (a["note"].is_string()) out << "  (" << a["note"].get<std::string>() << ")";
      out << "\n";
    }
    if (w["status"] == "error" && w["reason"].is_string()) out << name << ": error: " << w["reason"].get<std::string>() << "\n";
  }
  if (result.contains("cold_start") && result["cold_start"].is_object() && result["cold_start"].contains("median_s")) {
    const auto& m = result["cold_start"]["median_s"];
    auto ms = [](const nlohmann::json& v) { return v.is_number() ? std::to_string(v.get<double>() * 1000).substr(0, 6) + " ms" : std::string("-"); };
    out << "cold start (median): bare " << ms(m["bare"]) << ", warm " << ms(m["warm"]) << ", cold " << ms(m["cold"]) << "\n";
  }
  const auto& s = result["summary"];
  if (s.is_object())
    out << "summary: PASS " << s["PASS"] << ", FAIL " << s["FAIL"] << ", FASTER " << s.value("FASTER", 0) << ", INCONCLUSIVE "
        << s["INCONCLUSIVE"] << ", ESTIMATE " << s.value("ESTIMATE", 0) << ", ERROR " << s["ERROR"] << ", SKIPPED "
        << s["SKIPPED"] << "; exit status " << s["exit_status"] << "\n";
}

}  // namespace ctr::bench
