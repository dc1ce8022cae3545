// `ctr push [--authfile FILE] [--nohttps] IMAGE.sif oras://REGISTRY/NAME:TAG`: a SIF into an
// OCI registry as Apptainer's `push oras://` lays it out, so that either pulls what the other
// pushed.
#include <memory>
#include <string>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/oci.hpp"

namespace ctr::cli {

void registerPush(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("push", "Push a SIF to an OCI registry (oras://REGISTRY/NAME:TAG)");
  auto image = std::make_shared<std::string>();
  auto target = std::make_shared<std::string>();
  auto options = std::make_shared<image::oci::PullOptions>();
  cmd->add_option("image", *image, "The SIF to push")->required();
  cmd->add_option("uri", *target, "oras://REGISTRY/NAME:TAG")->required();
  cmd->add_option("--authfile", options->authFile,
                  "Registry credentials from FILE (Docker's format) instead of ctr's own file");
  cmd->add_flag("--nohttps,--no-https", options->noHttps, "Use plain http for the registry");
  cmd->callback([&ctx, image, target, options] {
    ctx.action = [image, target, options] {
      if (!target->starts_with("oras://"))
        throw Error("push: " + *target + ": ctr pushes to oras://REGISTRY/NAME:TAG (library:// is Sylabs' cloud "
                    "service, which ctr does not talk to)")
            .withStatus(1);
      options->limits = config::loadDefaultPolicy().pull;
      image::oci::orasPush(*image, target->substr(7), *options);
      return 0;
    };
  });
}

}  // namespace ctr::cli
