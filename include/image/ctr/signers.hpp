// Who signed an image, for ctr.conf's execution control (docs/design-signing.md, section
// 2): the facts the planner decides on, read once per node for an image file as it is and
// kept in the user's state directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ctr/config.hpp"
#include "ctr/fd.hpp"
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

// The facts of the image file open on `fd` (`fileBytes` long), verified now and kept
// nowhere: the setuid helper's own check of the very file it mounts (`ctr __verify-fd`).
SignatureFacts verifyOpenFile(UniqueFd fd, std::uint64_t fileBytes, const config::ExecutionControl& control, bool trusted,
                              bool blacklisted);

// "whitelist for every image", "blacklist for /scratch": a rule as messages name it.
[[nodiscard]] std::string ruleName(const config::ExecutionRule& rule);

// ctr.conf's judgement of an image with facts `f` under `rule` (read from `source`): "" when
// it may run, else "refused by ctr.conf's execution rule (RULE, SOURCE): WHY". The planner
// and the setuid helper's check both ask this, so they cannot disagree.
[[nodiscard]] std::string executionRefusal(const config::ExecutionRule& rule, const SignatureFacts& f,
                                           const std::string& source);

}  // namespace ctr::image
