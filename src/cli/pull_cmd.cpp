// `ctr pull [--force] [--name FILE] [--dir DIR] [OUT.sif] SOURCE`: a Docker/OCI image into a
// SIF, named as Apptainer names it when OUT.sif and --name are not given.
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/oci.hpp"

namespace ctr::cli {

void registerPull(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("pull", "Fetch a Docker/OCI image and pack it into a SIF");
  auto request = std::make_shared<image::oci::PullRequest>();
  auto args = std::make_shared<std::vector<std::string>>();
  auto name = std::make_shared<std::string>(), dir = std::make_shared<std::string>();
  cmd->add_option("args", *args,
                  "[OUTPUT] SOURCE: the SIF to write (default: --name, else NAME_TAG.sif from SOURCE, as Apptainer) "
                  "and docker://[HOST[:PORT]/]NAME[:TAG|@DIGEST], docker-archive:PATH, oci-archive:PATH[:TAG] or oci:DIR[:TAG]")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--name", *name, "The SIF to write (wins over OUTPUT)");
  cmd->add_option("--dir", *dir, "Write the SIF into this directory");
  cmd->add_flag("--force,-F", request->force, "Overwrite an existing output file");
  cmd->add_flag("--deterministic", request->deterministic,
                "Reproducible output: nil UUID, fixed times, reproducible squashfs");
  cmd->add_flag("--nohttps,--no-https", request->options.noHttps, "Use plain http for the registry");
  cmd->add_option("--arch", request->options.platformArch, "Architecture to pull from a multi-platform image");
  cmd->callback([&ctx, request, args, name, dir] {
    ctx.action = [request, args, name, dir] {
      request->output = image::oci::pullOutputPath(*args, *name, *dir);
      request->source = args->back();
      request->options.limits = config::loadDefaultPolicy().pull;
      image::oci::pullToSif(*request);
      return 0;
    };
  });
}

}  // namespace ctr::cli
