#include "report.hpp"

#include <cstdio>
#include <fstream>

#include "ctr/error.hpp"

namespace ctr::bench {

using json = nlohmann::json;

namespace {

std::string pct(const json& v) {
  if (!v.is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", v.get<double>() * 100);
  return b;
}

std::string htmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// One row per FOM: workload, FOM, unit, median A, median B, overhead, CI, delta, verdict, note.
std::vector<std::vector<std::string>> rows(const json& result) {
  std::vector<std::vector<std::string>> out;
  for (const auto& w : result["workloads"]) {
    if (w["foms"].empty()) {
      out.push_back({w["name"], "", "", "", "", "", "", "", w["status"].get<std::string>(),
                     w["reason"].is_string() ? w["reason"].get<std::string>() : ""});
      continue;
    }
    for (const auto& f : w["foms"]) {
      const auto& a = f["analysis"];
      auto num = [](const json& v) { return v.is_number() ? std::to_string(v.get<double>()) : std::string("-"); };
      out.push_back({w["name"], f["name"], f.value("unit", ""), num(a["median"]["A"]), num(a["median"]["B"]),
                     pct(a["overhead"]), a["ci"].is_array() ? "[" + pct(a["ci"][0]) + ", " + pct(a["ci"][1]) + "]" : "-",
                     pct(f["delta"]), a["verdict"], a["note"].is_string() ? a["note"].get<std::string>() : ""});
    }
  }
  return out;
}

const std::vector<std::string> kHeader{"workload", "FOM", "unit", "median A", "median B", "overhead", "90% CI",
                                       "delta", "verdict", "note"};

}  // namespace

void writeReport(const json& result, const std::filesystem::path& markdownOut, const std::filesystem::path& htmlOut) {
  auto table = rows(result);
  std::ofstream md(markdownOut);
  if (!md) throw Error(markdownOut.string() + ": cannot write");
  md << "# ctr-bench: " << result.value("mode", "") << ", profile " << result.value("profile", "") << "\n\n";
  md << "Started " << result.value("started", "") << ", host " << result["host"].value("hostname", "?") << ".\n\n";
  std::string sep = "|";
  md << "|";
  for (const auto& h : kHeader) {
    md << " " << h << " |";
    sep += "---|";
  }
  md << "\n" << sep << "\n";
  for (const auto& r : table) {
    md << "|";
    for (const auto& c : r) md << " " << c << " |";
    md << "\n";
  }
  if (htmlOut.empty()) return;
  std::ofstream html(htmlOut);
  if (!html) throw Error(htmlOut.string() + ": cannot write");
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ctr-bench</title></head><body>\n<table>\n<tr>";
  for (const auto& h : kHeader) html << "<th>" << htmlEscape(h) << "</th>";
  html << "</tr>\n";
  for (const auto& r : table) {
    html << "<tr>";
    for (const auto& c : r) html << "<td>" << htmlEscape(c) << "</td>";
    html << "</tr>\n";
  }
  html << "</table>\n</body></html>\n";
}

}  // namespace ctr::bench
