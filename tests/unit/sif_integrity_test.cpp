// The reference's integrity format on the conformance fixtures (docs/design-signing.md):
// ctr's image metadata for a group is byte for byte what the fixture's DSSE envelope
// signed; its Ed25519 and RSA signatures verify with their keys and not with the ECDSA
// one; a changed object or header makes another document.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ctr/error.hpp"
#include "ctr/sif.hpp"
#include "ctr/sif_integrity.hpp"
#include "ctr/sif_pgp.hpp"

namespace sif = ctr::image::sif;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(CTR_FIXTURES_DIR) / "sif";

std::string readText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The data of the image's signature object linked to `group`.
std::string signatureData(const sif::Image& image, std::uint32_t group) {
  for (const auto& d : image.usedDescriptors())
    if (d.dataType == static_cast<std::int32_t>(sif::DataType::Signature) && d.linkIsGroup() && d.link() == group) {
      const auto bytes = image.readObject(d);
      return {bytes.begin(), bytes.end()};
    }
  return {};
}

// A copy of `from` under a test directory, one byte at `at` flipped.
std::filesystem::path flippedCopy(const std::filesystem::path& from, std::int64_t at) {
  const auto to = std::filesystem::temp_directory_path() / ("ctr-sif-integrity-" + std::to_string(::getpid()) + ".sif");
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  std::fstream f(to, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 1));
  return to;
}

}  // namespace

TEST(SifIntegrity, MetadataIsWhatTheReferenceSignedAndItsSignaturesVerify) {
  for (const char* name : {"one-group-signed-dsse.sif", "two-groups-signed-dsse.sif", "apptainer-one-group-signed-dsse.sif"}) {
    const auto image = sif::Image::open(kFixtures / "images" / name);
    const std::uint32_t groups = std::string(name).find("two-groups") != std::string::npos ? 2 : 1;
    for (std::uint32_t g = 1; g <= groups; ++g) {
      const auto envelope = sif::parseDsseEnvelope(signatureData(image, g));
      ASSERT_TRUE(envelope) << name << " group " << g;
      EXPECT_EQ(envelope->payloadType, sif::kSifMetadataMediaType);
      EXPECT_EQ(sif::imageMetadata(image, g), envelope->payload) << name << " group " << g;
      EXPECT_TRUE(sif::dsseSignedBy(*envelope, readText(kFixtures / "keys/ed25519-public.pem"))) << name;
      EXPECT_TRUE(sif::dsseSignedBy(*envelope, readText(kFixtures / "keys/rsa-public.pem"))) << name;
      EXPECT_FALSE(sif::dsseSignedBy(*envelope, readText(kFixtures / "keys/ecdsa-public.pem"))) << name;
    }
  }
}

TEST(SifIntegrity, ATamperedEnvelopeOrImageNoLongerMatches) {
  const auto path = kFixtures / "images/one-group-signed-dsse.sif";
  const auto image = sif::Image::open(path);
  auto envelope = *sif::parseDsseEnvelope(signatureData(image, 1));
  const std::string signedJson = envelope.payload;
  envelope.payload[20] ^= 1;  // the signed document changed: no signature covers it
  EXPECT_FALSE(sif::dsseSignedBy(envelope, readText(kFixtures / "keys/ed25519-public.pem")));
  // One byte of object 2's data, then of the header's UUID: another document.
  const auto& object = image.descriptorById(2);
  for (const std::int64_t at : {object.offset + 100, std::int64_t{50}}) {
    const auto copy = flippedCopy(path, at);
    EXPECT_NE(sif::imageMetadata(sif::Image::open(copy), 1), signedJson) << "byte " << at;
    std::filesystem::remove(copy);
  }
  EXPECT_THROW((void)sif::imageMetadata(image, 7), ctr::Error);
  EXPECT_FALSE(sif::parseDsseEnvelope("-----BEGIN PGP SIGNED MESSAGE-----"));
  EXPECT_THROW((void)sif::dsseSignedBy(envelope, "not a key"), ctr::Error);
}

TEST(SifIntegrity, PaeIsDssesEncoding) {
  EXPECT_EQ(sif::dssePae("t/x", "body"), "DSSEv1 3 t/x 4 body");
}

