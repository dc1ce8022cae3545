// The user's local OpenPGP keyring (`ctr key`, docs/user-guide-images.md "Keys"): one file
// per key, public/<FINGERPRINT>.pgp and secret/<FINGERPRINT>.pgp (binary OpenPGP), in a
// private directory: $CTR_KEYS_DIR, else $XDG_DATA_HOME/ctr/keys, else
// ~/.local/share/ctr/keys. `ctr sign` and `ctr verify` use it when given no key. Secret keys
// are kept without a passphrase (ctr asks for none): the directory's mode 0700 guards them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ctr/sif_pgp.hpp"

namespace ctr::image {

class KeyStore {
 public:
  // The store at `dir` (made, 0700, when `create`; a missing one is empty otherwise).
  KeyStore(std::filesystem::path dir, bool create);
  // Where the caller's store is ($CTR_KEYS_DIR, $XDG_DATA_HOME, $HOME, in that order).
  [[nodiscard]] static std::filesystem::path defaultDir();

  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  // The key files of one half, sorted by fingerprint.
  [[nodiscard]] std::vector<std::filesystem::path> files(bool secret) const;
  [[nodiscard]] std::vector<sif::PgpKeyInfo> list(bool secret) const;
  // The fingerprint of the one key that `id` names: a whole fingerprint or its last 8 or more
  // hex digits (a key id), any case. Throws ctr::Error for none or several.
  [[nodiscard]] std::string resolve(const std::string& id, bool secret) const;

  struct Imported {
    std::vector<std::string> added;      // fingerprints new to the store (public or secret)
    std::vector<std::string> unchanged;  // already there
  };
  // Every key of an OpenPGP file (armoured or binary; public keys, secret keys, or both).
  Imported importFile(const std::filesystem::path& file);
  // A new RSA signing key pair for `userId` (no passphrase, no expiry); its fingerprint.
  std::string newPair(const std::string& userId, unsigned bits);
  // The key `fingerprint` (resolve()d) as OpenPGP bytes; `secret`: its secret part too.
  [[nodiscard]] std::string exportKey(const std::string& fingerprint, bool secret, bool armor) const;
  // Removes the public key (and with `secret` its secret key); throws when it is not there.
  void remove(const std::string& fingerprint, bool secret);

 private:
  void keep(const sif::PgpKeyring& keyring, const std::string& fingerprint, bool secret);
  std::filesystem::path dir_;
};

}  // namespace ctr::image
