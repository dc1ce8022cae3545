// ctr-bench: bare metal against ctr, per figure of merit, with a verdict an admin can
// defend (docs/benchmark-guide.md, "ctr-bench"). Subcommands: run, calibrate, compare, report.
#include <CLI/CLI.hpp>

#include <iostream>

#include "calibrate.hpp"
#include "compare.hpp"
#include "ctr/error.hpp"
#include "ctr/strings.hpp"
#include "report.hpp"
#include "result.hpp"
#include "runner.hpp"
#include "scenarios.hpp"

namespace {

constexpr int kUsage = 3;

}  // namespace

int main(int argc, char** argv) {
  using namespace ctr::bench;
  CLI::App app{"ctr-bench: bare metal vs container, per figure of merit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ctr-bench ") + CTR_BENCH_VERSION);

  RunOptions ro;
  bool quick = false, full = false, hl = false, noCold = false;
  std::string workloads, mode = "runtime-overhead", ctrArgs, mpirunArgs;
  std::vector<std::string> deltas;
  std::optional<std::string> descriptorDir, workdir;
  auto* run = app.add_subcommand("run", "Run the workloads bare (A) and in a container (B) and decide per FOM");
  auto* q = run->add_flag("--quick", quick, "Short profile: proves the whole path in a few minutes (default)");
  run->add_flag("--full", full, "Full profile: more blocks and the long workloads")->excludes(q);
  run->add_option("--workloads", workloads, "Comma-separated workload names (default: every workload of the profile)");
  run->add_option("--workload-file", ro.workloadFiles, "A site workload descriptor (YAML); repeatable")->check(CLI::ExistingFile);
  run->add_option("--site-dir", ro.siteDirs, "A directory of site workload descriptors; repeatable")->check(CLI::ExistingDirectory);
  run->add_option("--descriptor-dir", descriptorDir, "The suite's descriptors (default: installed beside ctr-bench)");
  run->add_option("--mode", mode, "runtime-overhead | image-vs-host | image-vs-image")
      ->check(CLI::IsMember({"runtime-overhead", "image-vs-host", "image-vs-image"}));
  run->add_option("--image", ro.image, "Image for B (runtime-overhead: replaces host-stack; image-vs-image: A)");
  run->add_option("--image-b", ro.imageB, "image-vs-image: the image of B");
  run->add_option("--ctr", ro.ctr, "The ctr to measure (default: beside ctr-bench, else PATH)");
  run->add_option("--ctr-args", ctrArgs, "Extra options for every `ctr exec` (one string)");
  run->add_option("--blocks", ro.blocks, "Initial paired blocks per workload (default: per descriptor and profile)")
      ->check(CLI::Range(1, 1000));
  run->add_option("--budget", ro.budgetS, "Time budget of the whole run in seconds (adds blocks while INCONCLUSIVE)")
      ->check(CLI::PositiveNumber);
  run->add_option("--delta", deltas, "NAME=X or WORKLOAD/NAME=X: a FOM's delta (0.02 or 2%); repeatable");
  run->add_option("--seed", ro.seed, "Seed of the block order and the bootstrap (default: from the clock, recorded)");
  run->add_option("--out", ro.out, "Result file (default ./ctr-bench-result.json)");
  run->add_option("--workdir", workdir, "Work directory (kept); default a temporary one, removed at the end");
  run->add_option("--mpirun-args", mpirunArgs, "Extra mpirun options for MPI workloads, both sides (one string)");
  run->add_flag("--no-cold-start", noCold, "Do not measure the cold start");
  run->add_option("--scenario", ro.scenarios, "After the workloads: cpu-steps | memory-steps | concurrent; repeatable")
      ->check(CLI::IsMember(kScenarios));
  run->add_option("--scenario-workload", ro.scenarioWorkload, "The workload of the scenarios (default: the first single-process one that ran)");
  run->add_flag("--hodges-lehmann", hl, "Decide on the Hodges-Lehmann estimate and Wilcoxon interval instead of the median's order statistics");
  run->add_option("--alpha", ro.alpha, "Each error rate of the rule (false PASS, false FAIL) over all looks (default 0.05)")
      ->check(CLI::Range(0.001, 0.2));

  CalibrateOptions cal;
  std::string calDelta = "2%", calCtrArgs;
  auto* calib = app.add_subcommand("calibrate", "Run a busy loop with known container overheads (0, delta/2, 2 delta, 10 delta) through the harness");
  calib->add_option("--delta", calDelta, "The delta the levels are multiples of (0.02 or 2%; default 2%)");
  calib->add_option("--blocks", cal.run.blocks, "Pairs per level (default 12)")->check(CLI::Range(1, 1000));
  calib->add_option("--iterations", cal.iterations, "Busy-loop iterations per bare launch (default 20000000, about 30 ms)")
      ->check(CLI::Range(1000LL, 100000000000LL));
  calib->add_option("--alpha", cal.run.alpha, "Each error rate of the rule (default 0.05)")->check(CLI::Range(0.001, 0.2));
  calib->add_option("--ctr", cal.run.ctr, "The ctr to measure (default: beside ctr-bench, else PATH)");
  calib->add_option("--ctr-args", calCtrArgs, "Extra options for every `ctr exec` (one string)");
  calib->add_option("--image", cal.run.image, "Image for B (default: host-stack)");
  calib->add_option("--budget", cal.run.budgetS, "Time budget in seconds (default 300)")->check(CLI::PositiveNumber);
  calib->add_option("--seed", cal.run.seed, "Seed of the block order (default: from the clock, recorded)");
  calib->add_option("--out", cal.run.out, "Result file (default ./ctr-bench-result.json)");

  std::string baseFile, newFile;
  CompareOptions co;
  auto* cmp = app.add_subcommand("compare", "Flag regressions of NEW against BASE (container and bare metal separately)");
  cmp->add_option("base", baseFile, "Result file of the earlier run")->required();
  cmp->add_option("new", newFile, "Result file of the later run")->required();
  cmp->add_option("--tolerance", co.tolerance, "Allowed worsening (fraction) instead of each FOM's delta")
      ->check(CLI::Range(0.0, 1.0));
  cmp->add_flag("--allow-missing", co.allowMissing, "A workload or FOM of BASE missing or errored in NEW is not a regression");

  std::string resultFile, outDir = ".";
  auto* rep = app.add_subcommand("report", "Write ctr-bench-report.md and ctr-bench-report.html from a result file");
  rep->add_option("result", resultFile, "Result file")->required();
  rep->add_option("--out-dir", outDir, "Where to write the report (default .)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kUsage;
  }

  try {
    if (*run) {
      ro.profile = full ? Profile::Full : Profile::Quick;
      for (auto w : ctr::splitList(workloads)) ro.workloads.emplace_back(w);
      if (mode == "image-vs-host") ro.mode = Mode::ImageVsHost;
      if (mode == "image-vs-image") ro.mode = Mode::ImageVsImage;
      ro.ctrArgs = splitOnBlanks(ctrArgs);
      ro.mpirunArgs = splitOnBlanks(mpirunArgs);
      for (const auto& d : deltas) ro.deltas.insert(parseDeltaOption(d));
      if (descriptorDir) ro.descriptorDir = *descriptorDir;
      if (workdir) ro.workdir = *workdir;
      ro.coldStart = !noCold;
      ro.ciMethod = hl ? CiMethod::HodgesLehmann : CiMethod::OrderStatisticMedian;
      return runBench(ro);
    }
    if (*calib) {
      cal.delta = parseDeltaOption("calibrate=" + calDelta).second;
      cal.run.ctrArgs = splitOnBlanks(calCtrArgs);
      return runCalibration(cal);
    }
    if (*cmp) {
      auto base = readResultFile(baseFile);
      auto now = readResultFile(newFile);
      return printComparison(compareResults(base, now, co), std::cout);
    }
    if (*rep) {
      auto result = readResultFile(resultFile);
      std::filesystem::create_directories(outDir);
      auto md = std::filesystem::path(outDir) / "ctr-bench-report.md";
      auto html = std::filesystem::path(outDir) / "ctr-bench-report.html";
      writeReport(result, md, html);
      std::cout << md.string() << "\n" << html.string() << "\n";
      return 0;
    }
  } catch (const ctr::Error& e) {
    std::cerr << "ctr-bench: error: " << e.oneLine() << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "ctr-bench: error: " << e.what() << "\n";
    return kUsage;
  }
  return kUsage;
}