namespace {

// verifyImage with PEM keys from the fixtures' keys/ directory.
sif::Verification verifyWith(const std::filesystem::path& image, std::initializer_list<const char*> pems,
                             const sif::VerifyTasks& tasks = {}, const sif::PgpKeyring* keyring = nullptr) {
  sif::VerifyKeys keys;
  for (const char* p : pems) keys.publicKeysPem.push_back(readText(kFixtures / "keys" / p));
  keys.keyring = keyring;
  return sif::verifyImage(sif::Image::open(image), tasks, keys);
}

}  // namespace

TEST(SifVerify, SshKeyIdsAreTheOnesTheFixturesName) {
  EXPECT_EQ(sif::sshKeyId(readText(kFixtures / "keys/ed25519-public.pem")), "SHA256:x6l8ZblpSSXGaPMCzySedWg88BwIFcz8jlPb6el0mFs");
  EXPECT_EQ(sif::sshKeyId(readText(kFixtures / "keys/rsa-public.pem")), "SHA256:BhCwr7qZulYcOMSl2Jt2DuYHxHNnN6th4NdMqR/PGa4");
  EXPECT_EQ(sif::sshKeyId(readText(kFixtures / "keys/ecdsa-public.pem")), "SHA256:13cNV0A11AxgIQYCvlDmJlRi0CjRtjnYF47RzrMhlaU");
  EXPECT_THROW((void)sif::sshKeyId("not a key"), ctr::Error);
}

TEST(SifVerify, EveryDsseFixtureVerifiesWithEachOfItsKeysAndNotWithAnother) {
  for (const char* name : {"one-group-signed-dsse.sif", "two-groups-signed-dsse.sif", "apptainer-one-group-signed-dsse.sif",
                           "apptainer-two-groups-signed-dsse.sif"}) {
    const auto path = kFixtures / "images" / name;
    for (const char* key : {"ed25519-public.pem", "rsa-public.pem"}) {
      const auto v = verifyWith(path, {key});
      EXPECT_EQ(v.error, "") << name << " " << key;
      ASSERT_FALSE(v.checks.empty()) << name;
      for (const auto& c : v.checks) {
        EXPECT_EQ(c.format, "DSSE");
        EXPECT_EQ(c.signers, std::vector<std::string>{sif::sshKeyId(readText(kFixtures / "keys" / key))});
        EXPECT_FALSE(c.objects.empty());
      }
    }
    const auto both = verifyWith(path, {"ed25519-public.pem", "rsa-public.pem"});
    EXPECT_EQ(both.checks.front().signers.size(), 2u) << name;
    EXPECT_NE(verifyWith(path, {"ecdsa-public.pem"}).error.find("no signature in the envelope verifies"), std::string::npos);
    EXPECT_EQ(verifyWith(path, {}).error, "key material not provided for DSSE envelope signature");
  }
  const auto two = verifyWith(kFixtures / "images/two-groups-signed-dsse.sif", {"ed25519-public.pem"});
  ASSERT_EQ(two.checks.size(), 2u);
  EXPECT_EQ(two.checks[0].covers, "object group 1");
  EXPECT_EQ(two.checks[1].covers, "object group 2");
  EXPECT_EQ(two.checks[1].objects, std::vector<std::uint32_t>{3});
}

TEST(SifVerify, GroupsAndObjectsAreChosenAsTheReferenceChoosesThem) {
  const auto path = kFixtures / "images/two-groups-signed-dsse.sif";
  sif::VerifyTasks group2;
  group2.groups = {2};
  const auto g = verifyWith(path, {"rsa-public.pem"}, group2);
  ASSERT_EQ(g.checks.size(), 1u);
  EXPECT_EQ(g.checks[0].covers, "object group 2");
  sif::VerifyTasks object1;
  object1.objects = {1};
  const auto o = verifyWith(path, {"rsa-public.pem"}, object1);
  EXPECT_EQ(o.error, "");
  ASSERT_EQ(o.checks.size(), 1u);
  EXPECT_EQ(o.checks[0].objects, std::vector<std::uint32_t>{1});
  sif::VerifyTasks missing;
  missing.groups = {7};
  EXPECT_EQ(verifyWith(path, {"rsa-public.pem"}, missing).error, "object group 7 not found in the image");
  EXPECT_EQ(verifyWith(kFixtures / "images/one-group.sif", {"rsa-public.pem"}).error,
            "signature not found for object group 1");
}

