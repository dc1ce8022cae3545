// Who signed an image, for ctr.conf's execution control (docs/design-signing.md, section
// 2): the facts the planner decides on, read once per node for an image file as it is and
// kept in the user's state directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ctr/config.hpp"
#include "ctr/image.hpp"

namespace ctr::image {

struct SignatureFacts {
  bool sif = false;                             // a SIF (only SIFs carry signatures)
  bool hasSignatures = false;                   // it has signature objects
  std::string trustedError;                     // "": every signature verified with the trusted keys
  std::vector<std::string> trustedSigners;      // trusted keys that verified a signature of it
  std::vector<std::string> trustedKeys;         // every trusted key's name (keyid, fingerprint)
  std::vector<std::string> blacklistedSigners;  // blacklisted keys that verified one
  bool cached = false;                          // from the verdict kept for this file
};

// A key file's text: a regular file of at most 1 MiB. Errors name `what` asked for it
// ("ctr.conf key", "--key") and the path.
[[nodiscard]] std::string readKeyFile(const std::string& path, const std::string& what);

// The facts of `image` against the keys of `control` (trusted ones when `trusted`,
// blacklisted ones when `blacklisted`), from `cacheDir` when a verdict for this file (its
// device, inode, size, mtime and ctime) and these keys' contents is there, else verified
// now (every byte of the SIF read) and kept there. Throws ctr::Error naming a key file
// that cannot be read or is no key.
SignatureFacts signatureFacts(const ImageSource& image, const config::ExecutionControl& control, bool trusted,
                              bool blacklisted, const std::filesystem::path& cacheDir);

}  // namespace ctr::image
