// `ctr overlay create` (Apptainer's `overlay create`): a writable ext3 overlay image, as a
// file of its own or as a new partition of a SIF. Made as an ordinary user, without a
// mount: the layout (upper/, work/, --create-dir directories) is staged in a scratch
// directory and written into the new file system by `mkfs.ext3 -d` (e2fsprogs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ctr/sif.hpp"

namespace ctr::image {

// Apptainer refuses smaller overlay images ("image size must be equal or greater than 64 MiB").
inline constexpr std::int64_t kMinOverlaySizeMiB = 64;

struct OverlayCreateOptions {
  std::filesystem::path image;  // a new file, or an existing SIF to add the partition to
  std::int64_t sizeMiB = kMinOverlaySizeMiB;
  std::vector<std::string> createDirs;  // absolute paths, made under upper/
  bool fakeroot = false;                // the layout owned by 0:0 (for runs with --fakeroot)
  bool sparse = false;                  // a sparse file, else every block allocated
};

// The directories of the image's layout, relative to its root, parents before children and
// each once: "upper", "work", then every directory on the way to each --create-dir under
// upper ("/usr/local" gives "upper/usr", "upper/usr/local"). Throws ctr::Error (status 255, as
// every refusal of overlay create) for a --create-dir that is not absolute or has a "..".
[[nodiscard]] std::vector<std::filesystem::path> overlayLayoutDirs(const std::vector<std::string>& createDirs);

// Throws ctr::Error (status 255, as Apptainer) for a size below kMinOverlaySizeMiB.
void checkOverlaySize(std::int64_t sizeMiB);

// Throws ctr::Error naming `name` when the SIF cannot take an overlay partition: it has one
// already, it is signed (the signature would no longer cover the image), or its root file
// system is encrypted.
void checkSifTakesOverlay(const sif::Image& image, const std::string& name);

// Where a SIF's ext3 overlay partition lies (`--overlay app.sif` stacks it as Apptainer does):
// the first Overlay partition of fs type Ext3, or nullopt when the SIF has none.
struct Ext3Partition {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};
[[nodiscard]] std::optional<Ext3Partition> sifExt3Overlay(const sif::Image& image);

// debugfs commands that give each of `dirs` (relative to the image's root) to root:root.
[[nodiscard]] std::string rootOwnershipScript(const std::vector<std::filesystem::path>& dirs);

// Creates the overlay image, or adds it to the SIF at options.image. On failure nothing is
// left behind: no partial image, no scratch directory, and a SIF as it was, byte for byte.
// Throws ctr::Error with one line naming the image and what was wrong.
void createOverlayImage(const OverlayCreateOptions& options);

}  // namespace ctr::image
