// Node-local staging (docs/design-io.md section 4): which image files a launch copies to the
// node's stage directory first, and where. The copy itself is the runtime's.
#include <algorithm>
#include <optional>
#include <string_view>

#include "ctr/error.hpp"
#include "ctr/limits.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/stage.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

void planStaging(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy,
                 const host::HostFacts& host) {
  if (options.stage == false || (!options.stage && policy.stageImages == config::StageImages::Never)) return;
  Staging staging;
  staging.dir = !host.stageDir.empty() ? host.stageDir
                                       : normalizePath(expandUidPattern(policy.stageDir, host.user.uid, "'stage dir'"));
  staging.maxBytes = policy.stageMaxBytes;
  std::uint64_t total = 0;
  auto consider = [&](const std::string& what, image::ImageSource& image) {
    if (image.kind == image::ImageKind::Directory) {
      if (options.stage) plan.warnings.push_back(what + " is a directory: not staged (--stage copies image files)");
      return;
    }
    if (isAtOrUnder(image.path.string(), staging.dir)) return;  // a copy already
    if (image.lazy) {  // its node cache is node-local already, and holds only what was read
      if (options.stage) plan.warnings.push_back(what + " is read lazily: not staged (its chunks are cached on the node)");
      return;
    }
    if (&image == &plan.image && options.writable && image.overlaySize != 0) {
      // The changes must go into the user's file, not into a node's copy of it.
      if (options.stage) plan.warnings.push_back(what + " is not staged: --writable writes into its overlay partition");
      return;
    }
    std::string reason;
    if (options.stage) {
      reason = "--stage";
    } else if (policy.stageImages == config::StageImages::Always) {
      reason = "'stage images = always'";
    } else if (auto fs = sharedFilesystemName(image.filesystem)) {
      reason = "on " + std::string(*fs) + " ('stage images = auto')";
    } else {
      return;
    }
    if (total + image.fileBytes > staging.maxBytes) {
      plan.warnings.push_back(what + " " + image.path.string() + " (" + limits::formatSize(image.fileBytes) + ") is not staged: " +
                              "with the launch's other copies it passes 'stage max size' (" + limits::formatSize(staging.maxBytes) +
                              ")");
      return;
    }
    total += image.fileBytes;
    StagedFile file{what, image.path.string(), joinPath(staging.dir, image::stage::copyName(image.path)),
                    image.fileBytes, image.mtimeNs, reason};
    image.path = file.copy;
    staging.files.push_back(std::move(file));
  };
  consider("the image", plan.image);
  for (auto& d : plan.datasets) consider("the dataset image", d.image);
  if (staging.files.empty()) return;

  const bool imageStaged = staging.files.front().what == "the image";
  plan.staging = std::move(staging);
  if (!imageStaged || plan.driver != ImageDriver::SetuidHelper) return;
  if (const std::string why = whyHelperRefuses(policy, host, fileMounted(plan, host, plan.image)); !why.empty()) {
    plan.driver = ImageDriver::Squashfuse;
    plan.driverReason = "the setuid helper would refuse the staged copy, the user's own file: " + why;
    plan.driverFallback.reset();
  }
}

}  // namespace ctr::launch
