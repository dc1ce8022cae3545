#include "compare.hpp"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

#include <algorithm>
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
  json summary = {{"OK", 0}, {"REGRESSION", 0}, {"INCONCLUSIVE", 0}, {"MISSING", 0}, {"ERROR", 0}};
  auto add = [&](json row) {
    std::string v = row["verdict"];
    summary[v] = summary[v].get<int>() + 1;
    rows.push_back(std::move(row));
  };
  // A workload or FOM that BASE measured and NEW did not: the whole workload, or one FOM.
  auto absent = [&](const json& wb, const std::string& fom, const std::string& verdict, const std::string& note) {
    add({{"workload", wb["name"]}, {"fom", fom}, {"side", "-"}, {"unit", ""}, {"change", nullptr}, {"ci", nullptr},
         {"tolerance", nullptr}, {"verdict", verdict}, {"note", note}});
  };
  const double alphaSide = (1 - o.confidence) / 2;
  for (const auto& wb : base["workloads"]) {
    if (wb.value("status", "ok") != "ok") continue;  // nothing measured in BASE to hold NEW to
    const json* wn = findByName(now["workloads"], wb["name"]);
    if (!wn) {
      absent(wb, "*", "MISSING", "not in the new run");
      continue;
    }
    const std::string status = wn->value("status", "ok");
    if (status == "skipped") {
      absent(wb, "*", "MISSING", "skipped in the new run: " + wn->value("reason", std::string("no reason")));
      continue;
    }
    if (status == "error" && (*wn)["foms"].empty()) {
      absent(wb, "*", "ERROR", "error in the new run: " + wn->value("reason", std::string("no reason")));
      continue;
    }
    for (const auto& fb : wb["foms"]) {
      const json* fn = findByName((*wn)["foms"], fb["name"]);
      if (!fn) {
        absent(wb, fb["name"], "MISSING", "FOM not in the new run");
        continue;
      }
      if (fn->contains("errors") && !(*fn)["errors"].empty()) {
        const auto& e = (*fn)["errors"][0];
        absent(wb, fb["name"], "ERROR",
               std::to_string((*fn)["errors"].size()) + " failed launch(es) in the new run; first: " + e.value("message", std::string("?")));
        continue;
      }
      bool higher = fb.value("direction", "higher") == "higher";
      double tol = o.tolerance.value_or(fb.value("delta", 0.05));
      for (const char* side : {"A", "B"}) {
        auto x = logSamples(fb["samples"][side]);
        auto y = logSamples((*fn)["samples"][side]);
        json row = {{"workload", wb["name"]}, {"fom", fb["name"]}, {"side", side}, {"unit", fb.value("unit", "")},
                    {"n_base", x.size()}, {"n_new", y.size()}, {"tolerance", tol}, {"samples_needed", nullptr}};
        std::string verdict = "INCONCLUSIVE";
        if (x.size() >= 2 && y.size() >= 2) {
          auto mw = mannWhitney(x, y, o.confidence);
          // The shift is log(new/base); worse = slower (times) or lower (rates).
          double sign = higher ? -1 : 1;
          double worse = sign * mw.shift;
          row["change"] = std::expm1(worse);
          row["p_value"] = mw.pValue;
          if (mw.ci) {
            double lo = std::expm1(std::min(sign * mw.ci->lo, sign * mw.ci->hi));
            double hi = std::expm1(std::max(sign * mw.ci->lo, sign * mw.ci->hi));
            row["ci"] = {lo, hi};
            if (lo > tol) verdict = "REGRESSION";
            else if (hi < tol) verdict = "OK";
          } else {
            row["ci"] = nullptr;
          }
          if (verdict == "INCONCLUSIVE") {
            // Samples per run for the CI to clear the tolerance (80% power at this change and
            // spread; Mann-Whitney's efficiency 3/pi against the t-test).
            std::vector<double> xs(x), ys(y), work(std::max(x.size(), y.size()));
            double s = (gsl_stats_mad(xs.data(), 1, xs.size(), work.data()) + gsl_stats_mad(ys.data(), 1, ys.size(), work.data())) / 2;
            double margin = std::fabs(std::log1p(tol) - worse);
            double z = gsl_cdf_ugaussian_Qinv(alphaSide) + gsl_cdf_ugaussian_Qinv(0.2);
            char note[200];
            if (margin > 0.1 * tol) {
              int n = std::max(10, static_cast<int>(std::ceil(2 * z * z * s * s / (margin * margin) * M_PI / 3)));
              row["samples_needed"] = n;
              std::snprintf(note, sizeof note, "cannot resolve tolerance %.1f%% with %zu/%zu samples: about %d per run would",
                            tol * 100, x.size(), y.size(), n);
            } else {
              std::snprintf(note, sizeof note, "the change sits on the tolerance %.1f%%: no sample count resolves it quickly",
                            tol * 100);
            }
            row["note"] = note;
          }
        } else {
          row["change"] = nullptr;
          row["ci"] = nullptr;
          row["note"] = "fewer than 2 samples on a side";
        }
        row["verdict"] = verdict;
        add(row);
      }
    }
  }
  summary["allow_missing"] = o.allowMissing;
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
    std::string side = r["side"] == "A" ? "bare" : r["side"] == "B" ? "ctr" : "-";
    std::string tol = r["tolerance"].is_number() ? pct(r["tolerance"]).substr(1) : "-";
    std::snprintf(line, sizeof line, "%-14s %-28s %-5s %10s  %-22s %7s  %s\n", r["workload"].get<std::string>().c_str(),
                  r["fom"].get<std::string>().c_str(), side.c_str(), pct(r["change"]).c_str(), ci.c_str(), tol.c_str(),
                  r["verdict"].get<std::string>().c_str());
    out << line;
    if (r.contains("note") && r["note"].is_string()) out << "    " << r["note"].get<std::string>() << "\n";
  }
  const auto& s = c["summary"];
  const bool allowMissing = s.value("allow_missing", false);
  out << "summary: OK " << s["OK"] << ", REGRESSION " << s["REGRESSION"] << ", INCONCLUSIVE " << s["INCONCLUSIVE"]
      << ", MISSING " << s["MISSING"] << ", ERROR " << s["ERROR"]
      << (allowMissing ? " (missing and errored allowed by --allow-missing)" : "") << "\n";
  if (s["REGRESSION"].get<int>() > 0) return 1;
  if (!allowMissing && s["MISSING"].get<int>() + s["ERROR"].get<int>() > 0) return 1;
  if (s["INCONCLUSIVE"].get<int>() > 0) return 2;
  return 0;
}

}  // namespace ctr::bench
