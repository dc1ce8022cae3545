// The host MPI for --mpi=bind and the ABI check against the image's (ctr/mpi.hpp).
#include "ctr/mpi.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <set>
#include <span>

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/configured.hpp"
#include "ctr/glibc_version.hpp"
#include "ctr/hash.hpp"
#include "ctr/ldcache.hpp"
#include "ctr/pathutil.hpp"
#include "scan_files.hpp"

namespace ctr::host {
namespace {

// Files looked at in the 'mpi path' directories for plugins' dependencies.
constexpr std::size_t kMaxPlugins = 4096;

std::string baseName(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string dirName(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// glibc's own libraries: the image's glibc serves the host MPI (binding the host's libc
// into an image is not something to do behind the user's back).
bool isGlibcLibrary(std::string_view soname) {
  for (std::string_view name : {"libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "libutil.so",
                                "libresolv.so", "libnsl.so", "libanl.so", "libmvec.so", "libBrokenLocale.so"})
    if (soname.starts_with(name) && (soname.size() == name.size() || soname[name.size()] == '.')) return true;
  return soname.starts_with("ld-linux") || soname.starts_with("ld64.so") || soname == "linux-vdso.so.1";
}

// The real path of `path` on the host (symlinks followed); `path` when that fails.
std::string realFile(const std::string& path) {
  std::error_code ec;
  auto real = std::filesystem::canonical(path, ec);
  return ec ? path : real.string();
}

// The cache entry ld.so would take for `soname` on this machine, as a selected library.
std::optional<SelectedLibrary> lookUp(const LdCache& cache, const std::string& soname, const std::string& root,
                                      std::string& why) {
  const std::string names[] = {soname};
  auto selection = selectLibraries(cache, names, hostElfIdentity(), root);
  for (auto& s : selection.selected)
    if (s.soname == soname) return std::move(s);
  why = "not in the host's ld.so cache";
  for (const auto& s : selection.skipped)
    if (s.soname == soname) why = s.reason;
  return std::nullopt;
}

}  // namespace

std::string toString(MpiFamily family) {
  switch (family) {
    case MpiFamily::OpenMpi: return "Open MPI";
    case MpiFamily::Mpich: return "MPICH ABI";
    case MpiFamily::Unknown: break;
  }
  return "unknown";
}

std::string toString(MpiAbiCheck mode) { return mode == MpiAbiCheck::Strict ? "strict" : "relaxed"; }

MpiFamily mpiFamilyOf(std::string_view name) {
  name = std::string_view(name).substr(name.find_last_of('/') == std::string_view::npos ? 0 : name.find_last_of('/') + 1);
  if (name.starts_with("libmpich.so.") || name == "libmpich.so") return MpiFamily::Mpich;
  if (name == "libmpi.so.12" || name.starts_with("libmpi.so.12.")) return MpiFamily::Mpich;
  if (name.starts_with("libmpi.so.") && name.size() > 10 && std::isdigit(static_cast<unsigned char>(name[10])))
    return MpiFamily::OpenMpi;
  return MpiFamily::Unknown;
}

std::optional<LibraryVersion> parseLibraryVersion(std::string_view fileName) {
  const auto at = fileName.find(".so");
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  LibraryVersion v;
  v.stem = std::string(fileName.substr(0, at + 3));
  std::string_view rest = fileName.substr(at + 3);
  while (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2) return std::nullopt;
    rest.remove_prefix(1);
    std::size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
    if (digits == 0 || digits > 6) return std::nullopt;
    v.numbers.push_back(std::stoi(std::string(rest.substr(0, digits))));
    rest.remove_prefix(digits);
  }
  return v;
}

std::string versionText(const LibraryVersion& version) {
  std::string out;
  for (int n : version.numbers) out += (out.empty() ? "" : ".") + std::to_string(n);
  return out;
}

MpiAbiVerdict checkMpiAbi(std::string_view hostFile, std::string_view imageFile, MpiAbiCheck mode) {
  const std::string host = "the host's " + std::string(hostFile), image = "the image's " + std::string(imageFile);
  const MpiFamily hostFamily = mpiFamilyOf(hostFile), imageFamily = mpiFamilyOf(imageFile);
  if (hostFamily != MpiFamily::Unknown && imageFamily != MpiFamily::Unknown && hostFamily != imageFamily)
    return {false, host + " is " + toString(hostFamily) + ", " + image + " is " + toString(imageFamily) +
                       ": the two ABIs are never mixed"};
  const auto h = parseLibraryVersion(hostFile), i = parseLibraryVersion(imageFile);
  if (!h || !i || h->stem != i->stem)
    return {false, host + " and " + image + " are not versions of one library"};
  if (h->numbers.empty() || i->numbers.empty())
    return {false, (h->numbers.empty() ? host : image) + " has no version in its file name: the ABI cannot be checked"};
  const std::string versions = " (host " + versionText(*h) + ", image " + versionText(*i) + ")";
  if (h->majorNumber() != i->majorNumber())
    return {false, host + " and " + image + " have different major versions" + versions + ": incompatible ABIs"};
  if (h->minorNumber() < i->minorNumber()) {
    if (mode == MpiAbiCheck::Strict)
      return {false, image + " is newer than " + host + versions +
                         ": the app may use what the older host library lacks ('mpi abi check = strict')"};
    return {true, image + " is newer than " + host + versions + ": replaced anyway ('mpi abi check = relaxed')"};
  }
  return {true, ""};
}

namespace {

// One scan of the host's MPI: the configured libraries, their DT_NEEDED closure in the
// host's ld.so cache, the fabric's libraries, configuration and plugin directories, and the
// newest glibc any of them needs.
class MpiScan {
 public:
  explicit MpiScan(const MpiScanInputs& in) : in_(in), cache_(readLdCache(underRoot(in.root, in.ldCache))) {
    mpi_.root = in.root;
  }

