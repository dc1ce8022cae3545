// The one non-cryptographic hash of ctr: FNV-1a (64-bit), for cache and state file keys
// (image keys in the state directory, the seccomp BPF cache). Not for anything an attacker
// controls the collisions of: keys name files in the user's own private directory.
#pragma once

#include <cstdint>
#include <cstdio>
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

// 16 lowercase hex digits.
inline std::string toHex16(std::uint64_t value) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

}  // namespace ctr
