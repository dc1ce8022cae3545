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

}  // namespace ctr::image::sif
