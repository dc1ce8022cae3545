// `ctr sign --key PRIVATE.pem [-g N]... IMAGE`: DSSE signatures as Apptainer's
// `sign --key` writes them (docs/design-signing.md, section 1.5), one per object group. The
// image is signed in a copy beside it, renamed over it: a crash leaves it as it was.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ctr/error.hpp"
#include "ctr/scratch.hpp"
#include "ctr/sif.hpp"
#include "ctr/sif_integrity.hpp"

namespace ctr::cli {

namespace {

struct SignArgs {
  std::string image;
  std::vector<std::string> keys;
  std::vector<std::uint32_t> groups;
};

int runSign(const SignArgs& a) {
  std::vector<std::string> pems;
  for (const auto& k : a.keys) pems.push_back(readKeyText(k, "--key"));
  const std::filesystem::path image(a.image);
  // A SIF the user may change, as an in-place signer would need: a read-only image stays so.
  (void)withContext(a.image, [&] { return image::sif::Image::open(image, true); });
  image::ScratchDir work(image, "sign");
  const auto copy = work.path() / "image.sif";
  std::error_code ec;
  std::filesystem::copy_file(image, copy, ec);
  if (ec) throw Error("sign: cannot copy " + a.image + ": " + ec.message());
  std::vector<std::string> keyids;
  {
    auto sif = image::sif::Image::open(copy, true);
    keyids = withContext(a.image, [&] { return image::sif::signDsse(sif, pems, a.groups); });
  }
  image::moveIntoPlace(copy, image, true);
  for (const auto& id : keyids) std::cout << "signed " << a.image << " with " << id << '\n';
  return 0;
}

}  // namespace

void registerSign(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("sign", "Sign a SIF with a PEM private key (DSSE, as Apptainer's sign --key)");
  auto a = std::make_shared<SignArgs>();
  cmd->add_option("image", a->image, "The SIF")->required();
  cmd->add_option("--key", a->keys, "PEM private key: Ed25519, RSA or ECDSA (P-256, P-384, P-521); several: one "
                  "envelope signed by each")->required();
  cmd->add_option("-g,--group-id", a->groups, "Only this object group (repeatable; default: every group)");
  cmd->callback([&ctx, a] { ctx.action = [a] { return runSign(*a); }; });
}

}  // namespace ctr::cli
