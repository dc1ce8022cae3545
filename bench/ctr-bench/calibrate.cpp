#include "calibrate.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "ctr/error.hpp"
#include "result.hpp"

namespace ctr::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Level {
  const char* name;
  double multiple;  // of delta
};
constexpr Level kLevels[] = {{"calib-placebo", 0}, {"calib-half-delta", 0.5}, {"calib-2delta", 2}, {"calib-10delta", 10}};

// The descriptors live in a directory of their own for the run, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/ctr-bench-calibrate.XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw sysError("mkdtemp " + tmpl);
    path_ = tmpl;
    fs::permissions(path_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", v * 100);
  return b;
}

}  // namespace

int runCalibration(CalibrateOptions o) {
  if (!(o.delta > 0 && o.delta < 1)) throw Error("--delta must be between 0 and 1 (or 0% and 100%)");
  TempDir dir;
  const int blocks = o.run.blocks.value_or(12);
  for (const auto& l : kLevels) {
    std::ofstream y(dir.path() / (std::string(l.name) + ".yaml"));
    y << "name: " << l.name << "\n"
      << "description: busy loop doing " << l.multiple << " x delta more work in the container (calibration)\n"
      << "command: [\"{bindir}/ctr-wl-busy\", --iterations, \"" << o.iterations << "\", --extra, \""
      << l.multiple * o.delta << "\"]\n"
      << "output: json\n"
      << "blocks: {quick: " << blocks << ", full: " << blocks << "}\n"
      << "max_blocks: {quick: " << blocks << ", full: " << blocks << "}\n"
      << "timeout_s: 120\n"
      << "foms:\n"
      << "  - {name: busy_time, delta: " << o.delta << "}\n"
      << "  - {name: busy_cpu_time, delta: " << o.delta << "}\n";
    if (!y) throw Error("cannot write the calibration descriptors in " + dir.path().string());
  }
  o.run.descriptorDir = dir.path();
  o.run.workloads.clear();
  o.run.workloadFiles.clear();
  o.run.siteDirs.clear();
  o.run.mode = Mode::RuntimeOverhead;
  o.run.coldStart = false;
  o.run.scenarios.clear();
  o.run.blocks = blocks;
  const int status = runBench(o.run);
  if (status == 130 || status == 3) return status;

  json result = readResultFile(o.run.out);
  json rows = json::array();
  bool ok = true;
  std::printf("\ncalibration (delta %.1f%%, %d pairs, alpha %.3g): injected overhead against what ctr-bench saw\n",
              o.delta * 100, blocks, o.run.alpha);
  std::printf("%-17s %-14s %9s %10s  %-22s %-12s %s\n", "level", "FOM", "injected", "estimate", "interval", "verdict",
              "interval holds injected");
  for (const auto& w : result["workloads"]) {
    double injected = 0;
    for (const auto& l : kLevels)
      if (w["name"] == l.name) injected = l.multiple * o.delta;
    for (const auto& f : w["foms"]) {
      const auto& a = f["analysis"];
      const std::string verdict = a["verdict"];
      bool holds = a["ci"].is_array() && a["ci"][0].get<double>() <= injected && injected <= a["ci"][1].get<double>();
      std::string ci = a["ci"].is_array() ? "[" + pct(a["ci"][0]) + ", " + pct(a["ci"][1]) + "]" : "-";
      std::printf("%-17s %-14s %9s %10s  %-22s %-12s %s\n", w["name"].get<std::string>().c_str(),
                  f["name"].get<std::string>().c_str(), pct(injected).c_str(),
                  a["overhead"].is_number() ? pct(a["overhead"]).c_str() : "-", ci.c_str(), verdict.c_str(),
                  holds ? "yes" : "no");
      rows.push_back({{"workload", w["name"]}, {"fom", f["name"]}, {"injected", injected}, {"overhead", a["overhead"]},
                      {"ci", a["ci"]}, {"verdict", verdict}, {"ci_holds_injected", holds}});
      // The contract: the placebo is never FAIL; 10 delta is FAIL on CPU time, its interval
      // holding the injected overhead (wall time may stay INCONCLUSIVE on a busy node).
      if (w["name"] == "calib-placebo" && verdict == "FAIL") ok = false;
      if (w["name"] == "calib-10delta" && f["name"] == "busy_cpu_time" && (verdict != "FAIL" || !holds)) ok = false;
    }
    if (w["status"] != "ok") {
      std::printf("%-17s %s (%s)\n", w["name"].get<std::string>().c_str(), w["status"].get<std::string>().c_str(),
                  w["reason"].is_string() ? w["reason"].get<std::string>().c_str() : "");
      ok = false;
    }
  }
  result["calibration"] = {{"delta", o.delta}, {"pairs", blocks}, {"iterations", o.iterations}, {"rows", rows}, {"ok", ok}};
  writeResultAtomic(o.run.out, result);
  std::printf("calibration %s: %s\n", ok ? "holds" : "DOES NOT HOLD",
              ok ? "the placebo gave no FAIL and 10 delta FAILed with the injected overhead inside its interval"
                 : "see the rows above");
  return ok ? 0 : 1;
}

}  // namespace ctr::bench
