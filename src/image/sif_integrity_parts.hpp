// Internal to the signed-SIF code (sif_integrity.cpp, sif_verify.cpp, sif_sign.cpp): the
// digests the reference's image metadata holds, and libcrypto keys.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ctr/sif.hpp"

namespace ctr::image::sif::detail {

// SHA-256 ("sha256:<hex>") of the header's 61 covered bytes, of a descriptor's 557 (with
// `relativeId` in place of its ID), of an object's data (read through the image's fd).
std::string headerDigest(const Header& header);
std::string descriptorDigest(const Descriptor& descriptor, std::uint32_t relativeId);
std::string objectDigest(const Image& image, const Descriptor& descriptor);

// The image's object groups (ascending); the used objects of group `g`, in slot order.
std::set<std::uint32_t> objectGroups(const Image& image);
std::vector<const Descriptor*> groupMembers(const Image& image, std::uint32_t g);
// The groups `asked` for (none: an empty set), each one the image has, else ctr::Error
// "object group N not found in the image".
std::set<std::uint32_t> askedGroups(const Image& image, const std::vector<std::uint32_t>& asked);

struct PkeyDeleter {
  void operator()(void* key) const;
};
using Pkey = std::unique_ptr<void, PkeyDeleter>;  // an EVP_PKEY
// Throws ctr::Error for text that is no PEM public (private) key.
Pkey readPemKey(const std::string& pem, bool privateKey);
Pkey readPublicKey(const std::string& pem);
// Whether `sig` is the key's signature of `message` (Ed25519: of the message itself; RSA
// PKCS#1 v1.5 and ECDSA: of its SHA-256).
bool verifies(void* key, const std::string& message, const std::string& sig);
// The key's SSH fingerprint ("SHA256:..."), as sif::sshKeyId.
std::string sshKeyId(void* key);

}  // namespace ctr::image::sif::detail
