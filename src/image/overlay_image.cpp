// `ctr overlay create`: see overlay_image.hpp.
#include "ctr/overlay_image.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/log.hpp"
#include "ctr/run_process.hpp"
#include "ctr/scratch.hpp"
#include "ctr/strings.hpp"

namespace ctr::image {

namespace fs = std::filesystem;

namespace {

// What is at the IMAGE path: nothing (a new image), a SIF (opened for writing), or
// anything else, which is refused.
std::optional<sif::Image> openExistingSif(const fs::path& image) {
  const std::string name = image.string();
  struct stat st {};
  if (::lstat(image.c_str(), &st) != 0) {
    if (errno != ENOENT) throw sysError(name);
    const fs::path dir = fs::absolute(image).parent_path();
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error(name + ": no directory " + dir.string());
    return std::nullopt;
  }
  UniqueFd fd(::open(image.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !hasSifMagic(fd.get()))
    throw Error(name + ": already exists (overlay create makes a new image, or adds one to a SIF)");
  fd.reset();
  return withContext(name, [&] { return sif::Image::open(image, true); });
}

// The layout staged in `root`, as Apptainer makes it: 0755 directories of the caller's; 0777
// where its uid or gid does not fit in 16 bits (an overlay then still works for it).
void stageLayout(const fs::path& root, const std::vector<fs::path>& dirs, bool fakeroot) {
  const bool wideIds = ::geteuid() > 65535 || ::getegid() > 65535;
  const mode_t mode = !fakeroot && wideIds ? 0777 : 0755;
  for (const auto& dir : dirs) {
    const fs::path at = root / dir;
    // chmod after mkdir: the umask must not narrow the mode.
    if (::mkdir(at.c_str(), mode) != 0 || ::chmod(at.c_str(), mode) != 0) throw sysError("create " + at.string());
  }
}

// A new file of `sizeMiB` MiB: sparse, or with every block allocated up front (Apptainer's
// dd from /dev/zero), so that a full file system cannot fail the container's writes later.
void makeImageFile(const fs::path& file, std::int64_t sizeMiB, bool sparse) {
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw sysError("create " + file.string());
  const off_t bytes = static_cast<off_t>(sizeMiB) * 1024 * 1024;
  if (sparse) {
    if (::ftruncate(fd.get(), bytes) != 0) throw sysError("size " + file.string());
  } else if (const int err = ::posix_fallocate(fd.get(), 0, bytes); err != 0) {
    throw sysError("allocate " + std::to_string(sizeMiB) + " MiB for " + file.string(), err);
  }
}

void makeExt3(const fs::path& file, const fs::path& layout, bool sparse) {
  std::vector<std::string> argv{findProgram(Program::MkfsExt3), "-q", "-F"};
  // mke2fs discards (punches holes in) a regular file's blocks unless told not to.
  if (!sparse) argv.insert(argv.end(), {"-E", "nodiscard"});
  argv.insert(argv.end(), {"-d", layout.string(), file.string()});
  ProcessOptions options;
  options.captureStdout = true;
  options.captureStderr = true;
  options.captureLimit = 64 * 1024;
  runProcessChecked(argv, options);
}

// debugfs answers 0 whatever its commands did: its only sign of failure is what it prints
// besides its banner.
void giveLayoutToRoot(const fs::path& file, const fs::path& scriptFile, const std::vector<fs::path>& dirs) {
  writeFile(scriptFile.string(), rootOwnershipScript(dirs));
  ProcessOptions options;
  options.captureStdout = true;
  options.captureStderr = true;
  options.captureLimit = 64 * 1024;
  const auto result =
      runProcessChecked({findProgram(Program::Debugfs), "-w", "-f", scriptFile.string(), file.string()}, options);
  std::string complaints;
  for (const auto line : splitLines(result.capturedStderr))
    if (!line.empty() && !line.starts_with("debugfs ")) complaints += (complaints.empty() ? "" : "; ") + std::string(line);
  if (!complaints.empty()) throw Error("debugfs could not give the layout to root: " + complaints);
}

// Adds the ext3 image as an overlay partition. Only the data past the old end and the header
// and descriptor table change; on failure they are put back, so the SIF stays as it was.
void appendOverlayPartition(sif::Image& image, const fs::path& ext3, const std::string& objectName) {
  const sif::Header header = image.header();
  const std::int64_t oldSize = image.fileSize();
  std::string prefix(static_cast<std::size_t>(header.descriptorsOffset + header.descriptorsSize), '\0');
  if (readAt(image.fd(), 0, std::span<char>(prefix)) != prefix.size()) throw Error("file shrank while being read");

  UniqueFd data(::open(ext3.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!data || ::fstat(data.get(), &st) != 0) throw sysError("open " + ext3.string());
  std::string arch = sif::archName(header.arch);
  if (arch == "unknown") arch = sif::hostArch();
  sif::ObjectInput in;
  in.type = sif::DataType::Partition;
  in.name = objectName;
  in.partition = sif::PartitionInfo{sif::FsType::Ext3, sif::PartType::Overlay, arch};
  in.data = sif::DataSource::fromFd(data.get(), st.st_size);
  sif::Editor editor(image);
  try {
    editor.add(in, editor.defaultTime());
    if (::fsync(image.fd()) != 0) throw sysError("fsync");
  } catch (...) {
    // Best effort: the error that brought us here is the one to report.
    if (::lseek(image.fd(), 0, SEEK_SET) == 0) {
      try {
        writeAllTo(image.fd(), prefix, "SIF header");
      } catch (const Error&) {
      }
    }
    if (::ftruncate(image.fd(), oldSize) != 0) spdlog::warn("{}: could not truncate back to {} bytes", objectName, oldSize);
    throw;
  }
}

}  // namespace

std::vector<fs::path> overlayLayoutDirs(const std::vector<std::string>& createDirs) {
  std::vector<fs::path> dirs{"upper", "work"};
  for (const auto& dir : createDirs) {
    const fs::path path(dir);
    if (!path.is_absolute()) throw Error("--create-dir " + dir + ": not an absolute path");
    fs::path at = "upper";
    for (const auto& part : path.relative_path()) {
      if (part.empty() || part == ".") continue;
      if (part == "..") throw Error("--create-dir " + dir + ": '..' is not allowed (the directory must stay in upper/)");
      at /= part;
      if (std::find(dirs.begin(), dirs.end(), at) == dirs.end()) dirs.push_back(at);
    }
  }
  return dirs;
}

void checkOverlaySize(std::int64_t sizeMiB) {
  if (sizeMiB < kMinOverlaySizeMiB)
    throw Error("--size " + std::to_string(sizeMiB) + ": an overlay image must be at least " +
                std::to_string(kMinOverlaySizeMiB) + " MiB");
}

std::optional<Ext3Partition> sifExt3Overlay(const sif::Image& image) {
  for (const auto& d : image.usedDescriptors())
    if (d.isPartition() && d.partType() == static_cast<std::int32_t>(sif::PartType::Overlay) &&
        d.fsType() == static_cast<std::int32_t>(sif::FsType::Ext3))
      return Ext3Partition{static_cast<std::uint64_t>(d.offset), static_cast<std::uint64_t>(d.size)};
  return std::nullopt;
}

void checkSifTakesOverlay(const sif::Image& image, const std::string& name) {
  const sif::Descriptor* primary = image.primaryPartition();
  if (primary == nullptr) throw Error(name + ": SIF has no primary system partition to put an overlay on");
  const auto rootFs = primary->fsType();
  if (rootFs == static_cast<std::int32_t>(sif::FsType::EncryptedSquashfs) ||
      rootFs == static_cast<std::int32_t>(sif::FsType::GocryptfsSquashfs))
    throw Error(name + ": SIF root file system is encrypted: cannot add a writable overlay");
  for (const auto& d : image.usedDescriptors())
    if (d.dataType == static_cast<std::int32_t>(sif::DataType::Signature))
      throw Error(name + ": SIF is signed: adding an overlay partition would break its signature");
  for (const auto& d : image.usedDescriptors())
    if (d.isPartition() && d.partType() == static_cast<std::int32_t>(sif::PartType::Overlay)) {
      const std::string id = std::to_string(d.id);
      throw Error(name + ": SIF already has an overlay partition (id " + id + "): delete it first with 'ctr sif del " +
                  id + " " + name + "'");
    }
}

std::string rootOwnershipScript(const std::vector<fs::path>& dirs) {
  std::string script;
  for (const auto& dir : dirs) {
    const std::string path = "/" + dir.string();
    // debugfs splits its commands at blanks and takes "..." as one word, with no escape.
    if (path.find_first_of("\"\n") != std::string::npos)
      throw Error("--create-dir " + path.substr(6) + ": a '\"' or newline cannot be given to root (--fakeroot)");
    script += "set_inode_field \"" + path + "\" uid 0\n";
    script += "set_inode_field \"" + path + "\" gid 0\n";
  }
  return script;
}

void createOverlayImage(const OverlayCreateOptions& options) {
  const std::string name = options.image.string();
  checkOverlaySize(options.sizeMiB);
  const auto dirs = overlayLayoutDirs(options.createDirs);
  const bool toRoot = options.fakeroot && (::geteuid() != 0 || ::getegid() != 0);
  if (toRoot) (void)rootOwnershipScript(dirs);  // refuses what debugfs cannot take, before any work

  auto sifImage = openExistingSif(options.image);
  if (sifImage) checkSifTakesOverlay(*sifImage, name);

  log::StepTimer step("overlay create " + name);
  const ScratchDir scratch(options.image, "overlay");
  const fs::path layout = scratch.path() / "layout";
  if (::mkdir(layout.c_str(), 0700) != 0) throw sysError("create " + layout.string());
  stageLayout(layout, dirs, options.fakeroot);
  // A SIF's partition is named as Apptainer names it: the image's file name and ".ext3".
  const std::string fileName = options.image.filename().string() + (sifImage ? ".ext3" : "");
  const fs::path ext3 = scratch.path() / fileName;
  withContext(name, [&] {
    makeImageFile(ext3, options.sizeMiB, options.sparse);
    makeExt3(ext3, layout, options.sparse);
    if (toRoot) giveLayoutToRoot(ext3, scratch.path() / "owners.debugfs", dirs);
    if (sifImage)
      appendOverlayPartition(*sifImage, ext3, fileName);
    else
      moveIntoPlace(ext3, options.image, false);
  });
}

}  // namespace ctr::image
