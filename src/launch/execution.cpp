// ctr.conf's execution control, decided (docs/design-signing.md, section 2): the rule that
// takes each image file the launch mounts (config::executionRuleFor on its real path) against
// who signed it (host.signedFiles, verified or kept by discoverSignedFile).
#include "ctr/error.hpp"
#include "ctr/launch.hpp"
#include "ctr/signers.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

// The rule that takes the file mounted for `what` (the image's path or "dataset image PATH"),
// nullopt when none does; throws its refusal.
std::optional<ExecutionCheck> checkFile(const std::string& what, const image::ImageSource& file,
                                        const config::Policy& policy, const host::HostFacts& host) {
  const auto found = host.signedFiles.find(file.path.string());
  if (found == host.signedFiles.end()) return std::nullopt;  // no rule other than off in ctr.conf
  const host::SignedFile& signedFile = found->second;
  const config::ExecutionRule* rule = config::executionRuleFor(policy.execution, signedFile.realPath);
  if (!rule) return std::nullopt;
  if (!signedFile.signatures) throw Error(signedFile.realPath + ": the execution rule's check did not run");
  const image::SignatureFacts& f = *signedFile.signatures;
  if (const std::string refused = image::executionRefusal(*rule, f, policy.source.string()); !refused.empty())
    throw Error(what + ": " + refused);
  ExecutionCheck check;
  check.ruleDir = rule->dir;
  check.mode = rule->mode;
  check.image = signedFile.realPath;
  check.signers = rule->mode == config::ExecutionMode::Blacklist ? std::vector<std::string>{} : f.trustedSigners;
  check.cached = f.cached;
  return check;
}

}  // namespace

void planExecution(LaunchPlan& plan, const config::Policy& policy, const host::HostFacts& host) {
  plan.execution = checkFile(plan.image.path.string(), plan.image, policy, host);
  for (auto& d : plan.datasets) d.execution = checkFile("dataset image " + d.image.path.string(), d.image, policy, host);
}

}  // namespace ctr::launch
