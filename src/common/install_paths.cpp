#include "ctr/install_paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <system_error>
#include <vector>

#include "ctr/configured.hpp"
#include "ctr/error.hpp"

namespace ctr {
namespace {

namespace fs = std::filesystem;

// What execvp(3) uses when PATH is unset (confstr(_CS_PATH)), plus the sbin directories
// where some distributions put mksquashfs.
constexpr const char* kDefaultSearchPath = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

struct ProgramInfo {
  std::array<const char*, 2> names;  // in order of preference; nullptr ends the list early
  const char* installHint;
  bool sbin = false;  // also looked for in /usr/sbin and /sbin, after $PATH
};

ProgramInfo infoOf(Program program) {
  switch (program) {
    case Program::Squashfuse:
      return {{"squashfuse_ll", "squashfuse"}, "install squashfuse (apt/dnf install squashfuse)"};
    case Program::SquashfsServer:
      return {{"ctr-squashfs", nullptr}, "it is built with ctr (needs libsquashfs-dev and libfuse3-dev)"};
    case Program::Mksquashfs: return {{"mksquashfs", nullptr}, "install squashfs-tools"};
    case Program::Unsquashfs: return {{"unsquashfs", nullptr}, "install squashfs-tools"};
    case Program::Topology: return {{"ctr-topology", nullptr}, "it is built with ctr (needs libhwloc)"};
    case Program::MkfsExt3: return {{"mkfs.ext3", nullptr}, "install e2fsprogs", true};
    case Program::Debugfs: return {{"debugfs", nullptr}, "install e2fsprogs", true};
    case Program::Fuse2fs:
      return {{"fuse2fs", nullptr}, "an ext3 --overlay image needs it: install fuse2fs (apt install fuse2fs)", true};
    case Program::FuseOverlayfs:
      return {{"fuse-overlayfs", nullptr},
              "an ext3 --overlay image needs it: install fuse-overlayfs (apt install fuse-overlayfs)", true};
  }
  return {{"", nullptr}, ""};
}

bool isExecutableFile(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// PREFIX/libexec/ctr of the relocated install, then of the configured one (once if equal).
std::vector<fs::path> libexecDirs() {
  std::vector<fs::path> dirs;
  if (!relocatedPrefix().empty()) dirs.push_back(relocatedPrefix() / configured::kLibexecDir / "ctr");
  fs::path configured = fs::path(configured::kInstallPrefix) / configured::kLibexecDir / "ctr";
  if (dirs.empty() || dirs.front() != configured) dirs.push_back(std::move(configured));
  return dirs;
}

// The directory of the running executable, empty where /proc/self/exe cannot be read. Read
// once: the link is resolved by the kernel each time (a path walk), and every launch asks for
// ctr.conf's place and for ctr-squashfs.
const fs::path& selfDir() {
  static const fs::path dir = [] {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : self.parent_path();
  }();
  return dir;
}

}  // namespace

const fs::path& relocatedPrefix() {
  static const fs::path prefix = [] {
    fs::path dir = selfDir();
    const fs::path binDir = configured::kBinDir;
    if (dir.empty() || binDir.is_absolute()) return fs::path();  // an absolute bindir cannot move
    // Walk up one level per component of the bindir ("bin"), checking each name.
    std::vector<fs::path> components(binDir.begin(), binDir.end());
    for (auto it = components.rbegin(); it != components.rend(); ++it) {
      if (dir.filename() != *it) return fs::path();
      dir = dir.parent_path();
    }
    return dir;
  }();
  return prefix;
}

std::string findInSearchPath(const std::string& name, const std::string& searchPath) {
  for (size_t start = 0;;) {
    const size_t end = searchPath.find(':', start);
    const std::string dir = searchPath.substr(start, end == std::string::npos ? end : end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (isExecutableFile(candidate)) return candidate.string();
    if (end == std::string::npos) return {};
    start = end + 1;
  }
}

namespace {

// ctr's own directories for `program`, in the order they are looked in.
std::vector<fs::path> ownDirs(Program program) {
  auto dirs = libexecDirs();
  // ctr's own programs: a build tree keeps them beside ctr (bin/ctr-topology, bin/ctr-squashfs),
  // and its own must win over those of an install at the configured prefix.
  if (program == Program::Topology || program == Program::SquashfsServer)
    if (!selfDir().empty()) dirs.insert(dirs.begin() + (relocatedPrefix().empty() ? 0 : 1), selfDir());
  return dirs;
}

std::string searchPathOf(Program program) {
  const char* envPath = std::getenv("PATH");
  std::string searchPath = envPath ? envPath : kDefaultSearchPath;
  if (infoOf(program).sbin) searchPath += ":/usr/sbin:/sbin";
  return searchPath;
}

}  // namespace

std::vector<fs::path> programSearchDirs(Program program) {
  auto dirs = ownDirs(program);
  const std::string searchPath = searchPathOf(program);
  for (size_t start = 0;;) {
    const size_t end = searchPath.find(':', start);
    const std::string dir = searchPath.substr(start, end == std::string::npos ? end : end - start);
    dirs.emplace_back(dir.empty() ? "." : dir);
    if (end == std::string::npos) return dirs;
    start = end + 1;
  }
}

std::string findProgram(Program program) {
  const ProgramInfo info = infoOf(program);
  const auto dirs = programSearchDirs(program);
  for (const char* name : info.names) {
    if (name == nullptr) break;
    for (const auto& dir : dirs)
      if (isExecutableFile(dir / name)) return (dir / name).string();
  }
  const auto own = ownDirs(program);
  std::string looked;
  for (const auto& dir : own) looked += dir.string() + ", ";
  throw Error(std::string(info.names[0]) + " not found (looked in " + looked + "$PATH=" + searchPathOf(program) +
              "): " + info.installHint + ", or put " + info.names[0] + " in " + own.front().string());
}

fs::path sysconfPath() {
  if (!relocatedPrefix().empty()) {
    fs::path relocated = relocatedPrefix() / configured::kSysconfDir / "ctr" / "ctr.conf";
    std::error_code ec;
    if (fs::exists(relocated, ec)) return relocated;
  }
  return configured::kSysconfPath;
}

}  // namespace ctr
