// The report's plots as Vega specs, from the result model (report_model.hpp).
#include <algorithm>
#include <cmath>

#include "report_model.hpp"

namespace ctr::bench::report {
namespace {

using nlohmann::json;

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

// Box, median bar, whiskers and one dot per sample, per side.
json distributionMarks() {
  json xCenter = {{"scale", "x"}, {"field", "side"}, {"band", 0.5}};
  return {
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
}

// The arrow at an edge of the clipped axis for a row whose bar goes on past it.
json clipArrow(const json& x, const char* align, const char* text) {
  return {{"type", "text"},
          {"from", {{"data", "rows"}}},
          {"encode",
           {{"enter",
             {{"x", x},
              {"y", {{"scale", "y"}, {"field", "row"}, {"band", 0.5}}},
              {"align", {{"value", align}}},
              {"baseline", {{"value", "middle"}}},
              {"fontSize", {{"value", 14}}},
              {"fill", {{"scale", "verdict"}, {"field", "verdict"}}},
              {"text", {{"signal", text}}}}}}}};
}

// The ±delta band, the zero line, each interval and estimate, and the clip arrows.
json overviewMarks() {
  json yMid = {{"scale", "y"}, {"field", "row"}, {"band", 0.5}};
  json tooltip = {{"signal", "{'FOM': datum.row, 'overhead': isValid(datum.o) ? format(datum.o, '+.2f') + '%' : '—', 'CI': datum.ci, 'delta': datum.delta, 'verdict': datum.verdict}"}};
  return {
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
      clipArrow({{"signal", "width"}, {"offset", -2}}, "right", "datum.clipped_hi ? '▸' : ''"),
      clipArrow({{"value", 2}}, "left", "datum.clipped_lo ? '◂' : ''"),
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
}

struct OverviewRows {
  json rows = json::array();
  json names = json::array();
};

// One row per FOM that ran: its estimate, interval and delta in percent, with its verdict.
OverviewRows overviewRows(const Result& r) {
  OverviewRows out;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") continue;
    for (const auto& f : w.foms) {
      std::string row = w.name + " · " + f.name;
      // Two FOMs may share a display name; the band scale needs distinct rows.
      while (std::find(out.names.begin(), out.names.end(), row) != out.names.end()) row += " ";
      out.names.push_back(row);
      std::string verdict = rowVerdict(w, f);
      if (verdict.empty()) verdict = "not analysed";
      const Analysis& a = analysisOf(f);
      auto pct = [](std::optional<double> v) { return v && std::isfinite(*v) ? json(*v * 100) : json(); };
      out.rows.push_back({{"row", row},
                          {"o", pct(a.overhead)},
                          {"lo", pct(a.ciLow)},
                          {"hi", pct(a.ciHigh)},
                          {"dn", f.delta ? json(-*f.delta * 100) : json()},
                          {"dp", f.delta ? json(*f.delta * 100) : json()},
                          {"verdict", verdict},
                          {"label", verdict + (a.overhead ? "  " + formatPercent(a.overhead) : std::string())},
                          {"ci", formatCi(a)},
                          {"delta", formatDelta(f.delta)}});
    }
  }
  return out;
}

// The axis is clipped so that one wild interval (a 3-pair +40,000%) cannot shrink the
// others to dots: at least 3x the largest delta (the band stays visible), at most what most
// estimates need; bars and dots beyond it stop at the edge with an arrow. Returns the limit
// and marks the rows that go on.
double clipOverview(json& rows, bool& clipped) {
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
  clipped = extent * 1.05 > limit;
  auto beyond = [&](const json& v, double sign) { return v.is_number() && sign * v.get<double>() > limit; };
  for (auto& row : rows) {
    row["clipped_hi"] = beyond(row["hi"], 1) || beyond(row["o"], 1);
    row["clipped_lo"] = beyond(row["lo"], -1) || beyond(row["o"], -1);
  }
  return limit;
}

// One bar per launch kind (its median), its launches as dots, the median as text.
json coldStartMarks() {
  return {
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
}

// The launches as dots, a line and dots per series of medians.
json scenarioMarks() {
  return {
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
}

}  // namespace

json distributionSpec(const WorkloadResult& w, const FomResult& f) {
  const std::string a = sideLabel(w.sides().a, 'A'), b = sideLabel(w.sides().b, 'B');
  json values = json::array();
  for (const auto& [label, samples] : {std::pair{a, &f.samplesA}, std::pair{b, &f.samplesB}})
    for (size_t block = 0; block < samples->size(); ++block)
      if ((*samples)[block] && std::isfinite(*(*samples)[block]))
        values.push_back({{"side", label}, {"value", *(*samples)[block]}, {"block", block}, {"j", jitter(block)}});

  std::string verdict = rowVerdict(w, f);
  std::string line = (verdict.empty() ? "not analysed" : verdict) + " · overhead " + formatPercent(analysisOf(f).overhead) +
                     " " + formatCi(analysisOf(f)) + " · delta " + formatDelta(f.delta);
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
  spec["marks"] = distributionMarks();
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
  OverviewRows o = overviewRows(r);
  bool clipped = false;
  const double limit = clipOverview(o.rows, clipped);
  int height = std::max(60, 30 * static_cast<int>(o.rows.size()));
  std::string axisNote = clipped ? "axis clipped at ±" + fixed(limit, 0) + "%: ▸ / ◂ mark bars that go on (numbers in the table)"
                                 : "positive = B worse";
  json spec = baseSpec(760, height, "Overhead of B against A, every figure of merit",
                       {"dot: median overhead · bar: its interval · green band: ±delta (PASS when the bar lies inside it)",
                        axisNote + (clipped ? " · positive = B worse" : "")});
  spec["data"] = {{{"name", "rows"}, {"values", o.rows}},
                  {{"name", "withDelta"}, {"source", "rows"}, {"transform", {{{"type", "filter"}, {"expr", "isValid(datum.dn)"}}}}},
                  {{"name", "withCi"}, {"source", "rows"}, {"transform", {{{"type", "filter"}, {"expr", "isValid(datum.lo) && isValid(datum.hi)"}}}}},
                  {{"name", "withOverhead"}, {"source", "rows"}, {"transform", {{{"type", "filter"}, {"expr", "isValid(datum.o)"}}}}}};
  spec["scales"] = {{{"name", "y"}, {"type", "band"}, {"domain", o.names}, {"range", "height"}, {"padding", 0.25}},
                    {{"name", "x"},
                     {"type", "linear"},
                     {"domain", {-limit, limit}},
                     {"range", "width"},
                     {"clamp", true},
                     {"zero", true}},
                    kVerdictScale};
  spec["axes"] = {{{"orient", "bottom"}, {"scale", "x"}, {"title", "overhead %"}, {"grid", true}},
                  {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 280}, {"labelFontSize", 11}}};
  spec["marks"] = overviewMarks();
  return spec;
}

json coldStartSpec(const ColdStart& c) {
  json bars = json::array(), samples = json::array(), order = json::array();
  for (const auto& name : coldStartOrder(c)) {
    order.push_back(name);
    if (const auto median = coldStartMedian(c, name))
      bars.push_back({{"launch", name}, {"ms", *median * 1000}, {"text", formatValue(*median * 1000) + " ms"}});
    const auto values = coldStartSamples(c, name);
    for (size_t i = 0; i < values.size(); ++i) samples.push_back({{"launch", name}, {"ms", values[i] * 1000}, {"j", jitter(i)}});
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
  spec["marks"] = coldStartMarks();
  return spec;
}


json scenarioSpec(const ScenarioResult& sc, const std::string& unit) {
  json medians = json::array(), samples = json::array(), order = json::array();
  for (size_t pi = 0; pi < sc.points.size(); ++pi) {
    const ScenarioPoint& p = sc.points[pi];
    std::string label = pointLabel(p, pi);
    const std::vector<double> values = validSamples(p.samples);
    while (std::find(order.begin(), order.end(), label) != order.end()) label += " ";
    order.push_back(label);
    if (p.median) medians.push_back({{"step", label}, {"value", *p.median}, {"series", "median"}});
    if (p.aggregate) medians.push_back({{"step", label}, {"value", *p.aggregate}, {"series", "node aggregate"}});
    for (size_t i = 0; i < values.size(); ++i) samples.push_back({{"step", label}, {"value", values[i]}, {"j", jitter(i)}});
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
                  {{"orient", "left"}, {"scale", "y"}, {"title", unit}, {"grid", true}}};
  spec["marks"] = scenarioMarks();
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

std::vector<std::string> coldStartOrder(const ColdStart& c) {
  std::vector<std::string> names = {"bare", "warm", "cold"};
  auto add = [&](const std::string& key) {
    if (std::find(names.begin(), names.end(), key) == names.end()) names.push_back(key);
  };
  for (const auto& [key, value] : c.samplesS) add(key);
  for (const auto& [key, value] : c.medianS) add(key);
  // A launch kind that was tried and never succeeded stays in, with no value: its errors say why.
  std::vector<std::string> out;
  for (const auto& n : names)
    if (c.samplesS.contains(n) || c.medianS.contains(n)) out.push_back(n);
  return out;
}

std::optional<double> coldStartMedian(const ColdStart& c, const std::string& name) {
  auto it = c.medianS.find(name);
  if (it == c.medianS.end() || !it->second) return std::nullopt;
  return *it->second;
}

std::vector<double> coldStartSamples(const ColdStart& c, const std::string& name) {
  auto it = c.samplesS.find(name);
  return it == c.samplesS.end() ? std::vector<double>{} : validSamples(it->second);
}

}  // namespace ctr::bench::report
