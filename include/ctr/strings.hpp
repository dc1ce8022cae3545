// Small string helpers shared by the parsers of ctr.conf, seccomp profiles, env files and
// bind specs.
#pragma once

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

// The items of a comma-separated list, each trimmed, empty ones kept (callers decide).
inline std::vector<std::string_view> splitList(std::string_view list) {
  std::vector<std::string_view> items;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    items.push_back(trim(list.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return items;
}

}  // namespace ctr
