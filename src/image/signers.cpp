// Who signed an image, for execution control (signers.hpp).
#include "ctr/signers.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/sif.hpp"
#include "ctr/sif_integrity.hpp"
#include "ctr/sif_pgp.hpp"

namespace ctr::image {

std::string readKeyFile(const std::string& path, const std::string& what) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  struct stat st{};
  if (!fd || ::fstat(fd.get(), &st) != 0) throw sysError(what + " " + path);
  if (!S_ISREG(st.st_mode) || st.st_size > (1 << 20)) throw Error(what + " " + path + ": not a key file (a file of at most 1 MiB)");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  if (::read(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) throw sysError(what + " " + path);
  return text;
}

namespace {

// The key material of some key files: PEM public keys as they are, OpenPGP ones in a keyring.
struct KeySet {
  std::vector<std::string> pems;
  std::vector<std::filesystem::path> pgpFiles;
  std::optional<sif::PgpKeyring> keyring;
  std::vector<std::string> names;  // keyids and primary fingerprints

  explicit KeySet(const std::vector<std::string>& files) {
    for (const auto& f : files) {
      std::string text = readKeyFile(f, "ctr.conf key");
      if (text.find("-----BEGIN PUBLIC KEY-----") != std::string::npos) {
        names.push_back(withContext("ctr.conf key " + f, [&] { return sif::sshKeyId(text); }));
        pems.push_back(std::move(text));
      } else {
        pgpFiles.emplace_back(f);
      }
    }
    if (!pgpFiles.empty()) {
      keyring.emplace(pgpFiles);
      for (auto& fpr : keyring->fingerprints()) names.push_back(std::move(fpr));
    }
  }
  [[nodiscard]] sif::VerifyKeys keys() const { return {pems, keyring ? &*keyring : nullptr}; }
};

// Whitelist's judgement, as Apptainer's execution control makes it: any error in what a
// trusted key signed, or in the image's layout, refuses; a signature the trusted keys do not
// verify (another signer's) does not count, but every group needs one they verify.
std::string trustedVerdict(const sif::Verification& v) {
  // An error of the image's layout (an unsigned group, an object in no group) is no check's.
  if (!v.error.empty() &&
      std::none_of(v.checks.begin(), v.checks.end(), [&](const sif::SignatureCheck& c) { return c.error == v.error; }))
    return v.error;
  std::map<std::string, std::string> unverified;  // what a signature covers -> why none verified
  std::set<std::string> verified;
  for (const auto& c : v.checks) {
    if (!c.error.empty() && c.signatureVerified) return c.error;
    if (c.error.empty()) verified.insert(c.covers);
    else unverified.try_emplace(c.covers, c.error);
  }
  for (const auto& [covers, why] : unverified)
    if (!verified.contains(covers)) return "no signature of " + covers + " verifies with a trusted key (" + why + ")";
  return "";
}

std::vector<std::string> allSigners(const sif::Verification& v) {
  std::set<std::string> out;
  for (const auto& c : v.checks)
    if (c.error.empty()) out.insert(c.signers.begin(), c.signers.end());
  return {out.begin(), out.end()};
}

// A file as it is: device, inode, size, modification and change times.
std::string fileIdentity(dev_t dev, ino_t ino, std::uint64_t size, std::int64_t mtimeNs, std::int64_t ctimeNs) {
  return std::to_string(dev) + " " + std::to_string(ino) + " " + std::to_string(size) + " " + std::to_string(mtimeNs) +
         " " + std::to_string(ctimeNs) + "\n";
}

// The name of the kept verdict: this image file as it is, these key files as they are (one
// stat each: any change of a key file changes its ctime). FNV-1a, as the state directory's
// other keys (ctr/hash.hpp): the directory is the user's own, and the warm launch must not
// load libcrypto for it.
std::string verdictName(const ImageSource& image, const config::ExecutionControl& control, bool trusted, bool blacklisted) {
  std::uint64_t h = fnv1a64(fileIdentity(image.device, image.inode, image.fileBytes, image.mtimeNs, image.ctimeNs) +
                            (trusted ? "t" : "-") + (blacklisted ? "b" : "-"));
  for (const auto* list : {&control.trustedKeys, &control.blacklistedKeys})
    for (const auto& k : *list) {
      struct stat st{};
      if (::stat(k.c_str(), &st) != 0) throw sysError("ctr.conf key " + k);
      h = fnv1a64(k + " " +
                      fileIdentity(st.st_dev, st.st_ino, static_cast<std::uint64_t>(st.st_size),
                                   st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                                   st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec),
                  h);
    }
  return toHex16(h) + ".json";
}

nlohmann::json toJson(const SignatureFacts& f) {
  return {{"sif", f.sif},
          {"has_signatures", f.hasSignatures},
          {"trusted_error", f.trustedError},
          {"trusted_signers", f.trustedSigners},
          {"trusted_keys", f.trustedKeys},
          {"blacklisted_signers", f.blacklistedSigners}};
}

std::optional<SignatureFacts> readVerdict(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (!fd) return std::nullopt;
  char buffer[16384];
  const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
  if (n <= 0 || static_cast<std::size_t>(n) == sizeof buffer) return std::nullopt;
  const auto j = nlohmann::json::parse(std::string_view(buffer, static_cast<std::size_t>(n)), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    SignatureFacts f;
    f.sif = j.at("sif").get<bool>();
    f.hasSignatures = j.at("has_signatures").get<bool>();
    f.trustedError = j.at("trusted_error").get<std::string>();
    f.trustedSigners = j.at("trusted_signers").get<std::vector<std::string>>();
    f.trustedKeys = j.at("trusted_keys").get<std::vector<std::string>>();
    f.blacklistedSigners = j.at("blacklisted_signers").get<std::vector<std::string>>();
    f.cached = true;
    return f;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// Kept best effort: a state directory that cannot take it costs the next launch a check.
void keepVerdict(const std::filesystem::path& dir, const std::string& name, const SignatureFacts& f) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return;
  const auto tmp = dir / (name + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp);
    out << toJson(f).dump();
    if (!out) return;
  }
  std::filesystem::rename(tmp, dir / name, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

// The facts of `sifImage` (nullopt: not a SIF) against the chosen keys, verified now.
SignatureFacts verifyNow(std::optional<sif::Image> sifImage, const config::ExecutionControl& control, bool trusted,
                         bool blacklisted) {
  SignatureFacts f;
  f.sif = sifImage.has_value();
  std::optional<KeySet> trustedKeys, blacklistedKeys;
  if (trusted) {
    trustedKeys.emplace(control.trustedKeys);
    f.trustedKeys = trustedKeys->names;
  }
  if (blacklisted) blacklistedKeys.emplace(control.blacklistedKeys);
  if (!f.sif) return f;
  const auto used = sifImage->usedDescriptors();
  f.hasSignatures = std::any_of(used.begin(), used.end(), [](const sif::Descriptor& d) {
    return d.dataType == static_cast<std::int32_t>(sif::DataType::Signature);
  });
  if (trustedKeys) {
    const auto v = sif::verifyImage(*sifImage, {}, trustedKeys->keys());
    f.trustedError = trustedVerdict(v);
    f.trustedSigners = allSigners(v);
  }
  if (blacklistedKeys && f.hasSignatures) f.blacklistedSigners = allSigners(sif::verifyImage(*sifImage, {}, blacklistedKeys->keys()));
  return f;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// Why `mode` refuses an image with these facts, "" when it lets it run.
std::string why(config::ExecutionMode mode, const SignatureFacts& f) {
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

SignatureFacts signatureFacts(const ImageSource& image, const config::ExecutionControl& control, bool trusted,
                              bool blacklisted, const std::filesystem::path& cacheDir) {
  const std::string name = verdictName(image, control, trusted, blacklisted);
  const auto dir = cacheDir / "verified";
  if (!cacheDir.empty())
    if (auto kept = readVerdict(dir / name)) return *kept;
  std::optional<sif::Image> sifImage;
  if (image.kind == ImageKind::Sif) sifImage = sif::Image::open(image.path);
  SignatureFacts f = verifyNow(std::move(sifImage), control, trusted, blacklisted);
  if (!cacheDir.empty()) keepVerdict(dir, name, f);
  return f;
}

SignatureFacts verifyOpenFile(UniqueFd fd, std::uint64_t fileBytes, const config::ExecutionControl& control, bool trusted,
                              bool blacklisted) {
  std::optional<sif::Image> sifImage;
  if (hasSifMagic(fd.get())) sifImage = sif::Image::fromFd(std::move(fd), static_cast<std::int64_t>(fileBytes));
  return verifyNow(std::move(sifImage), control, trusted, blacklisted);
}

std::string ruleName(const config::ExecutionRule& rule) {
  return std::string(config::toString(rule.mode)) + " for " + (rule.dir.empty() ? std::string("every image") : rule.dir);
}

std::string executionRefusal(const config::ExecutionRule& rule, const SignatureFacts& f, const std::string& source) {
  const std::string reason = why(rule.mode, f);
  return reason.empty() ? "" : "refused by ctr.conf's execution rule (" + ruleName(rule) + ", " + source + "): " + reason;
}

}  // namespace ctr::image
