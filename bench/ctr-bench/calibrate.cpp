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

std::string pct(std::optional<double> v) {
  if (!v) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", *v * 100);
  return b;
}

double injectedFor(const std::string& workload, double delta) {
  for (const auto& l : kLevels)
    if (workload == l.name) return l.multiple * delta;
  return 0;
}

// One FOM of one level: what was injected against what the run saw.
CalibrationRow rowFor(const WorkloadResult& w, const FomResult& f, double delta) {
  static const Analysis none;
  const Analysis& a = f.analysis ? *f.analysis : none;
  CalibrationRow row{w.name, f.name, a.verdict, injectedFor(w.name, delta), a.overhead, a.ciLow, a.ciHigh, false};
  row.ciHoldsInjected = a.ciLow && a.ciHigh && *a.ciLow <= row.injected && row.injected <= *a.ciHigh;
  return row;
}

// The contract: the placebo is never FAIL; 10 delta is FAIL on CPU time, its interval
// holding the injected overhead (wall time may stay INCONCLUSIVE on a busy node).
bool rowHolds(const CalibrationRow& r) {
  if (r.workload == "calib-placebo" && r.verdict == "FAIL") return false;
  if (r.workload == "calib-10delta" && r.fom == "busy_cpu_time" && (r.verdict != "FAIL" || !r.ciHoldsInjected)) return false;
  return true;
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

  Result result = readResultFile(o.run.out);
  Calibration cal{o.delta, blocks, o.iterations, {}, true};
  std::printf("\ncalibration (delta %.1f%%, %d pairs, alpha %.3g): injected overhead against what ctr-bench saw\n",
              o.delta * 100, blocks, o.run.alpha);
  std::printf("%-17s %-14s %9s %10s  %-22s %-12s %s\n", "level", "FOM", "injected", "estimate", "interval", "verdict",
              "interval holds injected");
  for (const auto& w : result.workloads) {
    for (const auto& f : w.foms) {
      const CalibrationRow row = rowFor(w, f, o.delta);
      std::string ci = row.ciLow && row.ciHigh ? "[" + pct(row.ciLow) + ", " + pct(row.ciHigh) + "]" : "-";
      std::printf("%-17s %-14s %9s %10s  %-22s %-12s %s\n", row.workload.c_str(), row.fom.c_str(), pct(row.injected).c_str(),
                  pct(row.overhead).c_str(), ci.c_str(), row.verdict.c_str(), row.ciHoldsInjected ? "yes" : "no");
      cal.ok = cal.ok && rowHolds(row);
      cal.rows.push_back(row);
    }
    if (w.status != "ok") {
      std::printf("%-17s %s (%s)\n", w.name.c_str(), w.status.c_str(), w.reason.c_str());
      cal.ok = false;
    }
  }
  const bool ok = cal.ok;
  result.calibration = std::move(cal);
  writeResultAtomic(o.run.out, result);
  std::printf("calibration %s: %s\n", ok ? "holds" : "DOES NOT HOLD",
              ok ? "the placebo gave no FAIL and 10 delta FAILed with the injected overhead inside its interval"
                 : "see the rows above");
  return ok ? 0 : 1;
}

}  // namespace ctr::bench
