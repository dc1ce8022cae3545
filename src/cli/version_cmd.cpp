#include <iostream>
#include <string>

#include "commands.hpp"
#include "ctr/build_config.hpp"

namespace ctr::cli {
namespace {

// Invoked as `apptainer` or `singularity`, ctr answers as Apptainer does (`version`: the
// bare version; `--version`: "apptainer version V"), with V the Apptainer release whose
// behaviour it follows plus its own version: tools that drive Apptainer (snakemake, nextflow)
// compare the last word with a minimum release.
std::string apptainerVersion() { return std::string(build::kApptainerVersion) + "+ctr." + build::kVersion; }

}  // namespace

std::string versionFlagText(const Context& ctx) {
  return ctx.asApptainer ? "apptainer version " + apptainerVersion()
                         : std::string("ctr version ") + build::kVersion;
}

void registerVersion(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("version", "Print the ctr version");
  cmd->callback([&ctx] {
    ctx.action = [&ctx] {
      std::cout << (ctx.asApptainer ? apptainerVersion() : versionFlagText(ctx)) << '\n';
      return 0;
    };
  });
}

}  // namespace ctr::cli