  HostMpi run() && {
    addConfiguredLibraries();
    for (const auto& lib : mpi_.libraries) needs(lib);
    addExtraLibraries();
    drain();
    addPaths();
    queuePluginNeeds();
    drain();
    findGlibcNeed();
    return std::move(mpi_);
  }

 private:
  // A library named by ctr.conf: an absolute path on the host, or a soname in its cache.
  std::optional<MpiLibrary> resolve(const std::string& name, std::string& why) const {
    if (!name.starts_with("/")) {
      auto found = lookUp(cache_, name, in_.root, why);
      if (!found) return std::nullopt;
      return MpiLibrary{found->soname, realFile(found->path),
                        "ld.so cache " + found->soname + " (" + describeLdCacheFlags(found->flags) + ")"};
    }
    const std::string path = realFile(underRoot(in_.root, name));
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      why = "no such file on the host";
      return std::nullopt;
    }
    try {
      if (elfClassAndMachine(path) != hostElfIdentity()) {
        why = "not built for " + describe(hostElfIdentity());
        return std::nullopt;
      }
    } catch (const Error& e) {
      why = e.oneLine();
      return std::nullopt;
    }
    // The soname a path provides: its real name up to the major ("libmpi.so.40.30.4" ->
    // "libmpi.so.40"), which is what ld.so looks for.
    const auto v = parseLibraryVersion(baseName(path));
    if (!v || v->numbers.empty()) {
      why = "its file name carries no version (libNAME.so.MAJOR...)";
      return std::nullopt;
    }
    return MpiLibrary{v->stem + "." + std::to_string(v->majorNumber()), path, "host file " + name};
  }

  void addConfiguredLibraries() {
    for (const auto& name : in_.libraries) {
      std::string why;
      auto lib = resolve(name, why);
      if (!lib) throw Error("ctr.conf 'mpi library' " + name + ": " + why);
      const MpiFamily family = mpiFamilyOf(baseName(lib->path));
      if (family != MpiFamily::Unknown && mpi_.family != MpiFamily::Unknown && family != mpi_.family)
        throw Error("ctr.conf 'mpi library' mixes " + toString(mpi_.family) + " and " + toString(family) + " (" + name +
                    ")");
      if (mpi_.family == MpiFamily::Unknown) mpi_.family = family;
      if (!seen_.insert(lib->soname).second) continue;
      lib->from = "ctr.conf 'mpi library' " + name + ": " + lib->from;
      mpi_.libraries.push_back(std::move(*lib));
    }
  }

