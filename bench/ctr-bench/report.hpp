// `ctr-bench report`: turns a result (format "ctr-bench-result", version 1; see
// docs/benchmark-guide.md) into a Markdown summary and one self-contained HTML page whose
// plots are drawn by Vega (Debian's libjs-vega, inlined when the report is written). What the
// report says is decided once (report_model.hpp); these render it.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "result.hpp"

namespace ctr::bench {

// Writes a Markdown summary and one self-contained HTML page. Both are rendered before
// either is written. Throws ctr::Error when Vega is not installed (see vegaDirectory()).
void writeReport(const Result& result, const std::filesystem::path& markdownOut, const std::filesystem::path& htmlOut);

// The pieces of writeReport, for tests and for callers that want the text.
[[nodiscard]] std::string renderMarkdown(const Result& result);
[[nodiscard]] std::string renderHtml(const Result& result);

// The same from a parsed result file (resultFromJson: a wrong field throws ctr::Error naming
// it, "workloads[2].foms[0].name"); optional parts may be absent or null.
[[nodiscard]] std::string renderMarkdown(const nlohmann::json& result);
[[nodiscard]] std::string renderHtml(const nlohmann::json& result);

// Where Vega's browser modules are read from: $CTR_BENCH_VEGA_DIR, else
// /usr/share/javascript/vega (Debian 12's libjs-vega).
[[nodiscard]] std::filesystem::path vegaDirectory();

}  // namespace ctr::bench
