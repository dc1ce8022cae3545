// The GPU driver scan for --nv and --rocm without CDI (ctr/gpu.hpp).
#include "ctr/gpu.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/configured.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/glibc_version.hpp"
#include "ctr/hash.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/install_paths.hpp"
#include "scan_files.hpp"

namespace ctr::host {
namespace {

using nlohmann::json;

GpuDriver scanUncached(const GpuScanInputs& in, const std::string& version) {
  GpuDriver driver;
  driver.vendor = in.vendor;
  driver.version = version;
  const LibraryList list = readLibraryList(in.libraryList);
  const LdCache cache = readLdCache(underRoot(in.root, in.ldCache));
  LibrarySelection selection = selectLibraries(cache, list.libraries, hostElfIdentity(), in.root);
  driver.libraries = std::move(selection.selected);
  driver.skipped = std::move(selection.skipped);
  std::optional<GlibcVersion> newest;
  for (const auto& lib : driver.libraries) {
    try {
      if (auto v = glibcNeededBy(lib.path); v && (!newest || *v > *newest)) {
        newest = v;
        driver.needsGlibcLibrary = lib.soname;
      }
    } catch (const Error& e) {
      spdlog::debug("glibc needs of {} not known: {}", lib.path, e.what());
    }
  }
  if (newest) driver.needsGlibc = toString(*newest);
  std::string searchPath = in.searchPath;
  if (in.root != "/") {
    searchPath.clear();
    for (size_t start = 0; start <= in.searchPath.size();) {
      size_t colon = in.searchPath.find(':', start);
      if (colon == std::string::npos) colon = in.searchPath.size();
      const std::string dir = in.searchPath.substr(start, colon - start);
      if (!dir.empty() && dir[0] == '/') searchPath += (searchPath.empty() ? "" : ":") + underRoot(in.root, dir);
      start = colon + 1;
    }
  }
  for (const auto& name : list.binaries) {
    std::string path = findInSearchPath(name, searchPath);
    if (path.empty()) {
      driver.skipped.push_back({name, "", "", "program not found on the host's PATH"});
      continue;
    }
    driver.binaries.emplace_back(name, path);
  }
  for (const auto& file : list.files) {
    if (::access(underRoot(in.root, file).c_str(), R_OK) == 0)
      driver.files.push_back(file);
    else
      driver.skipped.push_back({file, "", "", "file not on the host"});
  }
  if (in.vendor != GpuVendor::Nvidia) return driver;
  for (const char* socket : {"/var/run/nvidia-persistenced/socket", "/run/nvidia-persistenced/socket"}) {
    struct stat st {};
    if (::stat(underRoot(in.root, socket).c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      driver.sockets.push_back(socket);
      break;
    }
  }
  return driver;
}

json libraryJson(const SelectedLibrary& l) {
  return {{"listed", l.listed}, {"soname", l.soname}, {"path", l.path}, {"flags", l.flags}};
}
json skippedJson(const SkippedLibrary& l) {
  return {{"listed", l.listed}, {"soname", l.soname}, {"path", l.path}, {"reason", l.reason}};
}

}  // namespace

std::string nvidiaDriverVersion(const std::string& root) {
  const std::string line = readFirstLine(underRoot(root, "/proc/driver/nvidia/version"));
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." or
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build ...":
  // the first word that is two or three dot-separated numbers. Read on every --nv launch,
  // so by words, not std::regex (compiling one cost 0.09 ms of a 3 ms launch).
  auto isVersion = [](std::string_view word) {
    int parts = 0;
    for (std::size_t start = 0; start <= word.size(); ++parts) {
      std::size_t dot = word.find('.', start);
      if (dot == std::string_view::npos) dot = word.size();
      if (dot == start || !std::all_of(word.begin() + start, word.begin() + dot,
                                       [](char c) { return c >= '0' && c <= '9'; }))
        return false;
      start = dot + 1;
    }
    return parts == 2 || parts == 3;
  };
  std::string_view rest = line;
  while (!rest.empty()) {
    const std::size_t begin = rest.find_first_not_of(" \t");
    if (begin == std::string_view::npos) break;
    rest.remove_prefix(begin);
    const std::size_t end = std::min(rest.find_first_of(" \t"), rest.size());
    if (isVersion(rest.substr(0, end))) return std::string(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  return line.empty() ? "" : "unknown";
}

std::vector<std::string> nvidiaDeviceNodes(const std::string& root) {
  std::vector<std::string> nodes;
  for (const char* fixed : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia-caps"})
    if (::access(underRoot(root, fixed).c_str(), F_OK) == 0) nodes.push_back(fixed);
  std::vector<std::pair<unsigned long, std::string>> numbered;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(underRoot(root, "/dev"), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(), [](char c) { return c >= '0' && c <= '9'; }) && name.size() < 16)
      numbered.emplace_back(std::stoul(name.substr(6)), "/dev/" + name);
  }
  std::sort(numbered.begin(), numbered.end());
  for (auto& [n, path] : numbered) nodes.push_back(std::move(path));
  return nodes;
}

std::string hostPath(const GpuDriver& driver, const std::string& path) { return underRoot(driver.root, path); }

std::optional<unsigned> nvidiaGpuIndex(const std::string& node) {
  if (node.size() <= 11 || !node.starts_with("/dev/nvidia") || !std::isdigit(static_cast<unsigned char>(node[11])))
    return std::nullopt;
  return static_cast<unsigned>(std::stoul(node.substr(11)));
}

std::string toString(GpuVendor vendor) { return vendor == GpuVendor::Nvidia ? "NVIDIA" : "AMD"; }

std::string amdDriverVersion(const std::string& root) {
  if (::access(underRoot(root, "/dev/kfd").c_str(), F_OK) != 0) return "";
  const std::string version = readFirstLine(underRoot(root, "/sys/module/amdgpu/version"));
  return version.empty() ? "in-tree" : version;
}

std::vector<std::string> amdDeviceNodes(const std::string& root) {
  std::vector<std::string> nodes;
  for (const char* node : {"/dev/kfd", "/dev/dri"})
    if (::access(underRoot(root, node).c_str(), F_OK) == 0) nodes.push_back(node);
  return nodes;
}

std::string scanCachePath(const GpuScanInputs& in, const std::string& version) {
  if (in.cacheDir.empty()) return "";
  const std::string key = toString(in.vendor) + "|" + fileIdentity(underRoot(in.root, in.ldCache)) + "|" + version + "|" +
                          fileIdentity(in.libraryList) + "|" + in.searchPath + "|" + in.root + "|" + configured::kVersion;
  return joinPath(in.cacheDir, fmt::format("{}-scan-{:016x}.json", in.vendor == GpuVendor::Nvidia ? "nvidia" : "amd",
                                           fnv1a64(key)));
}

GpuDriver scanGpuDriver(const GpuScanInputs& in) {
  const bool nvidia = in.vendor == GpuVendor::Nvidia;
  const std::string version = nvidia ? nvidiaDriverVersion(in.root) : amdDriverVersion(in.root);
  if (version.empty())
    throw Error(nvidia ? "no NVIDIA driver on this host (" + underRoot(in.root, "/proc/driver/nvidia/version") +
                             " is missing: the nvidia kernel module is not loaded)"
                       : "no AMD GPU driver on this host (" + underRoot(in.root, "/dev/kfd") +
                             " is missing: the amdgpu kernel module is not loaded)");
  GpuDriver driver;
  const std::string cachePath = scanCachePath(in, version);
  if (!cachePath.empty()) {
    if (std::string text = readFileIfPresent(cachePath); !text.empty()) {
      if (auto cached = gpuDriverFromJson(text); cached && cached->vendor == in.vendor) {
        driver = std::move(*cached);
        driver.fromCache = true;
      } else {
        spdlog::debug("driver scan cache {} unusable: scanning again", cachePath);
      }
    }
  }
  if (!driver.fromCache) {
    driver = scanUncached(in, version);
    if (!cachePath.empty()) {
      try {
        writeScanCache(cachePath, toJson(driver).dump(), "the driver scan cache");
      } catch (const Error& e) {
        spdlog::debug("{} (the scan is not cached)", e.what());
      }
    }
  }
  driver.devices = nvidia ? nvidiaDeviceNodes(in.root) : amdDeviceNodes(in.root);
  driver.root = in.root;
  return driver;
}

json toJson(const GpuDriver& d) {
  json libraries = json::array(), skipped = json::array(), binaries = json::array();
  for (const auto& l : d.libraries) libraries.push_back(libraryJson(l));
  for (const auto& l : d.skipped) skipped.push_back(skippedJson(l));
  for (const auto& [name, path] : d.binaries) binaries.push_back({{"name", name}, {"path", path}});
  return {{"vendor", toString(d.vendor)}, {"version", d.version},   {"libraries", libraries}, {"skipped", skipped}, {"binaries", binaries},
          {"files", d.files},       {"sockets", d.sockets}, {"needs_glibc", d.needsGlibc}, {"needs_glibc_library", d.needsGlibcLibrary},   {"devices", d.devices}, {"from_cache", d.fromCache}};
}

namespace {

// Reads the scan cache (toJson's object) straight into a GpuDriver as nlohmann's parser
// walks it, with no DOM: every --nv launch reads it, and the DOM of 60 libraries cost
// 0.08 ms to build and convert, this about half. (CBOR would read in 0.02 ms, but
// nlohmann's binary reader calls ldexp, which made every launch load libm.) Depth 1 is the top object, 2 its arrays,
// 3 the records in them (a library, a skipped one, a program).
class GpuDriverReader final : public nlohmann::json_sax<json> {
 public:
  explicit GpuDriverReader(GpuDriver& driver) : d_(driver) {}

  bool key(string_t& name) override {
    (depth_ == 1 ? top_ : field_) = std::move(name);
    return true;
  }
  bool start_object(std::size_t) override {
    if (++depth_ != 3) return depth_ == 1;
    if (top_ == "libraries") d_.libraries.emplace_back();
    else if (top_ == "skipped") d_.skipped.emplace_back();
    else if (top_ == "binaries") d_.binaries.emplace_back();
    else return false;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return ++depth_ == 2; }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool string(string_t& value) override {
    std::string* into = depth_ == 1 ? topString() : depth_ == 2 ? listEntry() : recordField();
    if (into) *into = std::move(value);
    return true;  // a field this ctr does not read: skipped
  }
  bool number_unsigned(number_unsigned_t value) override {
    return number_integer(static_cast<number_integer_t>(value));
  }
  bool number_integer(number_integer_t value) override {
    if (depth_ == 3 && top_ == "libraries" && field_ == "flags") d_.libraries.back().flags = static_cast<std::int32_t>(value);
    return true;
  }
  bool boolean(bool) override { return true; }  // from_cache: the reader sets it
  bool null() override { return false; }
  bool number_float(number_float_t, const string_t&) override { return false; }
  bool binary(binary_t&) override { return false; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::string* topString() {
    if (top_ == "vendor") return &vendor;
    if (top_ == "version") return &d_.version;
    if (top_ == "needs_glibc") return &d_.needsGlibc;
    if (top_ == "needs_glibc_library") return &d_.needsGlibcLibrary;
    return nullptr;
  }
  std::string* listEntry() {
    auto* list = top_ == "files" ? &d_.files : top_ == "sockets" ? &d_.sockets : nullptr;
    return list ? &list->emplace_back() : nullptr;
  }
  std::string* recordField() {
    if (top_ == "libraries" || top_ == "skipped") {
      auto pick = [this](auto& r) -> std::string* {
        return field_ == "listed" ? &r.listed : field_ == "soname" ? &r.soname : field_ == "path" ? &r.path : nullptr;
      };
      if (top_ == "libraries") return pick(d_.libraries.back());
      if (field_ == "reason") return &d_.skipped.back().reason;
      return pick(d_.skipped.back());
    }
    if (top_ == "binaries") return field_ == "name" ? &d_.binaries.back().first : field_ == "path" ? &d_.binaries.back().second : nullptr;
    return nullptr;
  }

  GpuDriver& d_;
  int depth_ = 0;
  std::string top_, field_;

 public:
  std::string vendor;
};

}  // namespace

std::optional<GpuDriver> gpuDriverFromJson(std::string_view text) {
  GpuDriver driver;
  GpuDriverReader reader(driver);
  if (!json::sax_parse(text.begin(), text.end(), &reader) ||
      (reader.vendor != "NVIDIA" && reader.vendor != "AMD") || driver.version.empty())
    return std::nullopt;
  driver.vendor = reader.vendor == "AMD" ? GpuVendor::Amd : GpuVendor::Nvidia;
  // A record without the fields a launch binds: not a scan of this ctr.
  for (const auto& l : driver.libraries)
    if (l.path.empty() || l.soname.empty()) return std::nullopt;
  for (const auto& [name, path] : driver.binaries)
    if (name.empty() || path.empty()) return std::nullopt;
  return driver;
}

}  // namespace ctr::host
