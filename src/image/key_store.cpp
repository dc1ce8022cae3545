// The user's local OpenPGP keyring (key_store.hpp). Each operation loads the keys it needs
// into a GnuPG home of its own (sif::PgpKeyring) and writes each key back as a file of its
// own, so one key's change never rewrites another's.
#include "ctr/key_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/user_dir.hpp"

namespace ctr::image {

namespace {

constexpr const char* kSuffix = ".pgp";

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

std::set<std::string> fingerprintsOf(const std::vector<sif::PgpKeyInfo>& keys) {
  std::set<std::string> out;
  for (const auto& k : keys) out.insert(k.fingerprint);
  return out;
}

// `bytes` as `path`, written beside it and renamed over it (0600): never half a key.
void writeKeyFile(const std::filesystem::path& path, std::string_view bytes) {
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw sysError("create " + tmp);
    try {
      writeAllTo(fd.get(), bytes, tmp);
      if (::fsync(fd.get()) != 0) throw sysError("fsync " + tmp);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    throw sysError("rename " + tmp + " to " + path.string());
  }
}

}  // namespace

KeyStore::KeyStore(std::filesystem::path dir, bool create) : dir_(std::move(dir)) {
  (void)openUserDir(dir_, "keyring", create, WhenTaken::Refuse);
  if (!create) return;
  for (const char* half : {"public", "secret"})
    (void)openUserDir(dir_ / half, "keyring", true, WhenTaken::Refuse);
}

std::filesystem::path KeyStore::defaultDir() {
  if (const char* dir = std::getenv("CTR_KEYS_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg == '/') return std::filesystem::path(xdg) / "ctr" / "keys";
  const std::filesystem::path home = homeDirectory();
  if (home.empty()) throw Error("no keyring: set CTR_KEYS_DIR or HOME");
  return home / ".local" / "share" / "ctr" / "keys";
}

std::vector<std::filesystem::path> KeyStore::files(bool secret) const {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / (secret ? "secret" : "public"), ec))
    if (entry.path().extension() == kSuffix && entry.is_regular_file(ec)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<sif::PgpKeyInfo> KeyStore::list(bool secret) const {
  const auto keyFiles = files(secret);
  if (keyFiles.empty()) return {};
  return sif::PgpKeyring(keyFiles).keys(secret);
}

std::string KeyStore::resolve(const std::string& id, bool secret) const {
  std::string want = upper(id);
  if (want.starts_with("0X")) want.erase(0, 2);
  if (want.size() < 8 || want.find_first_not_of("0123456789ABCDEF") != std::string::npos)
    throw Error("'" + id + "' is no key fingerprint (40 hex digits) or key id (its last 8 or 16)").withStatus(1);
  std::vector<std::string> found;
  for (const auto& file : files(secret)) {
    const std::string fpr = file.stem().string();
    if (fpr.ends_with(want)) found.push_back(fpr);
  }
  if (found.size() == 1) return found.front();
  if (found.empty())
    throw Error("no " + std::string(secret ? "secret" : "public") + " key " + id + " in the keyring " + dir_.string() +
                " (ctr key list" + (secret ? " --secret" : "") + ")");
  throw Error("'" + id + "' names " + std::to_string(found.size()) + " keys in " + dir_.string() + ": give more digits");
}

void KeyStore::keep(const sif::PgpKeyring& keyring, const std::string& fingerprint, bool secret) {
  writeKeyFile(dir_ / (secret ? "secret" : "public") / (fingerprint + kSuffix), keyring.exportKey(fingerprint, secret, false));
}

KeyStore::Imported KeyStore::importFile(const std::filesystem::path& file) {
  const sif::PgpKeyring keyring({file});  // throws naming a file with no key gpg can import
  const std::set<std::string> havePublic = fingerprintsOf(list(false)), haveSecret = fingerprintsOf(list(true));
  Imported result;
  // Secret keys first: one with a passphrase cannot be kept, and then nothing of it is.
  for (const auto& key : keyring.keys(true)) {
    if (haveSecret.contains(key.fingerprint)) continue;
    keep(keyring, key.fingerprint, true);
    result.added.push_back(key.fingerprint + " (secret)");
  }
  for (const auto& key : keyring.keys(false)) {
    if (havePublic.contains(key.fingerprint)) {
      result.unchanged.push_back(key.fingerprint);
      continue;
    }
    keep(keyring, key.fingerprint, false);
    result.added.push_back(key.fingerprint);
  }
  return result;
}

std::string KeyStore::newPair(const std::string& userId, unsigned bits) {
  sif::PgpKeyring keyring({});
  const std::string fingerprint = keyring.createKey(userId, bits);
  keep(keyring, fingerprint, true);
  keep(keyring, fingerprint, false);
  return fingerprint;
}

std::string KeyStore::exportKey(const std::string& fingerprint, bool secret, bool armor) const {
  const auto file = dir_ / (secret ? "secret" : "public") / (fingerprint + kSuffix);
  return sif::PgpKeyring({file}).exportKey(fingerprint, secret, armor);
}

void KeyStore::remove(const std::string& fingerprint, bool secret) {
  bool removed = false;
  for (const char* half : secret ? std::vector<const char*>{"public", "secret"} : std::vector<const char*>{"public"}) {
    std::error_code ec;
    removed = std::filesystem::remove(dir_ / half / (fingerprint + kSuffix), ec) || removed;
    if (ec) throw Error("remove " + (dir_ / half / (fingerprint + kSuffix)).string() + ": " + ec.message());
  }
  if (!removed) throw Error("no key " + fingerprint + " in the keyring " + dir_.string());
}

}  // namespace ctr::image