  // The admin's 'mpi dependency' libraries and the fabric's, when the host has them: the
  // MPI's transport plugins (dlopen'd, so not in any DT_NEEDED) need them, and the host's
  // provider plugins match the host's.
  void addExtraLibraries() {
    std::vector<std::pair<std::string, std::string>> extra;  // name, why
    for (const auto& name : in_.dependencies) extra.emplace_back(name, "ctr.conf 'mpi dependency' " + name);
    for (const char* fabric : {"libibverbs.so.1", "librdmacm.so.1"})
      for (const auto& e : cache_.entries)
        if (e.soname == fabric) {
          extra.emplace_back(fabric, "the host's rdma-core");
          break;
        }
    for (const auto& [name, why] : extra) {
      std::string problem;
      auto lib = resolve(name, problem);
      if (!lib) {
        mpi_.skipped.push_back(name + " (" + why + "): " + problem);
        continue;
      }
      if (!seen_.insert(lib->soname).second) continue;
      lib->from = why + ": " + lib->from;
      mpi_.dependencies.push_back(*lib);
      needs(mpi_.dependencies.back());
    }
  }

  // Queues what `lib` needs (DT_NEEDED), for drain().
  void needs(const MpiLibrary& lib) {
    try {
      for (auto& n : elfNeeded(lib.path)) queue_.emplace_back(std::move(n), lib.soname);
    } catch (const Error& e) {
      mpi_.skipped.push_back(lib.soname + ": its dependencies are not known (" + e.oneLine() + ")");
    }
  }

  // Dependencies, breadth first, resolved in the host's cache.
  void drain() {
    while (!queue_.empty()) {
      auto [soname, by] = std::move(queue_.front());
      queue_.pop_front();
      if (isGlibcLibrary(soname) || seen_.contains(soname)) continue;
      seen_.insert(soname);
      std::string why;
      auto found = lookUp(cache_, soname, in_.root, why);
      if (!found) {
        mpi_.skipped.push_back(soname + " (needed by " + by + "): " + why);
        continue;
      }
      mpi_.dependencies.push_back({soname, realFile(found->path), "DT_NEEDED of " + by + ": ld.so cache " + soname +
                                                                      " (" + describeLdCacheFlags(found->flags) + ")"});
      needs(mpi_.dependencies.back());
    }
  }

  void addPath(const std::string& path, const std::string& from, bool quiet) {
    if (!paths_.insert(path).second) return;
    if (::access(underRoot(in_.root, path).c_str(), F_OK) == 0)
      mpi_.paths.push_back({path, from});
    else if (!quiet)
      mpi_.skipped.push_back(path + " (" + from + "): not on the host");
  }

  // Configuration the admin names, then the fabric's plugins and configuration.
  void addPaths() {
    for (const auto& path : in_.paths) addPath(path, "ctr.conf 'mpi path'", false);
    addPath("/etc/libibverbs.d", "rdma-core provider configuration", true);
    for (const auto& [soname, dir, what] :
         {std::tuple{"libibverbs.so.1", "libibverbs", "rdma-core provider plugins"},
          std::tuple{"libucp.so.0", "ucx", "UCX transport plugins"},
          std::tuple{"libfabric.so.1", "libfabric", "libfabric provider plugins"}}) {
      for (const auto& e : cache_.entries) {
        if (e.soname != soname || e.path.empty() || e.path[0] != '/') continue;
        // The library's real directory: plugins are looked for at the path the library was
        // built for (/usr/lib/<multiarch>/libibverbs), not through /lib -> usr/lib.
        std::string libDir = realFile(underRoot(in_.root, dirName(e.path)));
        if (in_.root != "/" && libDir.starts_with(in_.root + "/")) libDir = libDir.substr(in_.root.size());
        addPath(joinPath(libDir, dir), what + std::string(" (beside ") + e.path + ")", true);
        break;
      }
    }
    addPath("/etc/ucx", "UCX configuration", true);
    addPath("/etc/libfabric.conf", "libfabric configuration", true);
  }

