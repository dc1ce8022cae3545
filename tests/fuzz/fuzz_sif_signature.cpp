// libFuzzer target: ctr verify on any file. A SIF the reader accepts, with whatever its
// signature objects hold (DSSE envelopes, clear-signed text, garbage), must give a verdict
// or a ctr::Error, never crash or read out of bounds. DSSE envelopes are checked against an
// Ed25519 key (the fixtures' seeds were signed by it); OpenPGP ones find no keyring, so
// that no gpg runs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/sif.hpp"
#include "ctr/sif_integrity.hpp"

namespace {

// The reference library's test key (../shared/fixtures/sif/keys/ed25519-public.pem).
constexpr const char* kKey =
    "-----BEGIN PUBLIC KEY-----\n"
    "MCowBQYDK2VwAyEA4LypVa0tjUB5eUQeeGjllrBG7gWCIOSymuMc6fg8GB4=\n"
    "-----END PUBLIC KEY-----\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sif = ctr::image::sif;
  ctr::UniqueFd fd(::memfd_create("fuzz.sif", MFD_CLOEXEC));
  if (!fd || ::write(fd.get(), data, size) != static_cast<ssize_t>(size)) return 0;
  try {
    const auto image = sif::Image::fromFd(std::move(fd), static_cast<std::int64_t>(size));
    sif::VerifyKeys keys;
    keys.publicKeysPem.push_back(kKey);
    (void)sif::verifyImage(image, {}, keys);
    sif::VerifyTasks legacy;
    legacy.legacy = legacy.all = true;
    (void)sif::verifyImage(image, legacy, keys);
    for (const auto& d : image.usedDescriptors()) {
      if (d.dataType != static_cast<std::int32_t>(sif::DataType::Signature)) continue;
      const auto bytes = image.readObject(d);
      (void)sif::parseDsseEnvelope(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
  } catch (const ctr::Error&) {
  }
  return 0;
}
