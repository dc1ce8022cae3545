// `ctr-bench report`: Markdown and a self-contained HTML page from a result file.
// (Placeholder until the report branch lands: this version writes the Markdown summary
// table, and the same table as a plain HTML page, without plots.)
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>

namespace ctr::bench {

void writeReport(const nlohmann::json& result, const std::filesystem::path& markdownOut,
                 const std::filesystem::path& htmlOut);

}  // namespace ctr::bench
