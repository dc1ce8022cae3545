#include "result.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <string_view>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace ctr::bench {
namespace {

using nlohmann::json;

// Reading: one object of the file at a time; every error names the field's path.

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
  [[nodiscard]] std::string indexed(std::string_view key, size_t i) const { return pathOf(key) + "[" + std::to_string(i) + "]"; }

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
  [[nodiscard]] std::string optText(std::string_view key, const std::string& otherwise = "") const {
    return find(key) == nullptr ? otherwise : text(key);
  }
  [[nodiscard]] std::optional<double> optNumber(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(key, std::string("expected a number, got ") + v->type_name());
    return v->get<double>();
  }
  [[nodiscard]] std::optional<int> optInt(std::string_view key) const {
    auto n = optNumber(key);
    if (!n) return std::nullopt;
    return static_cast<int>(*n);
  }
  [[nodiscard]] std::optional<bool> optBool(std::string_view key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
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
  [[nodiscard]] std::vector<std::string> optWords(std::string_view key) const {
    std::vector<std::string> out;
    const json& words = optArray(key);
    for (size_t i = 0; i < words.size(); ++i) {
      if (!words[i].is_string()) throw Error("result file: field " + indexed(key, i) + ": expected a string");
      out.push_back(words[i].get<std::string>());
    }
    return out;
  }
  // One sample per block; null where that launch failed.
  [[nodiscard]] SampleList samples(std::string_view key) const {
    SampleList out;
    const json& values = optArray(key);
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].is_null()) out.emplace_back(std::nullopt);
      else if (values[i].is_number()) out.emplace_back(values[i].get<double>());
      else throw Error("result file: field " + indexed(key, i) + ": expected a number or null, got " + values[i].type_name());
    }
    return out;
  }
  // Every member through `read`, keyed by name.
  template <typename T, typename Read>
  [[nodiscard]] std::map<std::string, T> members(Read read) const {
    std::map<std::string, T> out;
    for (const auto& [key, value] : object_.items()) out.emplace(key, read(*this, key));
    return out;
  }
  [[nodiscard]] const json& raw() const { return object_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  // The members the reader does not know, kept so that writing the file back loses nothing.
  [[nodiscard]] json unknown(std::initializer_list<std::string_view> known) const {
    json out = json::object();
    for (const auto& [key, value] : object_.items())
      if (std::find(known.begin(), known.end(), key) == known.end()) out[key] = value;
    return out;
  }

 private:
  [[nodiscard]] std::string where() const { return path_.empty() ? "top level" : "field " + path_; }
  const json& object_;
  std::string path_;
};

// Each element of the array `key` through `read`.
template <typename Read>
auto readList(const Fields& f, std::string_view key, Read read) {
  std::vector<decltype(read(f))> out;
  const json& list = f.optArray(key);
  for (size_t i = 0; i < list.size(); ++i) out.push_back(read(Fields(list[i], f.indexed(key, i))));
  return out;
}

constexpr std::array<std::string_view, 6> kVerdicts = {"PASS", "FAIL", "FASTER", "INCONCLUSIVE", "ESTIMATE", "ERROR"};

// sideKey: "side" (A or B) for a FOM's launches, "case" (bare, warm, cold) for cold start.
LaunchError readError(const Fields& f, std::string_view sideKey) {
  LaunchError e;
  if (const json* block = f.find("block")) {
    if (block->is_number()) e.block = block->get<int>();
    else if (block->is_string()) e.blockName = block->get<std::string>();
    else f.fail("block", "expected a number or a phase name");
  }
  e.phase = f.optText("phase");
  e.side = f.optText(sideKey);
  e.message = f.optText("message");
  e.stderrTail = f.optText("stderr_tail");
  return e;
}

// A pair [low, high] of numbers or nulls.
void readInterval(const Fields& f, std::string_view key, std::optional<double>& low, std::optional<double>& high) {
  const json* ci = f.find(key);
  if (ci == nullptr) return;
  if (!ci->is_array() || ci->size() != 2) f.fail(key, "expected [low, high]");
  for (size_t i = 0; i < 2; ++i) {
    if ((*ci)[i].is_null()) continue;
    if (!(*ci)[i].is_number()) f.fail(key, "expected numbers");
    (i == 0 ? low : high) = (*ci)[i].get<double>();
  }
}

