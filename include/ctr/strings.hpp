// Small string helpers shared by the parsers of ctr.conf, seccomp profiles, env files and
// bind specs.
#pragma once

#include <string_view>

namespace ctr {

// `s` without leading and trailing blanks (space, tab, CR, LF).
constexpr std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace ctr
