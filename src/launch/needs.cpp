// What a launch needs to know of the node: decided here from the options and the image, so
// that the host module probes only that (host::discoverNeeds) and the CLI decides nothing.
#include <algorithm>

#include "ctr/launch.hpp"

namespace ctr::launch {
namespace {

// Only the servers planImageServer may choose: what ctr.conf names, 'auto' squashfuse_ll only
// where ctr-squashfs is missing; a lazily read image is served by ctr-squashfs alone.
host::ServerSearch serverSearch(config::SquashfsServer setting, bool lazy) {
  if (lazy) return {.ctrSquashfs = true};
  switch (setting) {
    case config::SquashfsServer::CtrSquashfs: return {.ctrSquashfs = true};
    case config::SquashfsServer::Squashfuse: return {.squashfuse = true};
    case config::SquashfsServer::Auto: break;
  }
  return {.ctrSquashfs = true, .squashfuse = true, .squashfuseOnlyAsFallback = true};
}

}  // namespace

host::Needs needsOf(const LaunchOptions& options, const image::ImageSource& image, const config::Policy& policy,
                    const host::HostFacts& host) {
  host::Needs needs;
  const bool file = image.kind != image::ImageKind::Directory;
  if (file) needs.imageFile = image.path.string();
  for (const auto& bind : userBindSpecs(options, host.env, host.cwd.empty() ? std::string("/") : host.cwd))
    if (!bind.imageSrc.empty()) needs.datasetFiles.push_back({bind.source, "--bind " + toString(bind)});
  for (const auto& overlay : options.overlays) needs.overlayFiles.push_back({overlay.path, "--overlay " + overlay.spec});
  // An --overlay path may be an image: its servers are looked for too (a few stat calls).
  if (file || !needs.datasetFiles.empty() || !needs.overlayFiles.empty())
    needs.squashfsServers = serverSearch(policy.squashfsServer, image.lazy.has_value());
  needs.limits = !options.limits.empty() || !options.statsFile.empty() || !options.gpus.empty();
  needs.devices = {options.nv, options.rocm, !options.gpus.empty(), !options.devices.empty()};
  needs.mpi = options.mpi == "bind";
  needs.stageDir = options.stage.value_or(policy.stageImages != config::StageImages::Never);
  needs.subordinateIds = options.fakeroot && !options.ignoreSubuid;
  // Execution control: which rule takes the image depends on its real path, a fact.
  const auto& rules = policy.execution.rules;
  if (std::any_of(rules.begin(), rules.end(), [](const config::ExecutionRule& r) { return r.mode != config::ExecutionMode::Off; }))
    needs.signatureImage = image;
  return needs;
}

host::Needs needsOfBuild() {
  host::Needs needs;
  needs.subordinateIds = true;
  return needs;
}

}  // namespace ctr::launch