  // Plugins in those directories (Open MPI's components, PMIx's, the verbs providers, UCX's
  // transports) are dlopen'd: what they need must be in the container too.
  void queuePluginNeeds() {
    std::size_t plugins = 0;
    for (const auto& path : mpi_.paths) {
      std::error_code ec;
      const std::string dir = underRoot(in_.root, path.path);
      if (!std::filesystem::is_directory(dir, ec)) continue;
      for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
           !ec && it != std::filesystem::recursive_directory_iterator() && plugins < kMaxPlugins; it.increment(ec)) {
        if (it.depth() >= 4) it.disable_recursion_pending();
        const std::string name = it->path().filename().string();
        if (!(name.ends_with(".so") || name.find(".so.") != std::string::npos) || !it->is_regular_file(ec) ||
            it->is_symlink(ec))
          continue;
        ++plugins;
        try {
          const std::string by = "plugin " + path.path + it->path().string().substr(dir.size());
          for (auto& n : elfNeeded(it->path().string())) {
            // Beside the plugin (its RUNPATH is $ORIGIN): in the bound directory already.
            std::error_code missing;
            if (!std::filesystem::exists(it->path().parent_path() / n, missing)) queue_.emplace_back(std::move(n), by);
          }
        } catch (const Error& e) {
          spdlog::debug("{}", e.what());
        }
      }
    }
  }

  // The newest glibc any library needs, and which library needs it.
  void findGlibcNeed() {
    std::optional<GlibcVersion> newest;
    auto glibcOf = [&](const MpiLibrary& lib) {
      try {
        if (auto v = glibcNeededBy(lib.path); v && (!newest || *v > *newest)) {
          newest = v;
          mpi_.needsGlibcLibrary = lib.soname;
        }
      } catch (const Error& e) {
        spdlog::debug("glibc needs of {} not known: {}", lib.path, e.what());
      }
    };
    for (const auto& lib : mpi_.libraries) glibcOf(lib);
    for (const auto& lib : mpi_.dependencies) glibcOf(lib);
    if (newest) mpi_.needsGlibc = toString(*newest);
  }

  const MpiScanInputs& in_;
  const LdCache cache_;
  HostMpi mpi_;
  std::set<std::string> seen_;                          // sonames taken
  std::deque<std::pair<std::string, std::string>> queue_;  // soname, needed by
  std::set<std::string> paths_;
};

}  // namespace

static HostMpi scanHostMpiUncached(const MpiScanInputs& in) {
  if (in.libraries.empty())
    throw Error("no host MPI is configured (ctr.conf 'mpi library = libmpi.so.40' names one)");
  return MpiScan(in).run();
}

namespace {

HostMpi fromJson(const nlohmann::json& j) {
  HostMpi mpi;
  const std::string abi = j.at("abi");
  mpi.family = abi == "Open MPI" ? MpiFamily::OpenMpi : abi == "MPICH ABI" ? MpiFamily::Mpich : MpiFamily::Unknown;
  for (const auto& l : j.at("libraries")) mpi.libraries.push_back({l.at("soname"), l.at("path"), l.at("from")});
  for (const auto& l : j.at("dependencies")) mpi.dependencies.push_back({l.at("soname"), l.at("path"), l.at("from")});
  for (const auto& p : j.at("paths")) mpi.paths.push_back({p.at("path"), p.at("from")});
  mpi.skipped = j.at("skipped").get<std::vector<std::string>>();
  mpi.needsGlibc = j.at("needs_glibc");
  mpi.needsGlibcLibrary = j.at("needs_glibc_library");
  return mpi;
}

}  // namespace

HostMpi scanHostMpi(const MpiScanInputs& in) {
  if (in.cacheDir.empty()) return scanHostMpiUncached(in);
  // Valid while the host's ld.so cache (rewritten by every library install), the list and
  // the configured directories are unchanged.
  std::string key = "mpi|" + std::string(configured::kVersion) + "|" + in.root + "|" + fileIdentity(underRoot(in.root, in.ldCache));
  for (const auto* list : {&in.libraries, &in.dependencies, &in.paths}) {
    key += "|";
    for (const auto& item : *list) key += item + "," + (item.starts_with("/") ? fileIdentity(underRoot(in.root, item)) : "") + ";";
  }
  const std::string cachePath = joinPath(in.cacheDir, fmt::format("mpi-scan-{:016x}.json", fnv1a64(key)));
  if (std::string text = readFileIfPresent(cachePath); !text.empty()) {
    try {
      HostMpi mpi = fromJson(nlohmann::json::parse(text));
      mpi.root = in.root;
      mpi.fromCache = true;
      return mpi;
    } catch (const std::exception& e) {
      spdlog::debug("host MPI scan cache {} unusable ({}): scanning again", cachePath, e.what());
    }
  }
  HostMpi mpi = scanHostMpiUncached(in);
  try {
    writeScanCache(cachePath, toJson(mpi).dump(), "the host MPI scan cache");
  } catch (const Error& e) {
    spdlog::debug("{} (the scan is not cached)", e.what());
  }
  return mpi;
}