// One flipped byte in a signed object, a covered descriptor field, the header or the
// signature: the check fails and says which.
TEST(SifVerify, AFlippedByteFailsNamingWhatChanged) {
  const auto path = kFixtures / "images/one-group-signed-dsse.sif";
  const auto image = sif::Image::open(path);
  const auto& object2 = image.descriptorById(2);
  const auto& signature = image.descriptorById(3);
  const std::int64_t descriptors = image.header().descriptorsOffset;
  struct Case {
    std::int64_t at;
    const char* says;
  };
  for (const Case& c : {Case{object2.offset + 7, "data object integrity compromised: 2"},
                        Case{descriptors + 585 + 41, "data object descriptor integrity compromised: 2"},  // object 2's CreatedAt
                        Case{5, "header integrity compromised"},                                          // the launch script
                        Case{signature.offset + signature.size / 2, "signature object 3"}}) {
    const auto copy = flippedCopy(path, c.at);
    const auto v = verifyWith(copy, {"ed25519-public.pem"});
    std::filesystem::remove(copy);
    EXPECT_NE(v.error.find(c.says), std::string::npos) << "byte " << c.at << ": " << v.error;
  }
}

TEST(SifVerify, OpenPgpFixturesVerifyWithTheKeyringOfTheirKey) {
  const sif::PgpKeyring keyring({kFixtures / "keys/private.asc"});
  EXPECT_EQ(keyring.fingerprints(), std::vector<std::string>{"12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84"});
  for (const char* name : {"one-group-signed-pgp.sif", "two-groups-signed-pgp.sif", "apptainer-one-group-signed-pgp.sif",
                           "apptainer-two-groups-signed-pgp.sif"}) {
    const auto v = verifyWith(kFixtures / "images" / name, {}, {}, &keyring);
    EXPECT_EQ(v.error, "") << name;
    ASSERT_FALSE(v.checks.empty()) << name;
    EXPECT_EQ(v.checks.front().format, "OpenPGP");
    EXPECT_EQ(v.checks.front().signers, std::vector<std::string>{"12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84"});
    EXPECT_EQ(verifyWith(kFixtures / "images" / name, {"rsa-public.pem"}).error,
              "key material not provided for PGP clear-sign signature");
  }
  // Legacy SIFHASH signatures: only when asked for, each of the three shapes.
  const auto legacy = kFixtures / "images/one-group-signed-legacy.sif";
  EXPECT_EQ(verifyWith(legacy, {}, {}, &keyring).error, "signature not found for object group 1");
  sif::VerifyTasks insecure;
  insecure.legacy = true;
  for (const char* name : {"one-group-signed-legacy.sif", "two-groups-signed-legacy.sif"}) {
    const auto v = verifyWith(kFixtures / "images" / name, {}, insecure, &keyring);
    EXPECT_EQ(v.error, "") << name;
    ASSERT_EQ(v.checks.size(), 1u) << name;
    EXPECT_EQ(v.checks.front().format, "OpenPGP (legacy)");
  }
  sif::VerifyTasks all = insecure;
  all.all = true;
  EXPECT_EQ(verifyWith(kFixtures / "images/one-group-signed-legacy-all.sif", {}, all, &keyring).error, "");
  // Its two groups' third object (group 2) has no signature of its own.
  EXPECT_EQ(verifyWith(kFixtures / "images/two-groups-signed-legacy-all.sif", {}, all, &keyring).error,
            "signature not found for object 3");
  sif::VerifyTasks group = insecure;
  group.groups = {1};
  for (const char* name : {"one-group-signed-legacy-group.sif", "two-groups-signed-legacy-group.sif"})
    EXPECT_EQ(verifyWith(kFixtures / "images" / name, {}, group, &keyring).error, "") << name;
  const auto image = sif::Image::open(legacy);
  const auto copy = flippedCopy(legacy, image.primaryPartition()->offset + 1);
  EXPECT_EQ(verifyWith(copy, {}, insecure, &keyring).error,
            "data object integrity compromised: " + std::to_string(image.primaryPartition()->id));
  std::filesystem::remove(copy);
}

namespace {

// A copy of the unsigned fixture one-group.sif, signed with these private keys.
std::filesystem::path signedCopy(std::initializer_list<const char*> keys, const char* name = "one-group.sif") {
  const auto to = std::filesystem::temp_directory_path() / ("ctr-sif-signed-" + std::to_string(::getpid()) + ".sif");
  std::filesystem::copy_file(kFixtures / "images" / name, to, std::filesystem::copy_options::overwrite_existing);
  std::vector<std::string> pems;
  for (const char* k : keys) pems.push_back(readText(kFixtures / "keys" / k));
  auto image = sif::Image::open(to, true);
  (void)sif::signDsse(image, pems);
  return to;
}

}  // namespace

