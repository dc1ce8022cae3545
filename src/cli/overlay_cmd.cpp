// `ctr overlay create [--size MiB] [--create-dir DIR]... [--fakeroot] [--sparse] IMAGE`:
// Apptainer's writable ext3 overlay image, made by ctr/overlay_image.hpp.
#include <memory>

#include "commands.hpp"
#include "ctr/overlay_image.hpp"

namespace ctr::cli {

void registerOverlay(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("overlay", "Writable ext3 overlay images (as Apptainer's overlay command)");
  cmd->require_subcommand(1);
  auto options = std::make_shared<image::OverlayCreateOptions>();
  auto* create = cmd->add_subcommand(
      "create", "Create an ext3 overlay image (upper/ and work/), or add one to a SIF as an overlay partition");
  create->add_option("-s,--size", options->sizeMiB, "Size of the overlay image in MiB (at least 64)")
      ->default_val(image::kMinOverlaySizeMiB);
  create->add_option("--create-dir", options->createDirs,
                     "Directory to make in the overlay (an absolute path, made under upper/); repeatable")
      ->allow_extra_args(false);
  create->add_flag("-f,--fakeroot", options->fakeroot, "Make the layout root's, for runs with --fakeroot");
  create->add_flag("-S,--sparse", options->sparse, "Create a sparse image file");
  create->add_option("image", options->image, "The overlay image to create, or a SIF to add it to")->required();
  create->callback([&ctx, options] {
    ctx.action = [options] {
      image::createOverlayImage(*options);
      return 0;
    };
  });
}

}  // namespace ctr::cli
