// Applying image layers to a directory: each tar entry is created relative to a directory
// descriptor reached one component at a time with O_NOFOLLOW, so no entry can leave the
// root, whatever symlinks earlier entries or layers planted. Whiteouts and opaque
// directories follow the OCI image spec (layer.md, "Whiteouts").
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/limits.hpp"
#include "ctr/oci.hpp"
#include "oci_libs.hpp"

namespace ctr::image::oci {

namespace {

constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";

std::string joinComponents(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) out += (i ? "/" : "") + parts[i];
  return out;
}

// Removes `name` in `dirfd`, a whole tree when it is a directory, never following a symlink.
void removeAt(int dirfd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return;
    throw sysError("stat " + name);
  }
  if (S_ISDIR(st.st_mode)) {
    // Owner rwx first: a directory from a layer may be read-only for its owner.
    int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == EACCES) && ::fchmodat(dirfd, name.c_str(), 0700, 0) == 0)
      fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) throw sysError("open " + name);
    ::fchmod(fd, (st.st_mode & 07777) | 0700);
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
      ::close(fd);
      throw sysError("opendir " + name);
    }
    std::vector<std::string> children;
    while (dirent* e = ::readdir(dir)) {
      std::string_view n = e->d_name;
      if (n != "." && n != "..") children.emplace_back(n);
    }
    try {
      for (const auto& c : children) removeAt(::dirfd(dir), c);
    } catch (...) {
      ::closedir(dir);
      throw;
    }
    ::closedir(dir);
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) throw sysError("remove " + name);
  } else if (::unlinkat(dirfd, name.c_str(), 0) != 0) {
    throw sysError("remove " + name);
  }
}

}  // namespace

