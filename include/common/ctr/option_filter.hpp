// Which options of a command its command line can name. CLI11 takes ~9,000 instructions to
// register one option (it builds each twice, to compare names) and ~16,000 for an option
// group (an App of its own): ~0.5M instructions for the 51 launch options, paid by every
// rank's `ctr exec`, although most launches name none or a few. A command being parsed
// registers only the options this filter wants; any command line then parses exactly as
// with the full set, since no token of it names an option left out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ctr::cli {

class OptionFilter {
 public:
  // Wants every option: for help, and for commands registered but not parsed.
  OptionFilter() = default;

  // Wants the options that the tokens after the command can name: "--name" and
  // "--name=value" a long option; "-abc" the short options a, b and c (a cluster, or "-Bx"
  // a short option and its value: extra letters only add options). Tokens are not told
  // apart from option values or the container's command: that too only adds options.
  // A token that can ask for help ("--help", a cluster holding 'h') wants every option.
  explicit OptionFilter(const std::vector<std::string>& args);

  // Whether to register an option with CLI11's name list ("-B,--bind", "--pwd,--cwd"). A
  // positional (a name without a dash) is always wanted.
  [[nodiscard]] bool wants(std::string_view names) const;

  [[nodiscard]] bool everything() const { return all_; }

 private:
  bool all_ = true;
  std::string shorts_;
  std::vector<std::string> longs_;
};

}  // namespace ctr::cli
