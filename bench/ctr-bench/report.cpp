#include "report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "ctr/error.hpp"

namespace ctr::bench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---- The result file, read once into plain data. Every field error names its path.

class Fields {
 public:
  Fields(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) throw Error("result file: " + where() + ": expected an object");
  }

  [[noreturn]] void fail(std::string_view key, std::string_view what) const {
    throw Error("result file: field " + pathOf(key) + ": " + std::string(what));
  }
  [[nodiscard]] std::string pathOf(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  // nullptr when the key is absent or null: both mean "not recorded".
  [[nodiscard]] const json* find(std::string_view key) const {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  [[nodiscard]] std::string text(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr) fail(key, "missing");
    if (!v->is_string()) fail(key, std::string("expected a string, got ") + v->type_name());
    return v->get<std::string>();
  }
  [[nodiscard]] std::optional<std::string> optText(std::string_view key) const {
    if (find(key) == nullptr) return std::nullopt;
    return text(key);
  }
  [[nodiscard]] std::optional<double> optNumber(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(key, std::string("expected a number, got ") + v->type_name());
    return v->get<double>();
  }
  [[nodiscard]] bool optBool(std::string_view key, bool otherwise) const {
    const json* v = find(key);
    if (v == nullptr) return otherwise;
    if (!v->is_boolean()) fail(key, std::string("expected true or false, got ") + v->type_name());
    return v->get<bool>();
  }
  // An empty array when absent or null.
  [[nodiscard]] const json& optArray(std::string_view key) const {
    static const json empty = json::array();
    const json* v = find(key);
    if (v == nullptr) return empty;
    if (!v->is_array()) fail(key, std::string("expected an array, got ") + v->type_name());
    return *v;
  }
  [[nodiscard]] std::optional<Fields> optObject(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return Fields(*v, pathOf(key));
  }
  [[nodiscard]] const json& raw() const { return object_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  [[nodiscard]] std::string where() const { return path_.empty() ? "top level" : "field " + path_; }
  const json& object_;
  std::string path_;
};

std::string indexed(std::string_view path, std::string_view key, size_t i) {
  return (path.empty() ? std::string(key) : std::string(path) + "." + std::string(key)) + "[" +
         std::to_string(i) + "]";
}

// One sample per block; null where that launch failed.
std::vector<std::optional<double>> readSamples(const json& array, const std::string& path) {
  std::vector<std::optional<double>> out;
  if (array.is_null()) return out;
  if (!array.is_array()) throw Error("result file: field " + path + ": expected an array of numbers");
  for (size_t i = 0; i < array.size(); ++i) {
    if (array[i].is_null()) {
      out.emplace_back(std::nullopt);
    } else if (array[i].is_number()) {
      out.emplace_back(array[i].get<double>());
    } else {
      throw Error("result file: field " + path + "[" + std::to_string(i) + "]: expected a number or null, got " +
                  array[i].type_name());
    }
  }
  return out;
}

std::vector<double> validSamples(const std::vector<std::optional<double>>& samples) {
  std::vector<double> out;
  for (const auto& s : samples)
    if (s) out.push_back(*s);
  return out;
}

constexpr std::array<std::string_view, 6> kVerdicts = {"PASS", "FAIL", "FASTER", "INCONCLUSIVE", "ESTIMATE", "ERROR"};

struct Analysis {
  std::optional<int> nPairs;
  std::optional<double> overhead, ciLow, ciHigh, ciLevel, cvA, cvB, baselineSpread, minA, minB, medianA, medianB;
  // A stack delta (ESTIMATE): how many times faster B is than A, with its interval.
  std::optional<double> speedup, speedupLow, speedupHigh;
  std::string ciMethod;
  std::string verdict;  // one of kVerdicts, or "" when the FOM was never analysed
  std::string note;
};

struct FomError {
  std::string block;  // a block number, or a phase such as "warm-up"
  std::string side, message, stderrTail;
};

struct Fom {
  std::string name, unit, direction;
  std::optional<double> delta;
  std::vector<std::optional<double>> samplesA, samplesB;
  std::vector<FomError> errors;
  Analysis analysis;
};

struct Workload {
  std::string name, description, status, reason, stderrTail;
  std::string labelA = "A", labelB = "B";
  std::optional<double> durationS;
  std::vector<std::pair<std::string, std::string>> commands;  // side, command line
  std::vector<Fom> foms;
};

struct Series {
  std::string name;
  std::vector<double> samples;
  std::optional<double> median;
};

struct ScenarioPoint {
  std::string label;
  std::vector<double> samples;
  std::optional<double> median;
  std::optional<double> aggregate;  // concurrent copies: the node's total (copies x median)
  std::vector<FomError> errors;
  std::vector<std::pair<std::string, std::string>> extras;  // other scalar fields, as written
};

struct Scenario {
  std::string name, kind, workload, fom, unit;
  std::string skipped;  // why it did not run
  std::vector<ScenarioPoint> points;
};

struct Result {
  std::string mode, profile, benchVersion, started, finished, seed;
  bool interrupted = false;
  std::optional<double> alpha;  // each error rate of the rule (config.alpha)
  std::optional<int> exitStatus;
  json host, config;
  std::vector<Series> coldStart;  // empty: not measured
  std::vector<FomError> coldStartErrors;
  std::vector<Workload> workloads;
  std::vector<Scenario> scenarios;
};

std::string scalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "—";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string commandText(const json& command) {
  if (!command.is_array()) return scalarText(command);
  std::string out;
  for (const auto& arg : command) out += (out.empty() ? "" : " ") + scalarText(arg);
  return out;
}

Analysis readAnalysis(const Fields& f) {
  Analysis a;
  if (auto n = f.optNumber("n_pairs")) a.nPairs = static_cast<int>(*n);
  a.overhead = f.optNumber("overhead");
  if (const json* ci = f.find("ci")) {
    if (!ci->is_array() || ci->size() != 2) f.fail("ci", "expected [low, high]");
    if (!(*ci)[0].is_null()) {
      if (!(*ci)[0].is_number()) f.fail("ci", "expected numbers");
      a.ciLow = (*ci)[0].get<double>();
    }
    if (!(*ci)[1].is_null()) {
      if (!(*ci)[1].is_number()) f.fail("ci", "expected numbers");
      a.ciHigh = (*ci)[1].get<double>();
    }
  }
  a.ciMethod = f.optText("ci_method").value_or("");
  a.ciLevel = f.optNumber("ci_level");
  a.baselineSpread = f.optNumber("baseline_spread");
  if (auto sp = f.optObject("speedup")) {
    a.speedup = sp->optNumber("factor");
    if (const json* ci = sp->find("ci"); ci && ci->is_array() && ci->size() == 2 && (*ci)[0].is_number() && (*ci)[1].is_number()) {
      a.speedupLow = (*ci)[0].get<double>();
      a.speedupHigh = (*ci)[1].get<double>();
    }
  }
  a.cvA = f.optNumber("cv_a");
  a.cvB = f.optNumber("cv_b");
  if (auto m = f.optObject("min")) {
    a.minA = m->optNumber("A");
    a.minB = m->optNumber("B");
  }
  if (auto m = f.optObject("median")) {
    a.medianA = m->optNumber("A");
    a.medianB = m->optNumber("B");
  }
  a.verdict = f.optText("verdict").value_or("");
  if (!a.verdict.empty() && std::find(kVerdicts.begin(), kVerdicts.end(), a.verdict) == kVerdicts.end())
    f.fail("verdict", "'" + a.verdict + "' is not PASS, FAIL, FASTER, INCONCLUSIVE, ESTIMATE or ERROR");
  a.note = f.optText("note").value_or("");
  return a;
}

// sideKey: "side" (A or B) for a FOM's launches, "case" (bare, warm, cold) for cold start.
FomError readError(const Fields& e, std::string_view sideKey) {
  FomError err;
  if (const json* block = e.find("block")) err.block = scalarText(*block);
  err.side = e.optText(sideKey).value_or("");
  err.message = e.optText("message").value_or("");
  err.stderrTail = e.optText("stderr_tail").value_or("");
  return err;
}

Fom readFom(const Fields& f) {
  Fom fom;
  fom.name = f.text("name");
  fom.unit = f.optText("unit").value_or("");
  fom.direction = f.optText("direction").value_or("");
  fom.delta = f.optNumber("delta");
  if (auto s = f.optObject("samples")) {
    fom.samplesA = readSamples(s->raw().value("A", json()), s->pathOf("A"));
    fom.samplesB = readSamples(s->raw().value("B", json()), s->pathOf("B"));
  }
  const json& errors = f.optArray("errors");
  for (size_t i = 0; i < errors.size(); ++i) {
    fom.errors.push_back(readError(Fields(errors[i], indexed(f.path(), "errors", i)), "side"));
  }
  if (auto a = f.optObject("analysis")) fom.analysis = readAnalysis(*a);
  return fom;
}

Workload readWorkload(const Fields& f) {
  Workload w;
  w.name = f.text("name");
  w.description = f.optText("description").value_or("");
  w.status = f.optText("status").value_or("ok");
  if (w.status != "ok" && w.status != "skipped" && w.status != "error")
    f.fail("status", "'" + w.status + "' is not ok, skipped or error");
  w.reason = f.optText("reason").value_or("");
  w.stderrTail = f.optText("stderr_tail").value_or("");
  if (auto labels = f.optObject("labels")) {
    w.labelA = labels->optText("A").value_or("A");
    w.labelB = labels->optText("B").value_or("B");
  }
  w.durationS = f.optNumber("duration_s");
  if (auto commands = f.optObject("commands"))
    for (const auto& [side, command] : commands->raw().items()) w.commands.emplace_back(side, commandText(command));
  const json& foms = f.optArray("foms");
  for (size_t i = 0; i < foms.size(); ++i) w.foms.push_back(readFom(Fields(foms[i], indexed(f.path(), "foms", i))));
  return w;
}

std::vector<Series> readColdStart(const Fields& f) {
  std::vector<Series> out;
  auto samples = f.optObject("samples_s");
  auto medians = f.optObject("median_s");
  // bare, warm, cold first (the story: process, ctr warm, ctr first launch), then any other.
  std::vector<std::string> names = {"bare", "warm", "cold"};
  for (const auto* obj : {samples ? &samples->raw() : nullptr, medians ? &medians->raw() : nullptr}) {
    if (obj == nullptr) continue;
    for (const auto& [key, value] : obj->items())
      if (std::find(names.begin(), names.end(), key) == names.end()) names.push_back(key);
  }
  for (const auto& name : names) {
    Series s{name, {}, std::nullopt};
    if (samples && samples->find(name)) s.samples = validSamples(readSamples(samples->raw()[name], samples->pathOf(name)));
    if (medians) s.median = medians->optNumber(name);
    // A launch kind that was tried and never succeeded stays in, with no value: its errors say why.
    if ((samples && samples->raw().contains(name)) || (medians && medians->raw().contains(name))) out.push_back(std::move(s));
  }
  return out;
}

std::string formatValue(std::optional<double> v);

Scenario readScenario(const Fields& f) {
  Scenario sc;
  sc.name = f.text("name");
  sc.kind = f.optText("kind").value_or("");
  sc.workload = f.optText("workload").value_or("");
  sc.fom = f.optText("fom").value_or("");
  sc.unit = f.optText("unit").value_or("");
  sc.skipped = f.optText("skipped").value_or("");
  const json& points = f.optArray("points");
  for (size_t i = 0; i < points.size(); ++i) {
    Fields p(points[i], indexed(f.path(), "points", i));
    ScenarioPoint pt;
    // The step a point stands for: a limit ("--cpus 0.5"), a number of copies, or a label.
    if (auto limit = p.find("limit")) pt.label = scalarText(*limit);
    else if (auto copies = p.find("copies")) pt.label = scalarText(*copies) + (scalarText(*copies) == "1" ? " copy" : " copies");
    else if (auto label = p.find("label")) pt.label = scalarText(*label);
    else pt.label = "point " + std::to_string(i);
    if (p.find("samples")) pt.samples = validSamples(readSamples(p.raw()["samples"], p.pathOf("samples")));
    pt.median = p.optNumber("median");
    pt.aggregate = p.optNumber("aggregate");
    const json& errors = p.optArray("errors");
    for (size_t e = 0; e < errors.size(); ++e) pt.errors.push_back(readError(Fields(errors[e], indexed(p.path(), "errors", e)), "side"));
    for (const auto& [key, value] : p.raw().items()) {
      if (key == "limit" || key == "copies" || key == "label" || key == "samples" || key == "median") continue;
      if (value.is_number()) pt.extras.emplace_back(key, formatValue(value.get<double>()));
      else if (value.is_primitive()) pt.extras.emplace_back(key, scalarText(value));
    }
    sc.points.push_back(std::move(pt));
  }
  return sc;
}

Result readResult(const json& doc) {
  Fields top(doc, "");
  Result r;
  r.mode = top.text("mode");
  if (r.mode != "runtime-overhead" && r.mode != "image-vs-host" && r.mode != "image-vs-image")
    top.fail("mode", "'" + r.mode + "' is not runtime-overhead, image-vs-host or image-vs-image");
  r.profile = top.optText("profile").value_or("");
  r.benchVersion = top.optText("ctr_bench_version").value_or("");
  r.started = top.optText("started").value_or("");
  r.finished = top.optText("finished").value_or("");
  if (const json* seed = top.find("seed")) r.seed = scalarText(*seed);
  r.interrupted = top.optBool("interrupted", false);
  if (const json* host = top.find("host")) r.host = *host;
  if (auto config = top.optObject("config")) {
    r.config = config->raw();
    r.alpha = config->optNumber("alpha");
  }
  if (auto summary = top.optObject("summary"))
    if (auto status = summary->optNumber("exit_status")) r.exitStatus = static_cast<int>(*status);
  if (auto cold = top.optObject("cold_start")) {
    r.coldStart = readColdStart(*cold);
    const json& errors = cold->optArray("errors");
    for (size_t i = 0; i < errors.size(); ++i)
      r.coldStartErrors.push_back(readError(Fields(errors[i], indexed("cold_start", "errors", i)), "case"));
  }
  if (top.find("workloads") == nullptr) top.fail("workloads", "missing");
  const json& workloads = top.optArray("workloads");
  for (size_t i = 0; i < workloads.size(); ++i) r.workloads.push_back(readWorkload(Fields(workloads[i], indexed("", "workloads", i))));
  const json& scenarios = top.optArray("scenarios");
  for (size_t i = 0; i < scenarios.size(); ++i) r.scenarios.push_back(readScenario(Fields(scenarios[i], indexed("", "scenarios", i))));
  // A scenario names its FOM; the unit is the workload's.
  for (auto& sc : r.scenarios)
    for (const auto& w : r.workloads)
      for (const auto& f : w.foms)
        if (sc.unit.empty() && f.name == sc.fom && (sc.workload.empty() || w.name == sc.workload)) sc.unit = f.unit;
  return r;
}

// ---- Formatting shared by both outputs.

// "%.*f", with a leading sign when asked.
std::string fixed(double value, int decimals, bool sign = false) {
  std::array<char, 64> buf{};
  if (sign) std::snprintf(buf.data(), buf.size(), "%+.*f", decimals, value);
  else std::snprintf(buf.data(), buf.size(), "%.*f", decimals, value);
  return buf.data();
}

// Four significant digits without an exponent in the range figures of merit live in.
std::string formatValue(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "—";
  double a = std::fabs(*v);
  if (a == 0) return "0";
  if (a >= 1e7 || a < 1e-3) {
    std::array<char, 64> buf{};
    std::snprintf(buf.data(), buf.size(), "%.3e", *v);
    return buf.data();
  }
  return fixed(*v, std::max(0, 3 - static_cast<int>(std::floor(std::log10(a)))));
}

std::string formatPercent(std::optional<double> fraction) {
  if (!fraction || !std::isfinite(*fraction)) return "—";
  return fixed(*fraction * 100, 2, true) + "%";
}

std::string formatCi(const Analysis& a) {
  if (!a.ciLow && !a.ciHigh) return "—";
  std::string level = a.ciLevel ? " (" + fixed(*a.ciLevel * 100, 1) + "%)" : "";
  return "[" + formatPercent(a.ciLow) + ", " + formatPercent(a.ciHigh) + "]" + level;
}

// "image stack 12.1x faster [11.0, 13.4]": a stack delta, never an overhead verdict.
std::string formatSpeedup(const Analysis& a) {
  if (!a.speedup) return "";
  const bool faster = *a.speedup >= 1;
  auto x = [&](double v) { return fixed(faster ? v : 1 / v, 2) + "x"; };
  std::string out = "B " + x(*a.speedup) + (faster ? " faster" : " slower");
  if (a.speedupLow && a.speedupHigh)
    out += " [" + fixed(faster ? *a.speedupLow : 1 / *a.speedupHigh, 2) + ", " + fixed(faster ? *a.speedupHigh : 1 / *a.speedupLow, 2) + "]";
  return out;
}

// The note column: the stack delta where there is one, then the analysis's note.
std::string rowNote(const Analysis& a) {
  std::string sp = formatSpeedup(a);
  if (sp.empty()) return a.note;
  return a.note.empty() ? sp : sp + "; " + a.note;
}

std::string formatDelta(std::optional<double> delta) {
  if (!delta) return "—";
  return "±" + fixed(*delta * 100, 1) + "%";
}

std::string formatDuration(double seconds) {
  auto s = static_cast<long>(std::lround(seconds));
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

// "2026-11-23T19:40:00Z" (the writer's UTC form); nullopt for anything else.
std::optional<std::time_t> parseUtc(const std::string& text) {
  std::tm tm{};
  char zone = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &zone) != 7 || zone != 'Z')
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return timegm(&tm);
}