void removeTree(const std::filesystem::path& path) noexcept {
  try {
    auto parent = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
    UniqueFd dir(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (dir) removeAt(dir.get(), path.filename().string());
  } catch (...) {
  }
}

struct LayerApplier::State {
  // A directory's final mode and time (nested here: a member's type from the anonymous
  // namespace would give State internal linkage, which GCC flags in a unity build).
  struct DirMeta {
    mode_t mode;
    timespec mtime;
  };
  std::filesystem::path rootfs;
  UniqueFd root;
  bool privileged = ::geteuid() == 0;
  config::PullPolicy limits;
  Members members = Members::ImageLayer;
  // What the layers applied so far unpacked to: their decompressed tar streams, and the
  // apparent sizes of their entries. Either over limits.maxUnpackedBytes stops the pull.
  std::uint64_t streamedBefore = 0;
  std::uint64_t apparentBytes = 0;
  std::size_t devicesSkipped = 0;
  std::map<std::string, DirMeta> dirs;  // final mode and time, set by finish()
  std::set<std::string> layerPaths;    // what the current layer wrote (for opaque dirs)
  std::string layerName;
  std::string entryPath;

  [[noreturn]] void refuse(const std::string& why) const {
    throw Error(layerName + ": " + entryPath + ": " + why);
  }

  // Called at each entry's header, before its data is read or skipped: a gzip bomb or a
  // sparse file of 200 GB is refused here, before it costs disk or time.
  void checkUnpacked(archive* a, const ArchiveApi& ar, archive_entry* e) {
    const la_int64_t size = ar.entry_size(e);
    if (size > 0) apparentBytes += static_cast<std::uint64_t>(size);
    const std::uint64_t streamed = streamedBefore + static_cast<std::uint64_t>(std::max<la_int64_t>(ar.filter_bytes(a, 0), 0));
    if (std::max(apparentBytes, streamed) <= limits.maxUnpackedBytes) return;
    throw Error(layerName + ": unpacks to more than " + limits::formatSize(limits.maxUnpackedBytes) + " (at " +
                entryPath + "); " + limitSetting(limits, limits.maxUnpackedBytes, "pull max unpacked size"));
  }

  // "./a//b/c" -> {a, b, c}; refuses absolute names and "..".
  std::vector<std::string> components(std::string_view path) const {
    if (path.starts_with('/')) refuse("absolute path refused (a layer's paths are relative to the image root)");
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos <= path.size()) {
      auto slash = path.find('/', pos);
      if (slash == std::string_view::npos) slash = path.size();
      std::string_view part = path.substr(pos, slash - pos);
      if (part == "..") refuse("path with '..' refused (it would leave the image root)");
      if (!part.empty() && part != ".") out.emplace_back(part);
      pos = slash + 1;
    }
    return out;
  }

  // The directory that holds parts[0..count), created (0755, owner-writable) where missing.
  // A symlink or a non-directory on the way is refused: following it could leave the root.
  UniqueFd openDir(const std::vector<std::string>& parts, std::size_t count, bool create) const {
    UniqueFd cur(::openat(root.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!cur) throw sysError("open " + rootfs.string());
    for (std::size_t i = 0; i < count; ++i) {
      const std::string& name = parts[i];
      struct stat st {};
      if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT || !create) refuse("cannot reach " + joinComponents(parts, i + 1) + ": " + std::strerror(errno));
        if (::mkdirat(cur.get(), name.c_str(), 0755) != 0 && errno != EEXIST)
          refuse("mkdir " + joinComponents(parts, i + 1) + ": " + std::strerror(errno));
      } else if (S_ISLNK(st.st_mode)) {
        refuse("refused: it goes through the symlink " + joinComponents(parts, i + 1) +
               " (writing through a symlink could leave the image root)");
      } else if (!S_ISDIR(st.st_mode)) {
        refuse(joinComponents(parts, i + 1) + " is not a directory");
      }
      UniqueFd next(::openat(cur.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) refuse("open " + joinComponents(parts, i + 1) + ": " + std::strerror(errno));
      cur = std::move(next);
    }
    return cur;
  }

  // Removes what an earlier entry left at `name` (a new entry replaces it), except a
  // directory when the new entry is one too (a directory entry only updates its metadata).
  void clearFor(int dirfd, const std::string& name, bool keepDirectory) const {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (keepDirectory && S_ISDIR(st.st_mode)) return;
    removeAt(dirfd, name);
  }

  // Opaque directory: what earlier layers put under `rel` goes; what this layer wrote stays.
  void clearOpaque(int dirfd, const std::string& rel) {
    UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) throw sysError("open " + rel);
    DIR* dir = ::fdopendir(fd.get());
    if (!dir) throw sysError("opendir " + rel);
    fd.release();
    std::vector<std::string> children;
    while (dirent* e = ::readdir(dir)) {
      std::string_view n = e->d_name;
      if (n != "." && n != "..") children.emplace_back(n);
    }
    ::closedir(dir);
    for (const auto& c : children) {
      const std::string childRel = rel.empty() ? c : rel + "/" + c;
      if (!layerPaths.contains(childRel)) {
        removeAt(dirfd, c);
        continue;
      }
      struct stat st {};
      if (::fstatat(dirfd, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        UniqueFd sub(::openat(dirfd, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (sub) clearOpaque(sub.get(), childRel);
      }
    }
  }

  void setOwner(int dirfd, const std::string& name, const ArchiveApi& ar, archive_entry* e) const {
    if (!privileged) return;  // kept only as root: an ordinary user cannot give files away
    if (::fchownat(dirfd, name.c_str(), static_cast<uid_t>(ar.entry_uid(e)), static_cast<gid_t>(ar.entry_gid(e)),
                   AT_SYMLINK_NOFOLLOW) != 0)
      refuse(std::string("chown: ") + std::strerror(errno));
  }

  mode_t permissions(const ArchiveApi& ar, archive_entry* e) const {
    mode_t mode = ar.entry_perm(e) & 07777;
    // Unprivileged, set-id bits would become the builder's (and root's in the squashfs).
    return privileged ? mode : mode & 01777;
  }

  // One member of a layer: a whiteout or opaque marker, or a file to create in the tree.
  void entry(archive* a, archive_entry* e, const ArchiveApi& ar) {
    const char* raw = ar.entry_pathname(e);
    entryPath = raw ? raw : "";
    auto parts = components(entryPath);
    if (parts.empty()) return;  // the root itself: its metadata is ours
    const std::string name = parts.back();
    const std::string rel = joinComponents(parts, parts.size());
    UniqueFd parent = openDir(parts, parts.size() - 1, true);

    if (name == kOpaqueMarker) {
      clearOpaque(parent.get(), joinComponents(parts, parts.size() - 1));
      return;
    }
    if (std::string_view(name).starts_with(kWhiteoutPrefix)) {
      const std::string hidden = name.substr(kWhiteoutPrefix.size());
      if (hidden.empty() || hidden == "." || hidden == ".." || hidden.starts_with(".wh.")) return;  // aufs internals
      removeAt(parent.get(), hidden);
      return;
    }
    layerPaths.insert(rel);
    const Member m{parent.get(), name, e, {static_cast<time_t>(ar.entry_mtime(e)), ar.entry_mtime_nsec(e)}};
    if (const char* hardlink = ar.entry_hardlink(e); hardlink && *hardlink) {
      hardLink(m, hardlink);
      return;
    }
    switch (ar.entry_filetype(e)) {
      case AE_IFDIR: directory(m, rel, ar); return;
      case AE_IFREG: regularFile(m, a, ar); return;
      case AE_IFLNK: symlink(m, ar); return;
      case AE_IFCHR:
      case AE_IFBLK:
      case AE_IFIFO: specialFile(m, ar); return;
      default: refuse("unsupported file type in a layer");
    }
  }

  // Where a member goes: its parent directory, its name there, its archive entry, its mtime.
  struct Member {
    int parent;
    const std::string& name;
    archive_entry* e;
    timespec mtime;
  };

  void hardLink(const Member& m, const char* hardlink) {
    const std::string saved = entryPath;
    entryPath = hardlink;
    auto target = components(hardlink);
    if (target.empty()) refuse("hard link to the image root");
    UniqueFd tparent = openDir(target, target.size() - 1, false);
    struct stat st {};
    if (::fstatat(tparent.get(), target.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode))
      refuse("hard link target missing or a directory");
    entryPath = saved;
    clearFor(m.parent, m.name, false);
    if (::linkat(tparent.get(), target.back().c_str(), m.parent, m.name.c_str(), 0) != 0)
      refuse(std::string("hard link to ") + hardlink + ": " + std::strerror(errno));
  }

  void directory(const Member& m, const std::string& rel, const ArchiveApi& ar) {
    clearFor(m.parent, m.name, true);
    if (::mkdirat(m.parent, m.name.c_str(), 0700) != 0 && errno != EEXIST)
      refuse(std::string("mkdir: ") + std::strerror(errno));
    // Owner-writable until finish(), so later entries and layers can still write here.
    ::fchmodat(m.parent, m.name.c_str(), permissions(ar, m.e) | 0700, 0);
    setOwner(m.parent, m.name, ar, m.e);
    dirs[rel] = DirMeta{permissions(ar, m.e), m.mtime};
  }

  void regularFile(const Member& m, archive* a, const ArchiveApi& ar) {
    clearFor(m.parent, m.name, false);
    UniqueFd out(::openat(m.parent, m.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) refuse(std::string("create: ") + std::strerror(errno));
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    for (;;) {
      int r = ar.read_data_block(a, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK) {
        const char* why = ar.error_string(a);
        refuse(std::string("reading the layer: ") + (why ? why : "error"));
      }
      // libarchive keeps a member's blocks inside its declared size; the budget relies on it.
      if (offset < 0 || static_cast<std::uint64_t>(offset) + size > static_cast<std::uint64_t>(ar.entry_size(m.e)))
        refuse("data beyond the member's size");
      const char* p = static_cast<const char*>(buf);
      while (size > 0) {
        ssize_t n = ::pwrite(out.get(), p, size, offset);
        if (n < 0) {
          if (errno == EINTR) continue;
          refuse(std::string("write: ") + std::strerror(errno));
        }
        p += n;
        size -= static_cast<size_t>(n);
        offset += n;
      }
    }
    // A sparse file may end in a hole.
    if (::ftruncate(out.get(), ar.entry_size(m.e)) != 0) refuse(std::string("truncate: ") + std::strerror(errno));
    setOwner(m.parent, m.name, ar, m.e);
    if (::fchmod(out.get(), permissions(ar, m.e)) != 0) refuse(std::string("chmod: ") + std::strerror(errno));
    const timespec times[2] = {m.mtime, m.mtime};
    ::futimens(out.get(), times);
  }

  void symlink(const Member& m, const ArchiveApi& ar) {
    clearFor(m.parent, m.name, false);
    const char* target = ar.entry_symlink(m.e);
    // The target is stored, never followed here: it may point anywhere.
    if (::symlinkat(target ? target : "", m.parent, m.name.c_str()) != 0)
      refuse(std::string("symlink: ") + std::strerror(errno));
    setOwner(m.parent, m.name, ar, m.e);
    const timespec times[2] = {m.mtime, m.mtime};
    ::utimensat(m.parent, m.name.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }

  // Character and block devices, FIFOs.
  void specialFile(const Member& m, const ArchiveApi& ar) {
    const bool fifo = ar.entry_filetype(m.e) == AE_IFIFO;
    // An image archive's own files are read by ctr: a device or FIFO there is an attack
    // (reading /dev/zero never ends), never part of a docker save or an OCI layout.
    if (members == Members::ArchiveFiles)
      refuse(std::string("refused: a ") + (fifo ? "FIFO" : "device") +
             " in an image archive (it holds only files, directories and links)");
    if (!fifo && !privileged) {
      ++devicesSkipped;  // mknod of a device needs CAP_MKNOD in the initial namespace
      return;
    }
    clearFor(m.parent, m.name, false);
    mode_t type = fifo ? S_IFIFO : ar.entry_filetype(m.e) == AE_IFCHR ? S_IFCHR : S_IFBLK;
    if (::mknodat(m.parent, m.name.c_str(), type | permissions(ar, m.e), fifo ? 0 : ar.entry_rdev(m.e)) != 0)
      refuse(std::string("mknod: ") + std::strerror(errno));
    setOwner(m.parent, m.name, ar, m.e);
  }

  void applyEntries(archive* a, const ArchiveApi& ar, const bool* interrupted) {
    layerPaths.clear();
    for (;;) {
      archive_entry* e = nullptr;
      int r = ar.read_next_header(a, &e);
      if (r == ARCHIVE_EOF) break;
      if ((interrupted && *interrupted) || cancelled()) throw Error("interrupted");
      if (r < ARCHIVE_WARN) {
        const char* why = ar.error_string(a);
        throw Error(layerName + ": not a readable tar layer: " + (why ? why : "error") + " (truncated or corrupt?)");
      }
      const char* raw = ar.entry_pathname(e);
      entryPath = raw ? raw : "";
      checkUnpacked(a, ar, e);
      entry(a, e, ar);
    }
    streamedBefore += static_cast<std::uint64_t>(std::max<la_int64_t>(ar.filter_bytes(a, 0), 0));
  }
};

LayerApplier::LayerApplier(const std::filesystem::path& rootfs, const config::PullPolicy& limits, Members members)
    : state_(new State) {
  state_->rootfs = rootfs;
  state_->limits = limits;
  state_->members = members;
  state_->root.reset(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!state_->root) {
    int err = errno;
    delete state_;
    throw sysError("open " + rootfs.string(), err);
  }
}

LayerApplier::~LayerApplier() { delete state_; }

std::size_t LayerApplier::devicesSkipped() const { return state_->devicesSkipped; }

namespace {

struct FileSource {
  int fd = -1;
  Digester* digester = nullptr;
  std::uint64_t bytes = 0;
  const std::function<void(std::uint64_t)>* onBytes = nullptr;
  std::vector<char> buffer = std::vector<char>(1 << 20);
  bool interrupted = false;
};

la_ssize_t readSource(archive*, void* data, const void** out) {
  auto* s = static_cast<FileSource*>(data);
  if (cancelled()) {
    s->interrupted = true;
    return -1;
  }
  for (;;) {
    ssize_t n = ::read(s->fd, s->buffer.data(), s->buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    s->digester->update(s->buffer.data(), static_cast<std::size_t>(n));
    s->bytes += static_cast<std::uint64_t>(n);
    if (s->onBytes && *s->onBytes) (*s->onBytes)(s->bytes);
    *out = s->buffer.data();
    return n;
  }
}

using ArchivePtr = std::unique_ptr<archive, int (*)(archive*)>;

ArchivePtr newReader(const ArchiveApi& ar) {
  ArchivePtr a(ar.read_new(), ar.read_free);
  if (!a) throw Error("archive_read_new failed");
  ar.read_support_filter_all(a.get());
  ar.read_support_format_tar(a.get());
  return a;
}

// A layer is read to its end (the digest covers every byte): a FIFO or a device such as
// /dev/zero in its place would never end.
void requireRegularFile(int fd, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw sysError("stat " + what);
  if (!S_ISREG(st.st_mode)) throw Error(what + " is " + fileTypeName(st.st_mode) + ", not a regular file: refusing to read it");
  // Opened with O_NONBLOCK so that a FIFO could not block the open; a regular file ignores it.
  if (int flags = ::fcntl(fd, F_GETFL); flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

}  // namespace

UniqueFd openArchiveMember(int dirFd, const std::string& relative, const std::string& what) {
  open_how how{};
  how.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dirFd, relative.c_str(), &how, sizeof how);
  if (fd < 0 && errno == ENOSYS) {
    // Kernel < 5.6: no link among the members is followed at all.
    how.flags |= O_NOFOLLOW;
    UniqueFd cur(::openat(dirFd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    std::string_view rest = relative;
    fd = -1;
    while (cur) {
      const auto slash = rest.find('/');
      const std::string part(rest.substr(0, slash));
      if (slash == std::string_view::npos) {
        fd = part == ".." ? -1 : ::openat(cur.get(), part.c_str(), static_cast<int>(how.flags));
        break;
      }
      if (part == "..") {
        errno = EXDEV;
        break;
      }
      cur.reset(::openat(cur.get(), part.empty() ? "." : part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      rest.remove_prefix(slash + 1);
    }
  }
  if (fd < 0) {
    if (errno == EXDEV || errno == ELOOP)
      throw Error(what + " (" + relative + "): refused: a link that leaves the archive (only links between its own members are followed)");
    throw sysError(what + " (" + relative + ")");
  }
  UniqueFd out(static_cast<int>(fd));
  requireRegularFile(out.get(), what + " (" + relative + ")");
  return out;
}

LayerStats LayerApplier::apply(const std::filesystem::path& layerFile, const std::string& layerName,
                               const std::function<void(std::uint64_t)>& onBytes) {
  UniqueFd fd(::open(layerFile.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) throw sysError(layerName + ": open " + layerFile.string());
  return apply(fd.get(), layerName, onBytes);
}

LayerStats LayerApplier::apply(int layerFd, const std::string& layerName, const std::function<void(std::uint64_t)>& onBytes) {
  requireRegularFile(layerFd, layerName);
  const auto& ar = archiveApi();
  state_->layerName = layerName;
  Digester digester;
  FileSource src;
  src.fd = layerFd;
  src.digester = &digester;
  src.onBytes = &onBytes;
  auto a = newReader(ar);
  if (ar.read_open(a.get(), &src, nullptr, readSource, nullptr) != ARCHIVE_OK) {
    if (src.interrupted) throw Error("interrupted");
    const char* why = ar.error_string(a.get());
    throw Error(layerName + ": not a readable layer: " + (why ? why : "error"));
  }
  state_->applyEntries(a.get(), ar, &src.interrupted);
  // The tar ends before the file does (end-of-archive blocks, a compressor's trailer):
  // the digest covers every byte.
  const void* rest = nullptr;
  while (readSource(a.get(), &src, &rest) > 0) {
  }
  if (src.interrupted) throw Error("interrupted");
  return LayerStats{digester.digest(), src.bytes};
}

LayerStats LayerApplier::applyFromMemory(std::string_view layer, const std::string& layerName) {
  const auto& ar = archiveApi();
  state_->layerName = layerName;
  auto a = newReader(ar);
  if (ar.read_open_memory(a.get(), layer.data(), layer.size()) != ARCHIVE_OK)
    throw Error(layerName + ": not a readable layer: " + ar.error_string(a.get()));
  state_->applyEntries(a.get(), ar, nullptr);
  Digester digester;
  digester.update(layer.data(), layer.size());
  return LayerStats{digester.digest(), layer.size()};
}

void LayerApplier::finish() {
  // Deepest first, so a read-only parent is set after its children.
  for (auto it = state_->dirs.rbegin(); it != state_->dirs.rend(); ++it) {
    state_->entryPath = it->first;
    auto parts = state_->components(it->first);
    UniqueFd parent;
    try {
      parent = state_->openDir(parts, parts.size() - 1, false);
    } catch (const Error&) {
      continue;  // removed by a later whiteout
    }
    struct stat st {};
    if (::fstatat(parent.get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
    const timespec times[2] = {it->second.mtime, it->second.mtime};
    ::fchmodat(parent.get(), parts.back().c_str(), it->second.mode, 0);
    ::utimensat(parent.get(), parts.back().c_str(), times, AT_SYMLINK_NOFOLLOW);
  }
  state_->dirs.clear();
}

}  // namespace ctr::image::oci
