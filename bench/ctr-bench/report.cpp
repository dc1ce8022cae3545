#include "report.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <variant>
#include <vector>

#include "ctr/error.hpp"
#include "report_model.hpp"

// The two renderings of the report model (report_model.hpp): each lays out the same
// sections, tables and figures; neither decides what the report says.

namespace ctr::bench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace report;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Markdown

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

// Numbers are ctr-bench's own formatting ("[+9.44%, +12.84%] (95.0%)") and go in as they are.
std::string mdCell(const Cell& c) {
  if (c.kind == CellKind::Verdict) return c.text.empty() ? "— (not analysed)" : "**" + c.text + "**";
  if (c.kind == CellKind::Number) return c.text;
  return mdText(c.text);
}

void mdTable(const Table& t, std::ostream& md) {
  md << "|";
  for (const auto& c : t.columns) md << " " << mdText(c.title) << " |";
  md << "\n|";
  for (const auto& c : t.columns) md << (c.numeric ? "---:|" : "---|");
  md << "\n";
  for (const auto& row : t.rows) {
    md << "|";
    // Markdown has no column spans: the cell repeats.
    for (const auto& cell : row)
      for (int i = 0; i < cell.span; ++i) md << " " << mdCell(cell) << " |";
    md << "\n";
  }
  if (t.rows.empty() && !t.whenEmpty.empty()) {
    md << "| " << mdText(t.whenEmpty) << " |";
    for (size_t i = 1; i < t.columns.size(); ++i) md << " |";
    md << "\n";
  }
}

void mdPairs(const Pairs& p, std::ostream& md) {
  for (const auto& [k, v] : p.items) {
    if (v.kind == CellKind::Pre) md << "- " << mdText(k) << ":\n\n" << mdCodeBlock(v.text) << "\n";
    else md << "- " << mdText(k) << ": " << mdText(v.text) << "\n";
  }
  md << "\n";
}

void mdBlock(const Block& block, std::ostream& md) {
  std::visit(Overloaded{
                 [&](const Paragraph& p) { md << mdText(p.text) << "\n\n"; },
                 [&](const Table& t) {
                   mdTable(t, md);
                   md << "\n";
                 },
                 [&](const Pairs& p) { mdPairs(p, md); },
                 [&](const Items& l) {
                   for (const auto& [name, text] : l.items) md << "- **" << mdText(name) << "**: " << mdText(text) << "\n";
                   md << "\n";
                 },
                 [&](const Preformatted& p) { md << mdCodeBlock(p.text) << "\n"; },
                 // Markdown has no plots: a figure shows its numbers as a table, where it has one.
                 [&](const Figure& f) {
                   if (!f.asTable) return;
                   mdTable(*f.asTable, md);
                   md << "\n";
                 },
             },
             block);
}

// A section of plots alone (with their explanations) has nothing to say in Markdown.
bool hasText(const Section& s) {
  for (const auto& b : s.blocks) {
    const auto* f = std::get_if<Figure>(&b);
    const auto* p = std::get_if<Paragraph>(&b);
    if (f ? f->asTable.has_value() : !(p && p->secondary)) return true;
  }
  return std::any_of(s.sections.begin(), s.sections.end(), hasText);
}

void mdSection(const Section& s, int level, std::ostream& md) {
  if (!hasText(s)) return;
  md << std::string(static_cast<size_t>(level), '#') << " " << mdText(s.title) << "\n\n";
  for (const auto& b : s.blocks) mdBlock(b, md);
  for (const auto& sub : s.sections) mdSection(sub, level + 1, md);
}

void mdHeader(const Report& r, std::ostream& md) {
  md << "# ctr-bench report: " << mdText(r.question) << "\n\n";
  md << "**Question answered by this run** (mode `" << r.mode << "`): " << r.question << ": " << r.explanation << "\n\n";
  if (r.interrupted)
    md << "> **Interrupted:** this run was stopped before it finished; the figures below use the blocks "
          "completed so far.\n\n";
  for (const auto& f : r.facts)
    md << "- " << mdText(f.label) << ": " << (f.strong ? "**" + mdText(f.value) + "**" : mdText(f.value)) << "\n";
  std::string counts;
  for (const auto& b : r.counts) counts += (counts.empty() ? "" : ", ") + std::to_string(b.count) + " " + b.label;
  md << "- Verdicts: " << counts << "\n\n";
}