std::optional<double> runDuration(const Result& r) {
  auto start = parseUtc(r.started);
  auto end = parseUtc(r.finished);
  if (!start || !end || *end < *start) return std::nullopt;
  return std::difftime(*end, *start);
}

std::string confidenceLabel(const Result&) { return "Interval (level)"; }

// The rule in one sentence, for both renderings (docs/benchmark-guide.md).
std::string ruleText(const Result& r) {
  if (r.mode != "runtime-overhead")
    return "B against A as an estimate with its distribution-free interval (ESTIMATE): two builds are meant to "
           "differ, so there is no overhead verdict.";
  std::string alpha = fixed(r.alpha.value_or(0.05) * 100, 1) + "%";
  return "Overhead = B against A, positive = B worse (B/A-1 for times, A/B-1 for rates): the median of the per-block "
         "ratios with its distribution-free interval (level in brackets). PASS when the interval lies within ±delta "
         "(at least 10 pairs, and the bare runs' own spread within delta), FAIL when it lies above +delta, FASTER "
         "when it lies below -delta, otherwise INCONCLUSIVE. Each wrong verdict (PASS at an overhead beyond delta, "
         "FAIL at none) has a probability of at most " + alpha + " over all the run's looks.";
}

struct Question {
  std::string title, explanation;
};

