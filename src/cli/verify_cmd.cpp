// `ctr verify [--key PEM]... [--keyring FILE]... [-g N]... [-i N]... [--all]
// [--legacy-insecure] [--json] IMAGE`: the signatures of a SIF checked as the reference
// checks them (docs/design-signing.md): who signed which objects, and the first object that
// does not match, in one line, with a non-zero exit status.
#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ctr/configured.hpp"
#include "ctr/error.hpp"
#include "ctr/key_store.hpp"
#include "ctr/sif.hpp"
#include "ctr/sif_integrity.hpp"
#include "ctr/sif_pgp.hpp"
#include "ctr/signers.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

struct VerifyArgs {
  std::string image;
  std::vector<std::string> keys;      // PEM public keys (DSSE)
  std::vector<std::string> keyrings;  // OpenPGP public keys
  std::vector<std::uint32_t> groups, objects;
  bool all = false, legacy = false, json = false;
};

std::string idList(const std::vector<std::uint32_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

void printText(const image::sif::Verification& v) {
  for (const auto& c : v.checks) {
    std::string signers;
    for (const auto& s : c.signers) signers += (signers.empty() ? "" : ", ") + s;
    std::cout << "signature " << c.signature << " (" << c.format << ") on " << c.covers << ": ";
    if (c.error.empty())
      std::cout << "objects " << idList(c.objects) << " verified, signed by " << signers << '\n';
    else
      std::cout << "FAILED: " << c.error << '\n';
  }
}

nlohmann::ordered_json toJson(const std::string& image, const image::sif::Verification& v) {
  nlohmann::ordered_json j;
  j["image"] = image;
  j["verified"] = v.error.empty();
  j["signatures"] = nlohmann::ordered_json::array();
  for (const auto& c : v.checks)
    j["signatures"].push_back({{"id", c.signature},
                               {"format", c.format},
                               {"covers", c.covers},
                               {"objects", c.objects},
                               {"signers", c.signers},
                               {"error", c.error}});
  if (!v.error.empty()) j["error"] = v.error;
  return j;
}

int runVerify(const VerifyArgs& a) {
  image::sif::VerifyKeys keys;
  for (const auto& k : a.keys) keys.publicKeysPem.push_back(image::readKeyFile(k, "--key"));
  std::vector<std::filesystem::path> pgpFiles(a.keyrings.begin(), a.keyrings.end());
  std::string local;
  if (a.keys.empty() && a.keyrings.empty()) {  // the local keyring's public keys (ctr key)
    const image::KeyStore store(image::KeyStore::defaultDir(), false);
    pgpFiles = store.files(false);
    local = " (the local keyring " + store.dir().string() + " has no key)";
  }
  std::optional<image::sif::PgpKeyring> keyring;
  if (!pgpFiles.empty()) {
    keyring.emplace(pgpFiles);
    keys.keyring = &*keyring;
  }
  if (keys.publicKeysPem.empty() && !keys.keyring)
    throw Error("verify: no key material: give --key FILE.pem (DSSE) or --keyring FILE (OpenPGP)" + local).withStatus(1);
  image::sif::VerifyTasks tasks;
  tasks.groups = a.groups;
  tasks.objects = a.objects;
  tasks.all = a.all;
  tasks.legacy = a.legacy;
  const auto sifImage = image::sif::Image::open(a.image);  // its errors name the file
  const auto v = image::sif::verifyImage(sifImage, tasks, keys);
  if (a.json) {
    std::cout << toJson(a.image, v).dump(2) << '\n';
  } else {
    printText(v);
    if (v.error.empty()) std::cout << "verified: " << a.image << '\n';
  }
  if (!v.error.empty()) throw Error(a.image + ": " + v.error);
  return 0;
}

// The image the setuid helper opened and hands to `__verify-fd`.
constexpr int kHelperImageFd = 3;

// `ctr __verify-fd REALPATH`: the setuid helper's own check of the file it is about to mount
// (docs/design-signing.md, section 3), run by it as its check user (_ctr-verify or nobody)
// with that file open on fd 3 and REALPATH where it lies. ctr.conf is the compiled-in one,
// never $CTR_CONFIG; the rule and the judgement are the planner's (config::executionRuleFor,
// image::executionRefusal).
// Prints "allow rule" (a rule took the image and lets it run) or "allow none" (no rule takes
// it), then the files the verdict rests on, one per line (ctr.conf and the key files read:
// the helper keeps the verdict while they are as they are), exit 0; or "refuse WHY" (any
// error included: the check fails closed), exit 1. Nothing is kept here.
int runVerifyFd(const std::string& realPath) {
  std::string files = std::string(configured::kSysconfPath) + "\n", verdict = "allow none\n";
  try {
    const config::Policy policy = config::loadPolicy(configured::kSysconfPath);
    if (const config::ExecutionRule* rule = config::executionRuleFor(policy.execution, realPath)) {
      const bool blacklist = rule->mode == config::ExecutionMode::Blacklist;
      struct stat st{};
      if (::fstat(kHelperImageFd, &st) != 0) throw sysError("the image on fd 3");
      const auto facts = image::verifyOpenFile(UniqueFd(kHelperImageFd), static_cast<std::uint64_t>(st.st_size),
                                               policy.execution, !blacklist, blacklist);
      if (const auto refused = image::executionRefusal(*rule, facts, policy.source.string()); !refused.empty()) {
        std::cout << "refuse " << refused << std::endl;
        return 1;
      }
      for (const auto& key : blacklist ? policy.execution.blacklistedKeys : policy.execution.trustedKeys)
        files += key + "\n";
      verdict = "allow rule\n";
    }
  } catch (const Error& e) {
    std::cout << "refuse the execution rule's check failed: " << e.oneLine() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cout << "refuse the execution rule's check failed: " << e.what() << std::endl;
    return 1;
  }
  std::cout << verdict << files << std::flush;
  return 0;
}

}  // namespace

void registerVerify(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("verify", "Check the signatures of a SIF (DSSE and OpenPGP, as Apptainer signs)");
  auto a = std::make_shared<VerifyArgs>();
  cmd->add_option("image", a->image, "The SIF")->required();
  cmd->add_option("--key", a->keys, "A PEM public key (Ed25519, RSA, ECDSA) for DSSE signatures (repeatable)");
  cmd->add_option("--keyring", a->keyrings, "OpenPGP public keys (armoured or binary) for clear-signed signatures "
                  "(repeatable)");
  cmd->add_option("-g,--group-id", a->groups, "Only this object group (repeatable)");
  cmd->add_option("-i,--sif-id", a->objects, "Only this object (repeatable)");
  cmd->add_flag("-a,--all", a->all, "With --legacy-insecure: every object of a group");
  cmd->add_flag("--legacy-insecure", a->legacy, "Singularity's signatures from before 3.6, which cover object data "
                "but not the header or descriptors");
  cmd->add_flag("-j,--json", a->json, "Print the result as JSON");
  cmd->callback([&ctx, a] { ctx.action = [a] { return runVerify(*a); }; });

  auto realPath = std::make_shared<std::string>();
  auto* helperCheck = app.add_subcommand("__verify-fd", "")->group("");  // hidden: the setuid helper's
  helperCheck->add_option("realpath", *realPath)->required();
  helperCheck->callback([&ctx, realPath] { ctx.action = [realPath] { return runVerifyFd(*realPath); }; });
}

}  // namespace ctr::cli
