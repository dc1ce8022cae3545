#include "ctr/pathutil.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <vector>

#include "ctr/error.hpp"

namespace ctr {
namespace {

std::vector<std::string_view> splitComponents(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > pos) parts.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return parts;
}

std::string absoluteFromNames(const std::vector<std::string>& names) {
  if (names.empty()) return "/";
  std::string out;
  for (const auto& n : names) out += "/" + n;
  return out;
}

// Linux MAXSYMLINKS, the limit path_resolution(7) uses.
constexpr int kMaxSymlinks = 40;

struct Component {
  std::string name;
  int viaLink = -1;  // index into RootWalk::links when the component came from a symlink target
};

struct WalkResult {
  std::vector<std::string> names;  // resolved components of the existing part
  UniqueFd fd;                     // O_PATH fd of names (the root when names is empty)
  UniqueFd parentFd;               // O_PATH fd of the directory holding the final component
  std::string finalName;           // last component, existing or not ("" for the root)
  std::deque<Component> missing;   // components not found (first one included)
  PathKind kind = PathKind::Missing;
};

UniqueFd openPath(int dirFd, const char* name) {
  int fd = ::openat(dirFd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  return UniqueFd(fd);
}

PathKind kindOf(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return PathKind::Directory;
  if (S_ISREG(st.st_mode)) return PathKind::RegularFile;
  return PathKind::Other;
}

// Where a walk stands: the components left, the names resolved so far and their
// directories, and the symlinks followed on the way.
struct RootWalk {
  int rootFd;
  std::string_view path;
  std::string_view what;
  bool refuseEscape;
  std::deque<Component> pending{};
  std::vector<std::string> links{};  // "/x -> /../../etc", for messages
  std::vector<std::string> names{};
  std::vector<UniqueFd> dirs{};  // dirs[i] is the directory names[0..i]
  int symlinksFollowed = 0;

  int currentDir() const { return dirs.empty() ? rootFd : dirs.back().get(); }
};

void goUp(RootWalk& w, const Component& comp) {
  if (w.names.empty()) {
    if (w.refuseEscape && comp.viaLink >= 0) {
      throw Error(std::string(w.what) + " " + std::string(w.path) +
                  " escapes the container root through symlink " + w.links[comp.viaLink]);
    }
    return;  // "/.." is "/"
  }
  w.names.pop_back();
  w.dirs.pop_back();
}

// The link `name` (open as `linkFd`): its target's components are walked next, from the
// root for an absolute one.
void followSymlink(RootWalk& w, int linkFd, const std::string& name) {
  if (++w.symlinksFollowed > kMaxSymlinks) {
    throw Error(std::string(w.what) + " " + std::string(w.path) +
                ": too many levels of symbolic links");
  }
  std::string target(4096, '\0');
  ssize_t n = ::readlinkat(linkFd, "", target.data(), target.size());
  if (n < 0) throw sysError(std::string(w.what) + " " + std::string(w.path) + ": readlink");
  target.resize(static_cast<size_t>(n));
  std::string linkPath = absoluteFromNames(w.names);
  linkPath += (w.names.empty() ? "" : "/") + name;
  w.links.push_back(linkPath + " -> " + target);
  int linkIndex = static_cast<int>(w.links.size()) - 1;
  if (!target.empty() && target[0] == '/') {
    w.names.clear();
    w.dirs.clear();
  }
  auto parts = splitComponents(target);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    w.pending.push_front({std::string(*it), linkIndex});
  }
}

bool onlyDotsLeft(const std::deque<Component>& pending) {
  for (const auto& c : pending) {
    if (c.name != ".") return false;
  }
  return true;
}

// The result's descriptors: of what was reached, and of the directory holding the final
// component.
void finishWalk(RootWalk& w, WalkResult& result) {
  if (result.missing.empty() && result.kind == PathKind::Missing) result.kind = PathKind::Directory;
  result.names = w.names;
  if (w.dirs.empty()) {
    result.fd = openPath(w.rootFd, ".");
    if (!result.fd) throw sysError(std::string(w.what) + " " + std::string(w.path) + ": open root");
  } else {
    result.fd = std::move(w.dirs.back());
    w.dirs.pop_back();
  }
  if (result.missing.empty()) {
    if (!w.names.empty()) {
      result.finalName = w.names.back();
      int parent = w.dirs.empty() ? w.rootFd : w.dirs.back().get();
      result.parentFd = openPath(parent, ".");
    }
  } else {
    // The first missing component lives in the deepest existing directory.
    result.finalName = result.missing.front().name;
    result.parentFd = openPath(result.fd.get(), ".");
  }
}

// The component walk shared by resolveInRoot and the openInRoot fallback. With
// `refuseEscape`, a ".." from a symlink target that would climb above the root throws;
// without it, it stays at the root (chroot semantics, like RESOLVE_IN_ROOT).
WalkResult walk(int rootFd, std::string_view path, std::string_view what, bool refuseEscape) {
  RootWalk w{.rootFd = rootFd, .path = path, .what = what, .refuseEscape = refuseEscape};
  for (auto part : splitComponents(path)) w.pending.push_back({std::string(part), -1});

  WalkResult result;
  while (!w.pending.empty()) {
    Component comp = std::move(w.pending.front());
    w.pending.pop_front();
    if (comp.name == ".") continue;
    if (comp.name == "..") {
      goUp(w, comp);
      continue;
    }

    UniqueFd fd = openPath(w.currentDir(), comp.name.c_str());
    if (!fd) {
      if (errno != ENOENT) {
        throw sysError(std::string(what) + " " + std::string(path) + ": cannot open " +
                       absoluteFromNames(w.names) + (w.names.empty() ? "" : "/") + comp.name);
      }
      result.missing.push_back(std::move(comp));
      result.missing.insert(result.missing.end(), w.pending.begin(), w.pending.end());
      break;
    }
    struct stat st {};
    if (::fstatat(fd.get(), "", &st, AT_EMPTY_PATH) != 0) {
      throw sysError(std::string(what) + " " + std::string(path) + ": fstat");
    }

    if (S_ISLNK(st.st_mode)) {
      followSymlink(w, fd.get(), comp.name);
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !onlyDotsLeft(w.pending)) {
      throw Error(std::string(what) + " " + std::string(path) + ": " +
                  absoluteFromNames(w.names) + (w.names.empty() ? "" : "/") + comp.name +
                  " is not a directory");
    }
    w.names.push_back(std::move(comp.name));
    w.dirs.push_back(std::move(fd));
    if (!S_ISDIR(st.st_mode)) {
      result.kind = kindOf(st);
      break;
    }
  }
  finishWalk(w, result);
  return result;
}

}  // namespace

