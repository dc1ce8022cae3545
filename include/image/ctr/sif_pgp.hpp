// OpenPGP clear-signed SIF signatures (docs/design-signing.md, sections 1.3 (a) and (b)),
// through GPGME, loaded with dlopen the first time one is checked (ctr links only libc).
// GPGME runs gpg; the keys come from a GnuPG home of their own, never the user's agent.
#pragma once

#include <cstdint>
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

// One key of a keyring, as `ctr key list` shows it.
struct PgpKeyInfo {
  std::string fingerprint;  // of the primary key, 40 upper-case hex digits
  std::string userId;       // the first user id ("Name (comment) <email>")
  std::string algorithm;    // as GPGME names it ("RSA", "EdDSA")
  unsigned bits = 0;
  std::int64_t created = 0;  // seconds since the epoch
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
  // The keys (with `secret`, those whose secret part is here too).
  [[nodiscard]] std::vector<PgpKeyInfo> keys(bool secret) const;
  // The key with primary fingerprint `fingerprint` as OpenPGP bytes (armoured with `armor`),
  // with its secret part when `secret`. A secret key with a passphrase cannot be exported:
  // ctr asks for none. Throws ctr::Error naming what gpg refused.
  [[nodiscard]] std::string exportKey(const std::string& fingerprint, bool secret, bool armor) const;
  // A new key pair for signing, without a passphrase and without expiry: RSA of `bits`.
  // Returns its primary fingerprint.
  std::string createKey(const std::string& userId, unsigned bits);

 private:
  void removeHome() noexcept;
  std::filesystem::path home_;
  bool agent_ = false;  // a secret key was imported: gpg-agent runs for this home
};

// Whether `data` starts as an OpenPGP clear-signed block (leading whitespace allowed).
[[nodiscard]] bool looksClearSigned(std::string_view data);

}  // namespace ctr::image::sif
