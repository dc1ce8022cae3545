// Assembling the root: join the holder's ready namespace when its prepared root is exactly
// the plan's; otherwise, in the launch's private copy of the holder's mount namespace (so
// nothing here is visible to other launches or to the host), mount the plan's mounts on the
// prepared root or on a root built on a private tmpfs "stage", and pivot_root.
#include "rootfs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <unistd.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/log.hpp"
#include "ctr/mpi.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/prepared_root.hpp"
#include "ctr/strings.hpp"
#include "fuse_union.hpp"

namespace ctr::runtime {

namespace {

using launch::holdingMount;
using launch::LaunchPlan;
using launch::Mount;
using launch::MountKind;

// The prepared root's manifest in baseDir (launch::PreparedRootManifest).
constexpr const char* kManifestFile = "/manifest.json";

std::string fdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// Whether the mount's source is there (defaults and admin binds of absent host paths are
// skipped, as Apptainer does; a missing user bind source is an error).
bool sourcePresent(const Mount& m, struct stat* st) {
  if (m.kind != MountKind::Bind) return true;
  if (::stat(m.source.c_str(), st) == 0) return true;
  if (m.required)
    throw Error("bind source " + m.source + " does not exist (" + std::strerror(errno) + ")");
  spdlog::debug("skipping the {} bind of absent {}", launch::toString(m.origin), m.source);
  return false;
}

// Whether an earlier mount of the plan (one that is made: its source is there) holds
// mount i's destination: its target is then created in that mount (a host directory of the
// user's or a tmpfs of the launch, as Apptainer does), not in the image.
bool underEarlierMount(const std::vector<Mount>& mounts, size_t i) {
  const std::string& dest = mounts[i].destination;
  for (size_t k = 0; k < i; ++k) {
    const Mount& m = mounts[k];
    struct stat st {};
    if (m.kind != MountKind::Bind && m.kind != MountKind::Tmpfs) continue;
    if (m.kind == MountKind::Bind && (::stat(m.source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) continue;
    if (dest.size() > m.destination.size() && dest.compare(0, m.destination.size(), m.destination) == 0 &&
        dest[m.destination.size()] == '/')
      return true;
  }
  return false;
}

// A tmpfs mount of the plan on the target fd, with the planner's mode and size.
void mountTmpfs(const Mount& m, int targetFd) {
  char options[64];
  std::snprintf(options, sizeof options, "mode=%o", m.tmpfsMode);
  std::string data = options;
  if (m.tmpfsSizeBytes) data += ",size=" + std::to_string(*m.tmpfsSizeBytes);
  if (::mount("tmpfs", fdPath(targetFd).c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) != 0)
    throw sysError("mount tmpfs on " + m.destination);
}

// O_PATH fd of `destination` inside the root (created beforehand when it was missing).
UniqueFd openTarget(int rootFd, const std::string& destination) {
  auto resolved = resolveInRoot(rootFd, destination, "mount target");
  if (resolved.kind == PathKind::Missing)
    throw Error("mount target " + destination + " does not exist in the container");
  return std::move(resolved.fd);
}

// mkdir -p `dir`/`path` (path already resolved and normalised), the last component a
// directory or an empty file. `dir` is our own tmpfs.
void createUnder(const std::string& dir, const std::string& path, bool directory) {
  std::string current = dir;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    current += "/" + path.substr(start, end - start);
    const bool last = end == path.size();
    if (last && !directory) {
      UniqueFd file(::open(current.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!file) throw sysError("create mount target " + path);
    } else if (::mkdir(current.c_str(), 0755) != 0 && errno != EEXIST) {
      throw sysError("create mount target " + path);
    }
    start = end + 1;
  }
}

// The mount at fd made read-only (with `also`: more MOUNT_ATTR_* flags), and every mount
// below it when `recursive`. Throws naming `what`.
void makeReadOnly(int fd, bool recursive, const std::string& what, std::uint64_t also = 0) {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | also;
  if (::mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof attr) != 0)
    throw sysError("make " + what + " read-only");
}

void bindInto(const std::string& source, int targetFd, bool readOnly, bool recursive,
              const std::string& destination) {
  UniqueFd tree(::open_tree(AT_FDCWD, source.c_str(),
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0)));
  if (!tree) throw sysError("bind " + source + " to " + destination);
  if (readOnly) makeReadOnly(tree.get(), recursive, destination);
  if (::move_mount(tree.get(), "", targetFd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    throw sysError("bind " + source + " to " + destination);
}

// A mount target the image lacks: where it goes (resolved, normalised), the deepest
// directory of the image on its path (resolveInRoot's `existing`), and whether the target
// is a directory (else an empty file).
struct MissingTarget {
  std::string path;
  std::string under;
  bool directory = false;
};

// An entry of an image directory: its name and readdir's d_type (DT_UNKNOWN: ask fstatat).
struct DirEntry {
  std::string name;
  unsigned char type = DT_UNKNOWN;
};

// The image's entries of the directory `dirFd` ("." and ".." left out), or nullopt when it
// has more than `limit`.
std::optional<std::vector<DirEntry>> entriesOf(int dirFd, std::size_t limit) {
  UniqueFd fd(::openat(dirFd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* dir = fd ? ::fdopendir(fd.get()) : nullptr;
  if (!dir) throw sysError("list an image directory");
  fd.release();
  std::vector<DirEntry> names;
  bool over = false;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() == limit) {
      over = true;
      break;
    }
    names.push_back({std::string(name), entry->d_type});
  }
  ::closedir(dir);
  if (over) return std::nullopt;
  return names;
}

// O_PATH fd of `under` in the root at rootPath as it is now: the topmost mount there (a fd
// opened before a mount was stacked on the root still names the one below).
UniqueFd openUnder(const std::string& rootPath, const std::string& under) {
  UniqueFd root(::open(rootPath.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw sysError("open " + rootPath);
  return under == "/" ? std::move(root) : openTarget(root.get(), under);
}

// The underlay of `under` (a directory of the image, image.imageDir's fd `imageDirFd`) in
// the root at rootPath: a tmpfs mounted over it, holding the image's `entries` of it (each
// bound from the image, read-only; a symlink copied) and the targets, then made read-only.
void mountUnderlay(const std::string& rootPath, const std::string& under, int imageDirFd,
                   const std::vector<DirEntry>& entries, const std::vector<const MissingTarget*>& targets) {
  struct stat dirStat {};
  if (::fstat(imageDirFd, &dirStat) != 0) throw sysError("stat " + under + " in the image");
  {
    UniqueFd below = openUnder(rootPath, under);
    char options[64];
    std::snprintf(options, sizeof options, "mode=%o,size=1m", dirStat.st_mode & 07777);
    if (::mount("ctr-underlay", fdPath(below.get()).c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options) != 0)
      throw sysError("mount the underlay tmpfs on " + under);
  }
  UniqueFd top = openUnder(rootPath, under);  // now the tmpfs
  for (const auto& [name, type] : entries) {
    const std::string what = (under == "/" ? "" : under) + "/" + name;
    struct stat st {};
    if (type == DT_UNKNOWN || type == DT_LNK) {
      if (::fstatat(imageDirFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw sysError("stat " + what + " in the image");
    } else {
      st.st_mode = type == DT_DIR ? S_IFDIR : S_IFREG;  // only whether a directory matters below
    }
    if (S_ISLNK(st.st_mode)) {
      if (st.st_size < 0 || st.st_size >= PATH_MAX) throw Error("the symlink " + what + " in the image is too long");
      std::string link(static_cast<std::size_t>(st.st_size) + 1, '\0');
      const ssize_t n = ::readlinkat(imageDirFd, name.c_str(), link.data(), link.size());
      if (n < 0 || static_cast<std::size_t>(n) >= link.size()) throw sysError("read the symlink " + what + " in the image");
      link.resize(static_cast<std::size_t>(n));
      if (::symlinkat(link.c_str(), top.get(), name.c_str()) != 0) throw sysError("copy the symlink " + what);
      continue;
    }
    if (S_ISDIR(st.st_mode) ? ::mkdirat(top.get(), name.c_str(), 0755) != 0
                            : !UniqueFd(::openat(top.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)))
      throw sysError("create the underlay's " + what);
    UniqueFd placeholder(::openat(top.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd tree(::open_tree(imageDirFd, name.c_str(),
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW | AT_RECURSIVE));
    // Read-only as the image's mount is, whose flags the clone keeps (as the root's bind).
    if (!placeholder || !tree ||
        ::move_mount(tree.get(), "", placeholder.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
      throw sysError("bind the image's " + what + " into the underlay");
  }
  for (const MissingTarget* t : targets) createUnder(rootPath, t->path, t->directory);
  makeReadOnly(top.get(), false, "the underlay of " + under);
}

// An overlay of `under` alone (the image's directory below, the targets in an upper layer
// of their own under `layerDir`, on the caller's tmpfs), read-only: for a directory with
// too many entries to bind one by one. False when the path cannot go into overlayfs's
// options (',', ':' or '\\' in it).
bool mountOverlayOf(const std::string& rootPath, const std::string& under, const std::string& imageDir,
                    const std::vector<const MissingTarget*>& targets, const std::string& layerDir) {
  const std::string lower = imageDir + (under == "/" ? "" : under);
  if (lower.find_first_of(",:\\") != std::string::npos || layerDir.find_first_of(",:\\") != std::string::npos)
    return false;
  const std::string upper = layerDir + "/upper", work = layerDir + "/work";
  for (const auto& dir : {layerDir, upper, work})
    if (::mkdir(dir.c_str(), 0755) != 0) throw sysError("mkdir " + dir);
  for (const MissingTarget* t : targets)
    createUnder(upper, under == "/" ? t->path : t->path.substr(under.size()), t->directory);
  {
    UniqueFd below = openUnder(rootPath, under);
    const std::string options = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
    if (::mount("overlay", fdPath(below.get()).c_str(), "overlay", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
      throw sysError("mount an overlay on " + under + " (" + options + ")");
  }
  makeReadOnly(openUnder(rootPath, under).get(), false, "the overlay of " + under);
  return true;
}

// `target` added to `missing` unless a mount of the plan already needs the same path there.
void addMissing(std::vector<MissingTarget>& missing, MissingTarget target) {
  if (std::none_of(missing.begin(), missing.end(), [&](const MissingTarget& t) { return t.path == target.path; }))
    missing.push_back(std::move(target));
}

// Every mount stacked at `path`, detached (what a failed makeTargetsInPlace left there).
void detachAll(const std::string& path) {
  while (::umount2(path.c_str(), MNT_DETACH) == 0) {
  }
  if (errno != EINVAL) throw sysError("detach the mounts at " + path);
}

// The targets the image lacks, made in the root at rootPath (the image bound there,
// read-only) without an overlay of the whole image: for each directory of the image that
// holds some, shallowest first, an underlay (kUnderlayMaxEntries entries at most) or an
// overlay of that directory (its layers in layersDir, on the caller's tmpfs). False, with
// what was mounted left for the caller to detach, when one cannot be made: the caller
// then lays its overlay over the whole image, as before. `overlaid`: set when a directory
// got an overlay (its lower layer, the image's, must then not change under it).
bool makeTargetsInPlace(const std::string& rootPath, int imageFd, const std::string& imageDir,
                        const std::vector<MissingTarget>& missing, const std::string& layersDir, bool& overlaid) {
  std::vector<std::string> dirs;
  for (const auto& t : missing)
    if (std::find(dirs.begin(), dirs.end(), t.under) == dirs.end()) dirs.push_back(t.under);
  // A directory inside another is one of the image's, bound by the outer one's underlay.
  std::stable_sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  try {
    for (std::size_t i = 0; i < dirs.size(); ++i) {
      const std::string& under = dirs[i];
      std::vector<const MissingTarget*> targets;
      for (const auto& t : missing)
        if (t.under == under) targets.push_back(&t);
      UniqueFd imageDirFd = under == "/" ? UniqueFd(::dup(imageFd)) : openInRoot(imageFd, under, O_PATH | O_DIRECTORY | O_NOFOLLOW);
      if (!imageDirFd) throw sysError("open " + under + " in the image");
      if (const auto entries = entriesOf(imageDirFd.get(), launch::kUnderlayMaxEntries)) {
        spdlog::debug("mount targets under {}: an underlay of its {} entries", under, entries->size());
        mountUnderlay(rootPath, under, imageDirFd.get(), *entries, targets);
      } else {
        spdlog::debug("mount targets under {}: an overlay of it (over {} entries)", under, launch::kUnderlayMaxEntries);
        if (::mkdir(layersDir.c_str(), 0755) != 0 && errno != EEXIST) throw sysError("mkdir " + layersDir);
        overlaid = true;
        if (!mountOverlayOf(rootPath, under, imageDir, targets, layersDir + "/" + std::to_string(i))) return false;
      }
    }
  } catch (const Error& e) {
    spdlog::debug("mount targets without an overlay of the image: {}", e.oneLine());
    return false;
  }
  return true;
}

// The image bound read-only at rootPath (an overlay over it would cost every path walk
// from / its ovl_permission and revalidation) with the targets it lacks made in place.
// False, nothing left mounted at rootPath, when they cannot be: the caller then lays an
// overlay over the whole image for them. `overlaid`: as makeTargetsInPlace's.
bool bindImageWithTargets(const std::string& rootPath, int imageFd, const std::string& imageDir,
                          const std::vector<MissingTarget>& missing, const std::string& layersDir, bool& overlaid) {
  {
    UniqueFd rootTarget(::open(rootPath.c_str(), O_PATH | O_CLOEXEC));
    bindInto(imageDir, rootTarget.get(), false, true, "/");
  }
  if (missing.empty() || makeTargetsInPlace(rootPath, imageFd, imageDir, missing, layersDir, overlaid)) return true;
  detachAll(rootPath);
  return false;
}

// An identity file of the image (/etc/passwd, /etc/group): "" when the image has none we
// may open (the generated file then has only the user's entries). A hostile image cannot
// hang or balloon the launch: a FIFO, a device or a file over 8 MiB is refused by name.
std::string readInRoot(int rootFd, const std::string& path) {
  constexpr std::size_t kMaxIdentityFile = 8u << 20;  // ~100,000 passwd lines
  const std::string what = "the image's " + path;
  UniqueFd fd;
  try {
    fd = openInRoot(rootFd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  } catch (const Error& e) {
    // Missing or out of reach: the user's entries only. But a device node on a nodev mount
    // cannot be opened at all, and must be refused as what it is, not skipped.
    struct stat st {};
    bool typed = false;
    try {
      typed = ::fstat(openInRoot(rootFd, path, O_PATH).get(), &st) == 0;
    } catch (const Error&) {
    }
    if (typed && !S_ISREG(st.st_mode))
      throw Error(what + " is " + fileTypeName(st.st_mode) + ", not a regular file: refusing to read it");
    spdlog::debug("{}", e.what());
    return {};
  }
  return readCheckedFile(fd.get(), kMaxIdentityFile, what);
}

// Where the plan's mount i goes in the root at rootPath (rootFd): a target missing inside
// an earlier mount (assembleRoot left it out of the image's overlay) is made there. `st`: the
// mount's source, as sourcePresent saw it.
UniqueFd mountTarget(const LaunchPlan& plan, size_t i, const std::string& rootPath, int rootFd,
                     const struct stat& st) {
  const Mount& m = plan.mounts[i];
  auto resolved = resolveInRoot(rootFd, m.destination, "mount target");
  if (resolved.kind == PathKind::Missing && underEarlierMount(plan.mounts, i)) {
    createUnder(rootPath, resolved.path, m.kind == MountKind::Tmpfs || (m.kind == MountKind::Bind && S_ISDIR(st.st_mode)));
    return openTarget(rootFd, m.destination);
  }
  if (resolved.kind == PathKind::Missing)
    throw Error("mount target " + m.destination + " does not exist in the container");
  return std::move(resolved.fd);
}

// A bind; a recursive bind of an ancestor of the state directory (/tmp) would carry the
// holder's and our own mounts (under hideDir) into the container: cut them off there.
void bindHidingState(const Mount& m, int targetFd, const std::string& rootPath, const std::string& hideDir) {
  bindInto(m.source, targetFd, m.readOnly, m.recursive, m.destination);
  if (m.recursive && isAtOrUnder(hideDir, m.source) && hideDir != m.source) {
    // (By path: the target fd still names the directory underneath the new mount.)
    std::string inside = rootPath + m.destination + hideDir.substr(m.source == "/" ? 0 : m.source.size());
    if (::umount2(inside.c_str(), MNT_DETACH) != 0)
      spdlog::debug("could not hide {} in the container: {}", inside, std::strerror(errno));
  }
}

// A sysfs of the container's network namespace (entered before the root is assembled).
void mountSysfs(const Mount& m, int targetFd) {
  const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | (m.readOnly ? MS_RDONLY : 0);
  if (::mount("sysfs", fdPath(targetFd).c_str(), "sysfs", flags, nullptr) == 0) return;
  spdlog::warn("cannot mount a sysfs of the container's network namespace on {} ({}): the host's {} is "
               "shown there, its network interfaces too",
               m.destination, std::strerror(errno), m.source);
  bindInto(m.source, targetFd, m.readOnly, true, m.destination);
}

void makeSymlink(const Mount& m, int rootFd) {
  const auto slash = m.destination.find_last_of('/');
  const std::string parent = slash == 0 ? "/" : m.destination.substr(0, slash);
  UniqueFd parentFd = openTarget(rootFd, parent);
  if (::symlinkat(m.source.c_str(), parentFd.get(), m.destination.c_str() + slash + 1) != 0 && errno != EEXIST)
    throw sysError("create the link " + m.destination + " -> " + m.source);
}

// A File mount's content, or an Identity mount's file made from the image's own.
std::string generatedContent(const Mount& m, const LaunchPlan& plan, int rootFd) {
  if (m.kind != MountKind::Identity) return m.content;
  return launch::identityFileText(m.identity, readInRoot(rootFd, m.destination), plan.user);
}

// The plan's mounts, in order, into the root at rootPath (rootFd). With `prepared`, the
// targets were resolved beforehand (an empty fd: nothing to mount), but for those `late`
// names: resolved, and made, here, in the tmpfs this launch has just mounted over them.
void mountPlan(const LaunchPlan& plan, const SharedImage& image, const std::string& rootPath,
               int rootFd, std::vector<UniqueFd>* prepared, const std::vector<bool>* late) {
  const std::string hideDir = image.stageDir.substr(0, image.stageDir.find_last_of('/'));  // <state>/mnt
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const Mount& m = plan.mounts[i];
    struct stat st {};
    // Prepared targets come resolved, but those in a tmpfs mounted just before (RootStrategy::late).
    const bool resolveHere = !prepared || (late && (*late)[i]);
    if (prepared && !resolveHere) {
      if (!(*prepared)[i]) continue;  // skipped source, or identity file already in place
    } else if (!sourcePresent(m, &st)) {
      continue;
    }
    if (m.kind == MountKind::Symlink) {
      makeSymlink(m, rootFd);
      continue;
    }
    std::string file;
    if (m.kind == MountKind::File || m.kind == MountKind::Identity) {
      file = image.stageDir + "/files/" + std::to_string(i);
      writeFile(file, generatedContent(m, plan, rootFd));
    }
    UniqueFd target = resolveHere ? mountTarget(plan, i, rootPath, rootFd, st) : std::move((*prepared)[i]);
    switch (m.kind) {
      case MountKind::Bind: bindHidingState(m, target.get(), rootPath, hideDir); break;
      case MountKind::Tmpfs: mountTmpfs(m, target.get()); break;
      case MountKind::Proc:
        // The procfs of the PID namespace this process is PID 1 of (execute.cpp).
        if (::mount("proc", fdPath(target.get()).c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
          throw sysError("mount proc on " + m.destination);
        break;
      case MountKind::Sysfs: mountSysfs(m, target.get()); break;
      case MountKind::File:
      case MountKind::Identity: bindInto(file, target.get(), m.readOnly, false, m.destination); break;
      case MountKind::Symlink: break;
    }
  }
}

// --mpi=bind: each host library over the image's library of its soname, after the ABI
// check the plan names (launch::MpiInjection). In the assembled root, before pivot_root,
// while the host's files are still reachable by path.
void replaceImageMpi(const LaunchPlan& plan, int rootFd) {
  if (!plan.mpi || plan.mpi->replace.empty()) return;
  log::StepTimer timer("replacing the image's MPI");
  auto fileOf = [](const std::string& path) { return path.substr(path.find_last_of('/') + 1); };
  std::size_t replaced = 0;
  for (const auto& r : plan.mpi->replace) {
    const auto image = host::findImageLibrary(rootFd, r.soname);
    if (!image) {
      spdlog::debug("--mpi=bind: the image has no {}: the host's is only in {}", r.soname, launch::kContainerMpiDir);
      continue;
    }
    const auto verdict = host::checkMpiAbi(fileOf(r.hostPath), fileOf(image->realPath), plan.mpi->check);
    if (!verdict.compatible)
      throw Error("--mpi=bind: " + r.soname + ": " + verdict.message + " (host " + r.hostPath + ", image " +
                  image->realPath + ")");
    if (!verdict.message.empty()) spdlog::warn("--mpi=bind: {}: {}", r.soname, verdict.message);
    UniqueFd target = openTarget(rootFd, image->realPath);
    bindInto(r.hostPath, target.get(), true, false, image->realPath);
    spdlog::debug("--mpi=bind: {} ({}, via {}) covered by {}", image->path, image->realPath, image->how, r.hostPath);
    ++replaced;
  }
  if (replaced > 0) return;
  // Nothing of the host's MPI is in the image: say what the image has instead.
  const std::string hostFile = fileOf(plan.mpi->replace.front().hostPath);
  const host::MpiFamily family = host::mpiFamilyOf(hostFile);
  std::string has;
  bool sameFamily = false;
  for (const auto& other : host::findImageMpiLibraries(rootFd)) {
    const std::string file = fileOf(other.realPath);
    sameFamily = sameFamily || host::mpiFamilyOf(file) == family;
    has += (has.empty() ? "" : ", ") + host::toString(host::mpiFamilyOf(file)) + " " + file + " (" + other.path + ")";
  }
  std::string sonames;
  for (const auto& r : plan.mpi->replace) sonames += (sonames.empty() ? "" : ", ") + r.soname;
  throw Error("--mpi=bind: the image has no " + sonames + " to replace with the host's " + host::toString(family) + " " +
              hostFile + "; " +
              (has.empty() ? std::string("it has no MPI library (libmpi.so.*, libmpich.so.*) in its ld.so cache or "
                                         "library directories: run it without --mpi=bind")
                           : "it has " + has +
                                 (!sameFamily && family != host::MpiFamily::Unknown
                                      ? ": Open MPI and the MPICH ABI are never mixed"
                                      : "")));
}

void pivotInto(const std::string& rootPath) {
  log::StepTimer pivot("pivot_root");
  // pivot_root(".", ".") stacks the old root on the new one; detaching it leaves only the
  // new root (pivot_root(2), "NOTES").
  if (::chdir(rootPath.c_str()) != 0) throw sysError("chdir " + rootPath);
  if (::syscall(SYS_pivot_root, ".", ".") != 0) throw sysError("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) throw sysError("detach the old root");
  if (::chdir("/") != 0) throw sysError("chdir /");
}

// Written beside it and renamed, last: a launch never reads half a manifest, and its
// presence means the prepared root is complete.
void writeManifest(const std::string& baseDir, const launch::PreparedRootManifest& manifest) {
  const std::string path = baseDir + kManifestFile, partial = path + ".part";
  writeFile(partial, launch::toJson(manifest));
  if (::rename(partial.c_str(), path.c_str()) != 0) throw sysError("rename " + partial + " to " + path);
}

// The holder's manifest, or nullopt (no prepared root: none yet, or one this ctr cannot read).
std::optional<launch::PreparedRootManifest> readManifest(const std::string& baseDir) {
  const std::string text = readFileIfPresent(baseDir + kManifestFile);
  if (text.empty()) return std::nullopt;
  try {
    return launch::preparedRootManifestFromJson(text);
  } catch (const Error& e) {
    spdlog::debug("{}: no prepared root", e.oneLine());
    return std::nullopt;
  }
}

// In this launch's own copy of the holder's namespace: the prepared root, its binds this
// plan does not have detached, the plan's other mounts made on it. False (nothing mounted
// yet) when one of their targets is missing there: the launch then builds its own root.
bool usePreparedRoot(const LaunchPlan& plan, SharedImage& image, const launch::RootStrategy& strategy) {
  const std::string rootPath = image.baseDir + "/root";
  UniqueFd rootFd(::open(rootPath.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!rootFd) throw sysError("open " + rootPath);
  for (const auto& destination : strategy.detach)
    if (::umount2((rootPath + destination).c_str(), MNT_DETACH) != 0)
      throw sysError("detach the prepared bind of " + destination);
  // Fds of the targets in mount order (empty: nothing to mount).
  std::vector<UniqueFd> targets;
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    if (!strategy.mount[i] || strategy.late[i]) {  // late: resolved once its tmpfs is mounted
      targets.emplace_back();
      continue;
    }
    auto resolved = resolveInRoot(rootFd.get(), plan.mounts[i].destination, "mount target");
    if (resolved.kind == PathKind::Missing) {
      spdlog::debug("mount target {} is missing in the prepared root: own root", plan.mounts[i].destination);
      return false;
    }
    targets.push_back(std::move(resolved.fd));
  }
  log::StepTimer prepared("using the prepared root");
  mountPlan(plan, image, rootPath, rootFd.get(), &targets, &strategy.late);
  replaceImageMpi(plan, rootFd.get());
  pivotInto(rootPath);
  return true;
}

// The targets of the spec's mounts that the image lacks (recorded in the manifest, but for
// the identity files, which every prepared root has).
std::vector<MissingTarget> missingBaseTargets(const launch::PreparedRootSpec& spec, int imageFd,
                                              launch::PreparedRootManifest& manifest) {
  std::vector<MissingTarget> missing;
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    // Inside another mount (a tmpfs /dev of --contain): created there by the launch.
    if (m.kind == MountKind::Symlink || underEarlierMount(spec.mounts, i)) continue;
    try {
      auto resolved = resolveInRoot(imageFd, m.destination, "mount target");
      if (resolved.kind != PathKind::Missing) continue;
      struct stat st {};
      if (!sourcePresent(m, &st)) continue;  // skipped by launches too
      const bool generated = m.kind == MountKind::Identity || m.kind == MountKind::File;
      addMissing(missing, {resolved.path, resolved.existing,
                           m.kind == MountKind::Tmpfs || (!generated && S_ISDIR(st.st_mode))});
      if (m.kind != MountKind::Identity) manifest.created.push_back(m.destination);
    } catch (const Error&) {
      // Escapes the image: launches that need it use their own root.
    }
  }
  return missing;
}

// The image at baseDir/root with the targets it lacks in place; failing that, an overlay of
// the whole image, whose upper layer gets them before it is mounted.
// True when an overlay has the image as its lower layer (of the whole image, or of one of
// its directories).
bool mountBaseImage(const std::string& imageDir, int imageFd, const std::string& baseDir,
                    const std::vector<MissingTarget>& missing) {
  const std::string upper = baseDir + "/upper", root = baseDir + "/root";
  bool overlaid = false;
  if (bindImageWithTargets(root, imageFd, imageDir, missing, baseDir + "/dir-overlays", overlaid)) return overlaid;
  for (const auto& t : missing) {
    try {
      createUnder(upper, t.path, t.directory);
    } catch (const Error& e) {
      spdlog::debug("{}", e.oneLine());  // launches that need it use their own root
    }
  }
  const std::string options = "lowerdir=" + imageDir + ",upperdir=" + upper + ",workdir=" + baseDir + "/work";
  if (::mount("overlay", root.c_str(), "overlay", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
    throw sysError("mount overlay base root (" + options + ")");
  return true;
}

// The identity files: the holder is the same user, so they are the same for every launch
// whose plan.user matches the manifest's.
void bindIdentityFiles(const launch::PreparedRootSpec& spec, int imageFd, int rootFd, const std::string& files) {
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    if (m.kind != MountKind::Identity) continue;
    const std::string file = files + "/" + std::to_string(i);
    writeFile(file, launch::identityFileText(m.identity, readInRoot(imageFd, m.destination), spec.user));
    UniqueFd target = openTarget(rootFd, m.destination);
    bindInto(file, target.get(), true, false, m.destination);
  }
}

// The default and admin binds, made once here rather than by every launch (/proc, /sys,
// /dev, /tmp, home, ...): a launch whose plan has the same bind skips it, one without it
// detaches it in its own copy, one with another mount there mounts over it. Injected host
// files (--nv's libraries in their tmpfs, the driver's programs) too: they are the same for
// every launch of the image that asks for them, and 60 binds per launch would cost
// milliseconds. The host tmpfs is read-only once filled.
void prebindShared(const launch::PreparedRootSpec& spec, const std::string& baseDir, int rootFd,
                   launch::PreparedRootManifest& manifest) {
  const std::string root = baseDir + "/root";
  const std::string hideDir = baseDir.substr(0, baseDir.find_last_of('/'));  // <state>/mnt
  std::vector<std::string> hostTmpfs;
  std::vector<bool> made(spec.mounts.size(), false);
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    struct stat st {};
    if (!m.prebind) continue;
    const bool inHostTmpfs = std::any_of(hostTmpfs.begin(), hostTmpfs.end(),
                                         [&](const std::string& d) { return isAtOrUnder(m.destination, d); });
    // Inside another mount: only one made here (a host tmpfs, where missing targets are
    // created, or a bind holding the target: /proc/sys in /proc); the launches make the others.
    if (const auto holder = holdingMount(spec.mounts, i); holder && !made[*holder]) continue;
    try {
      if (m.kind == MountKind::Tmpfs) {
        mountTmpfs(m, openTarget(rootFd, m.destination).get());
        hostTmpfs.push_back(m.destination);
      } else {
        if (m.kind != MountKind::Bind || ::stat(m.source.c_str(), &st) != 0) continue;
        auto resolved = resolveInRoot(rootFd, m.destination, "mount target");
        if (resolved.kind == PathKind::Missing && inHostTmpfs) {
          createUnder(root, resolved.path, S_ISDIR(st.st_mode));
          resolved = resolveInRoot(rootFd, m.destination, "mount target");
        }
        if (resolved.kind == PathKind::Missing) continue;
        bindHidingState(m, resolved.fd.get(), root, hideDir);
      }
      manifest.prebound.push_back(launch::preboundOf(m));
      made[i] = true;
    } catch (const Error& e) {
      spdlog::debug("not pre-binding {}: {}", m.destination, e.oneLine());
    }
  }
  for (const auto& dir : hostTmpfs) makeReadOnly(openTarget(rootFd, dir).get(), false, dir);
}

}  // namespace

launch::PreparedRootManifest prepareBaseRoot(const std::string& imageDir, const std::string& baseDir,
                                             const launch::PreparedRootSpec& spec, bool* overlaid) {
  if (::mount("ctr-base", baseDir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=16m") != 0)
    throw sysError("mount tmpfs on " + baseDir);
  const std::string root = baseDir + "/root", files = baseDir + "/files";
  for (const auto& dir : {baseDir + "/upper", baseDir + "/work", root, files})
    if (::mkdir(dir.c_str(), 0755) != 0) throw sysError("mkdir " + dir);
  UniqueFd imageFd(::open(imageDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!imageFd) throw sysError("open image root " + imageDir);

  // The planner's launch-independent mounts: their targets, made where the image lacks
  // them (see assembleRoot for where and why).
  launch::PreparedRootManifest manifest;
  manifest.user = spec.user;
  const bool overlay = mountBaseImage(imageDir, imageFd.get(), baseDir, missingBaseTargets(spec, imageFd.get(), manifest));
  if (overlaid) *overlaid = overlay;
  UniqueFd rootFd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!rootFd) throw sysError("open " + root);
  bindIdentityFiles(spec, imageFd.get(), rootFd.get(), files);
  makeReadOnly(rootFd.get(), true, "the base root", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);  // as the overlay was
  prebindShared(spec, baseDir, rootFd.get(), manifest);
  writeManifest(baseDir, manifest);
  return manifest;
}

UniqueFd makeReadyNamespace(const std::string& root, const std::function<void()>& inside) {
  UniqueFd home(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  UniqueFd proc(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));  // still there after the pivot
  if (!home || !proc) throw sysError("open /proc/self/ns/mnt");
  if (::unshare(CLONE_NEWNS) != 0) throw sysError("unshare(mount namespace) for the ready namespace");
  UniqueFd ready;
  std::optional<Error> failed;
  try {
    pivotInto(root);
    ready.reset(::openat(proc.get(), "thread-self/ns/mnt", O_RDONLY | O_CLOEXEC));
    if (!ready) throw sysError("open the ready namespace");
    if (inside) inside();
  } catch (const Error& e) {
    failed = e;
  }
  // Back home. Failing that, this process cannot serve its image: end it (its launch reports
  // that the holder ended before it was ready; the kernel frees every mount).
  if (::setns(home.get(), CLONE_NEWNS) != 0) ::_exit(kExitFailure);
  if (failed) throw *failed;
  return ready;
}

namespace {

// The overlay root at rootPath: plan.overlay's layers over the image, and the mount targets
// the image lacks (`missing`: resolved path, whether a directory) in a layer of their own on
// the stage tmpfs. The upper layer is the writable --overlay's, else the stage tmpfs's
// (--writable-tmpfs, or a read-only root that only needs the targets: made read-only
// later), else none: a read-only overlay of lower layers.
void mountOverlayRoot(const LaunchPlan& plan, const SharedImage& image, const std::string& rootPath,
                      const std::vector<MissingTarget>& missing) {
  const launch::RootOverlay& layers = plan.overlay;
  const launch::OverlayLayer* writable = layers.writable();
  // An ext3 layer's directories are inside its fuse2fs mount.
  const std::vector<std::string> ext3Mounts = mountExt3Layers(layers, image.overlayLocks, image.stageDir);
  const auto layerDir = [&](size_t i, const std::string& dir) {
    return ext3Mounts[i].empty() ? dir : ext3Mounts[i] + "/" + dir;
  };
  std::string upper, work;
  if (writable) {
    upper = layerDir(0, writable->dir);
    work = layerDir(0, writable->workDir);
  } else if (layers.tmpfsUpper || plan.rootMode == launch::RootMode::Bind) {
    upper = image.stageDir + "/upper";
    work = image.stageDir + "/work";
    if (::mkdir(upper.c_str(), 0755) != 0 || ::mkdir(work.c_str(), 0755) != 0)
      throw sysError("mkdir in " + image.stageDir);
  }
  // The targets go into the private upper layer, or into a lower layer of their own: never
  // into a directory of the user's.
  std::string lower;
  if (!missing.empty()) {
    std::string targets = upper;
    if (writable || upper.empty()) {
      targets = image.stageDir + "/targets";
      if (::mkdir(targets.c_str(), 0755) != 0) throw sysError("mkdir in " + image.stageDir);
      lower = targets + ":";
    }
    for (const auto& t : missing) createUnder(targets, t.path, t.directory);
  }
  for (size_t i = 0; i < layers.layers.size(); ++i)
    if (!layers.layers[i].writable) lower += layerDir(i, layers.layers[i].dir) + ":";
  lower += image.imageDir;
  std::string options = "lowerdir=" + lower;
  if (!upper.empty()) options += ",upperdir=" + upper + ",workdir=" + work;
  if (layers.driver == launch::UnionDriver::FuseOverlayfs) {
    mountFuseOverlayfs(options, rootPath, plan.user.uid, plan.user.gid);
    startFuseWatchdog(layers.stuckServerGrace);
    return;
  }
  // A layer of the user's keeps overlayfs's marks (opaque directories) in user.overlay.*
  // extended attributes, the ones a user namespace may write and read back next time.
  if (!layers.layers.empty()) options += ",userxattr";
  if (::mount("overlay", rootPath.c_str(), "overlay", MS_NOSUID | MS_NODEV | (upper.empty() ? MS_RDONLY : 0),
              options.c_str()) == 0)
    return;
  const int error = errno;
  if (writable)
    throw Error("--overlay " + writable->path + ": the kernel refused an overlay with its upper layer there (" +
                std::strerror(error) + "): a writable layer needs a local file system with user extended " +
                "attributes (ext4, xfs, btrfs), not NFS or Lustre")
        .withStatus(1);
  errno = error;
  throw sysError("mount overlay root (" + options + ")");
}

// Host directories the plan has ctr create (--workdir's tmp, var_tmp, scratch), as the
// user, before anything looks at the sources.
void createSourceDirs(const LaunchPlan& plan) {
  for (const auto& m : plan.mounts) {
    if (!m.createSourceMode) continue;
    std::error_code ec;
    if (std::filesystem::create_directories(m.source, ec))
      ::chmod(m.source.c_str(), static_cast<mode_t>(*m.createSourceMode));
    if (ec) throw Error("cannot create " + m.source + " for " + m.destination + ": " + ec.message());
  }
}

// The remembered JoinReady decisions (launch::JoinMemo) in the prepared root's directory:
// its tmpfs lives and ends with the holder's manifest, so they are never stale; the file
// grows to at most kJoinMemoMaxBytes (one line per distinct plan, some repeated by
// launches that raced).
constexpr const char* kJoinMemoFile = "/join-memo";
constexpr off_t kJoinMemoMaxBytes = 16 * 1024;

void rememberJoin(const std::string& baseDir, const launch::JoinMemo& memo) {
  UniqueFd fd(::open((baseDir + kJoinMemoFile).c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || st.st_size >= kJoinMemoMaxBytes) return;
  const std::string line = launch::toLine(memo);
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    spdlog::debug("{}{}: not remembered ({})", baseDir, kJoinMemoFile, std::strerror(errno));
}

// How this launch gets its root from what the holder prepared (launch::chooseRootStrategy),
// or as a launch with the same plan found before (launch::rememberedJoin).
launch::RootStrategy rootStrategy(const LaunchPlan& plan, const SharedImage& image) {
  std::vector<signed char> present(plan.mounts.size(), -1);  // each source stat'ed once, when asked
  const launch::SourcePresent ask = [&](size_t i) {
    struct stat st {};
    if (present[i] < 0) present[i] = sourcePresent(plan.mounts[i], &st) ? 1 : 0;
    return present[i] == 1;
  };
  const bool memo = plan.rootMode == launch::RootMode::Bind && !image.baseDir.empty() && image.readyNamespace;
  const std::uint64_t key = memo ? launch::rootStrategyKey(plan) : 0;
  if (memo) {
    if (auto strategy = launch::rememberedJoin(launch::parseJoinMemos(readFileIfPresent(image.baseDir + kJoinMemoFile)),
                                               key, plan.mounts.size(), ask)) {
      spdlog::debug("root: {} ({})", launch::toString(strategy->kind), strategy->reason);
      return *strategy;
    }
  }
  const auto manifest = plan.rootMode == launch::RootMode::Bind && !image.baseDir.empty()
                            ? readManifest(image.baseDir)
                            : std::nullopt;
  auto strategy = launch::chooseRootStrategy(plan, manifest ? &*manifest : nullptr, ask,
                                             static_cast<bool>(image.readyNamespace));
  spdlog::debug("root: {} ({})", launch::toString(strategy.kind), strategy.reason);
  if (memo && strategy.kind == launch::RootStrategyKind::JoinReady) {
    launch::JoinMemo remembered{key, {}};
    for (std::size_t i = 0; i < present.size(); ++i)
      if (present[i] >= 0) remembered.answers.emplace_back(i, present[i] == 1);
    rememberJoin(image.baseDir, remembered);
  }
  return strategy;
}

// Into the holder's ready namespace, shared with the other launches like this one: nothing
// is mounted in it, and the app cannot (it has no capabilities left).
void joinReadyRoot(SharedImage& image) {
  // What the holder read of the image's env scripts in that namespace: the same files this
  // launch would read there (nothing bound over them, image read-only).
  image.envScripts = readEnvScriptCopy(image.baseDir + "/env-scripts");
  if (::setns(image.readyNamespace.get(), CLONE_NEWNS) != 0) throw sysError("setns(the prepared root's namespace)");
  image.readyNamespace.reset();
  image.sharedMountNamespace = false;
  spdlog::debug("joined the prepared root's namespace{}",
                image.envScripts ? " (env scripts: the holder's copy of " + std::to_string(image.envScripts->size()) + ")" : "");
}

// The plan's mount targets the image lacks. A missing target needs a place of our own to
// be created in: the image's directories belong to an unmapped root, so even
// CAP_DAC_OVERRIDE in our user namespace cannot create entries in them (capabilities(7),
// "user namespaces"). A tmpfs in place (makeTargetsInPlace), or an overlay whose upper layer
// gets the targets *before* it is mounted.
std::vector<MissingTarget> missingTargetsOf(const LaunchPlan& plan, int imageFd) {
  std::vector<MissingTarget> missing;
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const Mount& m = plan.mounts[i];
    struct stat st {};
    if (!sourcePresent(m, &st) || underEarlierMount(plan.mounts, i)) continue;
    auto resolved = resolveInRoot(imageFd, m.destination, "mount target");
    if (resolved.kind == PathKind::Missing) {
      spdlog::debug("mount target {} is missing in the image", m.destination);
      addMissing(missing, {resolved.path, resolved.existing, m.kind == MountKind::Tmpfs || S_ISDIR(st.st_mode)});
    }
  }
  return missing;
}

// The root of this launch's own at rootPath, by the plan's root mode.
void mountOwnRoot(const LaunchPlan& plan, const SharedImage& image, const std::string& rootPath, int imageFd) {
  const auto missing = missingTargetsOf(plan, imageFd);
  if (plan.rootMode == launch::RootMode::Sandbox || plan.rootMode == launch::RootMode::Writable) {
    // The sandbox is the image being built, or (--writable) the user's directory image: its
    // missing targets are created in it, as Apptainer does, and it is bound read-write (the
    // host's directory: the holder's bind of it is read-only).
    const std::string dir = plan.rootMode == launch::RootMode::Sandbox ? image.imageDir : plan.image.path.string();
    for (const auto& t : missing) createUnder(dir, t.path, t.directory);
    UniqueFd rootTarget(::open(rootPath.c_str(), O_PATH | O_CLOEXEC));
    bindInto(dir, rootTarget.get(), false, true, "/");
  } else if (plan.rootMode == launch::RootMode::Overlay) {
    mountOverlayRoot(plan, image, rootPath, missing);
  } else if (bool overlaid = false;
             !bindImageWithTargets(rootPath, imageFd, image.imageDir, missing, image.stageDir + "/dir-overlays", overlaid)) {
    // The image, read-only, with the targets it lacks in place; failing that, an overlay
    // over the whole image holds them.
    spdlog::debug("mount targets missing in the image: an overlay root");
    mountOverlayRoot(plan, image, rootPath, missing);
  }
}

}  // namespace

void assembleRoot(const LaunchPlan& plan, SharedImage& image) {
  log::StepTimer timer("assembling the root");
  createSourceDirs(plan);
  const auto strategy = rootStrategy(plan, image);
  if (strategy.kind == launch::RootStrategyKind::JoinReady) {
    joinReadyRoot(image);
    return;
  }
  image.readyNamespace.reset();
  if (image.sharedMountNamespace) {
    if (::unshare(CLONE_NEWNS) != 0) throw sysError("unshare(mount namespace)");
    image.sharedMountNamespace = false;
  }
  if (strategy.kind == launch::RootStrategyKind::UsePrepared && usePreparedRoot(plan, image, strategy)) return;
  // Our mount namespace is a copy of the holder's, whose mounts are slaves of the host's
  // or private: nothing we mount propagates back, so no MS_REC|MS_SLAVE walk is needed.
  // The stage is a private tmpfs (64 MiB, Apptainer's default for --writable-tmpfs).
  if (::mount("ctr-stage", image.stageDir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=0755,size=64m") != 0)
    throw sysError("mount tmpfs on " + image.stageDir);
  const std::string rootPath = image.stageDir + "/root";
  if (::mkdir(rootPath.c_str(), 0755) != 0 || ::mkdir((image.stageDir + "/files").c_str(), 0755) != 0)
    throw sysError("mkdir in " + image.stageDir);
  UniqueFd imageFd(::open(image.imageDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!imageFd) throw sysError("open image root " + image.imageDir);
  mountOwnRoot(plan, image, rootPath, imageFd.get());
  UniqueFd rootFd(::open(rootPath.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!rootFd) throw sysError("open " + rootPath);
  mountPlan(plan, image, rootPath, rootFd.get(), nullptr, nullptr);
  if (plan.rootReadOnly) makeReadOnly(rootFd.get(), false, "the root");
  replaceImageMpi(plan, rootFd.get());
  pivotInto(rootPath);
}

}  // namespace ctr::runtime
