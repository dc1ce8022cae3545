// Small string helpers shared by the parsers of ctr.conf, seccomp profiles, env files and
// bind specs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ctr {

// `s` without leading and trailing blanks (space, tab, CR, LF).
constexpr std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// The items of a comma-separated list, each trimmed; empty ones ("a,,b", a trailing comma)
// are dropped.
inline std::vector<std::string_view> splitList(std::string_view list) {
  std::vector<std::string_view> items;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    if (auto item = trim(list.substr(pos, comma - pos)); !item.empty()) items.push_back(item);
    pos = comma + 1;
  }
  return items;
}

// The lines of `text` without their '\n' (a last line without one counts; no empty line
// after a final '\n'). The views point into `text`.
inline std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

// One meaningful line of a "key = value" file (ctr.conf, seccomp profiles).
struct ConfigLine {
  int number = 0;         // 1-based, for "FILE:LINE: ..." messages
  std::string_view text;  // the line without its '#' comment, trimmed; never empty
  bool hasEquals = false; // whether `text` holds a '='
  std::string_view key;   // with hasEquals: `text` before the first '=', trimmed
  std::string_view value; // with hasEquals: `text` after the first '=', trimmed
};

// The lines of `text` that are neither blank nor only a comment ('#' to the end of the
// line). The views point into `text`, which must outlive them.
inline std::vector<ConfigLine> configLines(std::string_view text) {
  std::vector<ConfigLine> lines;
  int number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++number;
    ConfigLine line{number, trim(raw.substr(0, raw.find('#'))), false, {}, {}};
    if (line.text.empty()) continue;
    if (size_t eq = line.text.find('='); eq != std::string_view::npos) {
      line.hasEquals = true;
      line.key = trim(line.text.substr(0, eq));
      line.value = trim(line.text.substr(eq + 1));
    }
    lines.push_back(line);
  }
  return lines;
}

// The value of `key` in "K=V" strings, as in an environment block (the first one), or ""
// when absent.
inline std::string envValue(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  }
  return {};
}

}  // namespace ctr