// Ed25519 and RSA PKCS#1 v1.5 signatures are deterministic, and so is the fixture (no
// UUID, the zero time): signed by ctr with the two keys the reference used, the unsigned
// fixture becomes its signed one byte for byte.
TEST(SifSign, SignedWithTheReferencesKeysTheFixtureBecomesTheReferencesSignedOneByteForByte) {
  for (const char* name : {"one-group", "two-groups"}) {
    const auto copy = signedCopy({"ed25519-private.pem", "rsa-private.pem"}, (std::string(name) + ".sif").c_str());
    EXPECT_EQ(readText(copy), readText(kFixtures / "images" / (std::string(name) + "-signed-dsse.sif"))) << name;
    std::filesystem::remove(copy);
  }
}

TEST(SifSign, EachKeyTypeRoundTripsAndOnlyItsPublicKeyVerifies) {
  for (const std::string type : {"ed25519", "rsa", "ecdsa"}) {
    const auto copy = signedCopy({(type + "-private.pem").c_str()});
    const auto good = verifyWith(copy, {(type + "-public.pem").c_str()});
    EXPECT_EQ(good.error, "") << type;
    ASSERT_EQ(good.checks.size(), 1u) << type;
    EXPECT_EQ(good.checks[0].signers, std::vector<std::string>{sif::sshKeyId(readText(kFixtures / "keys" / (type + "-public.pem")))});
    const char* other = type == "rsa" ? "ed25519-public.pem" : "rsa-public.pem";
    EXPECT_NE(verifyWith(copy, {other}).error, "") << type;
    std::filesystem::remove(copy);
  }
  const auto to = std::filesystem::temp_directory_path() / ("ctr-sif-signed-" + std::to_string(::getpid()) + ".sif");
  std::filesystem::copy_file(kFixtures / "images/one-group.sif", to, std::filesystem::copy_options::overwrite_existing);
  auto image = sif::Image::open(to, true);
  EXPECT_THROW((void)sif::signDsse(image, {readText(kFixtures / "keys/ed25519-public.pem")}), ctr::Error);
  EXPECT_THROW((void)sif::signDsse(image, {readText(kFixtures / "keys/ed25519-private.pem")}, {9}), ctr::Error);
  std::filesystem::remove(to);
}

// OpenPGP: the fixtures' secret key clear-signs the image metadata; ctr's own verifier and
// the descriptor (SHA-256, the primary key's fingerprint) agree with the reference's.
TEST(SifSign, OpenPgpSignaturesVerifyAndRecordThePrimaryKey) {
  const sif::PgpKeyring keyring({kFixtures / "keys/private.asc"});
  const auto to = std::filesystem::temp_directory_path() / ("ctr-sif-pgp-" + std::to_string(::getpid()) + ".sif");
  std::filesystem::copy_file(kFixtures / "images/two-groups.sif", to, std::filesystem::copy_options::overwrite_existing);
  {
    auto image = sif::Image::open(to, true);
    EXPECT_EQ(sif::signPgp(image, keyring, ""), "12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84");
  }
  const auto v = verifyWith(to, {}, {}, &keyring);
  EXPECT_EQ(v.error, "");
  ASSERT_EQ(v.checks.size(), 2u);
  EXPECT_EQ(v.checks[0].format, "OpenPGP");
  const auto image = sif::Image::open(to);
  const auto reference = sif::Image::open(kFixtures / "images/two-groups-signed-pgp.sif");
  for (std::uint32_t id : {4u, 5u}) {
    const auto& mine = image.descriptorById(id);
    const auto& theirs = reference.descriptorById(id);
    EXPECT_EQ(mine.extra, theirs.extra) << id;  // hash type and fingerprint
    EXPECT_EQ(mine.linkedIdRaw, theirs.linkedIdRaw) << id;
    EXPECT_EQ(mine.groupIdRaw, theirs.groupIdRaw) << id;
  }
  EXPECT_NE(sif::verifyImage(image, {}, {}).error, "");
  EXPECT_THROW((void)sif::PgpKeyring({kFixtures / "keys/ed25519-public.pem"}), ctr::Error);
  std::filesystem::remove(to);
}