void readSides(const Fields& f, std::string_view key, std::optional<double>& a, std::optional<double>& b) {
  if (auto sides = f.optObject(key)) {
    a = sides->optNumber("A");
    b = sides->optNumber("B");
  }
}

Analysis readAnalysis(const Fields& f) {
  Analysis a;
  a.nPairs = f.optInt("n_pairs");
  a.looks = f.optInt("looks");
  a.minPairs = f.optInt("min_pairs");
  a.pairsNeeded = f.optInt("pairs_needed");
  a.overhead = f.optNumber("overhead");
  readInterval(f, "ci", a.ciLow, a.ciHigh);
  a.ciLevel = f.optNumber("ci_level");
  a.alpha = f.optNumber("alpha");
  a.cvA = f.optNumber("cv_a");
  a.cvB = f.optNumber("cv_b");
  a.baselineSpread = f.optNumber("baseline_spread");
  readSides(f, "min", a.bestA, a.bestB);
  readSides(f, "median", a.medianA, a.medianB);
  if (auto sp = f.optObject("speedup")) {
    a.speedup.emplace();
    a.speedup->factor = sp->optNumber("factor");
    readInterval(*sp, "ci", a.speedup->low, a.speedup->high);
  }
  a.ciMethod = f.optText("ci_method");
  a.verdict = f.optText("verdict");
  if (!a.verdict.empty() && std::find(kVerdicts.begin(), kVerdicts.end(), a.verdict) == kVerdicts.end())
    f.fail("verdict", "'" + a.verdict + "' is not PASS, FAIL, FASTER, INCONCLUSIVE, ESTIMATE or ERROR");
  a.note = f.optText("note");
  a.extra = f.unknown({"n_pairs", "looks", "min_pairs", "pairs_needed", "overhead", "ci", "ci_level", "alpha", "cv_a", "cv_b",
                       "baseline_spread", "min", "median", "speedup", "ci_method", "verdict", "note"});
  return a;
}

FomResult readFom(const Fields& f) {
  FomResult fom;
  fom.name = f.text("name");
  fom.unit = f.optText("unit");
  fom.direction = f.optText("direction");
  fom.delta = f.optNumber("delta");
  if (auto s = f.optObject("samples")) {
    fom.samplesA = s->samples("A");
    fom.samplesB = s->samples("B");
  }
  fom.errors = readList(f, "errors", [](const Fields& e) { return readError(e, "side"); });
  if (auto a = f.optObject("analysis")) fom.analysis = readAnalysis(*a);
  fom.extra = f.unknown({"name", "unit", "direction", "delta", "samples", "errors", "analysis"});
  return fom;
}

BlockPlan readBlock(const Fields& f) {
  BlockPlan b;
  b.block = f.optInt("block").value_or(0);
  b.order = f.optWords("order");
  if (auto wall = f.optObject("wall_s"))
    b.wallS = wall->members<double>([](const Fields& w, const std::string& k) { return w.optNumber(k).value_or(0); });
  return b;
}

std::map<std::string, std::vector<std::string>> readCommands(const Fields& f) {
  return f.members<std::vector<std::string>>([](const Fields& c, const std::string& k) { return c.optWords(k); });
}

std::map<std::string, std::string> readEnv(const Fields& f) {
  return f.members<std::string>([](const Fields& e, const std::string& k) { return e.optText(k); });
}

SourceRow readSourceRow(const Fields& f) {
  SourceRow r;
  r.fom = f.text("fom");
  r.side = f.text("side");
  r.unit = f.optText("unit");
  r.direction = f.optText("direction");
  r.delta = f.optNumber("delta");
  r.n = f.optInt("n").value_or(0);
  r.nAgainst = f.optInt("n_against").value_or(0);
  r.median = f.optNumber("median");
  r.medianAgainst = f.optNumber("median_against");
  r.ratio = f.optNumber("ratio");
  readInterval(f, "ci", r.ciLow, r.ciHigh);
  r.ciLevel = f.optNumber("ci_level");
  r.spread = f.optNumber("spread");
  r.verdict = f.text("verdict");
  r.note = f.optText("note");
  return r;
}