std::string normalizePath(std::string_view path) {
  const bool absolute = !path.empty() && path[0] == '/';
  std::vector<std::string_view> out;
  for (auto part : splitComponents(path)) {
    if (part == ".") continue;
    if (part == "..") {
      if (!out.empty() && out.back() != "..") {
        out.pop_back();
      } else if (!absolute) {
        out.push_back(part);
      }
      continue;
    }
    out.push_back(part);
  }
  std::string result = absolute ? "/" : "";
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0) result += '/';
    result += out[i];
  }
  if (result.empty()) result = ".";
  return result;
}

std::string joinPath(std::string_view base, std::string_view tail) {
  std::string combined(base);
  combined += '/';
  combined += tail;
  return normalizePath(combined);
}

bool isAtOrUnder(std::string_view path, std::string_view dir) {
  return dir == "/" || path == dir || (path.starts_with(dir) && path.size() > dir.size() && path[dir.size()] == '/');
}

bool hasDotDotComponent(std::string_view path) {
  for (auto part : splitComponents(path)) {
    if (part == "..") return true;
  }
  return false;
}

std::string expandUidPattern(std::string_view pattern, unsigned uid, std::string_view setting) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[++i]) {
      case 'u': out += std::to_string(uid); break;
      case '%': out += '%'; break;
      default:
        throw Error(std::string(setting) + " " + std::string(pattern) + ": unknown %" + pattern[i] +
                    " (known: %u, the user's id; %%)");
    }
  }
  return out;
}

std::string_view toString(PathKind kind) {
  switch (kind) {
    case PathKind::Missing: return "missing";
    case PathKind::Directory: return "directory";
    case PathKind::RegularFile: return "file";
    case PathKind::Other: return "other";
  }
  return "other";
}

ResolvedPath resolveInRoot(int rootFd, std::string_view path, std::string_view what) {
  if (path.empty() || path[0] != '/') {
    throw Error(std::string(what) + " '" + std::string(path) + "' is not an absolute path");
  }
  WalkResult w = walk(rootFd, path, what, /*refuseEscape=*/true);
  ResolvedPath resolved;
  resolved.existing = absoluteFromNames(w.names);
  std::string full = resolved.existing;
  for (const auto& c : w.missing) full += "/" + c.name;
  resolved.path = normalizePath(full);
  resolved.kind = w.missing.empty() ? w.kind : PathKind::Missing;
  resolved.fd = std::move(w.fd);
  return resolved;
}

UniqueFd openInRoot(int rootFd, std::string_view path, int flags, unsigned mode) {
  const std::string pathStr(path);
  struct open_how how {};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, rootFd, pathStr.c_str(), &how, sizeof(how));
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  if (errno != ENOSYS) throw sysError("open " + pathStr + " inside the container root");

  // Kernel < 5.6: walk with chroot semantics, then open the last component from its
  // directory without following anything more.
  WalkResult w = walk(rootFd, path, "path", /*refuseEscape=*/false);
  if (w.missing.size() > 1) {
    throw sysError("open " + pathStr + " inside the container root", ENOENT);
  }
  int result = -1;
  if (w.finalName.empty()) {
    result = ::openat(rootFd, ".", flags | O_CLOEXEC);
  } else {
    result = ::openat(w.parentFd.get(), w.finalName.c_str(), flags | O_CLOEXEC | O_NOFOLLOW,
                      static_cast<mode_t>(mode));
  }
  if (result < 0) throw sysError("open " + pathStr + " inside the container root");
  return UniqueFd(result);
}

std::optional<std::string_view> sharedFilesystemName(std::int64_t type) {
  switch (static_cast<std::uint32_t>(type)) {
    case NFS_SUPER_MAGIC: return "NFS";
    case 0x0BD00BD0u: return "Lustre";
    case 0x47504653u: return "GPFS";
    case 0x19830326u: return "BeeGFS";
    case 0x00C36400u: return "CephFS";
    case 0xAAD7AAEAu: return "PanFS";
    case 0x20030528u: return "OrangeFS";
    case AFS_SUPER_MAGIC:
    case 0x6B414653u: return "AFS";
    case CIFS_SUPER_MAGIC:
    case SMB2_SUPER_MAGIC: return "SMB/CIFS";
    default: return std::nullopt;
  }
}

}  // namespace ctr
