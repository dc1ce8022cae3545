// Signed SIF images (sif_integrity.hpp; the format: docs/design-signing.md, section 1).
#include "ctr/sif_integrity.hpp"

#include <algorithm>
#include <array>
#include <memory>

#include <nlohmann/json.hpp>

#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "oci_libs.hpp"
#include "sif_integrity_parts.hpp"

namespace ctr::image::sif {

namespace {

// Byte ranges of the encoded records that the digests cover (section 1.1).
struct Range {
  std::size_t at, size;
};
constexpr std::array<Range, 4> kHeaderCovered{{{0, 32}, {32, 10}, {42, 3}, {48, 16}}};  // launch, magic, version, id
// A descriptor: these, with its relative ID (4 bytes, little-endian) after the first two.
constexpr std::array<Range, 9> kDescriptorCovered{{{0, 4},     // data type
                                                   {4, 1},     // used
                                                   {13, 4},    // linked ID, raw
                                                   {25, 8},    // size
                                                   {41, 8},    // created at
                                                   {57, 8},    // uid
                                                   {65, 8},    // gid
                                                   {73, 128},  // name
                                                   {201, 384}}};  // extra

}  // namespace

namespace detail {

std::string headerDigest(const Header& header) {
  const auto bytes = encodeHeader(header);
  Digester d;
  for (const auto& r : kHeaderCovered) d.update(bytes.data() + r.at, r.size);
  return d.digest();
}

std::string descriptorDigest(const Descriptor& descriptor, std::uint32_t relativeId) {
  const auto bytes = encodeDescriptor(descriptor);
  const std::array<std::uint8_t, 4> id{static_cast<std::uint8_t>(relativeId), static_cast<std::uint8_t>(relativeId >> 8),
                                       static_cast<std::uint8_t>(relativeId >> 16),
                                       static_cast<std::uint8_t>(relativeId >> 24)};
  Digester d;
  for (std::size_t i = 0; i < kDescriptorCovered.size(); ++i) {
    if (i == 2) d.update(id.data(), id.size());
    d.update(bytes.data() + kDescriptorCovered[i].at, kDescriptorCovered[i].size);
  }
  return d.digest();
}

std::string objectDigest(const Image& image, const Descriptor& descriptor) {
  return digestFile(image.fd(), "object " + std::to_string(descriptor.id) + " of the image", descriptor.offset,
                    descriptor.size)
      .digest;
}

std::set<std::uint32_t> objectGroups(const Image& image) {
  std::set<std::uint32_t> groups;
  for (const auto& d : image.slots())
    if (d.used && d.group() != 0) groups.insert(d.group());
  return groups;
}

std::vector<const Descriptor*> groupMembers(const Image& image, std::uint32_t g) {
  std::vector<const Descriptor*> members;
  for (const auto& d : image.slots())
    if (d.used && g != 0 && d.group() == g) members.push_back(&d);
  return members;
}

std::set<std::uint32_t> askedGroups(const Image& image, const std::vector<std::uint32_t>& asked) {
  const auto present = objectGroups(image);
  std::set<std::uint32_t> groups(asked.begin(), asked.end());
  for (auto g : groups)
    if (!present.contains(g)) throw Error("object group " + std::to_string(g) + " not found in the image");
  return groups;
}

void PkeyDeleter::operator()(void* key) const { oci::cryptoApi().pkey_free(key); }

Pkey readPemKey(const std::string& pem, bool privateKey) {
  const auto& crypto = oci::cryptoApi();
  void* bio = crypto.bio_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!bio) throw Error("cannot read a key: out of memory");
  void* key = (privateKey ? crypto.pem_read_bio_privatekey : crypto.pem_read_bio_pubkey)(bio, nullptr, nullptr, nullptr);
  crypto.bio_free(bio);
  if (!key)
    throw Error(privateKey ? "not a PEM private key without a passphrase (-----BEGIN PRIVATE KEY-----)"
                           : "not a PEM public key (-----BEGIN PUBLIC KEY-----)");
  return Pkey(key);
}

Pkey readPublicKey(const std::string& pem) { return readPemKey(pem, false); }

bool verifies(void* key, const std::string& message, const std::string& sig) {
  const auto& crypto = oci::cryptoApi();
  std::unique_ptr<void, void (*)(void*)> ctx(crypto.md_ctx_new(), crypto.md_ctx_free);
  if (!ctx) return false;
  // Ed25519 signs the message itself; RSA and ECDSA keys sign its SHA-256.
  const void* md = crypto.pkey_is_a(key, "ED25519") ? nullptr : crypto.sha256();
  if (crypto.digest_verify_init(ctx.get(), nullptr, md, nullptr, key) != 1) return false;
  return crypto.digest_verify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                              reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

}  // namespace detail

std::string imageMetadata(const Image& image, std::uint32_t group) {
  auto members = detail::groupMembers(image, group);
  if (members.empty()) throw Error("object group " + std::to_string(group) + " not found in the image");
  std::sort(members.begin(), members.end(), [](const Descriptor* a, const Descriptor* b) { return a->id < b->id; });
  const std::uint32_t minId = members.front()->id;
  // nlohmann's ordered_json keeps the reference's key order; dump() is compact.
  nlohmann::ordered_json j;
  j["version"] = 1;
  j["header"] = {{"digest", detail::headerDigest(image.header())}};
  j["objects"] = nlohmann::ordered_json::array();
  for (const Descriptor* d : members)
    j["objects"].push_back({{"relativeId", d->id - minId},
                            {"descriptorDigest", detail::descriptorDigest(*d, d->id - minId)},
                            {"objectDigest", detail::objectDigest(image, *d)}});
  return j.dump();
}

namespace {

// Standard or URL-safe base64, padded or not (DSSE readers take both).
std::optional<std::string> decodeEnvelopeBase64(std::string text) {
  std::replace(text.begin(), text.end(), '-', '+');
  std::replace(text.begin(), text.end(), '_', '/');
  while (text.size() % 4 != 0) text += '=';
  return oci::base64Decode(text);
}

// The OpenSSH wire form's pieces: a string (uint32 big-endian length, bytes) and an mpint.
void sshString(std::string& out, std::string_view bytes) {
  const auto n = static_cast<std::uint32_t>(bytes.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  out += bytes;
}

std::string bignumParam(void* key, const char* name) {
  const auto& crypto = oci::cryptoApi();
  void* bn = nullptr;
  if (crypto.pkey_get_bn_param(key, name, &bn) != 1 || !bn) throw Error(std::string("the key has no ") + name);
  std::string bytes(static_cast<std::size_t>((crypto.bn_num_bits(bn) + 7) / 8), '\0');
  crypto.bn_bn2bin(bn, reinterpret_cast<unsigned char*>(bytes.data()));
  crypto.bn_free(bn);
  if (!bytes.empty() && (static_cast<unsigned char>(bytes[0]) & 0x80)) bytes.insert(bytes.begin(), '\0');
  return bytes;
}

// The key's public half in OpenSSH's wire form.
std::string sshPublicBlob(void* key) {
  const auto& crypto = oci::cryptoApi();
  std::string blob;
  if (crypto.pkey_is_a(key, "ED25519")) {
    std::string raw(32, '\0');
    std::size_t n = raw.size();
    if (crypto.pkey_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &n) != 1 || n != 32)
      throw Error("cannot read the Ed25519 public key");
    sshString(blob, "ssh-ed25519");
    sshString(blob, raw);
  } else if (crypto.pkey_is_a(key, "RSA")) {
    sshString(blob, "ssh-rsa");
    sshString(blob, bignumParam(key, "e"));
    sshString(blob, bignumParam(key, "n"));
  } else if (crypto.pkey_is_a(key, "EC")) {
    char group[64] = {};
    std::size_t n = 0;
    if (crypto.pkey_get_utf8_string_param(key, "group", group, sizeof group, &n) != 1) throw Error("cannot read the EC key's curve");
    const std::string curve = std::string(group) == "prime256v1" ? "nistp256"
                              : std::string(group) == "secp384r1" ? "nistp384"
                              : std::string(group) == "secp521r1" ? "nistp521"
                                                                  : "";
    if (curve.empty()) throw Error(std::string("ECDSA keys on the curve ") + group + " are not supported (P-256, P-384, P-521)");
    std::string point(160, '\0');
    if (crypto.pkey_get_octet_string_param(key, "encoded-pub-key", reinterpret_cast<unsigned char*>(point.data()),
                                           point.size(), &n) != 1)
      throw Error("cannot read the EC public key");
    point.resize(n);
    sshString(blob, "ecdsa-sha2-" + curve);
    sshString(blob, curve);
    sshString(blob, point);
  } else {
    throw Error("the key is not Ed25519, RSA or ECDSA");
  }
  return blob;
}

}  // namespace

std::string detail::sshKeyId(void* key) {
  const std::string blob = sshPublicBlob(key);
  Digester d;
  d.update(blob.data(), blob.size());
  const std::string hex = d.digest().substr(7);
  std::string raw;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) raw += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  std::string b64 = oci::base64Encode(raw);
  while (b64.ends_with('=')) b64.pop_back();
  return "SHA256:" + b64;
}