// The three questions are never mixed (bench-method.md, "The question, twice").
Question questionOf(const std::string& mode) {
  if (mode == "runtime-overhead")
    return {"Runtime overhead",
            "the same binaries and libraries run bare (A) and through ctr (B). A verdict here is the cost of "
            "the container runtime itself."};
  if (mode == "image-vs-host")
    return {"Image stack delta (image vs host)",
            "the image's own build of each workload (B) against the host's build (A). Differences are those of "
            "the software stacks (compiler, libraries, flags), not a runtime overhead of ctr."};
  return {"Image vs image",
          "two images' builds of one application, A against B (e.g. a generic and an optimised build). "
          "Differences are those of the images, not a runtime overhead of ctr."};
}

// Distinct "A = x, B = y" pairs across the workloads that ran.
std::vector<std::pair<std::string, std::string>> labelPairs(const Result& r) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    std::pair<std::string, std::string> p{w.labelA, w.labelB};
    if (std::find(pairs.begin(), pairs.end(), p) == pairs.end()) pairs.push_back(p);
  }
  return pairs;
}

struct Counts {
  int pass = 0, fail = 0, faster = 0, inconclusive = 0, estimate = 0, error = 0, unanalysed = 0, skipped = 0;
};

// The verdict a FOM row shows: the analysis's, ERROR for a FOM of a failed workload
// without one, "" when it was never analysed (an interrupted run).
std::string rowVerdict(const Workload& w, const Fom& f) {
  if (!f.analysis.verdict.empty()) return f.analysis.verdict;
  return w.status == "error" ? "ERROR" : "";
}

Counts countVerdicts(const Result& r) {
  Counts c;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") {
      ++c.skipped;
      continue;
    }
    if (w.foms.empty() && w.status == "error") ++c.error;
    for (const auto& f : w.foms) {
      std::string v = rowVerdict(w, f);
      if (v == "PASS") ++c.pass;
      else if (v == "FAIL") ++c.fail;
      else if (v == "INCONCLUSIVE") ++c.inconclusive;
      else if (v == "FASTER") ++c.faster;
      else if (v == "ESTIMATE") ++c.estimate;
      else if (v == "ERROR") ++c.error;
      else ++c.unanalysed;
    }
  }
  return c;
}

// Host facts an admin looks for first; the full fingerprint follows in a table.
std::vector<std::pair<std::string, std::string>> flatten(const json& value, const std::string& prefix = "") {
  std::vector<std::pair<std::string, std::string>> out;
  if (value.is_object()) {
    for (const auto& [key, v] : value.items()) {
      std::string name = prefix.empty() ? key : prefix + "." + key;
      if ((v.is_object() || v.is_array()) && !v.empty()) {
        auto inner = flatten(v, name);
        out.insert(out.end(), inner.begin(), inner.end());
      } else {
        out.emplace_back(name, scalarText(v));
      }
    }
  } else if (value.is_array()) {
    // A list of records ("checks": [{"name": ..., "status": ...}]) reads best keyed by name;
    // a list of plain values as one line.
    bool records = std::all_of(value.begin(), value.end(), [](const json& e) { return e.is_object(); });
    if (!records) {
      std::string line;
      for (const auto& e : value) line += (line.empty() ? "" : ", ") + scalarText(e);
      out.emplace_back(prefix, line);
      return out;
    }
    for (size_t i = 0; i < value.size(); ++i) {
      json record = value[i];
      std::string label = std::to_string(i);
      if (record.contains("name") && record["name"].is_string()) {
        label = record["name"].get<std::string>();
        record.erase("name");
      }
      auto inner = flatten(record, prefix + "[" + label + "]");
      out.insert(out.end(), inner.begin(), inner.end());
    }
  } else if (!value.is_null()) {
    out.emplace_back(prefix.empty() ? "value" : prefix, scalarText(value));
  }
  return out;
}

std::string hostSummary(const json& host) {
  if (!host.is_object()) return "not recorded";
  auto flat = flatten(host);
  auto pick = [&](std::initializer_list<std::string_view> keys) -> std::string {
    for (auto key : keys)
      for (const auto& [k, v] : flat)
        if (k == key && v != "—" && !v.empty()) return v.substr(0, v.find('\n'));  // a tool's first line
    return "";
  };
  std::vector<std::string> parts;
  auto add = [&](const std::string& value, const std::string& suffix = "") {
    if (!value.empty()) parts.push_back(value + suffix);
  };
  add(pick({"hostname", "host"}));
  add(pick({"cpu_model", "cpu.model", "cpu"}));
  add(pick({"cores", "cpu.cores", "cpus", "ncpus"}), " cores");
  if (std::string numa = pick({"numa_nodes", "numa.nodes", "numa"}); !numa.empty())
    add(numa + (numa == "1" ? " NUMA node" : " NUMA nodes"));
  if (std::string bytes = pick({"memory_bytes"}); !bytes.empty() && bytes.find_first_not_of("0123456789") == std::string::npos)
    add(fixed(std::stod(bytes) / (1024.0 * 1024 * 1024), 1) + " GiB");
  else
    add(pick({"memory", "mem_total", "memory_total", "memory.total"}));
  if (std::string kernel = pick({"kernel", "os.kernel"}); !kernel.empty()) add("kernel " + kernel);
  std::string gpu = pick({"gpu.model", "gpu_model", "gpu.name"});
  if (!gpu.empty()) {
    std::string driver = pick({"gpu.driver", "gpu_driver", "driver"});
    add(gpu + (driver.empty() ? "" : " (driver " + driver + ")"));
  } else if (host.contains("gpu")) {
    add("no GPU");
  }
  if (std::string ctr = pick({"ctr_version", "ctr.version"}); !ctr.empty()) add(ctr.rfind("ctr", 0) == 0 ? ctr : "ctr " + ctr);
  if (parts.empty()) return "see the fingerprint below";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// ---- Markdown

// Text from the result file (names, notes, reasons) is written so that Markdown renders
// it literally: no emphasis, no links, no inline HTML, no table cells split by '|'.
std::string mdText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
      continue;
    }
    if (std::string_view("\\`*_[]<>|&#!").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A fenced block longer than any backtick run in the text, so stderr cannot close it.
std::string mdCodeBlock(std::string_view text) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  std::string fence(std::max<size_t>(3, longest + 1), '`');
  std::string body(text);
  if (!body.empty() && body.back() != '\n') body += '\n';
  return fence + "text\n" + body + fence + "\n";
}

std::string verdictMd(const std::string& verdict) {
  return verdict.empty() ? "— (not analysed)" : "**" + verdict + "**";
}

std::string describeCounts(const Counts& c) {
  std::string s = std::to_string(c.pass) + " PASS, " + std::to_string(c.fail) + " FAIL, " +
                  std::to_string(c.faster) + " FASTER, " + std::to_string(c.inconclusive) + " INCONCLUSIVE, " +
                  (c.estimate ? std::to_string(c.estimate) + " ESTIMATE, " : std::string()) + std::to_string(c.error) +
                  " ERROR, " + std::to_string(c.skipped) + " skipped";
  if (c.unanalysed > 0) s += ", " + std::to_string(c.unanalysed) + " not analysed";
  return s;
}

std::string errorHeading(const FomError& e, std::string_view sideWord = "side") {
  std::string where;
  if (!e.block.empty())
    where = e.block.find_first_not_of("0123456789") == std::string::npos ? "block " + e.block : e.block;
  if (!e.side.empty()) where += (where.empty() ? "" : ", ") + std::string(sideWord) + " " + e.side;
  return where;
}

}  // namespace