SourceComparison readSourceComparison(const Fields& f) {
  SourceComparison c;
  c.against = f.text("against");
  c.note = f.optText("note");
  c.rows = readList(f, "rows", readSourceRow);
  c.extra = f.unknown({"against", "note", "rows"});
  return c;
}

WorkloadResult readWorkload(const Fields& f) {
  WorkloadResult w;
  w.name = f.text("name");
  w.description = f.optText("description");
  w.descriptor = f.optText("descriptor");
  w.status = f.optText("status", "ok");
  if (w.status != "ok" && w.status != "skipped" && w.status != "error")
    f.fail("status", "'" + w.status + "' is not ok, skipped or error");
  w.reason = f.optText("reason");
  w.stderrTail = f.optText("stderr_tail");
  w.budgetNote = f.optText("budget_note");
  if (auto labels = f.optObject("labels")) w.labels = SideLabels{labels->optText("A", "A"), labels->optText("B", "B")};
  if (auto commands = f.optObject("commands")) w.commands = readCommands(*commands);
  if (auto env = f.optObject("env")) w.env = readEnv(*env);
  w.durationS = f.optNumber("duration_s");
  if (f.find("looks")) {
    w.looks.emplace();
    const json& looks = f.optArray("looks");
    for (size_t i = 0; i < looks.size(); ++i) {
      if (!looks[i].is_number()) throw Error("result file: field " + f.indexed("looks", i) + ": expected a number");
      w.looks->push_back(looks[i].get<int>());
    }
  }
  w.plan = readList(f, "plan", readBlock);
  if (const json* info = f.find("info")) w.info = *info;
  w.foms = readList(f, "foms", readFom);
  if (auto c = f.optObject("source_comparison")) w.sourceComparison = readSourceComparison(*c);
  w.extra = f.unknown({"name", "description", "descriptor", "status", "reason", "stderr_tail", "budget_note", "labels",
                       "commands", "env", "duration_s", "looks", "plan", "info", "foms", "source_comparison"});
  return w;
}

ColdStart readColdStart(const Fields& f) {
  ColdStart c;
  c.skipped = f.optText("skipped");
  c.rounds = f.optInt("rounds");
  if (auto commands = f.optObject("commands")) c.commands = readCommands(*commands);
  if (auto samples = f.optObject("samples_s"))
    c.samplesS = samples->members<SampleList>([](const Fields& s, const std::string& k) { return s.samples(k); });
  if (auto medians = f.optObject("median_s"))
    c.medianS = medians->members<std::optional<double>>([](const Fields& m, const std::string& k) { return m.optNumber(k); });
  c.errors = readList(f, "errors", [](const Fields& e) { return readError(e, "case"); });
  c.extra = f.unknown({"skipped", "rounds", "commands", "samples_s", "median_s", "errors"});
  return c;
}

ScenarioPoint readPoint(const Fields& f) {
  ScenarioPoint p;
  if (f.find("limit")) p.limit = f.text("limit");
  if (f.find("label")) p.label = f.text("label");
  p.copies = f.optInt("copies");
  if (f.find("ctr_args")) p.ctrArgs = f.optWords("ctr_args");
  p.samples = f.samples("samples");
  p.median = f.optNumber("median");
  p.aggregate = f.optNumber("aggregate");
  if (auto foms = f.optObject("foms"))
    p.foms = foms->members<PointFom>([](const Fields& fs, const std::string& k) {
      Fields one(fs.raw()[k], fs.pathOf(k));
      return PointFom{one.samples("samples"), one.optNumber("median")};
    });
  if (f.find("wall_s")) {
    SampleList walls = f.samples("wall_s");
    p.wallS.emplace();
    for (const auto& w : walls) p.wallS->push_back(w.value_or(0));
  }
  p.errors = readList(f, "errors", [](const Fields& e) { return readError(e, "side"); });
  p.extra = f.unknown({"limit", "label", "copies", "ctr_args", "samples", "median", "aggregate", "foms", "wall_s", "errors"});
  return p;
}

