#include "compare.hpp"

#include <cmath>
#include <cstdio>

#include "ctr/error.hpp"
#include "stats.hpp"

namespace ctr::bench {

using json = nlohmann::json;

namespace {

std::vector<double> logSamples(const json& samples) {
  std::vector<double> out;
  for (const auto& v : samples)
    if (v.is_number() && v.get<double>() > 0) out.push_back(std::log(v.get<double>()));
  return out;
}

const json* findByName(const json& list, const std::string& name) {
  for (const auto& x : list)
    if (x.contains("name") && x["name"] == name) return &x;
  return nullptr;
}

}  // namespace

json compareResults(const json& base, const json& now, const CompareOptions& o) {
  if (base.value("mode", "") != now.value("mode", ""))
    throw Error("the runs measure different things (mode " + base.value("mode", std::string("?")) + " vs " +
                now.value("mode", std::string("?")) + "): a stack delta is never compared with a runtime overhead");
  json rows = json::array();
  json summary = {{"OK", 0}, {"REGRESSION", 0}, {"INCONCLUSIVE", 0}};
  for (const auto& wb : base["workloads"]) {
    const json* wn = findByName(now["workloads"], wb["name"]);
    if (!wn) continue;
    for (const auto& fb : wb["foms"]) {
      const json* fn = findByName((*wn)["foms"], fb["name"]);
      if (!fn) continue;
      bool higher = fb.value("direction", "higher") == "higher";
      double tol = o.tolerance.value_or(fb.value("delta", 0.05));
      for (const char* side : {"A", "B"}) {
        auto x = logSamples(fb["samples"][side]);
        auto y = logSamples((*fn)["samples"][side]);
        json row = {{"workload", wb["name"]}, {"fom", fb["name"]}, {"side", side}, {"unit", fb.value("unit", "")},
                    {"n_base", x.size()}, {"n_new", y.size()}, {"tolerance", tol}};
        std::string verdict = "INCONCLUSIVE";
        if (x.size() >= 2 && y.size() >= 2) {
          auto mw = mannWhitney(x, y, o.confidence);
          // The shift is log(new/base); worse = slower (times) or lower (rates).
          double sign = higher ? -1 : 1;
          row["change"] = std::expm1(sign * mw.shift);
          row["p_value"] = mw.pValue;
          if (mw.ci) {
            double lo = std::expm1(std::min(sign * mw.ci->lo, sign * mw.ci->hi));
            double hi = std::expm1(std::max(sign * mw.ci->lo, sign * mw.ci->hi));
            row["ci"] = {lo, hi};
            if (lo > tol) verdict = "REGRESSION";
            else if (hi < tol) verdict = "OK";
          } else {
            row["ci"] = nullptr;
            row["note"] = "too few samples for a CI at this confidence";
          }
        } else {
          row["change"] = nullptr;
          row["ci"] = nullptr;
          row["note"] = "fewer than 2 samples on a side";
        }
        row["verdict"] = verdict;
        summary[verdict] = summary[verdict].get<int>() + 1;
        rows.push_back(row);
      }
    }
  }
  return {{"rows", rows}, {"summary", summary}};
}

int printComparison(const json& c, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-28s %-5s %10s  %-22s %7s  %s\n", "workload", "FOM", "side", "change",
                "90% CI", "tol", "verdict");
  out << line;
  auto pct = [](const json& v) {
    if (!v.is_number()) return std::string("-");
    char b[32];
    std::snprintf(b, sizeof b, "%+.2f%%", v.get<double>() * 100);
    return std::string(b);
  };
  for (const auto& r : c["rows"]) {
    std::string ci = r["ci"].is_array() ? "[" + pct(r["ci"][0]) + ", " + pct(r["ci"][1]) + "]" : "-";
    std::string side = r["side"] == "A" ? "bare" : "ctr";
    std::snprintf(line, sizeof line, "%-14s %-28s %-5s %10s  %-22s %6.1f%%  %s\n", r["workload"].get<std::string>().c_str(),
                  r["fom"].get<std::string>().c_str(), side.c_str(), pct(r["change"]).c_str(), ci.c_str(),
                  r["tolerance"].get<double>() * 100, r["verdict"].get<std::string>().c_str());
    out << line;
  }
  const auto& s = c["summary"];
  out << "summary: OK " << s["OK"] << ", REGRESSION " << s["REGRESSION"] << ", INCONCLUSIVE " << s["INCONCLUSIVE"] << "\n";
  if (s["REGRESSION"].get<int>() > 0) return 1;
  if (s["INCONCLUSIVE"].get<int>() > 0) return 2;
  return 0;
}

}  // namespace ctr::bench
