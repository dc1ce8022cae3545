// The files a launch's options name, looked at as the caller: what an --overlay path is, and
// the dataset images of the binds (image-src=). The planner only reads the result.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/overlay_image.hpp"
#include "ctr/sif.hpp"

namespace ctr::host {

namespace {

// A file the image reader does not take: an ext2/3/4 image by its superblock's magic number
// (0xEF53, little-endian, at 1080), else something no overlay can be.
OverlayFile sniffFile(const std::string& path, const struct stat& st) {
  std::array<unsigned char, 2> magic{};
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  const bool ext = S_ISREG(st.st_mode) && fd && ::pread(fd.get(), magic.data(), magic.size(), 1080) == 2 &&
                   magic[0] == 0x53 && magic[1] == 0xEF;
  OverlayFile file;
  file.kind = ext ? OverlayFileKind::Ext3 : OverlayFileKind::Other;
  file.ext3Size = static_cast<std::uint64_t>(st.st_size);
  return file;
}

// An image file: squashfs or SIF, or a SIF with an ext3 overlay partition, which is then
// the layer (Apptainer's).
OverlayFile imageFile(const std::string& path, const struct stat& st) {
  try {
    auto image = image::resolveImage(path);
    OverlayFile file;
    if (image.kind == image::ImageKind::Sif) {
      if (const auto part = image::sifExt3Overlay(image::sif::Image::open(path, false))) {
        file.kind = OverlayFileKind::Ext3;
        file.ext3Offset = part->offset;
        file.ext3Size = part->size;
        return file;
      }
    }
    file.kind = image.kind == image::ImageKind::Sif ? OverlayFileKind::Sif : OverlayFileKind::Squashfs;
    file.image = std::move(image);
    return file;
  } catch (const Error&) {
    return sniffFile(path, st);
  }
}

}  // namespace

OverlayFile inspectOverlayFile(const NamedFile& named) {
  struct stat st {};
  if (::stat(named.path.c_str(), &st) != 0) {
    if (errno != ENOENT) throw Error(named.label + ": " + std::strerror(errno)).withStatus(1);
    return {};
  }
  if (!S_ISDIR(st.st_mode)) return imageFile(named.path, st);
  OverlayFile file;
  file.kind = OverlayFileKind::Directory;
  struct stat upper {};
  file.hasUpperDir = ::stat((named.path + "/upper").c_str(), &upper) == 0 && S_ISDIR(upper.st_mode);
  return file;
}

image::ImageSource inspectDatasetFile(const NamedFile& named) {
  struct stat st {};
  if (::stat(named.path.c_str(), &st) != 0)
    throw Error(named.label + ": " + named.path + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    throw Error(named.label + ": image-src= needs a squashfs or SIF file, and " + named.path +
                " is a directory (bind it without image-src=)");
  try {
    return image::resolveDataImage(named.path);
  } catch (const Error& e) {
    throw Error(named.label + ": not a squashfs or SIF image (" + e.oneLine() + ")");
  }
}

}  // namespace ctr::host
