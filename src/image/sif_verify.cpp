// `ctr verify`'s checks (sif_integrity.hpp, verifyImage): which signatures a request
// selects and the order the reference checks them in, with its words for each failure
// (docs/design-signing.md, section 1.4).
#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/hash.hpp"
#include "ctr/sif_integrity.hpp"
#include "ctr/sif_pgp.hpp"
#include "sif_integrity_parts.hpp"

namespace ctr::image::sif {

namespace {

constexpr auto kSignature = static_cast<std::int32_t>(DataType::Signature);

// What one task checks: a whole group, or some of its objects; legacy ones SIFHASH
// signatures of an object or a group.
struct Task {
  enum Kind { Group, Objects, LegacyGroup, LegacyObject } kind;
  std::uint32_t group = 0;
  std::vector<std::uint32_t> objects;  // Objects: the ones asked for; LegacyObject: one
};

std::string taskName(const Task& t) {
  if (t.kind == Task::Group || t.kind == Task::LegacyGroup) return "object group " + std::to_string(t.group);
  std::string ids;
  for (auto id : t.objects) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  return (t.objects.size() > 1 ? "objects " : "object ") + ids;
}

// Legacy: a clear-signed text that starts with "SIFHASH:\n" (Singularity before 3.6).
bool isLegacy(std::string_view data) {
  if (!looksClearSigned(data)) return false;
  const auto body = data.find("\n\n");
  return body != std::string_view::npos && data.substr(body + 2).starts_with("SIFHASH:\n");
}

std::vector<Task> selectTasks(const Image& image, const VerifyTasks& asked) {
  auto objectGroup = [&](std::uint32_t id) {
    const Descriptor* d = nullptr;
    for (const auto& s : image.slots())
      if (s.used && s.id == id) d = &s;
    if (!d) throw Error("object " + std::to_string(id) + " not found in the image");
    if (d->group() == 0) throw Error("object " + std::to_string(id) + " is in no object group");
    return d->group();
  };
  std::vector<Task> tasks;
  std::set<std::uint32_t> groups = detail::askedGroups(image, asked.groups);
  std::set<std::uint32_t> objects(asked.objects.begin(), asked.objects.end());
  if (asked.legacy) {
    if (asked.all)
      for (const auto& d : image.usedDescriptors())
        if (d.dataType != kSignature && d.group() != 0) objects.insert(d.id);
    if (groups.empty() && objects.empty()) {
      const Descriptor* primary = image.primaryPartition();
      if (!primary) throw Error("the image has no primary partition to check (give --sif-id, --group-id or --all)");
      objects.insert(primary->id);
    }
    for (auto g : groups) tasks.push_back({Task::LegacyGroup, g, {}});
    for (auto id : objects) tasks.push_back({Task::LegacyObject, objectGroup(id), {id}});
    return tasks;
  }
  if (groups.empty() && objects.empty()) groups = detail::objectGroups(image);
  if (groups.empty() && objects.empty()) throw Error("no object groups found in the image");
  for (auto g : groups) tasks.push_back({Task::Group, g, {}});
  std::map<std::uint32_t, std::vector<std::uint32_t>> byGroup;
  for (auto id : objects) byGroup[objectGroup(id)].push_back(id);
  for (auto& [g, ids] : byGroup) tasks.push_back({Task::Objects, g, ids});
  return tasks;
}

// The signature objects a task checks, in slot order.
std::vector<const Descriptor*> signaturesFor(const Image& image, const Task& t) {
  std::vector<const Descriptor*> out;
  for (const auto& d : image.slots()) {
    if (!d.used || d.dataType != kSignature) continue;
    if (t.kind == Task::LegacyObject) {
      if (!d.linkIsGroup() && d.link() == t.objects.front()) out.push_back(&d);
      continue;
    }
    if (!d.linkIsGroup() || d.link() != t.group) continue;
    const auto bytes = image.readObject(d);
    if (isLegacy(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())) ==
        (t.kind == Task::LegacyGroup))
      out.push_back(&d);
  }
  return out;
}

// The descriptor's hash type (Extra's first int32): 1 SHA-256, 2 SHA-384, 3 SHA-512.
std::string descriptorHash(const Descriptor& d) {
  switch (d.extraInt32(0)) {
    case 1: return "sha256";
    case 2: return "sha384";
    case 3: return "sha512";
    default: throw Error("signature object " + std::to_string(d.id) + ": hash algorithm unsupported");
  }
}

// The OpenPGP fingerprint the descriptor records (Extra bytes 4..23), upper-case hex; "" if zero.
std::string descriptorFingerprint(const Descriptor& d) {
  const std::span<const std::uint8_t> fpr(d.extra.data() + 4, 20);
  if (std::all_of(fpr.begin(), fpr.end(), [](std::uint8_t b) { return b == 0; })) return {};
  std::string hex = toHex(fpr);
  std::transform(hex.begin(), hex.end(), hex.begin(), [](unsigned char c) { return std::toupper(c); });
  return hex;
}

// A DSSE envelope: at least one of its signatures verifies with a trusted key (each key
// counted once; a signature that names another keyid is not tried with it). Returns the
// signed document and puts the keyids that verified in `signers`.
std::string checkDsse(const DsseEnvelope& envelope, const Descriptor& sig, const VerifyKeys& keys,
                      std::vector<std::string>& signers) {
  if (keys.publicKeysPem.empty()) throw Error("key material not provided for DSSE envelope signature");
  std::vector<std::pair<detail::Pkey, std::string>> trusted;
  for (const auto& pem : keys.publicKeysPem) {
    auto key = detail::readPublicKey(pem);
    std::string id;
    try {
      id = detail::sshKeyId(key.get());
    } catch (const Error&) {
      // A key type without an SSH name matches only signatures that name no key.
    }
    trusted.emplace_back(std::move(key), id);
  }
  const std::string pae = dssePae(envelope.payloadType, envelope.payload);
  std::vector<bool> used(trusted.size());
  for (const auto& s : envelope.signatures)
    for (std::size_t k = 0; k < trusted.size(); ++k) {
      if (used[k] || (!s.keyid.empty() && s.keyid != trusted[k].second)) continue;
      if (detail::verifies(trusted[k].first.get(), pae, s.sig)) {
        used[k] = true;
        signers.push_back(trusted[k].second.empty() ? "a key without an SSH name" : trusted[k].second);
        break;
      }
    }
  if (signers.empty())
    throw Error("signature object " + std::to_string(sig.id) +
                " not valid: dsse: no signature in the envelope verifies with the keys given");
  return envelope.payload;
}

// An OpenPGP clear-signed block: a good signature of a keyring's key, with an accepted
// hash, by the key the descriptor names. Returns the signed text.
std::string checkPgp(std::string_view block, const Descriptor& sig, const VerifyKeys& keys, bool legacy,
                     std::vector<std::string>& signers) {
  if (!keys.keyring) throw Error("key material not provided for PGP clear-sign signature");
  const PgpCheck check = keys.keyring->verifyClearSigned(block);
  const std::string name = "signature object " + std::to_string(sig.id) + " not valid: ";
  if (!check.good) throw Error(name + "openpgp: " + check.error);
  static const std::set<std::string> kHashes{"SHA224", "SHA256", "SHA384", "SHA512"};
  if (!legacy && !kHashes.contains(check.hash)) throw Error(name + "openpgp: hash " + check.hash + " not accepted");
  (void)descriptorHash(sig);
  if (descriptorFingerprint(sig) != check.primaryFingerprint)
    throw Error("fingerprint in descriptor does not correspond to signing entity");
  signers.push_back(check.primaryFingerprint);
  return check.text;
}

// "sha256:<hex>" from the document, for comparison with ctr's own (SHA-256) digests.
std::string documentDigest(const nlohmann::json& j, const std::string& sigName) {
  if (!j.is_object() || !j.contains("digest") || !j["digest"].is_string())
    throw Error(sigName + ": the signed document has a malformed digest");
  const std::string value = j["digest"].get<std::string>();
  const auto colon = value.find(':');
  if (colon == std::string::npos || value.find(':', colon + 1) != std::string::npos)
    throw Error(sigName + ": malformed digest '" + value + "' in the signed document");
  if (value.substr(0, colon) != "sha256")
    throw Error(sigName + ": digest algorithm " + value.substr(0, colon) + " is not supported by ctr (sha256)");
  return value;
}

// Steps c to f of section 1.4: the signed document against the image as it is now.
std::vector<std::uint32_t> checkDocument(const Image& image, const Task& t, const Descriptor& sig,
                                         const std::string& document) {
  const std::string sigName = "signature object " + std::to_string(sig.id) + " not valid";
  const auto j = nlohmann::json::parse(document, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("header") || !j.contains("objects") || !j["objects"].is_array())
    throw Error(sigName + ": the signed document is not SIF image metadata");
  const auto members = detail::groupMembers(image, t.group);
  if (members.empty()) throw Error("object group " + std::to_string(t.group) + " not found");
  std::uint32_t minId = members.front()->id;
  for (const auto* d : members) minId = std::min(minId, d->id);
  std::map<std::uint32_t, std::pair<std::string, std::string>> signedObjects;  // id -> descriptor, data digests
  for (const auto& o : j["objects"]) {
    if (!o.is_object() || !o.contains("relativeId") || !o["relativeId"].is_number_unsigned())
      throw Error(sigName + ": the signed document lists an object without a relativeId");
    signedObjects[minId + o["relativeId"].get<std::uint32_t>()] = {
        documentDigest(nlohmann::json{{"digest", o.value("descriptorDigest", "")}}, sigName),
        documentDigest(nlohmann::json{{"digest", o.value("objectDigest", "")}}, sigName)};
  }
  if (t.kind == Task::Group) {
    for (const auto* d : members)
      if (!signedObjects.contains(d->id)) throw Error("object " + std::to_string(d->id) + ": object not signed");
    for (const auto& entry : signedObjects) {
      const std::uint32_t id = entry.first;
      if (std::none_of(members.begin(), members.end(), [id](const Descriptor* d) { return d->id == id; }))
        throw Error("object " + std::to_string(id) + ": signed object not found");
    }
  }
  if (documentDigest(j["header"], sigName) != detail::headerDigest(image.header()))
    throw Error("header integrity compromised");
  std::vector<std::uint32_t> checked;
  for (const auto* d : members) {
    if (t.kind == Task::Objects && std::find(t.objects.begin(), t.objects.end(), d->id) == t.objects.end()) continue;
    const auto entry = signedObjects.find(d->id);
    if (entry == signedObjects.end()) throw Error("object " + std::to_string(d->id) + ": object not signed");
    if (entry->second.first != detail::descriptorDigest(*d, d->id - minId))
      throw Error("data object descriptor integrity compromised: " + std::to_string(d->id));
    if (entry->second.second != detail::objectDigest(image, *d))
      throw Error("data object integrity compromised: " + std::to_string(d->id));
    checked.push_back(d->id);
  }
  return checked;
}

// Legacy: "SIFHASH:\n<hex>" against the object's data, or the group's in slot order.
std::vector<std::uint32_t> checkLegacyDigest(const Image& image, const Task& t, const Descriptor& sig,
                                             const std::string& text) {
  if (!text.starts_with("SIFHASH:\n"))
    throw Error("signature object " + std::to_string(sig.id) + " not valid: no SIFHASH in the signed text");
  std::string want = text.substr(9);
  if (want.ends_with('\n')) want.pop_back();
  Digester digester(descriptorHash(sig));
  std::vector<std::uint32_t> covered;
  for (const auto* d : detail::groupMembers(image, t.group)) {
    if (t.kind == Task::LegacyObject && d->id != t.objects.front()) continue;
    digestRange(digester, image.fd(), "object " + std::to_string(d->id) + " of the image", d->offset, d->size);
    covered.push_back(d->id);
  }
  const std::string got = digester.digest();
  if (got.substr(got.find(':') + 1) != want)
    throw Error(t.kind == Task::LegacyObject ? "data object integrity compromised: " + std::to_string(t.objects.front())
                                             : "data object integrity compromised: object group " + std::to_string(t.group));
  return covered;
}

SignatureCheck checkSignature(const Image& image, const Task& t, const Descriptor& sig, const VerifyKeys& keys) {
  SignatureCheck c;
  c.signature = sig.id;
  c.covers = taskName(t);
  try {
    const auto bytes = image.readObject(sig);
    const std::string_view data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const bool legacy = t.kind == Task::LegacyGroup || t.kind == Task::LegacyObject;
    if (legacy) {
      c.format = "OpenPGP (legacy)";
      const std::string text = checkPgp(data, sig, keys, true, c.signers);
      c.signatureVerified = true;
      c.objects = checkLegacyDigest(image, t, sig, text);
    } else if (const auto envelope = parseDsseEnvelope(data)) {
      c.format = "DSSE";
      (void)descriptorHash(sig);
      const std::string document = checkDsse(*envelope, sig, keys, c.signers);
      c.signatureVerified = true;
      c.objects = checkDocument(image, t, sig, document);
    } else if (looksClearSigned(data)) {
      c.format = "OpenPGP";
      const std::string document = checkPgp(data, sig, keys, false, c.signers);
      c.signatureVerified = true;
      c.objects = checkDocument(image, t, sig, document);
    } else {
      throw Error("signature object " + std::to_string(sig.id) + ": signature format not recognized");
    }
  } catch (const Error& e) {
    c.error = e.what();
  }
  return c;
}

}  // namespace

Verification verifyImage(const Image& image, const VerifyTasks& asked, const VerifyKeys& keys) {
  Verification v;
  try {
    const auto used = image.usedDescriptors();
    if (used.empty()) throw Error("the image has no objects");
    for (const auto& d : used)
      if (d.group() == 0 && d.dataType != kSignature)
        throw Error("object " + std::to_string(d.id) + ": non-signature object not associated with object group");
    for (const Task& t : selectTasks(image, asked)) {
      const auto sigs = signaturesFor(image, t);
      if (sigs.empty()) throw Error("signature not found for " + taskName(t));
      for (const Descriptor* sig : sigs) {
        v.checks.push_back(checkSignature(image, t, *sig, keys));
        if (v.error.empty() && !v.checks.back().error.empty()) v.error = v.checks.back().error;
      }
    }
  } catch (const Error& e) {
    if (v.error.empty()) v.error = e.what();
  }
  return v;
}

}  // namespace ctr::image::sif
