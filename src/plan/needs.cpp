// What a launch needs to know of the node: decided here from the options and the image, so
// that the host module probes only that (host::discoverNeeds) and the CLI decides nothing.
#include <algorithm>

#include "ctr/launch.hpp"

namespace ctr::launch {

host::Needs needsOf(const LaunchOptions& options, const image::ImageSource& image, const config::Policy& policy) {
  host::Needs needs;
  const bool file = image.kind != image::ImageKind::Directory;
  if (file) needs.imageFile = image.path.string();
  const bool overlayImages = std::any_of(options.overlays.begin(), options.overlays.end(),
                                         [](const OverlayArg& a) { return a.image.has_value(); });
  needs.squashfsServers = file || !options.datasetImages.empty() || overlayImages;
  needs.limits = !options.limits.empty() || !options.statsFile.empty() || !options.gpus.empty();
  needs.devices = {options.nv, options.rocm, !options.gpus.empty(), !options.devices.empty()};
  needs.mpi = options.mpi == "bind";
  needs.stageDir = options.stage.value_or(policy.stageImages != config::StageImages::Never);
  needs.subordinateIds = options.fakeroot && !options.ignoreSubuid;
  return needs;
}

host::Needs needsOfBuild() {
  host::Needs needs;
  needs.subordinateIds = true;
  return needs;
}

}  // namespace ctr::launch