ScenarioResult readScenario(const Fields& f) {
  ScenarioResult s;
  s.name = f.text("name");
  s.kind = f.optText("kind");
  s.workload = f.optText("workload");
  s.fom = f.optText("fom");
  s.unit = f.optText("unit");
  s.skipped = f.optText("skipped");
  s.rounds = f.optInt("rounds");
  s.points = readList(f, "points", readPoint);
  s.extra = f.unknown({"name", "kind", "workload", "fom", "unit", "skipped", "rounds", "points"});
  return s;
}

RunConfig readConfig(const Fields& f) {
  RunConfig c;
  c.ctr = f.optText("ctr");
  c.image = f.optText("image");
  c.imageA = f.optText("image_a");
  c.imageB = f.optText("image_b");
  c.imageNote = f.optText("image_note");
  c.ciMethod = f.optText("ci_method");
  c.workdir = f.optText("workdir");
  c.ctrArgs = f.optWords("ctr_args");
  c.mpirunArgs = f.optWords("mpirun_args");
  c.imageHeld = f.optBool("image_held");
  c.budgetS = f.optNumber("budget_s");
  c.alpha = f.optNumber("alpha");
  c.blocks = f.optInt("blocks");
  if (auto deltas = f.optObject("deltas"))
    c.deltas = deltas->members<double>([](const Fields& d, const std::string& k) { return d.optNumber(k).value_or(0); });
  if (auto env = f.optObject("env")) c.env = readEnv(*env);
  c.extra = f.unknown({"ctr", "image", "image_a", "image_b", "image_note", "ci_method", "workdir", "ctr_args", "mpirun_args",
                       "image_held", "budget_s", "alpha", "blocks", "deltas", "env"});
  return c;
}

RunSummary readSummary(const Fields& f) {
  RunSummary s;
  s.exitStatus = f.optInt("exit_status");
  for (const auto& [key, value] : f.raw().items())
    if (key != "exit_status") s.counts[key] = f.optInt(key).value_or(0);
  return s;
}

CalibrationRow readCalibrationRow(const Fields& f) {
  CalibrationRow r;
  r.workload = f.optText("workload");
  r.fom = f.optText("fom");
  r.verdict = f.optText("verdict");
  r.injected = f.optNumber("injected").value_or(0);
  r.overhead = f.optNumber("overhead");
  readInterval(f, "ci", r.ciLow, r.ciHigh);
  r.ciHoldsInjected = f.optBool("ci_holds_injected").value_or(false);
  return r;
}

Calibration readCalibration(const Fields& f) {
  Calibration c;
  c.delta = f.optNumber("delta").value_or(0);
  c.pairs = f.optInt("pairs").value_or(0);
  c.iterations = static_cast<long long>(f.optNumber("iterations").value_or(0));
  c.rows = readList(f, "rows", readCalibrationRow);
  c.ok = f.optBool("ok").value_or(false);
  return c;
}

void readRunFacts(const Fields& top, Result& r) {
  r.format = top.optText("format", kResultFormat);
  r.version = top.optInt("version").value_or(kResultVersion);
  r.mode = top.text("mode");
  if (r.mode != "runtime-overhead" && r.mode != "image-vs-host" && r.mode != "image-vs-image")
    top.fail("mode", "'" + r.mode + "' is not runtime-overhead, image-vs-host or image-vs-image");
  r.profile = top.optText("profile");
  r.benchVersion = top.optText("ctr_bench_version");
  r.started = top.optText("started");
  r.finished = top.optText("finished");
  if (const json* seed = top.find("seed")) {
    if (!seed->is_number_unsigned() && !seed->is_number_integer()) top.fail("seed", "expected a whole number");
    r.seed = seed->get<std::uint64_t>();
  }
  r.interrupted = top.optBool("interrupted").value_or(false);
  if (const json* host = top.find("host")) r.host = *host;
}

// Writing: the keys `ctr-bench run` has always written, nulls included.

template <typename T>
json orNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json orNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json intervalJson(const std::optional<double>& low, const std::optional<double>& high) {
  if (!low && !high) return nullptr;
  return json::array({orNull(low), orNull(high)});
}

