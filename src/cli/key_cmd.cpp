// `ctr key list|import|export|newpair|remove`: the user's local OpenPGP keyring
// (image::KeyStore), which `ctr sign` and `ctr verify` use when given no key, as Apptainer's
// `key` commands keep the keys its `sign` and `verify` use.
#include <ctime>
#include <iomanip>
#include <memory>
#include <string>

#include "commands.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/key_store.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

struct KeyArgs {
  bool secret = false, armor = false;
  std::string id, file;
  std::string name, email, comment;
  unsigned bits = 4096;
};

std::string day(std::int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char out[16];
  std::strftime(out, sizeof out, "%Y-%m-%d", &tm);
  return out;
}

int runList(const KeyArgs& a) {
  const image::KeyStore store(image::KeyStore::defaultDir(), false);
  const auto keys = store.list(a.secret);
  std::cout << (a.secret ? "Secret" : "Public") << " keys in " << store.dir().string() << ": " << keys.size() << '\n';
  for (const auto& k : keys)
    std::cout << k.fingerprint << "  " << k.algorithm << ' ' << k.bits << "  " << day(k.created) << "  " << k.userId
              << '\n';
  return 0;
}

int runImport(const KeyArgs& a) {
  image::KeyStore store(image::KeyStore::defaultDir(), true);
  const auto result = store.importFile(a.file);
  for (const auto& fpr : result.added) std::cout << "imported " << fpr << '\n';
  for (const auto& fpr : result.unchanged) std::cout << "already in the keyring: " << fpr << '\n';
  return 0;
}

int runExport(const KeyArgs& a) {
  const image::KeyStore store(image::KeyStore::defaultDir(), false);
  const std::string fingerprint = store.resolve(a.id, a.secret);
  const std::string bytes = store.exportKey(fingerprint, a.secret, a.armor);
  if (a.file == "-") {
    std::cout << bytes << std::flush;
    return 0;
  }
  writeFile(a.file, bytes);
  std::cout << "exported " << (a.secret ? "the secret key " : "the key ") << fingerprint << " to " << a.file << '\n';
  return 0;
}

int runNewPair(const KeyArgs& a) {
  if (a.name.empty() || a.email.empty()) throw Error("key newpair: give --name and --email").withStatus(1);
  if (a.bits != 2048 && a.bits != 3072 && a.bits != 4096)
    throw Error("key newpair: --bit-length " + std::to_string(a.bits) + ": 2048, 3072 or 4096").withStatus(1);
  const std::string userId = a.name + (a.comment.empty() ? "" : " (" + a.comment + ")") + " <" + a.email + ">";
  image::KeyStore store(image::KeyStore::defaultDir(), true);
  const std::string fpr = store.newPair(userId, a.bits);
  std::cout << "new key pair " << fpr << " for " << userId << " (RSA " << a.bits << ", no passphrase) in "
            << store.dir().string() << '\n';
  return 0;
}

int runRemove(const KeyArgs& a) {
  image::KeyStore store(image::KeyStore::defaultDir(), false);
  std::string fpr;
  try {
    fpr = store.resolve(a.id, false);
  } catch (const Error&) {
    if (!a.secret) throw;
    fpr = store.resolve(a.id, true);  // a secret key whose public key was removed before
  }
  store.remove(fpr, a.secret);
  std::cout << "removed " << fpr << (a.secret ? " and its secret key" : "") << '\n';
  return 0;
}

}  // namespace

void registerKey(CLI::App& app, Context& ctx) {
  auto* key = app.add_subcommand("key", "The local OpenPGP keyring that sign and verify use when given no key");
  key->require_subcommand(1);
  auto a = std::make_shared<KeyArgs>();
  auto action = [&ctx, a](int (*run)(const KeyArgs&)) { return [&ctx, a, run] { ctx.action = [a, run] { return run(*a); }; }; };

  auto* list = key->add_subcommand("list", "List the keys: fingerprint, algorithm, bits, created, user id");
  list->add_flag("-s,--secret", a->secret, "The secret keys");
  list->callback(action(runList));

  auto* import = key->add_subcommand("import", "Add the keys of an OpenPGP file (armoured or binary, public or secret)");
  import->add_option("file", a->file, "The key file")->required();
  import->callback(action(runImport));

  auto* exportCmd = key->add_subcommand("export", "Write a key to a file (- for standard output)");
  exportCmd->add_flag("-s,--secret", a->secret, "The secret key");
  exportCmd->add_flag("-a,--armor", a->armor, "ASCII-armoured");
  exportCmd->add_option("id", a->id, "Fingerprint, or its last 8 or 16 hex digits")->required();
  exportCmd->add_option("file", a->file, "Where to write it")->required();
  exportCmd->callback(action(runExport));

  auto* newpair = key->add_subcommand("newpair", "Make a new key pair for signing (RSA, no passphrase)");
  newpair->add_option("-N,--name", a->name, "Your name")->required();
  newpair->add_option("-E,--email", a->email, "Your e-mail address")->required();
  newpair->add_option("-C,--comment", a->comment, "A comment in the user id");
  newpair->add_option("-b,--bit-length", a->bits, "RSA key size: 2048, 3072 or 4096 (default 4096)");
  newpair->callback(action(runNewPair));

  auto* remove = key->add_subcommand("remove", "Remove a public key from the keyring");
  remove->add_flag("-s,--secret", a->secret, "Its secret key too");
  remove->add_option("id", a->id, "Fingerprint, or its last 8 or 16 hex digits")->required();
  remove->callback(action(runRemove));
}

}  // namespace ctr::cli
