// `ctr-bench run`: each workload bare (A) and in a container (B) in randomized interleaved
// paired blocks, one process launch per sample, warm-ups discarded, the same environment and
// rank placement both ways; the verdict per FOM from stats.hpp; the result file rewritten
// after every block.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "descriptor.hpp"
#include "stats.hpp"

namespace ctr::bench {

enum class Mode { RuntimeOverhead, ImageVsHost, ImageVsImage };
std::string modeName(Mode m);

struct RunOptions {
  Profile profile = Profile::Quick;
  std::vector<std::string> workloads;  // names; empty = every workload of the profile
  std::vector<std::filesystem::path> workloadFiles;
  std::vector<std::filesystem::path> siteDirs;
  std::optional<std::filesystem::path> descriptorDir;  // instead of the installed one
  Mode mode = Mode::RuntimeOverhead;
  std::string image;
  std::string imageB;
  std::string ctr;  // empty: beside ctr-bench, else PATH
  std::vector<std::string> ctrArgs;
  std::optional<int> blocks;
  std::optional<double> budgetS;
  std::map<std::string, double> deltas;
  std::uint64_t seed = 0;  // 0: from the clock (recorded)
  std::filesystem::path out = "ctr-bench-result.json";
  std::optional<std::filesystem::path> workdir;
  std::vector<std::string> mpirunArgs;
  bool coldStart = true;
  CiMethod ciMethod = CiMethod::OrderStatisticMedian;
  double alpha = 0.05;  // each error of the rule over all looks (stats.hpp)
  std::vector<std::string> scenarios;  // cpu-steps, memory-steps, concurrent
  std::string scenarioWorkload;        // default: the first single-process workload that ran
};

// Returns the exit status (docs/benchmark-guide.md: 0 all PASS, 1 a FAIL, 2 INCONCLUSIVE
// only, 3 an ERROR or a setup failure, 130 interrupted).
int runBench(const RunOptions& options);

// Where the suite's descriptors and programs are, relative to this executable: an install
// (PREFIX/bin/ctr-bench -> PREFIX/share/ctr/bench/workloads, PREFIX/libexec/ctr/bench) or
// a build tree (BUILD/bin/ctr-bench -> the source tree's bench/workloads, BUILD/bench/workloads).
std::filesystem::path defaultDescriptorDir();
std::vector<std::filesystem::path> programDirs();

// "gemm=0.03", "gemm-cpu/dgemm=2%": the --delta values.
std::pair<std::string, double> parseDeltaOption(const std::string& text);

}  // namespace ctr::bench
