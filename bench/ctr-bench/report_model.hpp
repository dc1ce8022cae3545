// What `ctr-bench report` says, decided once: a typed description of the report (header,
// sections, tables of cells, verdict badges, figures) built from a Result. The Markdown and
// HTML renderers (report.cpp) only lay it out; neither decides content of its own. A figure
// carries its Vega spec for the page and, where the numbers fit a table, that table for
// Markdown.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "result.hpp"

namespace ctr::bench::report {

enum class CellKind {
  Text,     // plain text
  Name,     // a workload or FOM name: may wrap anywhere
  Number,   // right-aligned, tabular figures
  Verdict,  // a verdict badge; "" = not analysed
  Note,     // free text that wraps
  Code,     // a command line
  Pre,      // several lines, kept as they are
};

struct Cell {
  std::string text;
  CellKind kind = CellKind::Text;
  int span = 1;  // columns it covers
};

struct Column {
  std::string title;
  bool numeric = false;
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
  std::string whenEmpty;  // the one row shown when there is none ("(no workload ran)")
};

// Name/value pairs (the host fingerprint, the configuration, the commands).
struct Pairs {
  std::vector<std::pair<std::string, Cell>> items;
};

struct Paragraph {
  std::string text;
  bool secondary = false;  // an explanation under a heading
};

// "**name**: text" items.
struct Items {
  std::vector<std::pair<std::string, std::string>> items;
};

struct Preformatted {
  std::string text;  // stderr, as it was
};

struct Figure {
  std::string id;
  nlohmann::json spec;          // Vega
  std::optional<Table> asTable;  // the same numbers for Markdown; none: a plot only
};

using Block = std::variant<Paragraph, Table, Pairs, Items, Preformatted, Figure>;

struct Section {
  std::string id;  // the page's anchor; may be empty
  std::string title;
  std::vector<Block> blocks;
  std::vector<Section> sections;
  bool sideBySide = false;  // subsections laid out next to each other on the page
};

struct Fact {
  std::string label, value;
  bool strong = false;
};

struct Badge {
  std::string verdict;  // PASS ... or SKIPPED, "none" for not analysed: the colour
  int count = 0;
  std::string label;
};

struct Report {
  std::string mode, question, explanation;
  std::string started, benchVersion;
  bool interrupted = false;
  std::vector<Fact> facts;
  std::vector<Badge> counts;
  std::vector<Section> sections;
};

[[nodiscard]] Report buildReport(const Result& result);

// Formatting both renderings share (and the plots).
[[nodiscard]] std::string fixed(double value, int decimals, bool sign = false);
[[nodiscard]] std::string formatValue(std::optional<double> v);
[[nodiscard]] std::string formatPercent(std::optional<double> fraction);
[[nodiscard]] std::string formatCi(const Analysis& a);
[[nodiscard]] std::string formatDelta(std::optional<double> delta);
[[nodiscard]] std::string formatDuration(double seconds);

// The verdict a FOM row shows: the analysis's, ERROR for a FOM of a failed workload
// without one, "" when it was never analysed (an interrupted run).
[[nodiscard]] std::string rowVerdict(const WorkloadResult& w, const FomResult& f);
[[nodiscard]] const Analysis& analysisOf(const FomResult& f);

// One step of a scenario as the report names it ("--cpus 0.5", "2 copies").
[[nodiscard]] std::string pointLabel(const ScenarioPoint& p, size_t index);
[[nodiscard]] std::vector<double> validSamples(const SampleList& samples);

// The Vega specs (report_plots.cpp).
[[nodiscard]] nlohmann::json overviewSpec(const Result& r);
[[nodiscard]] nlohmann::json distributionSpec(const WorkloadResult& w, const FomResult& f);
[[nodiscard]] nlohmann::json coldStartSpec(const ColdStart& c);
[[nodiscard]] nlohmann::json scenarioSpec(const ScenarioResult& sc, const std::string& unit);

// Cold start launches in the report's order: bare, warm, cold first, then any other.
[[nodiscard]] std::vector<std::string> coldStartOrder(const ColdStart& c);
// One launch kind's median and its successful launches.
[[nodiscard]] std::optional<double> coldStartMedian(const ColdStart& c, const std::string& name);
[[nodiscard]] std::vector<double> coldStartSamples(const ColdStart& c, const std::string& name);

}  // namespace ctr::bench::report
