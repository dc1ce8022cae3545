#include "ctr/option_filter.hpp"

#include <algorithm>

#include "ctr/strings.hpp"

namespace ctr::cli {

OptionFilter::OptionFilter(const std::vector<std::string>& args) : all_(false) {
  for (std::string_view arg : args) {
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") continue;
    if (arg[1] == '-') {
      std::string_view name = arg.substr(2);
      name = name.substr(0, name.find('='));
      all_ = all_ || name == "help";
      longs_.emplace_back(name);
    } else {
      std::string_view letters = arg.substr(1);
      all_ = all_ || letters.find('h') != std::string_view::npos;
      shorts_.append(letters);
    }
  }
}

bool OptionFilter::wants(std::string_view names) const {
  if (all_) return true;
  for (std::string_view name : splitList(names)) {
    if (!name.starts_with('-')) return true;  // a positional
    if (name.starts_with("--")) {
      if (std::find(longs_.begin(), longs_.end(), name.substr(2)) != longs_.end()) return true;
    } else if (name.size() == 2 && shorts_.find(name[1]) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace ctr::cli
