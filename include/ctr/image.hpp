// What an IMAGE argument is, and where its root filesystem lives: the one entry point the
// runtime uses to turn a path into something it can mount. Recognises a SIF (its primary
// system partition), a plain squashfs file and a directory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace ctr::image {

enum class ImageKind { Sif, Squashfs, Directory };

struct ImageSource {
  std::filesystem::path path;  // absolute path as given by the user, made absolute
  ImageKind kind = ImageKind::Directory;
  // For Sif and Squashfs: where the squashfs filesystem lies inside the file.
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string arch;  // Go arch name of the SIF primary partition ("amd64"); empty if unknown
  // Identity of the file, the key of the per-node mount cache (stat of the opened file).
  dev_t device = 0;
  ino_t inode = 0;
  std::int64_t mtimeNs = 0;
};

// Opens `path` and works out what it is. Throws ctr::Error with a one-line message naming
// the path and the problem: missing, unreadable, not an image at all, malformed SIF, SIF
// without a primary squashfs partition, ...
ImageSource resolveImage(const std::filesystem::path& path);

// "sif", "squashfs", "directory"
std::string toString(ImageKind kind);

}  // namespace ctr::image