std::string renderMarkdown(const json& resultJson) {
  const Result r = readResult(resultJson);
  const Question q = questionOf(r.mode);
  const Counts counts = countVerdicts(r);
  std::ostringstream md;

  md << "# ctr-bench report: " << mdText(q.title) << "\n\n";
  md << "**Question answered by this run** (mode `" << r.mode << "`): " << q.title << ": " << q.explanation << "\n\n";
  if (r.interrupted)
    md << "> **Interrupted:** this run was stopped before it finished; the figures below use the blocks "
          "completed so far.\n\n";
  md << "- Host: " << mdText(hostSummary(r.host)) << "\n";
  md << "- Profile: " << (r.profile.empty() ? "—" : mdText(r.profile));
  auto duration = runDuration(r);
  md << "; duration: " << (duration ? formatDuration(*duration) : "—");
  md << " (" << (r.started.empty() ? "—" : mdText(r.started)) << " to " << (r.finished.empty() ? "—" : mdText(r.finished))
     << ")";
  md << "; interrupted: " << (r.interrupted ? "**yes**" : "no") << "\n";
  for (const auto& [a, b] : labelPairs(r)) md << "- A = " << mdText(a) << ", B = " << mdText(b) << "\n";
  if (!r.seed.empty()) md << "- Seed: " << mdText(r.seed) << "\n";
  if (!r.benchVersion.empty()) md << "- ctr-bench version: " << mdText(r.benchVersion) << "\n";
  md << "- Verdicts: " << describeCounts(counts);
  if (r.exitStatus) md << "; exit status " << *r.exitStatus;
  md << "\n\n";

  md << "## Results\n\n";
  md << ruleText(r) << "\n\n";
  md << "| Workload | FOM | Unit | A median | B median | Overhead | " << confidenceLabel(r)
     << " | Delta | n | Verdict | Note |\n";
  md << "|---|---|---|---:|---:|---:|---|---:|---:|---|---|\n";
  bool anyRow = false;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    if (w.foms.empty()) {
      md << "| " << mdText(w.name) << " | — | — | — | — | — | — | — | — | " << verdictMd(w.status == "error" ? "ERROR" : "")
         << " | " << mdText(w.reason.empty() ? "no figure of merit reported" : w.reason) << " |\n";
      anyRow = true;
      continue;
    }
    for (const auto& f : w.foms) {
      const Analysis& a = f.analysis;
      md << "| " << mdText(w.name) << " | " << mdText(f.name) << " | " << mdText(f.unit) << " | "
         << formatValue(a.medianA) << " | " << formatValue(a.medianB) << " | " << formatPercent(a.overhead) << " | "
         << formatCi(a) << " | " << formatDelta(f.delta) << " | " << (a.nPairs ? std::to_string(*a.nPairs) : "—") << " | "
         << verdictMd(rowVerdict(w, f)) << " | " << mdText(rowNote(a)) << " |\n";
      anyRow = true;
    }
  }
  if (!anyRow) md << "| (no workload ran) | | | | | | | | | | |\n";
  md << "\n";

  std::vector<const Workload*> skipped;
  for (const auto& w : r.workloads)
    if (w.status == "skipped") skipped.push_back(&w);
  if (!skipped.empty()) {
    md << "## Skipped workloads\n\n";
    for (const auto* w : skipped)
      md << "- **" << mdText(w->name) << "**: " << mdText(w->reason.empty() ? "no reason given" : w->reason) << "\n";
    md << "\n";
  }

  std::ostringstream errors;
  for (const auto& w : r.workloads) {
    if (w.status == "error") {
      errors << "### " << mdText(w.name) << "\n\n" << mdText(w.reason.empty() ? "the workload failed" : w.reason) << "\n\n";
      if (!w.stderrTail.empty()) errors << mdCodeBlock(w.stderrTail) << "\n";
    }
    for (const auto& f : w.foms) {
      for (const auto& e : f.errors) {
        std::string where = errorHeading(e);
        errors << "### " << mdText(w.name) << " / " << mdText(f.name) << (where.empty() ? "" : " (" + where + ")")
               << "\n\n" << mdText(e.message.empty() ? "failed" : e.message) << "\n\n";
        if (!e.stderrTail.empty()) errors << mdCodeBlock(e.stderrTail) << "\n";
      }
    }
  }
  for (const auto& sc : r.scenarios)
    for (const auto& p : sc.points)
      for (const auto& e : p.errors) {
        errors << "### scenario " << mdText(sc.name) << ", " << mdText(p.label) << "\n\n"
               << mdText(e.message.empty() ? "failed" : e.message) << "\n\n";
        if (!e.stderrTail.empty()) errors << mdCodeBlock(e.stderrTail) << "\n";
      }
  for (const auto& e : r.coldStartErrors) {
    errors << "### cold start (" << mdText(errorHeading(e, "launch")) << ")\n\n" << mdText(e.message.empty() ? "failed" : e.message)
           << "\n\n";
    if (!e.stderrTail.empty()) errors << mdCodeBlock(e.stderrTail) << "\n";
  }
  if (!errors.str().empty()) md << "## Errors\n\n" << errors.str();

  md << "## Cold start\n\n";
  if (r.coldStart.empty()) {
    md << "Not measured in this run.\n\n";
  } else {
    md << "First launch after an image mount (cold) against later launches (warm) and the bare process.\n\n";
    md << "| Launch | Median | Samples |\n|---|---:|---:|\n";
    for (const auto& s : r.coldStart) {
      std::optional<double> ms;
      if (s.median) ms = *s.median * 1000;
      md << "| " << mdText(s.name) << " | " << (ms ? formatValue(ms) + " ms" : "—") << " | " << s.samples.size() << " |\n";
    }
    md << "\n";
  }

  if (!r.scenarios.empty()) {
    md << "## Scenarios\n\n";
    for (const auto& sc : r.scenarios) {
      md << "### " << mdText(sc.name) << "\n\n";
      std::string about;
      if (!sc.kind.empty()) about += mdText(sc.kind);
      if (!sc.workload.empty())
        about += (about.empty() ? "" : "; ") + mdText(sc.workload) + (sc.fom.empty() ? "" : " / " + mdText(sc.fom));
      if (!sc.unit.empty()) about += (about.empty() ? "" : "; ") + mdText(sc.unit);
      if (!about.empty()) md << about << "\n\n";
      if (!sc.skipped.empty()) {
        md << "Skipped: " << mdText(sc.skipped) << "\n\n";
        continue;
      }
      std::vector<std::string> extraKeys;
      for (const auto& p : sc.points)
        for (const auto& [k, v] : p.extras)
          if (std::find(extraKeys.begin(), extraKeys.end(), k) == extraKeys.end()) extraKeys.push_back(k);
      md << "| Step | Median | Samples |";
      for (const auto& k : extraKeys) md << " " << mdText(k) << " |";
      md << "\n|---|---:|---:|";
      for (size_t i = 0; i < extraKeys.size(); ++i) md << "---|";
      md << "\n";
      for (const auto& p : sc.points) {
        md << "| " << mdText(p.label) << " | " << formatValue(p.median) << " | " << p.samples.size() << " |";
        for (const auto& k : extraKeys) {
          auto it = std::find_if(p.extras.begin(), p.extras.end(), [&](const auto& e) { return e.first == k; });
          md << " " << (it == p.extras.end() ? "—" : mdText(it->second)) << " |";
        }
        md << "\n";
      }
      md << "\n";
    }
  }

  md << "## Host fingerprint\n\n";
  auto flat = flatten(r.host);
  if (flat.empty()) md << "Not recorded.\n";
  for (const auto& [k, v] : flat) {
    if (v.find('\n') == std::string::npos) md << "- " << mdText(k) << ": " << mdText(v) << "\n";
    else md << "- " << mdText(k) << ":\n\n" << mdCodeBlock(v) << "\n";
  }
  return md.str();
}

namespace {

// ---- HTML

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON placed inside <script>: '<', '>' and '&' only occur inside strings there, where
// \u escapes mean the same, so no "</script>" or "<!--" from the data can reach the parser.
std::string jsonForScript(const json& value) {
  std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

// Debian ships Vega as one UMD file per package (no single vega.min.js), and their browser
// globals overwrite each other; so the page loads them through a small CommonJS-style
// require() instead. These are the packages the report's charts need, in require() names.
struct VegaModule {
  std::string_view requireName, file;
};
constexpr std::array<VegaModule, 19> kVegaModules = {{
    {"vega-util", "vega-util.min.js"},
    {"vega-time", "vega-time.min.js"},
    {"vega-format", "vega-format.min.js"},
    {"vega-loader", "vega-loader.min.js"},
    {"vega-dataflow", "vega-dataflow.min.js"},
    {"vega-scale", "vega-scale.min.js"},
    {"vega-canvas", "vega-canvas.min.js"},
    {"vega-scenegraph", "vega-scenegraph.min.js"},
    {"vega-expression", "vega-expression.min.js"},
    {"vega-event-selector", "vega-event-selector.min.js"},
    {"vega-statistics", "vega-statistics.min.js"},
    {"vega-selections", "vega-selection.min.js"},  // upstream's package name; Debian's file name
    {"vega-functions", "vega-functions.min.js"},
    {"vega-runtime", "vega-runtime.min.js"},
    {"vega-view", "vega-view.min.js"},
    {"vega-parser", "vega-parser.min.js"},
    {"vega-transforms", "vega-transforms.min.js"},
    {"vega-view-transforms", "vega-view-transforms.min.js"},
    {"vega-encode", "vega-encode.min.js"},
}};

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool containsNoCase(std::string_view haystack, std::string_view needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  return it != haystack.end();
}

// One <script> body that defines ctrBenchVega(): the Vega API as the upstream "vega"
// bundle assembles it (every package's exports, and the dataflow's transforms registry
// extended with the transform packages).
std::string inlineVega() {
  const fs::path dir = vegaDirectory();
  std::string js = "function ctrBenchVega() {\n'use strict';\nvar factories = {};\n";
  for (const auto& m : kVegaModules) {
    const fs::path file = dir / m.file;
    if (!fs::is_regular_file(file))
      throw Error("Vega is not installed: " + file.string() +
                  " is missing (install Debian's libjs-vega, or set CTR_BENCH_VEGA_DIR to its directory)");
    std::string code = readFile(file);
    if (containsNoCase(code, "</script") || code.find("<!--") != std::string::npos)
      throw Error(file.string() + " contains '</script' or '<!--' and cannot be inlined in the report");
    // The map file is not inlined; a browser asking for it would leave the self-contained page.
    for (size_t at = code.find("//# sourceMappingURL="); at != std::string::npos; at = code.find("//# sourceMappingURL=", at))
      code.replace(at, 3, "// ");
    js += "factories['" + std::string(m.requireName) + "'] = function (exports, module, require) {\n" + code +
          "\n};\n";
  }
  js += R"JS(var cache = {};
function require(name) {
  if (cache[name]) return cache[name].exports;
  var factory = factories[name];
  if (!factory) throw new Error('Vega package ' + name + ' is not inlined in this report');
  var module = {exports: {}};
  cache[name] = module;
  factory.call(globalThis, module.exports, module, require);
  return module.exports;
}
var vega = {};
Object.keys(factories).forEach(function (name) { Object.assign(vega, require(name)); });
var transforms = require('vega-dataflow').transforms;
['vega-transforms', 'vega-view-transforms', 'vega-encode'].forEach(function (name) {
  Object.assign(transforms, require(name));
});
return vega;
}
)JS";
  return js;
}