json samplesJson(const SampleList& samples) {
  json out = json::array();
  for (const auto& s : samples) out.push_back(orNull(s));
  return out;
}

// Known keys over the unknown ones a reader kept.
json withExtra(const json& extra, json known) {
  json out = extra.is_object() ? extra : json::object();
  for (auto& [key, value] : known.items()) out[key] = std::move(value);
  return out;
}

json errorJson(const LaunchError& e, const char* sideKey) {
  json out = json::object();
  if (e.block) out["block"] = *e.block;
  else if (!e.blockName.empty()) out["block"] = e.blockName;
  if (!e.phase.empty()) out["phase"] = e.phase;
  if (!e.side.empty()) out[sideKey] = e.side;
  out["message"] = e.message;
  out["stderr_tail"] = e.stderrTail;
  return out;
}

json errorsJson(const std::vector<LaunchError>& errors, const char* sideKey) {
  json out = json::array();
  for (const auto& e : errors) out.push_back(errorJson(e, sideKey));
  return out;
}

json analysisJson(const Analysis& a) {
  json out = {{"n_pairs", orNull(a.nPairs)},        {"cv_a", orNull(a.cvA)},
              {"cv_b", orNull(a.cvB)},              {"baseline_spread", orNull(a.baselineSpread)},
              {"min", {{"A", orNull(a.bestA)}, {"B", orNull(a.bestB)}}},
              {"median", {{"A", orNull(a.medianA)}, {"B", orNull(a.medianB)}}},
              {"ci_method", orNull(a.ciMethod)},    {"alpha", orNull(a.alpha)},
              {"looks", orNull(a.looks)},           {"min_pairs", orNull(a.minPairs)},
              {"overhead", orNull(a.overhead)},     {"ci", intervalJson(a.ciLow, a.ciHigh)},
              {"ci_level", orNull(a.ciLevel)},      {"pairs_needed", orNull(a.pairsNeeded)},
              {"verdict", orNull(a.verdict)},       {"note", orNull(a.note)}};
  if (a.speedup)
    out["speedup"] = {{"factor", orNull(a.speedup->factor)}, {"ci", intervalJson(a.speedup->low, a.speedup->high)}};
  return withExtra(a.extra, std::move(out));
}

json fomJson(const FomResult& f) {
  return withExtra(f.extra, {{"name", f.name},
                             {"unit", f.unit},
                             {"direction", orNull(f.direction)},
                             {"delta", orNull(f.delta)},
                             {"samples", {{"A", samplesJson(f.samplesA)}, {"B", samplesJson(f.samplesB)}}},
                             {"errors", errorsJson(f.errors, "side")},
                             {"analysis", f.analysis ? analysisJson(*f.analysis) : json(nullptr)}});
}

json sourceComparisonJson(const SourceComparison& c) {
  json rows = json::array();
  for (const auto& r : c.rows)
    rows.push_back({{"fom", r.fom},
                    {"side", r.side},
                    {"unit", r.unit},
                    {"direction", orNull(r.direction)},
                    {"delta", orNull(r.delta)},
                    {"n", r.n},
                    {"n_against", r.nAgainst},
                    {"median", orNull(r.median)},
                    {"median_against", orNull(r.medianAgainst)},
                    {"ratio", orNull(r.ratio)},
                    {"ci", intervalJson(r.ciLow, r.ciHigh)},
                    {"ci_level", orNull(r.ciLevel)},
                    {"spread", orNull(r.spread)},
                    {"verdict", r.verdict},
                    {"note", orNull(r.note)}});
  json out = {{"against", c.against}, {"rows", std::move(rows)}};
  if (!c.note.empty()) out["note"] = c.note;
  return withExtra(c.extra, std::move(out));
}

