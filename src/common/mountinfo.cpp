#include "ctr/mountinfo.hpp"

#include <algorithm>

namespace ctr {

std::optional<MountInfoLine> parseMountInfoLine(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t pos = 0;
  while (pos < line.size()) {
    auto space = line.find(' ', pos);
    if (space == std::string_view::npos) space = line.size();
    if (space > pos) fields.push_back(line.substr(pos, space - pos));
    pos = space + 1;
  }
  auto dash = std::find(fields.begin(), fields.end(), "-");
  if (fields.size() < 6 || dash - fields.begin() < 6 || fields.end() - dash < 4) return std::nullopt;
  MountInfoLine m{std::string(fields[4]), {}, std::string(dash[1]), std::string(dash[3])};
  for (auto f = fields.begin() + 6; f != dash; ++f) m.optionalFields.emplace_back(*f);
  return m;
}

}  // namespace ctr