// HTML

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
.v-NO-DIFFERENCE { background: var(--pass); } .v-SLOWER { background: #b26a00; }
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

std::string plotDiv(const std::string& id) { return "<div class=\"card\"><div class=\"plot\" id=\"" + id + "\"></div></div>\n"; }

std::string verdictBadge(const std::string& verdict) {
  if (verdict.empty()) return "<span class=\"v-none\">not analysed</span>";
  return "<span class=\"v-" + esc(verdict) + "\">" + esc(verdict) + "</span>";
}

std::string htmlCell(const Cell& c) {
  std::string span = c.span > 1 ? " colspan=\"" + std::to_string(c.span) + "\"" : "";
  switch (c.kind) {
    case CellKind::Name: return "<td class=\"name\"" + span + ">" + esc(c.text) + "</td>";
    case CellKind::Number: return "<td class=\"num\"" + span + ">" + esc(c.text) + "</td>";
    case CellKind::Verdict: return "<td class=\"verdict\"" + span + ">" + verdictBadge(c.text) + "</td>";
    case CellKind::Note: return "<td class=\"note\"" + span + ">" + esc(c.text) + "</td>";
    case CellKind::Code: return "<td" + span + "><code>" + esc(c.text) + "</code></td>";
    case CellKind::Pre: return "<td class=\"pre\"" + span + ">" + esc(c.text) + "</td>";
    case CellKind::Text: break;
  }
  return "<td" + span + ">" + esc(c.text) + "</td>";
}

// The table scrolls sideways inside its box rather than being cut off by the page.
void htmlTable(const Table& t, std::ostream& h) {
  h << "<div class=\"table-wrap\"><table>\n<thead><tr>";
  for (const auto& c : t.columns) h << "<th>" << esc(c.title) << "</th>";
  h << "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    h << "<tr>";
    for (const auto& cell : row) h << htmlCell(cell);
    h << "</tr>\n";
  }
  if (t.rows.empty() && !t.whenEmpty.empty())
    h << "<tr><td colspan=\"" << t.columns.size() << "\">" << esc(t.whenEmpty) << "</td></tr>\n";
  h << "</tbody>\n</table></div>\n";
}

struct Plot {
  std::string id;
  json spec;
};

void htmlBlock(const Block& block, std::ostream& h, std::vector<Plot>& plots) {
  std::visit(Overloaded{
                 [&](const Paragraph& p) { h << (p.secondary ? "<p class=\"desc\">" : "<p>") << esc(p.text) << "</p>\n"; },
                 [&](const Table& t) { htmlTable(t, h); },
                 [&](const Pairs& p) {
                   h << "<table>\n";
                   for (const auto& [k, v] : p.items) h << "<tr><th>" << esc(k) << "</th>" << htmlCell(v) << "</tr>\n";
                   h << "</table>\n";
                 },
                 [&](const Items& l) {
                   h << "<ul>\n";
                   for (const auto& [name, text] : l.items) h << "<li><strong>" << esc(name) << "</strong>: " << esc(text) << "</li>\n";
                   h << "</ul>\n";
                 },
                 [&](const Preformatted& p) { h << "<pre>" << esc(p.text) << "</pre>\n"; },
                 [&](const Figure& f) {
                   plots.push_back({f.id, f.spec});
                   h << plotDiv(f.id);
                 },
             },
             block);
}

// Blocks in order; figures next to each other share one wrapping grid.
void htmlBlocks(const std::vector<Block>& blocks, std::ostream& h, std::vector<Plot>& plots) {
  bool inGrid = false;
  for (const auto& b : blocks) {
    const bool figure = std::holds_alternative<Figure>(b);
    if (figure && !inGrid) h << "<div class=\"grid\">\n";
    if (!figure && inGrid) h << "</div>\n";
    inGrid = figure;
    htmlBlock(b, h, plots);
  }
  if (inGrid) h << "</div>\n";
}

