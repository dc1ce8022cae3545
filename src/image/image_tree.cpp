// ImageTree, copyEntry, dropPrivilegedFiles: see image_tree.hpp.
#include "ctr/image_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::image {

namespace {

namespace fs = std::filesystem;

// The image path as a relative one ("usr/bin"), "" for the image's "/".
std::string relativeInImage(std::string_view path) {
  std::string normal = normalizePath(std::string("/") + std::string(path));
  return normal == "/" ? std::string() : normal.substr(1);
}

// openat2 inside the image: -errno when it fails.
int openIn(int rootFd, const std::string& rel, int flags, mode_t mode = 0) {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, rootFd, rel.empty() ? "." : rel.c_str(), &how, sizeof how);
  if (fd >= 0) return static_cast<int>(fd);
  if (errno != ENOSYS) return -errno;
  // Kernels before 5.6: the same chroot semantics by ctr's own walk.
  try {
    return openInRoot(rootFd, "/" + rel, flags, mode).release();
  } catch (const Error&) {
    return errno ? -errno : -ENOENT;
  }
}

std::pair<std::string, std::string> splitLast(const std::string& rel) {
  const auto slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

void replaceNonDirectory(int dir, const std::string& name, const std::string& what) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (S_ISDIR(st.st_mode)) throw Error(what + ": is a directory");
  if (::unlinkat(dir, name.c_str(), 0) != 0) throw sysError("replace " + what);
}

// A directory's entries, read through its own descriptor.
std::vector<std::string> entriesOf(int dirFd, const std::string& what) {
  const int copy = ::openat(dirFd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) throw sysError("open " + what);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(copy), ::closedir);
  if (!dir) {
    ::close(copy);
    throw sysError("read " + what);
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir.get())) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void copyXattrs(int from, int to) {
  char names[4096];
  const ssize_t len = ::flistxattr(from, names, sizeof names);
  for (ssize_t off = 0; len > 0 && off < len; off += static_cast<ssize_t>(std::char_traits<char>::length(names + off)) + 1) {
    char value[4096];
    const ssize_t n = ::fgetxattr(from, names + off, value, sizeof value);
    // Where the target cannot take an attribute (another file system, an ordinary caller and
    // trusted.*), it is left out, as `cp -a` does.
    if (n >= 0) (void)::fsetxattr(to, names + off, value, static_cast<std::size_t>(n), 0);
  }
}

class Copier {
 public:
  Copier(const CopyOptions& options, std::string what) : options_(options), what_(std::move(what)) {}

