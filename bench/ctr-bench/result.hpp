// The result file of `ctr-bench run` (format "ctr-bench-result", version 1; the contract
// is docs/benchmark-guide.md, "Result file"), as plain data. The runner fills a Result,
// `report`, `compare` and `calibrate` read one; resultToJson and resultFromJson (result.cpp)
// are the only code that knows the file's keys. Keys a reader does not know (a newer writer,
// an older field) are kept in `extra` and written back as they were.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ctr::bench {

inline constexpr const char* kResultFormat = "ctr-bench-result";
inline constexpr int kResultVersion = 1;

// One value per block; nullopt where that launch failed or was not run.
using SampleList = std::vector<std::optional<double>>;

// A failed launch. FOM launches name their side (A or B), cold start launches their case
// (bare, warm, cold): both are `side` here.
struct LaunchError {
  std::optional<int> block;  // -1: a warm-up launch
  std::string blockName;     // a phase written where the block number goes ("warm-up")
  std::string phase;         // "warm-up"
  std::string side, message, stderrTail;
  bool operator==(const LaunchError&) const = default;
};

// A stack delta (image-vs-host, image-vs-image): how many times faster B is than A.
struct Speedup {
  std::optional<double> factor, low, high;
  bool operator==(const Speedup&) const = default;
};

struct Analysis {
  std::optional<int> nPairs, looks, minPairs, pairsNeeded;
  std::optional<double> overhead, ciLow, ciHigh, ciLevel, alpha;
  std::optional<double> cvA, cvB, baselineSpread;
  std::optional<double> bestA, bestB;  // "min": the best sample of each side
  std::optional<double> medianA, medianB;
  std::optional<Speedup> speedup;
  std::string ciMethod;
  std::string verdict;  // PASS, FAIL, FASTER, INCONCLUSIVE, ESTIMATE or ERROR
  std::string note;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Analysis&) const = default;
};

struct FomResult {
  std::string name, unit;
  std::string direction;  // "higher" or "lower" (is better); "" when not recorded
  std::optional<double> delta;
  SampleList samplesA, samplesB;
  std::vector<LaunchError> errors;
  std::optional<Analysis> analysis;  // none: never analysed (an interrupted run)
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const FomResult&) const = default;
};

// One paired block: the order the sides ran in and their wall times.
struct BlockPlan {
  int block = 0;
  std::vector<std::string> order;
  std::map<std::string, double> wallS;
  bool operator==(const BlockPlan&) const = default;
};

struct SideLabels {
  std::string a = "A", b = "B";
  bool operator==(const SideLabels&) const = default;
};

// One FOM on one side (A with A, B with B) of a data-source comparison (descriptor key
// compare_source): this workload's samples against those of the workload it names, from
// the same run. Unpaired (the two workloads' blocks are not interleaved), and about the
// data source, not the runtime: no verdict of the run, no exit status.
struct SourceRow {
  std::string fom, side, unit, direction;
  std::optional<double> delta;
  int n = 0, nAgainst = 0;  // samples of this workload's side and of the other's
  std::optional<double> median, medianAgainst;
  std::optional<double> ratio, ciLow, ciHigh, ciLevel;  // this / against (the FOM's own ratio) and its interval
  std::optional<double> spread;  // the larger robust spread of the two sides' samples
  std::string verdict;  // NO-DIFFERENCE, SLOWER, FASTER, INCONCLUSIVE
  std::string note;
  bool operator==(const SourceRow&) const = default;
};

struct SourceComparison {
  std::string against;  // the other workload's name
  std::string note;     // why there are no rows (the other did not run ok in this run)
  std::vector<SourceRow> rows;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const SourceComparison&) const = default;
};

struct WorkloadResult {
  std::string name, description, descriptor;
  std::string status = "ok";  // ok, skipped or error
  std::string reason, stderrTail, budgetNote;
  std::optional<SideLabels> labels;
  std::optional<std::map<std::string, std::vector<std::string>>> commands;  // side -> argv
  std::optional<std::map<std::string, std::string>> env;
  std::optional<double> durationS;
  std::optional<std::vector<int>> looks;
  std::vector<BlockPlan> plan;
  nlohmann::json info;  // the program's own "info" object, as it printed it
  std::vector<FomResult> foms;
  std::optional<SourceComparison> sourceComparison;
  nlohmann::json extra = nlohmann::json::object();
  [[nodiscard]] SideLabels sides() const { return labels.value_or(SideLabels{}); }
  bool operator==(const WorkloadResult&) const = default;
};

