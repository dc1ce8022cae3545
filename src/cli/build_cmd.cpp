// `ctr build OUT.sif DIR`: pack a directory tree into a SIF image.
#include <memory>

#include "commands.hpp"
#include "ctr/image.hpp"

namespace ctr::cli {

void registerBuild(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("build", "Build a SIF image from a directory");
  auto options = std::make_shared<image::BuildOptions>();
  cmd->add_option("output", options->output, "SIF image to write")->required();
  cmd->add_option("rootfs", options->rootfs, "Directory holding the root filesystem")->required();
  cmd->add_flag("--force,-F", options->force, "Overwrite an existing output file");
  cmd->add_flag("--deterministic", options->deterministic,
                "Reproducible output: nil UUID, fixed times, reproducible squashfs");
  cmd->callback([&ctx, options] {
    ctx.action = [options] {
      image::buildSif(*options);
      return 0;
    };
  });
}

}  // namespace ctr::cli
