// `ctr sign`: DSSE envelopes (PEM private keys) and OpenPGP clear-signed metadata (a secret
// key through GPGME) as the reference's signers write them (docs/design-signing.md,
// sections 1.3 and 1.5).
#include <set>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/sif_integrity.hpp"
#include "ctr/sif_pgp.hpp"
#include "oci_libs.hpp"
#include "sif_integrity_parts.hpp"

namespace ctr::image::sif {

namespace {

// The key's signature of `message`: Ed25519 of the message, RSA and ECDSA of its SHA-256.
std::string signMessage(void* key, const std::string& message) {
  const auto& crypto = oci::cryptoApi();
  std::unique_ptr<void, void (*)(void*)> ctx(crypto.md_ctx_new(), crypto.md_ctx_free);
  const void* md = crypto.pkey_is_a(key, "ED25519") ? nullptr : crypto.sha256();
  std::size_t size = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(message.data());
  if (!ctx || crypto.digest_sign_init(ctx.get(), nullptr, md, nullptr, key) != 1 ||
      crypto.digest_sign(ctx.get(), nullptr, &size, in, message.size()) != 1)
    throw Error("the key cannot sign (libcrypto refused it)");
  std::string sig(size, '\0');
  if (crypto.digest_sign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size, in, message.size()) != 1)
    throw Error("signing failed (libcrypto)");
  sig.resize(size);
  return sig;
}

// The object groups to sign: `groups`, each of which the image must have, else all of them.
std::set<std::uint32_t> groupsToSign(const Image& image, const std::vector<std::uint32_t>& groups) {
  std::set<std::uint32_t> chosen = detail::askedGroups(image, groups);
  if (chosen.empty()) chosen = detail::objectGroups(image);
  if (chosen.empty()) throw Error("the image has no object group to sign");
  return chosen;
}

// A signature object linked to group `g` holding `data`; the signer's OpenPGP fingerprint
// in `entityHex` ("" for DSSE).
void addSignature(Editor& editor, std::uint32_t g, const std::string& data, const std::string& entityHex) {
  ObjectInput sig;
  sig.type = DataType::Signature;
  sig.group = 0;
  sig.linkedGroup = g;
  sig.hashType = 1;  // SHA-256: the DSSE signer's whatever the key, and the OpenPGP one's
  sig.entityHex = entityHex;
  sig.data = DataSource::fromBytes(std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
  editor.add(sig, editor.defaultTime());
}

}  // namespace

std::string signPgp(Image& image, const PgpKeyring& keyring, const std::string& fingerprint,
                    const std::vector<std::uint32_t>& groups) {
  const auto chosen = groupsToSign(image, groups);
  Editor editor(image);
  std::string signer;
  for (auto g : chosen) {
    const auto signedText = keyring.clearSign(imageMetadata(image, g), fingerprint);
    signer = signedText.primaryFingerprint;
    addSignature(editor, g, signedText.block, signer);
  }
  return signer;
}

std::vector<std::string> signDsse(Image& image, const std::vector<std::string>& privateKeysPem,
                                  const std::vector<std::uint32_t>& groups) {
  if (privateKeysPem.empty()) throw Error("no key to sign with");
  std::vector<detail::Pkey> keys;
  std::vector<std::string> keyids;
  for (const auto& pem : privateKeysPem) {
    keys.push_back(detail::readPemKey(pem, true));
    keyids.push_back(detail::sshKeyId(keys.back().get()));
  }
  const auto chosen = groupsToSign(image, groups);
  Editor editor(image);
  for (auto g : chosen) {
    const std::string document = imageMetadata(image, g);
    nlohmann::ordered_json envelope;
    envelope["payloadType"] = kSifMetadataMediaType;
    envelope["payload"] = oci::base64Encode(document);
    envelope["signatures"] = nlohmann::ordered_json::array();
    const std::string pae = dssePae(kSifMetadataMediaType, document);
    for (std::size_t k = 0; k < keys.size(); ++k)
      envelope["signatures"].push_back({{"keyid", keyids[k]}, {"sig", oci::base64Encode(signMessage(keys[k].get(), pae))}});
    addSignature(editor, g, envelope.dump(), "");
  }
  return keyids;
}

}  // namespace ctr::image::sif
