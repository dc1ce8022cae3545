// Signed SIF images, the reference's integrity format (docs/design-signing.md, section 1):
// the signed "image metadata" of an object group, and DSSE envelopes checked against PEM
// public keys. libcrypto through the dlopen table (ctr links only libc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/sif.hpp"

namespace ctr::image::sif {

// The compact JSON the reference signs for object group `group` (all its objects, by ID):
// {"version":1,"header":{"digest":"sha256:.."},"objects":[{"relativeId":N,
// "descriptorDigest":"sha256:..","objectDigest":"sha256:.."},...]}, SHA-256 over the
// header's 61 covered bytes, each descriptor's 557 (its ID made relative to the group's
// lowest) and each object's data. Throws ctr::Error for a group with no objects.
[[nodiscard]] std::string imageMetadata(const Image& image, std::uint32_t group);

// A DSSE envelope (signature object data, section 1.3): its payload and signatures decoded.
struct DsseSignature {
  std::string keyid;
  std::string sig;  // raw signature bytes
};
struct DsseEnvelope {
  std::string payloadType;
  std::string payload;  // decoded: the signed JSON
  std::vector<DsseSignature> signatures;
};
inline constexpr std::string_view kSifMetadataMediaType = "application/vnd.sylabs.sif-metadata+json";

// nullopt when `data` is no DSSE envelope of SIF metadata (another format, or malformed).
[[nodiscard]] std::optional<DsseEnvelope> parseDsseEnvelope(std::string_view data);

// DSSE's pre-authentication encoding: "DSSEv1 <len> <type> <len> <body>".
[[nodiscard]] std::string dssePae(std::string_view payloadType, std::string_view body);

// Whether one of the envelope's signatures verifies with the PEM public key: Ed25519 over
// the PAE, RSA (PKCS#1 v1.5) and ECDSA over its SHA-256. Throws ctr::Error for a key that is
// not a PEM public key.
[[nodiscard]] bool dsseSignedBy(const DsseEnvelope& envelope, const std::string& publicKeyPem);

// The SSH fingerprint that names a PKIX key in a DSSE envelope ("SHA256:" and unpadded
// base64 of SHA-256 over the OpenSSH wire form): Ed25519, RSA, ECDSA P-256/384/521. Throws
// ctr::Error for a key that is no PEM public key, or of another type.
[[nodiscard]] std::string sshKeyId(const std::string& publicKeyPem);

// Signs `image` (opened writable) as the reference's DSSE signer does: for each of `groups`
// (none: every object group, ascending) one envelope of that group's image metadata with a
// signature by each PEM private key in turn (Ed25519; RSA PKCS#1 v1.5 and ECDSA over
// SHA-256), appended as a signature object linked to the group. Returns the keys' SSH
// keyids. Throws ctr::Error for a key that is no PEM private key, or a group the image
// does not have.
std::vector<std::string> signDsse(Image& image, const std::vector<std::string>& privateKeysPem,
                                  const std::vector<std::uint32_t>& groups = {});

class PgpKeyring;

// Signs `image` (opened writable) as the reference's OpenPGP signer does: for each of
// `groups` (none: every group) the group's image metadata clear-signed (SHA-256) by the
// keyring's secret key `fingerprint` ("": its only one), appended as a signature object
// that records the primary key's fingerprint. Returns that fingerprint.
std::string signPgp(Image& image, const PgpKeyring& keyring, const std::string& fingerprint,
                    const std::vector<std::uint32_t>& groups = {});

// What `ctr verify` checks (section 1.4): each object group of the image, or those and the
// objects asked for; legacy: Singularity's SIFHASH signatures (before 3.6), which cover
// object data only (the primary partition, unless objects, groups or all are asked for).
struct VerifyTasks {
  std::vector<std::uint32_t> groups;   // --group-id
  std::vector<std::uint32_t> objects;  // --sif-id
  bool legacy = false;                 // --legacy-insecure
  bool all = false;                    // --all: with legacy, every grouped object
};
// The key material: PEM public keys (DSSE), an OpenPGP keyring (clear-signed); either may
// be missing, which fails a signature that needs it.
struct VerifyKeys {
  std::vector<std::string> publicKeysPem;
  const PgpKeyring* keyring = nullptr;
};
// One signature object's check.
struct SignatureCheck {
  std::uint32_t signature = 0;         // its object ID
  std::string format;                  // "DSSE", "OpenPGP", "OpenPGP (legacy)"
  std::string covers;                  // "object group 1", "object 2"
  std::vector<std::uint32_t> objects;  // the objects it was checked against
  std::vector<std::string> signers;    // DSSE keyids that verified, the OpenPGP primary key
  bool signatureVerified = false;      // the keys verified it: an error after is the image's
  std::string error;                   // "" when it verified
};
struct Verification {
  std::vector<SignatureCheck> checks;
  std::string error;  // the first failure, in the reference's words; "" when all verified
};
// Checks the signatures `tasks` select, every one of them (all must verify), in the
// reference's order; the file is read through `image` (its fd), so what was checked is what
// the caller holds open.
[[nodiscard]] Verification verifyImage(const Image& image, const VerifyTasks& tasks, const VerifyKeys& keys);

}  // namespace ctr::image::sif