// Renders every plot into its container with the SVG renderer and reports on <body>:
// data-plots-expected, data-plots-rendered and data-plots-failed (ids, space-separated), so
// a headless browser's DOM tells whether each chart drew.
constexpr std::string_view kRenderScript = R"JS((function () {
  'use strict';
  var body = document.body;
  var plots = JSON.parse(document.getElementById('ctr-bench-plots').textContent);
  body.dataset.plotsExpected = String(plots.length);
  function fail(plot, message) {
    var el = document.getElementById(plot.id);
    if (el) {
      el.classList.add('plot-failed');
      el.textContent = 'This plot failed to render: ' + message;
    }
    return plot.id;
  }
  function finish(failed) {
    body.dataset.plotsFailed = failed.join(' ');
    body.dataset.plotsRendered = String(plots.length - failed.length);
  }
  var vega;
  try {
    vega = ctrBenchVega();
  } catch (e) {
    finish(plots.map(function (p) { return fail(p, 'Vega did not load: ' + e); }));
    return;
  }
  Promise.all(plots.map(function (plot) {
    var errors = [];
    var logger = vega.logger(vega.Warn);
    logger.error = function () { errors.push(Array.prototype.join.call(arguments, ' ')); return logger; };
    return Promise.resolve().then(function () {
      var view = new vega.View(vega.parse(plot.spec), {renderer: 'svg', container: '#' + plot.id, hover: true, logger: logger});
      return view.runAsync();
    }).then(function () {
      if (errors.length) return fail(plot, errors.join('; '));
      if (!document.querySelector('#' + plot.id + ' svg')) return fail(plot, 'no SVG was drawn');
      return null;
    }, function (e) {
      return fail(plot, (e && e.message) || String(e));
    });
  })).then(function (results) {
    finish(results.filter(function (id) { return id !== null; }));
  });
})();
)JS";

// ---- Vega specifications, one per plot.

const json kVerdictScale = {{"name", "verdict"},
                            {"type", "ordinal"},
                            {"domain", {"PASS", "FAIL", "FASTER", "INCONCLUSIVE", "ESTIMATE", "ERROR", "not analysed"}},
                            {"range", {"#2e7d32", "#c62828", "#1565c0", "#e08a00", "#4c78a8", "#6a1b9a", "#757575"}}};

json baseSpec(int width, int height, const std::string& title, const std::vector<std::string>& subtitle) {
  json titleJson = {{"text", title}, {"anchor", "start"}, {"fontSize", 14}, {"subtitleFontSize", 11},
                    {"subtitleColor", "#555"}, {"limit", width + 60}};
  if (!subtitle.empty()) titleJson["subtitle"] = subtitle;
  return {{"width", width},
          {"height", height},
          {"padding", 6},
          {"autosize", {{"type", "pad"}}},
          {"title", titleJson},
          {"config", {{"axis", {{"labelFontSize", 11}, {"titleFontSize", 11}, {"gridColor", "#e6e6e6"}}}}}};
}

// Spreads a block's sample sideways (a few pixels, fixed per block) so equal values stay visible.
double jitter(size_t block) { return static_cast<double>(static_cast<long>(block * 7 % 11) - 5) * 2.2; }

std::string sideLabel(const std::string& label, char side) { return label + " (" + side + ")"; }

json distributionSpec(const Workload& w, const Fom& f) {
  const std::string a = sideLabel(w.labelA, 'A'), b = sideLabel(w.labelB, 'B');
  json values = json::array();
  for (const auto& [label, samples] : {std::pair{a, &f.samplesA}, std::pair{b, &f.samplesB}})
    for (size_t block = 0; block < samples->size(); ++block)
      if ((*samples)[block] && std::isfinite(*(*samples)[block]))
        values.push_back({{"side", label}, {"value", *(*samples)[block]}, {"block", block}, {"j", jitter(block)}});

  std::string verdict = rowVerdict(w, f);
  std::string line = (verdict.empty() ? "not analysed" : verdict) + " · overhead " + formatPercent(f.analysis.overhead) +
                     " " + formatCi(f.analysis) + " · delta " + formatDelta(f.delta);
  std::string unit = f.unit + (f.direction == "higher" ? " (higher is better)" : f.direction == "lower" ? " (lower is better)" : "");
  json spec = baseSpec(300, 210, w.name + " · " + f.name, {line});
  spec["data"] = {
      {{"name", "samples"}, {"values", values}},
      {{"name", "stats"},
       {"source", "samples"},
       {"transform",
        {{{"type", "aggregate"},
          {"groupby", {"side"}},
          {"ops", {"min", "q1", "median", "q3", "max", "count"}},
          {"fields", {"value", "value", "value", "value", "value", "value"}},
          {"as", {"min", "q1", "median", "q3", "max", "n"}}}}}}};
  json y = {{"name", "y"}, {"type", "linear"}, {"range", "height"}, {"zero", false}, {"nice", true}};
  if (values.empty()) y["domain"] = {0, 1};
  else y["domain"] = {{"data", "samples"}, {"field", "value"}};
  spec["scales"] = {{{"name", "x"}, {"type", "band"}, {"domain", {a, b}}, {"range", "width"}, {"padding", 0.35}},
                    y,
                    {{"name", "color"}, {"type", "ordinal"}, {"domain", {a, b}}, {"range", {"#4c78a8", "#f58518"}}}};
  spec["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"labelLimit", 150}},
                  {{"orient", "left"}, {"scale", "y"}, {"title", unit}, {"grid", true}, {"tickCount", 6}}};
  json xCenter = {{"scale", "x"}, {"field", "side"}, {"band", 0.5}};
  spec["marks"] = {
      {{"type", "rule"},
       {"from", {{"data", "stats"}}},
       {"encode", {{"enter", {{"x", xCenter}, {"y", {{"scale", "y"}, {"field", "min"}}}, {"y2", {{"scale", "y"}, {"field", "max"}}},
                              {"stroke", {{"value", "#777"}}}}}}}},
      {{"type", "rect"},
       {"from", {{"data", "stats"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "side"}, {"band", 0.12}}},
           {"x2", {{"scale", "x"}, {"field", "side"}, {"band", 0.88}}},
           {"y", {{"scale", "y"}, {"field", "q1"}}},
           {"y2", {{"scale", "y"}, {"field", "q3"}}},
           {"fill", {{"scale", "color"}, {"field", "side"}}},
           {"fillOpacity", {{"value", 0.18}}},
           {"stroke", {{"scale", "color"}, {"field", "side"}}},
           {"tooltip", {{"signal", "{'median': format(datum.median, '.4~g'), 'IQR': format(datum.q1, '.4~g') + ' – ' + format(datum.q3, '.4~g'), 'n': datum.n}"}}}}}}}},
      {{"type", "rect"},
       {"from", {{"data", "stats"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "side"}, {"band", 0.05}}},
           {"x2", {{"scale", "x"}, {"field", "side"}, {"band", 0.95}}},
           {"yc", {{"scale", "y"}, {"field", "median"}}},
           {"height", {{"value", 2.5}}},
           {"fill", {{"value", "#222"}}}}}}}},
      {{"type", "symbol"},
       {"from", {{"data", "samples"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "side"}, {"band", 0.5}, {"offset", {{"field", "j"}}}}},
           {"y", {{"scale", "y"}, {"field", "value"}}},
           {"size", {{"value", 34}}},
           {"fill", {{"scale", "color"}, {"field", "side"}}},
           {"fillOpacity", {{"value", 0.85}}},
           {"stroke", {{"value", "white"}}},
           {"strokeWidth", {{"value", 0.6}}},
           {"tooltip", {{"signal", "{'block': datum.block, 'value': format(datum.value, '.5~g')}"}}}}}}}}};
  if (values.empty())
    spec["marks"].push_back({{"type", "text"},
                             {"encode",
                              {{"enter",
                                {{"x", {{"signal", "width / 2"}}},
                                 {"y", {{"signal", "height / 2"}}},
                                 {"align", {{"value", "center"}}},
                                 {"fill", {{"value", "#6a1b9a"}}},
                                 {"fontSize", {{"value", 13}}},
                                 {"text", {{"value", "no valid samples"}}}}}}}});
  return spec;
}