namespace {

// The image's /etc/ld.so.cache, or an empty cache when it has none we can read.
LdCache imageLdCache(int rootFd) {
  try {
    UniqueFd fd = openInRoot(rootFd, "/etc/ld.so.cache", O_RDONLY | O_NONBLOCK | O_NOCTTY);
    const std::string text = readCheckedFile(fd.get(), 64u << 20, "the image's /etc/ld.so.cache");
    return parseLdCache(std::as_bytes(std::span(text)), "the image's /etc/ld.so.cache");
  } catch (const Error& e) {
    spdlog::debug("{}", e.what());
  }
  return {};
}

std::optional<ImageLibrary> findIn(int rootFd, const LdCache& cache, const std::string& soname) {
  auto resolved = [&](const std::string& path, std::string how) -> std::optional<ImageLibrary> {
    try {
      auto r = resolveInRoot(rootFd, path, "image library");
      if (r.kind != PathKind::RegularFile) return std::nullopt;
      return ImageLibrary{soname, path, r.path, std::move(how)};
    } catch (const Error& e) {
      spdlog::debug("{}", e.what());
      return std::nullopt;
    }
  };
  const auto hostFlags = ldCacheFlagsFor(hostElfIdentity());
  for (const auto& e : cache.entries) {
    if (e.soname != soname || !e.hwcapsName.empty() || e.path.empty() || e.path[0] != '/') continue;
    if (hostFlags && e.flags != *hostFlags && e.flags != kLdFlagElf) continue;
    if (auto found = resolved(e.path, "the image's ld.so cache")) return found;
  }
  for (std::string_view dir : kImageLibraryDirs)
    if (auto found = resolved(joinPath(dir, soname), std::string(dir))) return found;
  return std::nullopt;
}

// An MPI library's soname: libmpi.so.N or libmpich.so.N (one number).
bool isMpiSoname(const std::string& name) {
  const auto v = parseLibraryVersion(name);
  return mpiFamilyOf(name) != MpiFamily::Unknown && v && v->numbers.size() == 1;
}

}  // namespace

std::optional<ImageLibrary> findImageLibrary(int rootFd, const std::string& soname) {
  return findIn(rootFd, imageLdCache(rootFd), soname);
}

std::vector<ImageLibrary> findImageMpiLibraries(int rootFd) {
  const LdCache cache = imageLdCache(rootFd);
  std::vector<std::string> names;
  for (const auto& e : cache.entries)
    if (isMpiSoname(e.soname) && std::find(names.begin(), names.end(), e.soname) == names.end()) names.push_back(e.soname);
  for (std::string_view dir : kImageLibraryDirs) {
    try {
      UniqueFd fd = openInRoot(rootFd, std::string(dir), O_RDONLY | O_DIRECTORY);
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd/" + std::to_string(fd.get()), ec)) {
        const std::string name = entry.path().filename().string();
        if (isMpiSoname(name) && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
    } catch (const Error&) {
    }
  }
  std::vector<ImageLibrary> out;
  for (const auto& name : names)
    if (auto found = findIn(rootFd, cache, name)) out.push_back(std::move(*found));
  return out;
}

nlohmann::json toJson(const HostMpi& mpi) {
  auto libs = [](const std::vector<MpiLibrary>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& l : list) {
      const auto v = parseLibraryVersion(baseName(l.path));
      a.push_back({{"soname", l.soname}, {"path", l.path}, {"version", v ? versionText(*v) : ""}, {"from", l.from}});
    }
    return a;
  };
  nlohmann::json paths = nlohmann::json::array();
  for (const auto& p : mpi.paths) paths.push_back({{"path", p.path}, {"from", p.from}});
  return {{"abi", toString(mpi.family)}, {"libraries", libs(mpi.libraries)}, {"dependencies", libs(mpi.dependencies)},
          {"paths", paths}, {"skipped", mpi.skipped}, {"needs_glibc", mpi.needsGlibc},
          {"needs_glibc_library", mpi.needsGlibcLibrary}};
}

}  // namespace ctr::host