json workloadJson(const WorkloadResult& w) {
  json out = {{"name", w.name},
              {"description", w.description},
              {"descriptor", w.descriptor},
              {"status", w.status},
              {"reason", orNull(w.reason)},
              {"stderr_tail", orNull(w.stderrTail)},
              {"commands", orNull(w.commands)},
              {"labels", w.labels ? json{{"A", w.labels->a}, {"B", w.labels->b}} : json(nullptr)},
              {"duration_s", orNull(w.durationS)},
              {"plan", json::array()},
              {"foms", json::array()}};
  if (w.env) out["env"] = *w.env;
  if (w.looks) out["looks"] = *w.looks;
  if (!w.info.is_null()) out["info"] = w.info;
  if (!w.budgetNote.empty()) out["budget_note"] = w.budgetNote;
  for (const auto& b : w.plan) out["plan"].push_back({{"block", b.block}, {"order", b.order}, {"wall_s", b.wallS}});
  for (const auto& f : w.foms) out["foms"].push_back(fomJson(f));
  if (w.sourceComparison) out["source_comparison"] = sourceComparisonJson(*w.sourceComparison);
  return withExtra(w.extra, std::move(out));
}

json coldStartJson(const ColdStart& c) {
  json samples = json::object(), medians = json::object();
  for (const auto& [k, v] : c.samplesS) samples[k] = samplesJson(v);
  for (const auto& [k, v] : c.medianS) medians[k] = orNull(v);
  json out = {{"samples_s", samples}, {"median_s", medians}};
  if (!c.skipped.empty()) out["skipped"] = c.skipped;
  if (c.rounds) out["rounds"] = *c.rounds;
  if (!c.commands.empty()) out["commands"] = c.commands;
  if (c.rounds || !c.errors.empty()) out["errors"] = errorsJson(c.errors, "case");
  return withExtra(c.extra, std::move(out));
}

json pointJson(const ScenarioPoint& p) {
  json out = {{"samples", samplesJson(p.samples)}, {"median", orNull(p.median)}, {"errors", errorsJson(p.errors, "side")}};
  if (p.limit) out["limit"] = *p.limit;
  if (p.label) out["label"] = *p.label;
  if (p.copies) out["copies"] = *p.copies;
  if (p.ctrArgs) out["ctr_args"] = *p.ctrArgs;
  if (p.aggregate) out["aggregate"] = *p.aggregate;
  if (p.wallS) out["wall_s"] = *p.wallS;
  if (p.foms) {
    out["foms"] = json::object();
    for (const auto& [name, f] : *p.foms) out["foms"][name] = {{"samples", samplesJson(f.samples)}, {"median", orNull(f.median)}};
  }
  return withExtra(p.extra, std::move(out));
}

json scenarioJson(const ScenarioResult& s) {
  json out = {{"name", s.name}};
  const std::array<std::pair<const char*, const std::string*>, 5> texts{
      {{"kind", &s.kind}, {"workload", &s.workload}, {"fom", &s.fom}, {"unit", &s.unit}, {"skipped", &s.skipped}}};
  for (const auto& [key, value] : texts)
    if (!value->empty()) out[key] = *value;
  if (s.rounds) out["rounds"] = *s.rounds;
  if (s.skipped.empty()) {
    out["points"] = json::array();
    for (const auto& p : s.points) out["points"].push_back(pointJson(p));
  }
  return withExtra(s.extra, std::move(out));
}

}  // namespace

json runConfigToJson(const RunConfig& c) {
  return withExtra(c.extra, {{"ctr", c.ctr},
                             {"ctr_args", c.ctrArgs},
                             {"image", c.image},
                             {"image_a", orNull(c.imageA)},
                             {"image_b", orNull(c.imageB)},
                             {"image_note", orNull(c.imageNote)},
                             {"image_held", orNull(c.imageHeld)},
                             {"budget_s", orNull(c.budgetS)},
                             {"alpha", orNull(c.alpha)},
                             {"ci_method", orNull(c.ciMethod)},
                             {"blocks", orNull(c.blocks)},
                             {"deltas", c.deltas},
                             {"mpirun_args", c.mpirunArgs},
                             {"workdir", c.workdir},
                             {"env", c.env}});
}

namespace {

json summaryJson(const RunSummary& s) {
  json out = json(s.counts);
  out["exit_status"] = orNull(s.exitStatus);
  return out;
}

json calibrationJson(const Calibration& c) {
  json rows = json::array();
  for (const auto& r : c.rows)
    rows.push_back({{"workload", r.workload}, {"fom", r.fom}, {"injected", r.injected}, {"overhead", orNull(r.overhead)},
                    {"ci", intervalJson(r.ciLow, r.ciHigh)}, {"verdict", r.verdict}, {"ci_holds_injected", r.ciHoldsInjected}});
  return {{"delta", c.delta}, {"pairs", c.pairs}, {"iterations", c.iterations}, {"rows", rows}, {"ok", c.ok}};
}

}  // namespace

