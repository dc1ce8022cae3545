// The report model (report_model.hpp), built once from a Result: what each section says.
#include "report_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

namespace ctr::bench::report {
namespace {

using nlohmann::json;

// "image stack 12.1x faster [11.0, 13.4]": a stack delta, never an overhead verdict.
std::string formatSpeedup(const Analysis& a) {
  if (!a.speedup || !a.speedup->factor) return "";
  const double factor = *a.speedup->factor;
  const auto& low = a.speedup->low;
  const auto& high = a.speedup->high;
  const bool faster = factor >= 1;
  std::string out = "B " + fixed(faster ? factor : 1 / factor, 2) + "x" + (faster ? " faster" : " slower");
  if (low && high) out += " [" + fixed(faster ? *low : 1 / *high, 2) + ", " + fixed(faster ? *high : 1 / *low, 2) + "]";
  return out;
}

// The note column: the stack delta where there is one, then the analysis's note.
std::string rowNote(const Analysis& a) {
  std::string sp = formatSpeedup(a);
  if (sp.empty()) return a.note;
  return a.note.empty() ? sp : sp + "; " + a.note;
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

// The rule in one sentence (docs/benchmark-guide.md).
std::string ruleText(const Result& r) {
  if (r.mode != "runtime-overhead")
    return "B against A as an estimate with its distribution-free interval (ESTIMATE): two builds are meant to "
           "differ, so there is no overhead verdict.";
  std::string alpha = fixed((r.config ? r.config->alpha : std::nullopt).value_or(0.05) * 100, 1) + "%";
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


std::string scalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "—";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::pair<std::string, std::string>> flatten(const json& value, const std::string& prefix = "");

// Host facts an admin looks for first; the full fingerprint follows in a table.
std::vector<std::pair<std::string, std::string>> flatten(const json& value, const std::string& prefix) {
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

// Markdown

// Text from the result file (names, notes, reasons) is written so that Markdown renders
// Distinct "A = x, B = y" pairs across the workloads that ran.
std::vector<std::string> sidePairs(const Result& r) {
  std::vector<std::string> pairs;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    std::string p = "A = " + w.sides().a + ", B = " + w.sides().b;
    if (std::find(pairs.begin(), pairs.end(), p) == pairs.end()) pairs.push_back(p);
  }
  return pairs;
}

std::vector<Badge> countVerdicts(const Result& r) {
  std::map<std::string, int> n;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") {
      ++n["SKIPPED"];
      continue;
    }
    if (w.foms.empty() && w.status == "error") ++n["ERROR"];
    for (const auto& f : w.foms) {
      std::string v = rowVerdict(w, f);
      ++n[v.empty() ? "none" : v];
    }
  }
  // The four verdicts, ERROR and skipped always; the rarer kinds when they occur.
  std::vector<Badge> out;
  for (const char* v : {"PASS", "FAIL", "FASTER", "INCONCLUSIVE", "ESTIMATE", "ERROR", "SKIPPED", "none"}) {
    std::string key = v;
    if ((key == "ESTIMATE" || key == "none") && n[key] == 0) continue;
    out.push_back({key, n[key], key == "SKIPPED" ? "skipped" : key == "none" ? "not analysed" : key});
  }
  return out;
}

std::vector<Fact> runFacts(const Result& r) {
  std::vector<Fact> facts;
  facts.push_back({"Host", hostSummary(r.host)});
  facts.push_back({"Profile", r.profile.empty() ? "—" : r.profile});
  auto duration = runDuration(r);
  facts.push_back({"Duration", (duration ? formatDuration(*duration) : "—") + " (" + (r.started.empty() ? "—" : r.started) +
                                   " to " + (r.finished.empty() ? "—" : r.finished) + ")"});
  facts.push_back({"Interrupted", r.interrupted ? "yes" : "no", r.interrupted});
  for (const auto& p : sidePairs(r)) facts.push_back({"Sides", p});
  if (r.seed) facts.push_back({"Seed", std::to_string(*r.seed)});
  if (!r.benchVersion.empty()) facts.push_back({"ctr-bench version", r.benchVersion});
  if (r.summary && r.summary->exitStatus) facts.push_back({"Exit status", std::to_string(*r.summary->exitStatus)});
  return facts;
}

std::vector<Cell> fomRow(const WorkloadResult& w, const FomResult& f) {
  const Analysis& a = analysisOf(f);
  auto cv = [](std::optional<double> v) { return formatPercent(v).substr(v ? 1 : 0); };
  return {{w.name, CellKind::Name},
          {f.name, CellKind::Name},
          {f.unit},
          {formatValue(a.medianA), CellKind::Number},
          {formatValue(a.medianB), CellKind::Number},
          {formatPercent(a.overhead), CellKind::Number},
          {formatCi(a), CellKind::Number},
          {formatDelta(f.delta), CellKind::Number},
          {a.nPairs ? std::to_string(*a.nPairs) : "—", CellKind::Number},
          {cv(a.cvA) + " / " + cv(a.cvB), CellKind::Number},
          {rowVerdict(w, f), CellKind::Verdict},
          {rowNote(a), CellKind::Note}};
}

Section summarySection(const Result& r) {
  Table t;
  for (const char* c : {"Workload", "FOM", "Unit"}) t.columns.push_back({c});
  for (const char* c : {"A median", "B median", "Overhead", "Interval (level)", "Delta", "n", "CV A / B"})
    t.columns.push_back({c, true});
  t.columns.push_back({"Verdict"});
  t.columns.push_back({"Note"});
  t.whenEmpty = "(no workload ran)";
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    // A workload that failed before reporting any FOM still has a row, as an ERROR.
    if (w.foms.empty())
      t.rows.push_back({{w.name, CellKind::Name},
                        {"—", CellKind::Text, 9},
                        {w.status == "error" ? "ERROR" : "", CellKind::Verdict},
                        {w.reason.empty() ? "no figure of merit reported" : w.reason, CellKind::Note}});
    for (const auto& f : w.foms) t.rows.push_back(fomRow(w, f));
  }
  return {"summary", "Results", {Paragraph{ruleText(r), true}, std::move(t)}, {}, false};
}

// The data-source comparisons (compare_source), apart from the overhead table: what a source
// costs is not what the runtime costs.
std::optional<Section> sourcesSection(const Result& r) {
  Table t;
  for (const char* c : {"Workload", "Against", "FOM", "Side"}) t.columns.push_back({c});
  for (const char* c : {"Median", "Median against", "Ratio", "Interval (level)", "Delta", "n"}) t.columns.push_back({c, true});
  t.columns.push_back({"Verdict"});
  t.columns.push_back({"Note"});
  for (const auto& w : r.workloads) {
    if (!w.sourceComparison) continue;
    const auto& c = *w.sourceComparison;
    if (c.rows.empty())
      t.rows.push_back({{w.name, CellKind::Name}, {c.against, CellKind::Name}, {"—", CellKind::Text, 9},
                        {c.note, CellKind::Note}});
    for (const auto& row : c.rows) {
      std::string ci = row.ciLow && row.ciHigh ? "[" + fixed(*row.ciLow, 3) + ", " + fixed(*row.ciHigh, 3) + "]" : "—";
      if (row.ciLow && row.ciHigh && row.ciLevel) ci += " (" + fixed(*row.ciLevel * 100, 0) + "%)";
      t.rows.push_back({{w.name, CellKind::Name},
                        {c.against, CellKind::Name},
                        {row.fom, CellKind::Name},
                        {row.side == "A" ? w.sides().a : w.sides().b},
                        {formatValue(row.median), CellKind::Number},
                        {formatValue(row.medianAgainst), CellKind::Number},
                        {row.ratio ? "x" + fixed(*row.ratio, 3) : "—", CellKind::Number},
                        {ci, CellKind::Number},
                        {formatDelta(row.delta), CellKind::Number},
                        {std::to_string(row.n) + " / " + std::to_string(row.nAgainst), CellKind::Number},
                        {row.verdict, CellKind::Verdict},
                        {row.note, CellKind::Note}});
    }
  }
  if (t.rows.empty()) return std::nullopt;
  return Section{"sources", "Data sources (not runtime overhead)",
                 {Paragraph{"Each workload against the one its descriptor names (compare_source), from this run: bare "
                            "with bare, container with container. The ratio is this workload's figure over the other's "
                            "(Hodges-Lehmann, unpaired: the two ran one after the other) with its Mann-Whitney interval; "
                            "NO-DIFFERENCE, SLOWER or FASTER against the FOM's delta (at least 10 samples a side), else "
                            "INCONCLUSIVE. It says what the data source costs; the runtime overhead is each workload's "
                            "own row above, and these rows change no verdict or exit status.",
                            true},
                  std::move(t)},
                 {},
                 false};
}

// The overview and one plot per FOM; the page only (the table above has the numbers).
std::vector<Section> plotSections(const Result& r) {
  Section distributions{"distributions", "Distributions, A against B",
                        {Paragraph{"One dot per launch (block); box: quartiles; black bar: median; whiskers: range.", true}},
                        {}, true};
  for (size_t wi = 0; wi < r.workloads.size(); ++wi) {
    const WorkloadResult& w = r.workloads[wi];
    if (w.status == "skipped" || w.foms.empty()) continue;
    Section s{"", w.name, {}, {}, false};
    std::string about = w.description;
    if (w.durationS) about += (about.empty() ? "" : " · ") + std::string("took ") + formatDuration(*w.durationS);
    if (!about.empty()) s.blocks.push_back(Paragraph{about, true});
    for (size_t fi = 0; fi < w.foms.size(); ++fi)
      s.blocks.push_back(Figure{"plot-fom-" + std::to_string(wi) + "-" + std::to_string(fi), distributionSpec(w, w.foms[fi]), {}});
    distributions.sections.push_back(std::move(s));
  }
  if (distributions.sections.empty()) return {};
  return {{"overview", "Overhead per figure of merit", {Figure{"plot-overview", overviewSpec(r), {}}}, {}, false},
          std::move(distributions)};
}

std::optional<Section> skippedSection(const Result& r) {
  Items items;
  for (const auto& w : r.workloads)
    if (w.status == "skipped") items.items.emplace_back(w.name, w.reason.empty() ? "no reason given" : w.reason);
  if (items.items.empty()) return std::nullopt;
  return Section{"skipped", "Skipped workloads", {std::move(items)}, {}, false};
}

std::string errorWhere(const LaunchError& e, const std::string& sideWord) {
  std::string where;
  if (e.block) where = *e.block >= 0 ? "block " + std::to_string(*e.block) : (e.phase.empty() ? "warm-up" : e.phase);
  else if (!e.blockName.empty())
    where = e.blockName.find_first_not_of("0123456789") == std::string::npos ? "block " + e.blockName : e.blockName;
  if (!e.side.empty()) where += (where.empty() ? "" : ", ") + sideWord + " " + e.side;
  return where;
}

Section errorEntry(const std::string& heading, const std::string& message, const std::string& stderrTail) {
  Section s{"", heading, {Paragraph{message.empty() ? "failed" : message}}, {}, false};
  if (!stderrTail.empty()) s.blocks.push_back(Preformatted{stderrTail});
  return s;
}

std::optional<Section> errorsSection(const Result& r) {
  Section s{"errors", "Errors", {}, {}, false};
  for (const auto& w : r.workloads) {
    if (w.status == "error")
      s.sections.push_back(errorEntry(w.name, w.reason.empty() ? "the workload failed" : w.reason, w.stderrTail));
    for (const auto& f : w.foms)
      for (const auto& e : f.errors) {
        std::string where = errorWhere(e, "side");
        s.sections.push_back(errorEntry(w.name + " / " + f.name + (where.empty() ? "" : " (" + where + ")"), e.message, e.stderrTail));
      }
  }
  for (const auto& sc : r.scenarios)
    for (size_t i = 0; i < sc.points.size(); ++i)
      for (const auto& e : sc.points[i].errors)
        s.sections.push_back(errorEntry("scenario " + sc.name + ", " + pointLabel(sc.points[i], i), e.message, e.stderrTail));
  if (r.coldStart)
    for (const auto& e : r.coldStart->errors)
      s.sections.push_back(errorEntry("cold start (" + errorWhere(e, "launch") + ")", e.message, e.stderrTail));
  if (s.sections.empty()) return std::nullopt;
  return s;
}

Section coldStartSection(const Result& r) {
  Section s{"cold-start", "Cold start", {}, {}, false};
  const auto order = r.coldStart ? coldStartOrder(*r.coldStart) : std::vector<std::string>{};
  if (order.empty()) {
    s.blocks.push_back(Paragraph{"Not measured in this run."});
    return s;
  }
  const ColdStart& c = *r.coldStart;
  s.blocks.push_back(Paragraph{"First launch after an image mount (cold) against later launches (warm) and the bare process." +
                               (c.skipped.empty() ? std::string() : " Not measured: " + c.skipped + ".")});
  Table t{{{"Launch"}, {"Median", true}, {"Samples", true}}, {}, ""};
  for (const auto& name : order) {
    const auto median = coldStartMedian(c, name);
    const std::string ms = median ? formatValue(*median * 1000) + " ms" : "—";
    t.rows.push_back({{name}, {ms, CellKind::Number}, {std::to_string(coldStartSamples(c, name).size()), CellKind::Number}});
  }
  s.blocks.push_back(Figure{"plot-cold-start", coldStartSpec(c), std::move(t)});
  return s;
}

// A scenario names its FOM; the unit is the workload's.
std::string scenarioUnit(const Result& r, const ScenarioResult& sc) {
  if (!sc.unit.empty()) return sc.unit;
  for (const auto& w : r.workloads)
    for (const auto& f : w.foms)
      if (f.name == sc.fom && (sc.workload.empty() || w.name == sc.workload)) return f.unit;
  return "";
}

// Scalar fields of a point besides its step and median (the node aggregate, a newer writer's).
std::vector<std::pair<std::string, std::string>> pointExtras(const ScenarioPoint& p) {
  std::vector<std::pair<std::string, std::string>> out;
  if (p.aggregate) out.emplace_back("aggregate", formatValue(*p.aggregate));
  for (const auto& [key, value] : p.extra.items()) {
    if (value.is_number()) out.emplace_back(key, formatValue(value.get<double>()));
    else if (value.is_primitive()) out.emplace_back(key, scalarText(value));
  }
  return out;
}

Table scenarioTable(const ScenarioResult& sc) {
  std::vector<std::string> extraKeys;
  for (const auto& p : sc.points)
    for (const auto& [k, v] : pointExtras(p))
      if (std::find(extraKeys.begin(), extraKeys.end(), k) == extraKeys.end()) extraKeys.push_back(k);
  Table t{{{"Step"}, {"Median", true}, {"Samples", true}}, {}, ""};
  for (const auto& k : extraKeys) t.columns.push_back({k});
  for (size_t i = 0; i < sc.points.size(); ++i) {
    const ScenarioPoint& p = sc.points[i];
    std::vector<Cell> row{{pointLabel(p, i)}, {formatValue(p.median), CellKind::Number},
                          {std::to_string(validSamples(p.samples).size()), CellKind::Number}};
    const auto extras = pointExtras(p);
    for (const auto& k : extraKeys) {
      auto it = std::find_if(extras.begin(), extras.end(), [&](const auto& e) { return e.first == k; });
      row.push_back({it == extras.end() ? "—" : it->second});
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::optional<Section> scenariosSection(const Result& r) {
  if (r.scenarios.empty()) return std::nullopt;
  Section s{"scenarios", "Scenarios", {}, {}, false};
  for (size_t i = 0; i < r.scenarios.size(); ++i) {
    const ScenarioResult& sc = r.scenarios[i];
    const std::string unit = scenarioUnit(r, sc);
    Section one{"", sc.name, {}, {}, false};
    std::string about = sc.kind;
    if (!sc.workload.empty()) about += (about.empty() ? "" : "; ") + sc.workload + (sc.fom.empty() ? "" : " / " + sc.fom);
    if (!unit.empty()) about += (about.empty() ? "" : "; ") + unit;
    if (!about.empty()) one.blocks.push_back(Paragraph{about, true});
    if (!sc.skipped.empty()) one.blocks.push_back(Paragraph{"Skipped: " + sc.skipped});
    else one.blocks.push_back(Figure{"plot-scenario-" + std::to_string(i), scenarioSpec(sc, unit), scenarioTable(sc)});
    s.sections.push_back(std::move(one));
  }
  return s;
}

Pairs pairsOf(const json& value) {
  Pairs p;
  for (const auto& [k, v] : flatten(value))
    p.items.emplace_back(k, Cell{v, v.find('\n') == std::string::npos ? CellKind::Text : CellKind::Pre});
  return p;
}

Section hostSection(const Result& r) {
  Section s{"host", "Host fingerprint", {}, {}, false};
  Pairs host = pairsOf(r.host);
  if (host.items.empty()) s.blocks.push_back(Paragraph{"Not recorded."});
  else s.blocks.push_back(std::move(host));
  if (r.config) s.sections.push_back({"", "Configuration", {pairsOf(runConfigToJson(*r.config))}, {}, false});
  Pairs commands;
  for (const auto& w : r.workloads) {
    if (!w.commands) continue;
    for (const auto& [side, argv] : *w.commands) {
      std::string line;
      for (const auto& arg : argv) line += (line.empty() ? "" : " ") + arg;
      commands.items.emplace_back(w.name + " " + side, Cell{line, CellKind::Code});
    }
  }
  if (!commands.items.empty()) s.sections.push_back({"", "Commands", {std::move(commands)}, {}, false});
  return s;
}

}  // namespace

// "%.*f", with a leading sign when asked.
std::string fixed(double value, int decimals, bool sign) {
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
const Analysis& analysisOf(const FomResult& f) {
  static const Analysis none;
  return f.analysis ? *f.analysis : none;
}

std::string rowVerdict(const WorkloadResult& w, const FomResult& f) {
  if (f.analysis && !f.analysis->verdict.empty()) return f.analysis->verdict;
  return w.status == "error" ? "ERROR" : "";
}

std::string pointLabel(const ScenarioPoint& p, size_t index) {
  if (p.limit) return *p.limit;
  if (p.copies) return std::to_string(*p.copies) + (*p.copies == 1 ? " copy" : " copies");
  if (p.label) return *p.label;
  return "point " + std::to_string(index);
}

std::vector<double> validSamples(const SampleList& samples) {
  std::vector<double> out;
  for (const auto& s : samples)
    if (s) out.push_back(*s);
  return out;
}

// Section by section, in the order both renderings show them.
Report buildReport(const Result& r) {
  const Question q = questionOf(r.mode);
  Report out{r.mode, q.title, q.explanation, r.started, r.benchVersion, r.interrupted, runFacts(r), countVerdicts(r), {}};
  out.sections.push_back(summarySection(r));
  if (auto s = sourcesSection(r)) out.sections.push_back(std::move(*s));
  for (auto& s : plotSections(r)) out.sections.push_back(std::move(s));
  if (auto s = skippedSection(r)) out.sections.push_back(std::move(*s));
  if (auto s = errorsSection(r)) out.sections.push_back(std::move(*s));
  out.sections.push_back(coldStartSection(r));
  if (auto s = scenariosSection(r)) out.sections.push_back(std::move(*s));
  out.sections.push_back(hostSection(r));
  return out;
}

}  // namespace ctr::bench::report
