// ctr.conf's execution control, decided (docs/design-signing.md, section 2): the rule that
// takes the image (config::executionRuleFor on its real path) against who signed it
// (host.signatures, verified or kept by discoverSignatures).
#include <algorithm>

#include "ctr/error.hpp"
#include "ctr/launch.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// Why the rule refuses the image, "" when it lets it run.
std::string refusal(config::ExecutionMode mode, const image::SignatureFacts& f) {
  using config::ExecutionMode;
  if (mode == ExecutionMode::Blacklist)
    return f.blacklistedSigners.empty() ? "" : "signed by a blacklisted key (" + joined(f.blacklistedSigners) + ")";
  if (!f.sif) return "not a SIF: only a signed SIF image may run here";
  if (!f.hasSignatures) return "the image is not signed";
  if (!f.trustedError.empty()) return f.trustedError;
  if (mode == ExecutionMode::Whitestrict)
    for (const auto& key : f.trustedKeys)
      if (std::find(f.trustedSigners.begin(), f.trustedSigners.end(), key) == f.trustedSigners.end())
        return "not signed by the trusted key " + key + " (whitestrict: by every one)";
  return "";
}

}  // namespace

void planExecution(LaunchPlan& plan, const config::Policy& policy, const host::HostFacts& host) {
  if (host.imageRealPath.empty()) return;  // no rule other than off in ctr.conf
  const config::ExecutionRule* rule = config::executionRuleFor(policy.execution, host.imageRealPath);
  if (!rule) return;
  if (!host.signatures) throw Error(host.imageRealPath + ": the execution rule's check did not run");
  const image::SignatureFacts& f = *host.signatures;
  const std::string ruleName = std::string(config::toString(rule->mode)) + " for " +
                               (rule->dir.empty() ? std::string("every image") : rule->dir);
  if (const std::string why = refusal(rule->mode, f); !why.empty())
    throw Error(plan.image.path.string() + ": refused by ctr.conf's execution rule (" + ruleName + ", " +
                policy.source.string() + "): " + why);
  ExecutionCheck check;
  check.ruleDir = rule->dir;
  check.mode = rule->mode;
  check.image = host.imageRealPath;
  check.signers = rule->mode == config::ExecutionMode::Blacklist ? std::vector<std::string>{} : f.trustedSigners;
  check.cached = f.cached;
  plan.execution = std::move(check);
}

}  // namespace ctr::launch
