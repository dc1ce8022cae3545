#include <iostream>

#include "commands.hpp"
#include "ctr/build_config.hpp"

namespace ctr::cli {

void registerVersion(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("version", "Print the ctr version");
  cmd->callback([&ctx] {
    ctx.action = [] {
      std::cout << "ctr version " << build::kVersion << '\n';
      return 0;
    };
  });
}

}  // namespace ctr::cli
