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