json overviewSpec(const Result& r) {
  json rows = json::array();
  json names = json::array();
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    for (const auto& f : w.foms) {
      std::string row = w.name + " · " + f.name;
      // Two FOMs may share a display name; the band scale needs distinct rows.
      while (std::find(names.begin(), names.end(), row) != names.end()) row += " ";
      names.push_back(row);
      std::string verdict = rowVerdict(w, f);
      const Analysis& a = f.analysis;
      auto pct = [](std::optional<double> v) { return v && std::isfinite(*v) ? json(*v * 100) : json(); };
      json item = {{"row", row},
                   {"o", pct(a.overhead)},
                   {"lo", pct(a.ciLow)},
                   {"hi", pct(a.ciHigh)},
                   {"dn", f.delta ? json(-*f.delta * 100) : json()},
                   {"dp", f.delta ? json(*f.delta * 100) : json()},
                   {"verdict", verdict.empty() ? "not analysed" : verdict},
                   {"label", (verdict.empty() ? "not analysed" : verdict) +
                                 (a.overhead ? "  " + formatPercent(a.overhead) : std::string())},
                   {"ci", formatCi(a)},
                   {"delta", formatDelta(f.delta)}};
      rows.push_back(item);
    }
  }
  // The axis is clipped so that one wild interval (a 3-pair +40,000%) cannot shrink the
  // others to dots: at least 3x the largest delta (the band stays visible), at most what most
  // estimates need; bars and dots beyond it stop at the edge with an arrow.
  double maxDelta = 0, extent = 0;
  std::vector<double> estimates;
  for (const auto& row : rows) {
    if (row["dp"].is_number()) maxDelta = std::max(maxDelta, row["dp"].get<double>());
    for (const char* k : {"lo", "hi", "o"})
      if (row[k].is_number()) extent = std::max(extent, std::fabs(row[k].get<double>()));
    if (row["o"].is_number()) estimates.push_back(std::fabs(row["o"].get<double>()));
  }
  if (maxDelta == 0) maxDelta = 5;
  std::sort(estimates.begin(), estimates.end());
  const double q75 = estimates.empty() ? 0 : estimates[std::min(estimates.size() - 1, estimates.size() * 3 / 4)];
  const double limit = std::max(3 * maxDelta, std::min(extent * 1.05, std::max(5 * maxDelta, 1.3 * q75)));
  const bool clipped = extent * 1.05 > limit;
  for (auto& row : rows) {
    row["clipped_hi"] = (row["hi"].is_number() && row["hi"].get<double>() > limit) || (row["o"].is_number() && row["o"].get<double>() > limit);
    row["clipped_lo"] = (row["lo"].is_number() && row["lo"].get<double>() < -limit) || (row["o"].is_number() && row["o"].get<double>() < -limit);
  }
  int height = std::max(60, 30 * static_cast<int>(rows.size()));
  std::string axisNote = clipped ? "axis clipped at ±" + fixed(limit, 0) + "%: ▸ / ◂ mark bars that go on (numbers in the table)"
                                 : "positive = B worse";
  json spec = baseSpec(760, height, "Overhead of B against A, every figure of merit",
                       {"dot: median overhead · bar: its interval · green band: ±delta (PASS when the bar lies inside it)",
                        axisNote + (clipped ? " · positive = B worse" : "")});
  spec["data"] = {{{"name", "rows"}, {"values", rows}},
                  {{"name", "withDelta"}, {"source", "rows"}, {"transform", {{{"type", "filter"}, {"expr", "isValid(datum.dn)"}}}}},
                  {{"name", "withCi"}, {"source", "rows"}, {"transform", {{{"type", "filter"}, {"expr", "isValid(datum.lo) && isValid(datum.hi)"}}}}},
                  {{"name", "withOverhead"}, {"source", "rows"}, {"transform", {{{"type", "filter"}, {"expr", "isValid(datum.o)"}}}}}};
  spec["scales"] = {{{"name", "y"}, {"type", "band"}, {"domain", names}, {"range", "height"}, {"padding", 0.25}},
                    {{"name", "x"},
                     {"type", "linear"},
                     {"domain", {-limit, limit}},
                     {"range", "width"},
                     {"clamp", true},
                     {"zero", true}},
                    kVerdictScale};
  spec["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"title", "overhead %"}, {"grid", true}},
                  {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 280}, {"labelFontSize", 11}}};
  json yMid = {{"scale", "y"}, {"field", "row"}, {"band", 0.5}};
  json tooltip = {{"signal", "{'FOM': datum.row, 'overhead': isValid(datum.o) ? format(datum.o, '+.2f') + '%' : '—', 'CI': datum.ci, 'delta': datum.delta, 'verdict': datum.verdict}"}};
  spec["marks"] = {
      {{"type", "rect"},
       {"from", {{"data", "withDelta"}}},
       {"encode",
        {{"enter",
          {{"y", {{"scale", "y"}, {"field", "row"}}},
           {"height", {{"scale", "y"}, {"band", 1}}},
           {"x", {{"scale", "x"}, {"field", "dn"}}},
           {"x2", {{"scale", "x"}, {"field", "dp"}}},
           {"fill", {{"value", "#2e7d32"}}},
           {"fillOpacity", {{"value", 0.13}}}}}}}},
      {{"type", "rule"},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"value", 0}}},
           {"y", {{"value", 0}}},
           {"y2", {{"signal", "height"}}},
           {"stroke", {{"value", "#444"}}},
           {"strokeDash", {{"value", {4, 3}}}}}}}}},
      {{"type", "rule"},
       {"from", {{"data", "withCi"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "lo"}}},
           {"x2", {{"scale", "x"}, {"field", "hi"}}},
           {"y", yMid},
           {"stroke", {{"scale", "verdict"}, {"field", "verdict"}}},
           {"strokeWidth", {{"value", 4}}},
           {"strokeCap", {{"value", "round"}}},
           {"tooltip", tooltip}}}}}},
      {{"type", "symbol"},
       {"from", {{"data", "withOverhead"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "o"}}},
           {"y", yMid},
           {"size", {{"value", 90}}},
           {"fill", {{"scale", "verdict"}, {"field", "verdict"}}},
           {"stroke", {{"value", "white"}}},
           {"strokeWidth", {{"value", 1.5}}},
           {"tooltip", tooltip}}}}}},
      {{"type", "text"},
       {"from", {{"data", "rows"}}},
       {"encode",
        {{"enter",
          {{"x", {{"signal", "width"}, {"offset", -2}}},
           {"y", yMid},
           {"align", {{"value", "right"}}},
           {"baseline", {{"value", "middle"}}},
           {"fontSize", {{"value", 14}}},
           {"fill", {{"scale", "verdict"}, {"field", "verdict"}}},
           {"text", {{"signal", "datum.clipped_hi ? '▸' : ''"}}}}}}}},
      {{"type", "text"},
       {"from", {{"data", "rows"}}},
       {"encode",
        {{"enter",
          {{"x", {{"value", 2}}},
           {"y", yMid},
           {"align", {{"value", "left"}}},
           {"baseline", {{"value", "middle"}}},
           {"fontSize", {{"value", 14}}},
           {"fill", {{"scale", "verdict"}, {"field", "verdict"}}},
           {"text", {{"signal", "datum.clipped_lo ? '◂' : ''"}}}}}}}},
      {{"type", "text"},
       {"from", {{"data", "rows"}}},
       {"encode",
        {{"enter",
          {{"x", {{"signal", "width"}, {"offset", 10}}},
           {"y", yMid},
           {"baseline", {{"value", "middle"}}},
           {"fontWeight", {{"value", "bold"}}},
           {"fontSize", {{"value", 11}}},
           {"fill", {{"scale", "verdict"}, {"field", "verdict"}}},
           {"text", {{"field", "label"}}}}}}}}};
  return spec;
}

json coldStartSpec(const Result& r) {
  json bars = json::array(), samples = json::array(), order = json::array();
  for (const auto& s : r.coldStart) {
    order.push_back(s.name);
    if (s.median) bars.push_back({{"launch", s.name}, {"ms", *s.median * 1000}, {"text", formatValue(*s.median * 1000) + " ms"}});
    for (size_t i = 0; i < s.samples.size(); ++i)
      samples.push_back({{"launch", s.name}, {"ms", s.samples[i] * 1000}, {"j", jitter(i)}});
  }
  json spec = baseSpec(360, 220, "Cold start: time to launch",
                       {"bar: median · dots: launches · cold = first launch after an image mount"});
  spec["data"] = {{{"name", "bars"}, {"values", bars}}, {{"name", "samples"}, {"values", samples}}};
  spec["scales"] = {{{"name", "x"}, {"type", "band"}, {"domain", order}, {"range", "width"}, {"padding", 0.3}},
                    {{"name", "y"},
                     {"type", "linear"},
                     {"domain", {{"fields", {{{"data", "bars"}, {"field", "ms"}}, {{"data", "samples"}, {"field", "ms"}}}}}},
                     {"range", "height"},
                     {"zero", true},
                     {"nice", true}}};
  spec["axes"] = {{{"orient", "bottom"}, {"scale", "x"}}, {{"orient", "left"}, {"scale", "y"}, {"title", "ms"}, {"grid", true}}};
  spec["marks"] = {
      {{"type", "rect"},
       {"from", {{"data", "bars"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "launch"}}},
           {"width", {{"scale", "x"}, {"band", 1}}},
           {"y", {{"scale", "y"}, {"field", "ms"}}},
           {"y2", {{"scale", "y"}, {"value", 0}}},
           {"fill", {{"value", "#72b7b2"}}},
           {"tooltip", {{"field", "text"}}}}}}}},
      {{"type", "symbol"},
       {"from", {{"data", "samples"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "launch"}, {"band", 0.5}, {"offset", {{"field", "j"}}}}},
           {"y", {{"scale", "y"}, {"field", "ms"}}},
           {"size", {{"value", 22}}},
           {"fill", {{"value", "#264653"}}},
           {"fillOpacity", {{"value", 0.7}}}}}}}},
      {{"type", "text"},
       {"from", {{"data", "bars"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "launch"}, {"band", 0.5}}},
           {"y", {{"scale", "y"}, {"field", "ms"}, {"offset", -6}}},
           {"align", {{"value", "center"}}},
           {"fontWeight", {{"value", "bold"}}},
           {"text", {{"field", "text"}}}}}}}}};
  return spec;
}