struct ColdStart {
  std::string skipped;  // why it was not measured
  std::optional<int> rounds;
  std::map<std::string, std::vector<std::string>> commands;  // bare, warm, cold -> argv
  std::map<std::string, SampleList> samplesS;
  std::map<std::string, std::optional<double>> medianS;
  std::vector<LaunchError> errors;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const ColdStart&) const = default;
};

struct PointFom {
  SampleList samples;
  std::optional<double> median;
  bool operator==(const PointFom&) const = default;
};

// One step of a scenario: a limit ("--cpus 0.5"), a number of concurrent copies, or a label.
struct ScenarioPoint {
  std::optional<std::string> limit, label;
  std::optional<int> copies;
  std::optional<std::vector<std::string>> ctrArgs;
  SampleList samples;  // the scenario's FOM
  std::optional<double> median;
  std::optional<double> aggregate;  // concurrent copies: the node's total (copies x median)
  std::optional<std::map<std::string, PointFom>> foms;
  std::optional<std::vector<double>> wallS;
  std::vector<LaunchError> errors;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const ScenarioPoint&) const = default;
};

struct ScenarioResult {
  std::string name, kind, workload, fom, unit;
  std::string skipped;  // why it did not run
  std::optional<int> rounds;
  std::vector<ScenarioPoint> points;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const ScenarioResult&) const = default;
};

// How the run was made: the options and what they resolved to.
struct RunConfig {
  std::string ctr, image, imageA, imageB, imageNote, ciMethod, workdir;
  std::vector<std::string> ctrArgs, mpirunArgs;
  std::optional<bool> imageHeld;
  std::optional<double> budgetS, alpha;
  std::optional<int> blocks;
  std::map<std::string, double> deltas;
  std::map<std::string, std::string> env;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const RunConfig&) const = default;
};

struct RunSummary {
  std::map<std::string, int> counts;  // verdict (and SKIPPED) -> how many
  std::optional<int> exitStatus;
  bool operator==(const RunSummary&) const = default;
};

// `ctr-bench calibrate`: the injected overhead of each level against what the run saw.
struct CalibrationRow {
  std::string workload, fom, verdict;
  double injected = 0;
  std::optional<double> overhead, ciLow, ciHigh;
  bool ciHoldsInjected = false;
  bool operator==(const CalibrationRow&) const = default;
};

struct Calibration {
  double delta = 0;
  int pairs = 0;
  long long iterations = 0;
  std::vector<CalibrationRow> rows;
  bool ok = false;
  bool operator==(const Calibration&) const = default;
};

struct Result {
  std::string format = kResultFormat;
  int version = kResultVersion;
  std::string mode;  // runtime-overhead, image-vs-host or image-vs-image
  std::string profile, benchVersion, started, finished;
  std::optional<std::uint64_t> seed;
  bool interrupted = false;
  nlohmann::json host;  // the fingerprint: what the tools said, shown as it was recorded
  std::optional<RunConfig> config;
  std::optional<ColdStart> coldStart;
  std::vector<WorkloadResult> workloads;
  std::vector<ScenarioResult> scenarios;
  std::optional<RunSummary> summary;
  std::optional<Calibration> calibration;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Result&) const = default;
};

// The one conversion each way. resultFromJson checks every field it knows and throws
// ctr::Error naming the first wrong one ("result file: field workloads[2].foms[0].name:
// missing"); optional parts may be absent or null. It does not look at format and version.
[[nodiscard]] nlohmann::json resultToJson(const Result& result);
[[nodiscard]] Result resultFromJson(const nlohmann::json& document);
// The "config" part alone, as the file has it (the report lists it).
[[nodiscard]] nlohmann::json runConfigToJson(const RunConfig& config);

// Parses and checks a result file; throws ctr::Error with one line naming the file and the
// problem (unreadable, not JSON, another format or version, a wrong field).
Result readResultFile(const std::filesystem::path& file);

// Writes `result` to `file` through a temporary file in the same directory and a rename,
// so a reader (or Ctrl-C) never sees half a file.
void writeResultAtomic(const std::filesystem::path& file, const Result& result);

}  // namespace ctr::bench
