// SHA-256 (FIPS 180-4) for the OCI digests the SIF writer stores in descriptors; small
// enough to keep libctr free of a crypto library dependency.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace ctr::image {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::uint8_t> data);
  // Lower-case hex digest; the object must not be updated afterwards.
  std::string hexDigest();

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t bufLen_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace ctr::image