void htmlSection(const Section& s, int level, std::ostream& h, std::vector<Plot>& plots) {
  const std::string tag = "h" + std::to_string(level);
  if (level == 2) h << "<section" << (s.id.empty() ? "" : " id=\"" + esc(s.id) + "\"") << ">\n";
  h << "<" << tag << ">" << esc(s.title) << "</" << tag << ">\n";
  htmlBlocks(s.blocks, h, plots);
  if (s.sideBySide) h << "<div class=\"workloads\">\n";
  for (const auto& sub : s.sections) {
    if (s.sideBySide) h << "<div class=\"workload\">\n";
    htmlSection(sub, level + 1, h, plots);
    if (s.sideBySide) h << "</div>\n";
  }
  if (s.sideBySide) h << "</div>\n";
  if (level == 2) h << "</section>\n";
}

void htmlHeader(const Report& r, std::ostream& h) {
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>ctr-bench report: " << esc(r.question) << (r.started.empty() ? "" : ", " + esc(r.started)) << "</title>\n"
    << "<style>" << kStyle << "</style>\n</head>\n<body>\n<main>\n";
  h << "<header>\n<h1>ctr-bench report</h1>\n";
  h << "<p class=\"question " << esc(r.mode) << "\"><strong>" << esc(r.question) << "</strong> (mode <code>" << esc(r.mode)
    << "</code>): " << esc(r.explanation) << "</p>\n";
  if (r.interrupted)
    h << "<p class=\"interrupted\">Interrupted: this run was stopped before it finished; the figures use the blocks "
         "completed so far.</p>\n";
  h << "<dl class=\"facts\">\n";
  for (const auto& f : r.facts)
    h << "<dt>" << esc(f.label) << "</dt><dd>" << (f.strong ? "<strong>" + esc(f.value) + "</strong>" : esc(f.value)) << "</dd>\n";
  h << "</dl>\n<p class=\"counts\">";
  for (const auto& b : r.counts) h << "<span class=\"v-" << esc(b.verdict) << "\">" << b.count << " " << esc(b.label) << "</span>";
  h << "</p>\n</header>\n";
}

}  // namespace

std::string renderMarkdown(const Result& result) {
  const Report r = buildReport(result);
  std::ostringstream md;
  mdHeader(r, md);
  for (const auto& s : r.sections) mdSection(s, 2, md);
  std::string text = md.str();
  while (text.size() > 1 && text.ends_with("\n\n")) text.pop_back();
  return text;
}

std::string renderHtml(const Result& result) {
  const Report r = buildReport(result);
  const std::string vegaJs = inlineVega();
  std::vector<Plot> plots;
  std::ostringstream h;
  htmlHeader(r, h);
  for (const auto& s : r.sections) htmlSection(s, 2, h, plots);
  h << "<footer>Written by ctr-bench report" << (r.benchVersion.empty() ? "" : " from a result of ctr-bench " + esc(r.benchVersion))
    << ". Plots: Vega (Debian libjs-vega), inlined; this page loads nothing from the network.</footer>\n</main>\n";
  json plotList = json::array();
  for (const auto& p : plots) plotList.push_back({{"id", p.id}, {"spec", p.spec}});
  h << "<script type=\"application/json\" id=\"ctr-bench-plots\">" << jsonForScript(plotList) << "</script>\n";
  h << "<script>\n" << vegaJs << "</script>\n";
  h << "<script>\n" << kRenderScript << "</script>\n</body>\n</html>\n";
  return h.str();
}

std::string renderMarkdown(const json& result) { return renderMarkdown(resultFromJson(result)); }
std::string renderHtml(const json& result) { return renderHtml(resultFromJson(result)); }

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

void writeReport(const Result& result, const fs::path& markdownOut, const fs::path& htmlOut) {
  // Both are rendered before either is written: a bad field leaves no half-written report.
  std::string markdown = renderMarkdown(result);
  std::string html = renderHtml(result);
  writeAtomically(markdownOut, markdown);
  writeAtomically(htmlOut, html);
}

}  // namespace ctr::bench