std::string sshKeyId(const std::string& publicKeyPem) { return detail::sshKeyId(detail::readPublicKey(publicKeyPem).get()); }

std::optional<DsseEnvelope> parseDsseEnvelope(std::string_view data) {
  const auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("payloadType") || !j["payloadType"].is_string() ||
      j["payloadType"].get<std::string>() != kSifMetadataMediaType || !j.contains("payload") ||
      !j["payload"].is_string() || !j.contains("signatures") || !j["signatures"].is_array())
    return std::nullopt;
  DsseEnvelope e;
  e.payloadType = j["payloadType"].get<std::string>();
  const auto payload = decodeEnvelopeBase64(j["payload"].get<std::string>());
  if (!payload) return std::nullopt;
  e.payload = *payload;
  for (const auto& s : j["signatures"]) {
    if (!s.is_object() || !s.contains("sig") || !s["sig"].is_string()) return std::nullopt;
    const auto sig = decodeEnvelopeBase64(s["sig"].get<std::string>());
    if (!sig) return std::nullopt;
    e.signatures.push_back({s.contains("keyid") && s["keyid"].is_string() ? s["keyid"].get<std::string>() : "", *sig});
  }
  return e;
}

std::string dssePae(std::string_view payloadType, std::string_view body) {
  return "DSSEv1 " + std::to_string(payloadType.size()) + " " + std::string(payloadType) + " " +
         std::to_string(body.size()) + " " + std::string(body);
}

bool dsseSignedBy(const DsseEnvelope& envelope, const std::string& publicKeyPem) {
  const auto key = detail::readPublicKey(publicKeyPem);
  const std::string pae = dssePae(envelope.payloadType, envelope.payload);
  return std::any_of(envelope.signatures.begin(), envelope.signatures.end(),
                     [&](const DsseSignature& s) { return detail::verifies(key.get(), pae, s.sig); });
}

}  // namespace ctr::image::sif