json scenarioSpec(const Scenario& sc) {
  json medians = json::array(), samples = json::array(), order = json::array();
  for (const auto& p : sc.points) {
    std::string label = p.label;
    while (std::find(order.begin(), order.end(), label) != order.end()) label += " ";
    order.push_back(label);
    if (p.median) medians.push_back({{"step", label}, {"value", *p.median}, {"series", "median"}});
    if (p.aggregate) medians.push_back({{"step", label}, {"value", *p.aggregate}, {"series", "node aggregate"}});
    for (size_t i = 0; i < p.samples.size(); ++i)
      samples.push_back({{"step", label}, {"value", p.samples[i]}, {"j", jitter(i)}});
  }
  std::vector<std::string> subtitle;
  std::string about = sc.kind;
  if (!sc.workload.empty()) about += (about.empty() ? "" : " · ") + sc.workload + (sc.fom.empty() ? "" : " / " + sc.fom);
  if (!about.empty()) subtitle.push_back(about);
  json spec = baseSpec(std::max(240, 90 * static_cast<int>(order.size())), 220, "Scenario: " + sc.name, subtitle);
  spec["data"] = {{{"name", "medians"}, {"values", medians}}, {{"name", "samples"}, {"values", samples}}};
  json y = {{"name", "y"}, {"type", "linear"}, {"range", "height"}, {"zero", true}, {"nice", true}};
  if (medians.empty() && samples.empty()) y["domain"] = {0, 1};
  else y["domain"] = {{"fields", {{{"data", "medians"}, {"field", "value"}}, {{"data", "samples"}, {"field", "value"}}}}};
  spec["scales"] = {{{"name", "x"}, {"type", "point"}, {"domain", order}, {"range", "width"}, {"padding", 0.5}},
                    y,
                    {{"name", "series"}, {"type", "ordinal"}, {"domain", {"median", "node aggregate"}}, {"range", {"#4c78a8", "#e45756"}}}};
  bool aggregates = std::any_of(sc.points.begin(), sc.points.end(), [](const ScenarioPoint& p) { return p.aggregate.has_value(); });
  if (aggregates) spec["legends"] = {{{"stroke", "series"}, {"fill", "series"}, {"orient", "top-left"}, {"symbolType", "circle"}}};
  spec["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"labelAngle", order.size() > 6 ? -30 : 0}, {"labelAlign", order.size() > 6 ? "right" : "center"}},
                  {{"orient", "left"}, {"scale", "y"}, {"title", sc.unit}, {"grid", true}}};
  spec["marks"] = {
      {{"type", "symbol"},
       {"from", {{"data", "samples"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "step"}, {"offset", {{"field", "j"}}}}},
           {"y", {{"scale", "y"}, {"field", "value"}}},
           {"size", {{"value", 22}}},
           {"fill", {{"value", "#9c755f"}}},
           {"fillOpacity", {{"value", 0.6}}}}}}}},
      {{"type", "group"},
       {"from", {{"facet", {{"name", "series_points"}, {"data", "medians"}, {"groupby", "series"}}}}},
       {"marks",
        {{{"type", "line"},
          {"from", {{"data", "series_points"}}},
          {"encode",
           {{"enter",
             {{"x", {{"scale", "x"}, {"field", "step"}}},
              {"y", {{"scale", "y"}, {"field", "value"}}},
              {"stroke", {{"scale", "series"}, {"field", "series"}}},
              {"strokeWidth", {{"value", 2}}}}}}}}}}},
      {{"type", "symbol"},
       {"from", {{"data", "medians"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "step"}}},
           {"y", {{"scale", "y"}, {"field", "value"}}},
           {"size", {{"value", 70}}},
           {"fill", {{"scale", "series"}, {"field", "series"}}},
           {"tooltip", {{"signal", "{'step': datum.step, 'value': datum.series, 'median': format(datum.value, '.4~g')}"}}}}}}}}};
  if (medians.empty() && samples.empty())
    spec["marks"].push_back({{"type", "text"},
                             {"encode",
                              {{"enter",
                                {{"x", {{"signal", "width / 2"}}},
                                 {"y", {{"signal", "height / 2"}}},
                                 {"align", {{"value", "center"}}},
                                 {"text", {{"value", "no values recorded"}}}}}}}});
  return spec;
}

