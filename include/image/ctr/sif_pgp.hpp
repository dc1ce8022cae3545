// OpenPGP clear-signed SIF signatures (docs/design-signing.md, sections 1.3 (a) and (b)),
// through GPGME, loaded with dlopen the first time one is checked (ctr links only libc).
// GPGME runs gpg; the keys come from a GnuPG home of their own, never the user's agent.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::image::sif {

// What gpg said of one clear-signed block.
struct PgpCheck {
  bool good = false;               // a good signature by a key of the keyring
  std::string text;                // the signed text, gpg's trailing newline removed
  std::string primaryFingerprint;  // 40 upper-case hex digits of the signer's primary key
  std::string hash;                // the signature's hash, as GPGME names it ("SHA256")
  std::string error;               // why not good
};

// A GnuPG home with these OpenPGP public keys (armoured or binary files, several keys each)
// imported, in a directory of its own that goes with the object. Throws ctr::Error naming a
// file gpg could not import a key from.
class PgpKeyring {
 public:
  explicit PgpKeyring(const std::vector<std::filesystem::path>& keyFiles);
  ~PgpKeyring();
  PgpKeyring(const PgpKeyring&) = delete;
  PgpKeyring& operator=(const PgpKeyring&) = delete;

  [[nodiscard]] PgpCheck verifyClearSigned(std::string_view block) const;
  // `text` clear-signed with SHA-256 by the secret key whose (primary or sub) fingerprint is
  // `fingerprint` ("": the keyring's one secret key), as the reference's signer does.
  // Throws ctr::Error naming what gpg refused (no such secret key, several, a passphrase:
  // ctr asks for none).
  struct Signed {
    std::string block;               // the clear-signed text
    std::string primaryFingerprint;  // of the signing key
  };
  [[nodiscard]] Signed clearSign(std::string_view text, const std::string& fingerprint) const;
  // The primary keys' fingerprints, as verifyClearSigned names them.
  [[nodiscard]] std::vector<std::string> fingerprints() const;

 private:
  void removeHome() noexcept;
  std::filesystem::path home_;
  bool agent_ = false;  // a secret key was imported: gpg-agent runs for this home
};

// Whether `data` starts as an OpenPGP clear-signed block (leading whitespace allowed).
[[nodiscard]] bool looksClearSigned(std::string_view data);

}  // namespace ctr::image::sif
