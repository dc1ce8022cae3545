// `ctr sign [--key PRIVATE.pem... | --keyring SECRET.asc] [--fingerprint FPR] [-g N]... IMAGE`
// (no key: the local keyring's secret key, `ctr key`):
// DSSE or OpenPGP signatures as Apptainer's `sign` writes them (docs/design-signing.md,
// section 1.5), one per object group. The image is signed in a copy beside it, renamed over
// it: a crash leaves it as it was.
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ctr/error.hpp"
#include "ctr/key_store.hpp"
#include "ctr/scratch.hpp"
#include "ctr/sif.hpp"
#include "ctr/sif_integrity.hpp"
#include "ctr/sif_pgp.hpp"
#include "ctr/signers.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

struct SignArgs {
  std::string image;
  std::vector<std::string> keys;  // PEM private keys (DSSE)
  std::string keyring;            // an OpenPGP secret key file
  std::string fingerprint;        // which of its secret keys
  std::vector<std::uint32_t> groups;
};

// The signature(s) into the writable copy; what names the signers.
std::vector<std::string> signCopy(const SignArgs& a, const std::filesystem::path& copy) {
  auto sif = image::sif::Image::open(copy, true);
  if (a.keys.empty()) {  // OpenPGP: --keyring, else the local keyring's secret keys (ctr key)
    std::vector<std::filesystem::path> files{a.keyring};
    if (a.keyring.empty()) {
      const image::KeyStore store(image::KeyStore::defaultDir(), false);
      files = store.files(true);
      if (files.empty())
        throw Error("sign: no key: give --key PRIVATE.pem (DSSE) or --keyring SECRET.asc (OpenPGP), or make one "
                    "with ctr key newpair (the local keyring " + store.dir().string() + " has no secret key)").withStatus(1);
    }
    const image::sif::PgpKeyring keyring(files);
    return {withContext(a.image, [&] { return image::sif::signPgp(sif, keyring, a.fingerprint, a.groups); })};
  }
  std::vector<std::string> pems;
  for (const auto& k : a.keys) pems.push_back(image::readKeyFile(k, "--key"));
  return withContext(a.image, [&] { return image::sif::signDsse(sif, pems, a.groups); });
}

int runSign(const SignArgs& a) {
  if (!a.keys.empty() && !a.keyring.empty())
    throw Error("sign: give --key PRIVATE.pem (DSSE) or --keyring SECRET.asc (OpenPGP), not both").withStatus(1);
  const std::filesystem::path image(a.image);
  // A SIF the user may change, as an in-place signer would need: a read-only image stays so.
  (void)image::sif::Image::open(image, true);  // its errors name the file
  image::ScratchDir work(image, "sign");
  const auto copy = work.path() / "image.sif";
  std::error_code ec;
  std::filesystem::copy_file(image, copy, ec);
  if (ec) throw Error("sign: cannot copy " + a.image + ": " + ec.message());
  const auto keyids = signCopy(a, copy);
  image::moveIntoPlace(copy, image, true);
  for (const auto& id : keyids) std::cout << "signed " << a.image << " with " << id << '\n';
  return 0;
}

}  // namespace

void registerSign(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("sign", "Sign a SIF: a PEM private key (DSSE) or an OpenPGP secret key, as Apptainer signs");
  auto a = std::make_shared<SignArgs>();
  cmd->add_option("image", a->image, "The SIF")->required();
  cmd->add_option("--key", a->keys, "PEM private key: Ed25519, RSA or ECDSA (P-256, P-384, P-521); several: one "
                  "envelope signed by each");
  cmd->add_option("--keyring", a->keyring, "An OpenPGP secret key file (gpg --export-secret-keys), without a "
                  "passphrase: a clear-signed signature, as Apptainer's sign with a PGP key");
  cmd->add_option("--fingerprint", a->fingerprint, "OpenPGP: the secret key to sign with, when the --keyring file or "
                  "the local keyring holds several");
  cmd->add_option("-g,--group-id", a->groups, "Only this object group (repeatable; default: every group)");
  cmd->callback([&ctx, a] { ctx.action = [a] { return runSign(*a); }; });
}

}  // namespace ctr::cli