constexpr std::string_view kStyle = R"CSS(
:root { --pass: #2e7d32; --fail: #c62828; --inc: #e08a00; --err: #6a1b9a; --muted: #5f6368; }
* { box-sizing: border-box; }
body { font: 14px/1.45 "DejaVu Sans", system-ui, sans-serif; color: #1f2328; margin: 0; background: #f6f7f9; }
main { max-width: 1360px; margin: 0 auto; padding: 20px 28px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 28px 0 10px; border-bottom: 1px solid #d8dbe0; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.question { background: #fff; border-left: 5px solid #4c78a8; padding: 10px 14px; margin: 10px 0; }
.question.image-vs-host, .question.image-vs-image { border-left-color: #9c755f; }
.interrupted { background: #fdecea; border: 1px solid var(--fail); color: var(--fail); padding: 8px 14px; font-weight: bold; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 10px 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.counts span { display: inline-block; padding: 3px 10px; border-radius: 12px; margin-right: 6px; color: #fff; font-weight: bold; }
.v-PASS { background: var(--pass); } .v-FAIL { background: var(--fail); } .v-INCONCLUSIVE { background: var(--inc); }
.v-FASTER { background: #1565c0; } .v-ESTIMATE { background: #4c78a8; }
.v-ERROR { background: var(--err); } .v-none, .v-SKIPPED { background: #757575; }
table { border-collapse: collapse; background: #fff; width: 100%; table-layout: auto; }
td.name, td.note { overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #d8dbe0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef0f3; }
td.name { min-width: 6em; }
td.note { min-width: 13em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.verdict span { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff; font-weight: bold; font-size: 12px; }
.grid { display: flex; flex-wrap: wrap; gap: 14px; }
.workloads { display: flex; flex-wrap: wrap; gap: 6px 30px; align-items: flex-start; }
.workload .desc { min-width: 100%; width: 0; }
.card { background: #fff; border: 1px solid #d8dbe0; border-radius: 6px; padding: 8px; }
.plot { min-height: 60px; }
.plot-failed { color: var(--fail); font-weight: bold; padding: 12px; }
.desc { color: var(--muted); margin: 0 0 8px; }
pre { background: #1f2328; color: #e6edf3; padding: 10px; overflow-x: auto; border-radius: 4px; font-size: 12px; }
code { font-size: 12px; }
td.pre { white-space: pre-wrap; font: 12px/1.3 "DejaVu Sans Mono", monospace; }
#host th { width: 18%; }
footer { color: var(--muted); margin-top: 30px; font-size: 12px; }
)CSS";

struct Plot {
  std::string id;
  json spec;
};

std::string verdictBadge(const std::string& verdict) {
  if (verdict.empty()) return "<span class=\"v-none\">not analysed</span>";
  return "<span class=\"v-" + esc(verdict) + "\">" + esc(verdict) + "</span>";
}

std::string plotDiv(const std::string& id) { return "<div class=\"card\"><div class=\"plot\" id=\"" + id + "\"></div></div>\n"; }

}  // namespace

std::string renderHtml(const json& resultJson) {
  const Result r = readResult(resultJson);
  const Question q = questionOf(r.mode);
  const Counts counts = countVerdicts(r);
  const std::string vegaJs = inlineVega();
  std::vector<Plot> plots;
  std::ostringstream h;

  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>ctr-bench report: " << esc(q.title) << (r.started.empty() ? "" : ", " + esc(r.started)) << "</title>\n"
    << "<style>" << kStyle << "</style>\n</head>\n<body>\n<main>\n";

  h << "<header>\n<h1>ctr-bench report</h1>\n";
  h << "<p class=\"question " << esc(r.mode) << "\"><strong>" << esc(q.title) << "</strong> (mode <code>" << esc(r.mode)
    << "</code>): " << esc(q.explanation) << "</p>\n";
  if (r.interrupted)
    h << "<p class=\"interrupted\">Interrupted: this run was stopped before it finished; the figures use the blocks "
         "completed so far.</p>\n";
  h << "<dl class=\"facts\">\n<dt>Host</dt><dd>" << esc(hostSummary(r.host)) << "</dd>\n";
  h << "<dt>Profile</dt><dd>" << (r.profile.empty() ? "—" : esc(r.profile)) << "</dd>\n";
  auto duration = runDuration(r);
  h << "<dt>Duration</dt><dd>" << (duration ? formatDuration(*duration) : "—") << " ("
    << (r.started.empty() ? "—" : esc(r.started)) << " to " << (r.finished.empty() ? "—" : esc(r.finished)) << ")</dd>\n";
  h << "<dt>Interrupted</dt><dd>" << (r.interrupted ? "<strong>yes</strong>" : "no") << "</dd>\n";
  for (const auto& [a, b] : labelPairs(r)) h << "<dt>Sides</dt><dd>A = " << esc(a) << ", B = " << esc(b) << "</dd>\n";
  if (!r.seed.empty()) h << "<dt>Seed</dt><dd>" << esc(r.seed) << "</dd>\n";
  if (!r.benchVersion.empty()) h << "<dt>ctr-bench</dt><dd>" << esc(r.benchVersion) << "</dd>\n";
  if (r.exitStatus) h << "<dt>Exit status</dt><dd>" << *r.exitStatus << "</dd>\n";
  h << "</dl>\n<p class=\"counts\">";
  for (const auto& [name, n] : std::initializer_list<std::pair<std::string_view, int>>{
           {"PASS", counts.pass}, {"FAIL", counts.fail}, {"FASTER", counts.faster}, {"INCONCLUSIVE", counts.inconclusive},
           {"ESTIMATE", counts.estimate}, {"ERROR", counts.error}, {"SKIPPED", counts.skipped}})
    if (n > 0 || name == "PASS" || name == "FAIL" || name == "INCONCLUSIVE" || name == "ERROR" || name == "SKIPPED")
      h << "<span class=\"v-" << name << "\">" << n << " " << name << "</span>";
  if (counts.unanalysed > 0) h << "<span class=\"v-none\">" << counts.unanalysed << " not analysed</span>";
  h << "</p>\n</header>\n";

  h << "<section id=\"summary\">\n<h2>Summary</h2>\n<p class=\"desc\">" << esc(ruleText(r)) << "</p>\n";
  h << "<div class=\"table-wrap\"><table>\n<thead><tr><th>Workload</th><th>FOM</th><th>Unit</th><th>A median</th><th>B median</th><th>Overhead</th><th>"
    << esc(confidenceLabel(r)) << "</th><th>Delta</th><th>n</th><th>CV A / B</th><th>Verdict</th><th>Note</th></tr></thead>\n<tbody>\n";
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    if (w.foms.empty()) {
      h << "<tr><td>" << esc(w.name) << "</td><td colspan=\"9\">—</td><td class=\"verdict\">"
        << verdictBadge(w.status == "error" ? "ERROR" : "") << "</td><td>"
        << esc(w.reason.empty() ? "no figure of merit reported" : w.reason) << "</td></tr>\n";
      continue;
    }
    for (const auto& f : w.foms) {
      const Analysis& a = f.analysis;
      h << "<tr><td class=\"name\">" << esc(w.name) << "</td><td class=\"name\">" << esc(f.name) << "</td><td>" << esc(f.unit) << "</td><td class=\"num\">"
        << formatValue(a.medianA) << "</td><td class=\"num\">" << formatValue(a.medianB) << "</td><td class=\"num\">"
        << formatPercent(a.overhead) << "</td><td class=\"num\">" << formatCi(a) << "</td><td class=\"num\">"
        << formatDelta(f.delta) << "</td><td class=\"num\">" << (a.nPairs ? std::to_string(*a.nPairs) : "—")
        << "</td><td class=\"num\">" << formatPercent(a.cvA).substr(a.cvA ? 1 : 0) << " / "
        << formatPercent(a.cvB).substr(a.cvB ? 1 : 0) << "</td><td class=\"verdict\">" << verdictBadge(rowVerdict(w, f))
        << "</td><td class=\"note\">" << esc(rowNote(a)) << "</td></tr>\n";
    }
  }
  h << "</tbody>\n</table></div>\n</section>\n";

  bool anyFom = false;
  for (const auto& w : r.workloads) anyFom = anyFom || (w.status != "skipped" && !w.foms.empty());
  if (anyFom) {
    plots.push_back({"plot-overview", overviewSpec(r)});
    h << "<section id=\"overview\">\n<h2>Overhead per figure of merit</h2>\n" << plotDiv("plot-overview") << "</section>\n";
    h << "<section id=\"distributions\">\n<h2>Distributions, A against B</h2>\n<p class=\"desc\">One dot per launch "
         "(block); box: quartiles; black bar: median; whiskers: range.</p>\n";
    h << "<div class=\"workloads\">\n";
    for (size_t wi = 0; wi < r.workloads.size(); ++wi) {
      const Workload& w = r.workloads[wi];
      if (w.status == "skipped" || w.foms.empty()) continue;
      h << "<div class=\"workload\">\n<h3>" << esc(w.name) << "</h3>\n";
      std::string about = w.description;
      if (w.durationS) about += (about.empty() ? "" : " · ") + std::string("took ") + formatDuration(*w.durationS);
      if (!about.empty()) h << "<p class=\"desc\">" << esc(about) << "</p>\n";
      h << "<div class=\"grid\">\n";
      for (size_t fi = 0; fi < w.foms.size(); ++fi) {
        std::string id = "plot-fom-" + std::to_string(wi) + "-" + std::to_string(fi);
        plots.push_back({id, distributionSpec(w, w.foms[fi])});
        h << plotDiv(id);
      }
      h << "</div>\n</div>\n";
    }
    h << "</div>\n</section>\n";
  }

  std::vector<const Workload*> skipped;
  for (const auto& w : r.workloads)
    if (w.status == "skipped") skipped.push_back(&w);
  if (!skipped.empty()) {
    h << "<section id=\"skipped\">\n<h2>Skipped workloads</h2>\n<ul>\n";
    for (const auto* w : skipped)
      h << "<li><strong>" << esc(w->name) << "</strong>: " << esc(w->reason.empty() ? "no reason given" : w->reason) << "</li>\n";
    h << "</ul>\n</section>\n";
  }

  std::ostringstream errors;
  for (const auto& w : r.workloads) {
    if (w.status == "error") {
      errors << "<h3>" << esc(w.name) << "</h3>\n<p>" << esc(w.reason.empty() ? "the workload failed" : w.reason) << "</p>\n";
      if (!w.stderrTail.empty()) errors << "<pre>" << esc(w.stderrTail) << "</pre>\n";
    }
    for (const auto& f : w.foms)
      for (const auto& e : f.errors) {
        std::string where = errorHeading(e);
        errors << "<h3>" << esc(w.name) << " / " << esc(f.name) << (where.empty() ? "" : " (" + esc(where) + ")")
               << "</h3>\n<p>" << esc(e.message.empty() ? "failed" : e.message) << "</p>\n";
        if (!e.stderrTail.empty()) errors << "<pre>" << esc(e.stderrTail) << "</pre>\n";
      }
  }
  for (const auto& sc : r.scenarios)
    for (const auto& p : sc.points)
      for (const auto& e : p.errors) {
        errors << "<h3>scenario " << esc(sc.name) << ", " << esc(p.label) << "</h3>\n<p>"
               << esc(e.message.empty() ? "failed" : e.message) << "</p>\n";
        if (!e.stderrTail.empty()) errors << "<pre>" << esc(e.stderrTail) << "</pre>\n";
      }
  for (const auto& e : r.coldStartErrors) {
    errors << "<h3>cold start (" << esc(errorHeading(e, "launch")) << ")</h3>\n<p>" << esc(e.message.empty() ? "failed" : e.message)
           << "</p>\n";
    if (!e.stderrTail.empty()) errors << "<pre>" << esc(e.stderrTail) << "</pre>\n";
  }
  if (!errors.str().empty()) h << "<section id=\"errors\">\n<h2>Errors</h2>\n" << errors.str() << "</section>\n";

  h << "<section id=\"cold-start\">\n<h2>Cold start</h2>\n";
  if (r.coldStart.empty()) {
    h << "<p>Not measured in this run.</p>\n";
  } else {
    plots.push_back({"plot-cold-start", coldStartSpec(r)});
    h << "<div class=\"grid\">" << plotDiv("plot-cold-start") << "</div>\n";
  }
  h << "</section>\n";

  if (!r.scenarios.empty()) {
    h << "<section id=\"scenarios\">\n<h2>Scenarios</h2>\n";
    for (const auto& sc : r.scenarios)
      if (!sc.skipped.empty()) h << "<p><strong>" << esc(sc.name) << "</strong> skipped: " << esc(sc.skipped) << "</p>\n";
    h << "<div class=\"grid\">\n";
    for (size_t i = 0; i < r.scenarios.size(); ++i) {
      if (!r.scenarios[i].skipped.empty()) continue;
      std::string id = "plot-scenario-" + std::to_string(i);
      plots.push_back({id, scenarioSpec(r.scenarios[i])});
      h << plotDiv(id);
    }
    h << "</div>\n</section>\n";
  }

  h << "<section id=\"host\">\n<h2>Host fingerprint</h2>\n";
  auto flatHost = flatten(r.host);
  if (flatHost.empty()) h << "<p>Not recorded.</p>\n";
  else {
    h << "<table>\n";
    for (const auto& [k, v] : flatHost)
      h << "<tr><th>" << esc(k) << "</th><td" << (v.find('\n') == std::string::npos ? "" : " class=\"pre\"") << ">" << esc(v)
        << "</td></tr>\n";
    h << "</table>\n";
  }
  auto flatConfig = flatten(r.config);
  if (!flatConfig.empty()) {
    h << "<h3>Configuration</h3>\n<table>\n";
    for (const auto& [k, v] : flatConfig) h << "<tr><th>" << esc(k) << "</th><td>" << esc(v) << "</td></tr>\n";
    h << "</table>\n";
  }
  h << "<h3>Commands</h3>\n<table>\n";
  for (const auto& w : r.workloads)
    for (const auto& [side, command] : w.commands)
      h << "<tr><th>" << esc(w.name) << " " << esc(side) << "</th><td><code>" << esc(command) << "</code></td></tr>\n";
  h << "</table>\n</section>\n";
  h << "<footer>Written by ctr-bench report" << (r.benchVersion.empty() ? "" : " from a result of ctr-bench " + esc(r.benchVersion))
    << ". Plots: Vega (Debian libjs-vega), inlined; this page loads nothing from the network.</footer>\n</main>\n";

  json plotList = json::array();
  for (const auto& p : plots) plotList.push_back({{"id", p.id}, {"spec", p.spec}});
  h << "<script type=\"application/json\" id=\"ctr-bench-plots\">" << jsonForScript(plotList) << "</script>\n";
  h << "<script>\n" << vegaJs << "</script>\n";
  h << "<script>\n" << kRenderScript << "</script>\n</body>\n</html>\n";
  return h.str();
}

fs::path vegaDirectory() {
  if (const char* dir = std::getenv("CTR_BENCH_VEGA_DIR"); dir != nullptr && *dir != '\0') return dir;
  return "/usr/share/javascript/vega";
}

namespace {
// Written beside the target and renamed over it, so a reader never sees half a report.
void writeAtomically(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp.string());
    out << text;
    out.close();
    if (!out) throw Error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
}
}  // namespace

void writeReport(const json& result, const fs::path& markdownOut, const fs::path& htmlOut) {
  // Both are rendered before either is written: a bad field leaves no half-written report.
  std::string markdown = renderMarkdown(result);
  std::string html = renderHtml(result);
  writeAtomically(markdownOut, markdown);
  writeAtomically(htmlOut, html);
}

}  // namespace ctr::bench
