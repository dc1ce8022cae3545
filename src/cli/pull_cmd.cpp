// `ctr pull [--force] [--sandbox] [--disable-cache] [--name FILE] [--dir DIR] [OUT.sif] SOURCE`: a
// Docker/OCI image into a SIF (or, --sandbox, a directory), named as Apptainer names it when
// OUT.sif and --name are not given.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/image.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/oci.hpp"
#include "ctr/scratch.hpp"

namespace ctr::cli {

void registerPull(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("pull", "Fetch a Docker/OCI image and pack it into a SIF");
  auto request = std::make_shared<image::oci::PullRequest>();
  auto args = std::make_shared<std::vector<std::string>>();
  auto name = std::make_shared<std::string>(), dir = std::make_shared<std::string>();
  cmd->add_option("args", *args,
                  "[OUTPUT] SOURCE: the SIF to write (default: --name, else NAME_TAG.sif from SOURCE, as Apptainer) "
                  "and docker://[HOST[:PORT]/]NAME[:TAG|@DIGEST], docker-archive:PATH, oci-archive:PATH[:TAG], oci:DIR[:TAG], oras://REF (a SIF pushed by ctr push or Apptainer) or http(s)://URL (the file as it is)")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--name", *name, "The SIF to write (wins over OUTPUT)");
  cmd->add_option("--dir", *dir, "Write the SIF into this directory");
  cmd->add_flag("--force,-F", request->force, "Overwrite an existing output file");
  cmd->add_flag("--deterministic", request->deterministic,
                "Reproducible output: nil UUID, fixed times, reproducible squashfs");
  cmd->add_flag("--nohttps,--no-https", request->options.noHttps, "Use plain http for the registry");
  cmd->add_option("--arch", request->options.platformArch, "Architecture to pull from a multi-platform image");
  cmd->add_option("--authfile", request->options.authFile,
                  "Registry credentials from FILE (Docker's format, as `registry login --authfile` writes it) "
                  "instead of ctr's own file");
  auto flags = std::make_shared<std::pair<bool, bool>>(false, false);  // --sandbox, --disable-cache
  cmd->add_flag("--sandbox,-s", flags->first, "Unpack the image into a writable directory OUTPUT instead of a SIF");
  cmd->add_flag("--disable-cache", flags->second,
                "Keep nothing in the image cache: the layers go to a temporary directory, removed afterwards");
  cmd->callback([&ctx, request, args, name, dir, flags] {
    ctx.action = [request, args, name, dir, flags] {
      const std::filesystem::path output = image::oci::pullOutputPath(*args, *name, *dir);
      request->source = args->back();
      request->options.limits = config::loadDefaultPolicy().pull;
      // Beside the output where that is private (else a private temporary directory).
      std::optional<image::ScratchDir> scratch;
      if (flags->first || flags->second) scratch.emplace(output, "pull");
      if (flags->second) request->options.cacheDir = scratch->path() / "cache";
      if (!flags->first) {
        request->output = output;
        image::oci::pullToSif(*request);
        return 0;
      }
      // --sandbox: the SIF in the scratch directory, unpacked as `build --sandbox` does.
      if (std::filesystem::exists(std::filesystem::symlink_status(output)) && !request->force)
        throw Error(output.string() + ": already exists (use --force to overwrite)");
      request->output = scratch->path() / "image.sif";
      request->force = true;
      image::oci::pullToSif(*request);
      warnDroppedFromSandbox(image::unpackToSandbox(request->output, output, true, false));
      return 0;
    };
  });
}

}  // namespace ctr::cli
