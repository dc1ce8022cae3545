// The one non-cryptographic hash of ctr: FNV-1a (64-bit), for cache and state file keys
// (image keys in the state directory, the seccomp BPF cache). Not for anything an attacker
// controls the collisions of: keys name files in the user's own private directory.
// SHA-256 is libcrypto's, in ctr/digest.hpp. Also the one hex encoder.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ctr {

constexpr std::uint64_t fnv1a64(std::string_view data, std::uint64_t hash = 14695981039346656037ULL) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

// Two lowercase hex digits per byte, in order.
inline std::string toHex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

// 16 lowercase hex digits, most significant first.
inline std::string toHex16(std::uint64_t value) {
  std::uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::uint8_t>(value >> (56 - 8 * i));
  return toHex(bytes);
}

}  // namespace ctr