Result resultFromJson(const json& document) {
  Fields top(document, "");
  Result r;
  readRunFacts(top, r);
  if (auto config = top.optObject("config")) r.config = readConfig(*config);
  if (auto cold = top.optObject("cold_start")) r.coldStart = readColdStart(*cold);
  if (top.find("workloads") == nullptr) top.fail("workloads", "missing");
  r.workloads = readList(top, "workloads", readWorkload);
  r.scenarios = readList(top, "scenarios", readScenario);
  if (auto summary = top.optObject("summary")) r.summary = readSummary(*summary);
  if (auto calibration = top.optObject("calibration")) r.calibration = readCalibration(*calibration);
  r.extra = top.unknown({"format", "version", "mode", "profile", "ctr_bench_version", "started", "finished", "seed",
                         "interrupted", "host", "config", "cold_start", "workloads", "scenarios", "summary", "calibration"});
  return r;
}

json resultToJson(const Result& r) {
  json out = {{"format", r.format},         {"version", r.version},   {"ctr_bench_version", orNull(r.benchVersion)},
              {"started", orNull(r.started)}, {"finished", orNull(r.finished)}, {"interrupted", r.interrupted},
              {"profile", orNull(r.profile)}, {"mode", r.mode},        {"seed", orNull(r.seed)},
              {"host", r.host},             {"config", r.config ? runConfigToJson(*r.config) : json(nullptr)},
              {"cold_start", r.coldStart ? coldStartJson(*r.coldStart) : json(nullptr)},
              {"workloads", json::array()}, {"scenarios", json::array()},
              {"summary", r.summary ? summaryJson(*r.summary) : json(nullptr)}};
  for (const auto& w : r.workloads) out["workloads"].push_back(workloadJson(w));
  for (const auto& s : r.scenarios) out["scenarios"].push_back(scenarioJson(s));
  if (r.calibration) out["calibration"] = calibrationJson(*r.calibration);
  return withExtra(r.extra, std::move(out));
}

// The file's header first, so a foreign or newer file is named as such rather than by its
// first unexpected field.
Result readResultFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": cannot read the result file");
  std::stringstream text;
  text << in.rdbuf();
  json r = json::parse(text.str(), nullptr, false);
  auto bad = [&](const std::string& problem) { throw Error(file.string() + ": " + problem); };
  if (r.is_discarded()) bad("not a ctr-bench result (not valid JSON; a corrupt or truncated file?)");
  if (!r.is_object()) bad("not a ctr-bench result (the top level is not a JSON object)");
  if (!r.contains("format") || r["format"] != kResultFormat)
    bad("not a ctr-bench result (\"format\" is " + (r.contains("format") ? r["format"].dump() : std::string("missing")) +
        ", expected \"" + kResultFormat + "\")");
  if (!r.contains("version") || !r["version"].is_number_integer()) bad("result file without a version number");
  if (r["version"].get<int>() != kResultVersion)
    bad("result file version " + r["version"].dump() + " is not supported by this ctr-bench (it reads version " +
        std::to_string(kResultVersion) + ")");
  try {
    return resultFromJson(r);
  } catch (const Error& e) {
    bad(e.what());
  }
  return {};
}

void writeResultAtomic(const std::filesystem::path& file, const Result& result) {
  auto dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  std::string tmpl = (dir / ("." + file.filename().string() + ".XXXXXX")).string();
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) throw sysError("cannot create a temporary file beside " + file.string());
  std::string text = resultToJson(result).dump(1) + "\n";
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::unlink(tmpl.c_str());
      throw sysError("write " + tmpl, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fchmod(fd.get(), 0644);
  if (::fsync(fd.get()) != 0 || ::rename(tmpl.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    throw sysError("cannot write " + file.string(), err);
  }
}

}  // namespace ctr::bench
