// `ctr pull [--force] OUT.sif SOURCE`: a Docker/OCI image into a SIF.
#include <memory>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/oci.hpp"

namespace ctr::cli {

void registerPull(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("pull", "Fetch a Docker/OCI image and pack it into a SIF");
  auto request = std::make_shared<image::oci::PullRequest>();
  cmd->add_option("output", request->output, "SIF image to write")->required();
  cmd->add_option("source", request->source,
                  "docker://[HOST[:PORT]/]NAME[:TAG|@DIGEST], docker-archive:PATH, oci-archive:PATH[:TAG] or oci:DIR[:TAG]")
      ->required();
  cmd->add_flag("--force,-F", request->force, "Overwrite an existing output file");
  cmd->add_flag("--deterministic", request->deterministic,
                "Reproducible output: nil UUID, fixed times, reproducible squashfs");
  cmd->add_flag("--nohttps,--no-https", request->options.noHttps, "Use plain http for the registry");
  cmd->add_option("--arch", request->options.platformArch, "Architecture to pull from a multi-platform image");
  cmd->callback([&ctx, request] {
    ctx.action = [request] {
      request->options.limits = config::loadDefaultPolicy().pull;
      image::oci::pullToSif(*request);
      return 0;
    };
  });
}

}  // namespace ctr::cli