  void copy(int fromDir, const std::string& name, int toDir, const std::string& toName, const std::string& shown) {
    struct stat st {};
    if (::fstatat(fromDir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw sysError(what_ + ": " + shown);
    if (S_ISDIR(st.st_mode)) return copyDirectory(fromDir, name, toDir, toName, st, shown);
    if (S_ISLNK(st.st_mode)) return copySymlink(fromDir, name, toDir, toName, st, shown);
    replaceNonDirectory(toDir, toName, what_ + ": " + shown);
    if (st.st_nlink > 1 && !S_ISDIR(st.st_mode)) {
      auto key = std::make_pair(st.st_dev, st.st_ino);
      if (auto it = links_.find(key); it != links_.end()) {
        if (::linkat(it->second.first, it->second.second.c_str(), toDir, toName.c_str(), 0) != 0)
          throw sysError(what_ + ": link " + shown);
        return;
      }
      const int dup = ::fcntl(toDir, F_DUPFD_CLOEXEC, 3);
      if (dup < 0) throw sysError("dup");
      held_.emplace_back(dup);
      links_[key] = {dup, toName};
    }
    if (S_ISREG(st.st_mode)) return copyFile(fromDir, name, toDir, toName, st, shown);
    // FIFOs, sockets and device nodes: made anew (devices need CAP_MKNOD, as for cp -a).
    if (::mknodat(toDir, toName.c_str(), st.st_mode & (S_IFMT | 07777), st.st_rdev) != 0)
      throw sysError(what_ + ": make " + shown);
    finish(toDir, toName, -1, st);
  }

 private:
  void copyFile(int fromDir, const std::string& name, int toDir, const std::string& toName, const struct stat& st,
                const std::string& shown) {
    UniqueFd in(::openat(fromDir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!in) throw sysError(what_ + ": open " + shown);
    struct stat now {};
    if (::fstat(in.get(), &now) != 0 || !S_ISREG(now.st_mode) || now.st_ino != st.st_ino)
      throw Error(what_ + ": " + shown + " changed while it was copied");
    UniqueFd out(::openat(toDir, toName.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) throw sysError(what_ + ": create " + shown);
    copyFileData(in.get(), out.get(), what_ + ": " + shown);
    copyXattrs(in.get(), out.get());
    finish(toDir, toName, out.get(), st);
  }

  void copySymlink(int fromDir, const std::string& name, int toDir, const std::string& toName, const struct stat& st,
                   const std::string& shown) {
    std::string target(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1, '\0');
    const ssize_t n = ::readlinkat(fromDir, name.c_str(), target.data(), target.size());
    if (n < 0) throw sysError(what_ + ": read link " + shown);
    target.resize(static_cast<std::size_t>(n));
    replaceNonDirectory(toDir, toName, what_ + ": " + shown);
    if (::symlinkat(target.c_str(), toDir, toName.c_str()) != 0) throw sysError(what_ + ": link " + shown);
    if (options_.preserveOwner) (void)::fchownat(toDir, toName.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    const timespec times[2] = {st.st_atim, st.st_mtim};
    (void)::utimensat(toDir, toName.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }

  void copyDirectory(int fromDir, const std::string& name, int toDir, const std::string& toName,
                     const struct stat& st, const std::string& shown) {
    UniqueFd from(::openat(fromDir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!from) throw sysError(what_ + ": open " + shown);
    struct stat existing {};
    if (::fstatat(toDir, toName.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
      if (!S_ISDIR(existing.st_mode)) replaceNonDirectory(toDir, toName, what_ + ": " + shown);
    }
    if (::mkdirat(toDir, toName.c_str(), 0700) != 0 && errno != EEXIST) throw sysError(what_ + ": mkdir " + shown);
    UniqueFd to(::openat(toDir, toName.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!to) throw sysError(what_ + ": open the copy of " + shown);
    for (const auto& child : entriesOf(from.get(), shown)) copy(from.get(), child, to.get(), child, shown + "/" + child);
    copyXattrs(from.get(), to.get());
    finish(toDir, toName, to.get(), st);
  }

  // Owner, mode (after the owner: chown clears setuid bits), times. A copy that keeps the
  // caller's ids drops setuid/setgid bits of someone else's file, as `cp -a` does.
  void finish(int dir, const std::string& name, int fd, const struct stat& st) const {
    mode_t mode = st.st_mode & 07777;
    if (options_.dropSetid || (!options_.preserveOwner && st.st_uid != ::geteuid()))
      mode &= ~static_cast<mode_t>(S_ISUID | S_ISGID);
    if (fd >= 0) {
      if (options_.preserveOwner) (void)::fchown(fd, st.st_uid, st.st_gid);
      (void)::fchmod(fd, mode);
      const timespec times[2] = {st.st_atim, st.st_mtim};
      (void)::futimens(fd, times);
      return;
    }
    if (options_.preserveOwner) (void)::fchownat(dir, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    (void)::fchmodat(dir, name.c_str(), mode, 0);
    const timespec times[2] = {st.st_atim, st.st_mtim};
    (void)::utimensat(dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }

  const CopyOptions& options_;
  std::string what_;
  std::map<std::pair<dev_t, ino_t>, std::pair<int, std::string>> links_;
  std::vector<UniqueFd> held_;
};

template <typename Visit>
void walkTree(int dirFd, const std::string& shown, Visit&& visit) {
  for (const auto& name : entriesOf(dirFd, shown)) {
    struct stat st {};
    if (::fstatat(dirFd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string path = shown == "/" ? "/" + name : shown + "/" + name;
    visit(dirFd, name, st, path);
    if (!S_ISDIR(st.st_mode)) continue;
    UniqueFd child(::openat(dirFd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (child) walkTree(child.get(), path, visit);
  }
}

}  // namespace

ImageTree::ImageTree(const fs::path& root) : root_(root) {
  fd_.reset(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd_) throw sysError("open the image tree " + root.string());
}

UniqueFd ImageTree::directory(std::string_view path, bool create) const { return directory(path, create, 0); }

UniqueFd ImageTree::directory(std::string_view path, bool create, int links) const {
  const std::string rel = relativeInImage(path);
  const int fd = openIn(fd_.get(), rel, O_PATH | O_DIRECTORY);
  if (fd >= 0) return UniqueFd(fd);
  if (!create || fd != -ENOENT || rel.empty())
    throw sysError("the image's /" + rel + " (in " + root_.string() + ")", -fd);
  auto [parentRel, name] = splitLast(rel);
  UniqueFd parent = directory(parentRel, true, links);
  if (::mkdirat(parent.get(), name.c_str(), 0755) != 0) {
    if (errno != EEXIST) throw sysError("mkdir the image's /" + rel + " (in " + root_.string() + ")");
    // A symlink to a directory the image lacks (opt -> /some/dir): the directory is made
    // where the link leads inside the image, as `mkdir -p` through it would in a container.
    char target[4096];
    const ssize_t n = ::readlinkat(parent.get(), name.c_str(), target, sizeof target - 1);
    if (n > 0 && links < 40) {
      target[n] = '\0';
      const std::string next = target[0] == '/' ? std::string(target) : "/" + parentRel + "/" + target;
      (void)directory(next, true, links + 1);
    }
  }
  const int made = openIn(fd_.get(), rel, O_PATH | O_DIRECTORY);
  if (made < 0) throw sysError("the image's /" + rel + " (in " + root_.string() + ")", -made);
  return UniqueFd(made);
}

std::vector<std::string> ImageTree::entries(std::string_view path) const {
  const int fd = openIn(fd_.get(), relativeInImage(path), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return {};
  UniqueFd dir(fd);
  return entriesOf(dir.get(), "the image's " + std::string(path));
}

bool ImageTree::isRegularFile(std::string_view path) const {
  const int fd = openIn(fd_.get(), relativeInImage(path), O_PATH);
  if (fd < 0) return false;
  UniqueFd hold(fd);
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

bool ImageTree::isRealDirectory(std::string_view path) const {
  struct stat st {};
  return lstatIn(path, st) && S_ISDIR(st.st_mode);
}

bool ImageTree::lstatIn(std::string_view path, struct stat& st) const {
  const std::string rel = relativeInImage(path);
  if (rel.empty()) return ::fstat(fd_.get(), &st) == 0;
  auto [parentRel, name] = splitLast(rel);
  const int parent = openIn(fd_.get(), parentRel, O_PATH | O_DIRECTORY);
  if (parent < 0) return false;
  UniqueFd hold(parent);
  return ::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

std::pair<UniqueFd, std::string> ImageTree::parentOf(std::string_view path, bool create) const {
  const std::string rel = relativeInImage(path);
  if (rel.empty()) throw Error("the image's / has no parent directory");
  auto [parentRel, name] = splitLast(rel);
  return {directory(parentRel, create), name};
}

bool ImageTree::exists(std::string_view path) const {
  struct stat st {};
  return lstatIn(path, st);
}

bool ImageTree::isDirectory(std::string_view path) const {
  const int fd = openIn(fd_.get(), relativeInImage(path), O_PATH | O_DIRECTORY);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

void ImageTree::writeFile(std::string_view path, std::string_view content, mode_t mode) const {
  auto [dir, name] = parentOf(path, true);
  const std::string shown = "the image's " + std::string(path);
  replaceNonDirectory(dir.get(), name, shown);
  // O_PATH descriptors cannot create; reopen the directory itself.
  UniqueFd real(::openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!real) throw sysError("open the directory of " + shown);
  UniqueFd out(::openat(real.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) throw sysError("create " + shown);
  writeAllTo(out.get(), content, shown);
  if (::fchmod(out.get(), mode) != 0) throw sysError("chmod " + shown);
}

void ImageTree::writeIfMissing(std::string_view path, std::string_view content, mode_t mode) const {
  if (!exists(path)) writeFile(path, content, mode);
}

void ImageTree::linkIfMissing(std::string_view path, std::string_view target) const {
  if (exists(path)) return;
  auto [dir, name] = parentOf(path, true);
  if (::symlinkat(std::string(target).c_str(), dir.get(), name.c_str()) != 0)
    throw sysError("symlink the image's " + std::string(path));
}

std::string ImageTree::readFile(std::string_view path, std::size_t limit) const {
  const int fd = openIn(fd_.get(), relativeInImage(path), O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd == -ENOENT) return {};
  if (fd < 0) throw sysError("open the image's " + std::string(path), -fd);
  UniqueFd in(fd);
  return readCheckedFile(in.get(), limit, "the image's " + std::string(path));
}

void ImageTree::remove(std::string_view path) const {
  const std::string rel = relativeInImage(path);
  auto [parentRel, name] = splitLast(rel);
  const int parent = openIn(fd_.get(), parentRel, O_PATH | O_DIRECTORY);
  if (parent < 0 || rel.empty()) return;
  UniqueFd hold(parent);
  if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) throw sysError("remove the image's " + std::string(path));
}

void ImageTree::rename(std::string_view from, std::string_view to) const {
  auto [fromDir, fromName] = parentOf(from, false);
  auto [toDir, toName] = parentOf(to, true);
  if (::renameat(fromDir.get(), fromName.c_str(), toDir.get(), toName.c_str()) != 0)
    throw sysError("rename the image's " + std::string(from) + " to " + std::string(to));
}

void copyEntry(int fromDir, const std::string& name, int toDir, const std::string& toName, const CopyOptions& options,
               const std::string& what) {
  Copier(options, what).copy(fromDir, name, toDir, toName, name);
}

void copyIntoTree(int sourceDir, const std::string& sourceName, const ImageTree& tree, std::string_view dest,
                  bool destIsDirectory, const CopyOptions& options, const std::string& what) {
  UniqueFd dir;
  std::string name = sourceName;
  if (destIsDirectory || tree.isDirectory(dest)) {
    dir = tree.directory(dest, true);
  } else {
    auto parent = tree.parentOf(dest, true);
    dir = std::move(parent.first);
    name = parent.second;
  }
  // mkdirat, openat and friends need a real descriptor to create in, not O_PATH.
  UniqueFd real(::openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!real) throw sysError(what + ": open the destination directory");
  Copier(options, what).copy(sourceDir, sourceName, real.get(), name, sourceName);
}

std::pair<UniqueFd, std::string> openSource(const ImageTree* tree, const std::string& path) {
  if (tree) {
    auto [dir, name] = tree->parentOf(path, false);
    UniqueFd real(::openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!real) throw sysError("open the directory of " + path);
    return {std::move(real), name};
  }
  fs::path host = fs::absolute(path).lexically_normal();
  if (host.filename().empty()) host = host.parent_path();
  const fs::path parent = host.has_relative_path() ? host.parent_path() : host;
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw sysError("open " + parent.string());
  return {std::move(dir), host.has_relative_path() ? host.filename().string() : std::string(".")};
}

PrivilegedFiles dropPrivilegedFiles(const ImageTree& tree) {
  PrivilegedFiles dropped;
  walkTree(tree.fd(), "/", [&](int dir, const std::string& name, const struct stat& st, const std::string& path) {
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
      if (::unlinkat(dir, name.c_str(), 0) != 0) throw sysError("remove the device node " + path);
      ++dropped.deviceNodes;
      return;
    }
    if (!S_ISREG(st.st_mode)) return;
    UniqueFd fd;
    auto file = [&] {
      if (!fd) fd.reset(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
      if (!fd) throw sysError("open " + path);
      return fd.get();
    };
    if (st.st_mode & (S_ISUID | S_ISGID)) {
      if (::fchmod(file(), st.st_mode & 0777 & ~static_cast<mode_t>(S_ISUID | S_ISGID)) != 0)
        throw sysError("clear the setuid/setgid bits of " + path);
      ++dropped.setidBits;
    }
    if (::fgetxattr(file(), "security.capability", nullptr, 0) >= 0) {
      if (::fremovexattr(file(), "security.capability") != 0) throw sysError("remove the file capabilities of " + path);
      ++dropped.capabilities;
    }
  });
  return dropped;
}

std::size_t clearSetidBitsOf(const ImageTree& tree, uid_t uid) {
  std::size_t cleared = 0;
  walkTree(tree.fd(), "/", [&](int dir, const std::string& name, const struct stat& st, const std::string& path) {
    if (!S_ISREG(st.st_mode) || st.st_uid != uid || !(st.st_mode & (S_ISUID | S_ISGID))) return;
    UniqueFd fd(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    // fchmod needs a real descriptor; chmod through the O_PATH one's /proc link is the
    // same file, whatever is at the name now.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
    if (!fd || ::chmod(proc.c_str(), st.st_mode & 0777) != 0) throw sysError("clear the setuid/setgid bits of " + path);
    ++cleared;
  });
  return cleared;
}

std::vector<std::string> setidFiles(const ImageTree& tree) {
  std::vector<std::string> found;
  walkTree(tree.fd(), "/", [&](int, const std::string&, const struct stat& st, const std::string& path) {
    if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) found.push_back(path);
  });
  return found;
}

}  // namespace ctr::image
