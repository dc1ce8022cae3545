#include <fcntl.h>

#include <cstdlib>
#include <cstdint>
#include <functional>
#include <sstream>
#include <map>

#include "ctr/strings.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::config {
namespace {

bool parseBool(const std::string& value) {
  if (value == "yes" || value == "true" || value == "1") return true;
  if (value == "no" || value == "false" || value == "0") return false;
  throw Error("expected yes or no, got '" + value + "'");
}

std::vector<std::string> parseList(const std::string& value) {
  const auto items = splitList(value);
  return {items.begin(), items.end()};
}

std::vector<std::string> parseAbsolutePaths(const std::string& value) {
  auto paths = parseList(value);
  for (const auto& p : paths) {
    if (p.empty() || p[0] != '/') throw Error("'" + p + "' is not an absolute path");
  }
  return paths;
}

// One absolute path, or empty for "the default".
std::string parseOptionalPath(const std::string& value) {
  if (!value.empty() && value[0] != '/') throw Error("'" + value + "' is not an absolute path");
  return value;
}

int parsePositiveInt(const std::string& value) {
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < 1 || n > 1 << 20) {
    throw Error("expected a whole number from 1 to 1048576, got '" + value + "'");
  }
  return static_cast<int>(n);
}

// "2", "0.5", "0": seconds, at most an hour; returned in milliseconds.
std::uint32_t parseLingerMs(const std::string& value) {
  size_t used = 0;
  double seconds = -1;
  try {
    seconds = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || !(seconds >= 0 && seconds <= 3600))
    throw Error("expected seconds from 0 to 3600 (e.g. 5 or 0.5), got '" + value + "'");
  return static_cast<std::uint32_t>(seconds * 1000 + 0.5);
}

// One of `choices` by its name; else "expected A, B or C, got 'V'".
template <typename T>
T parseChoice(const std::string& value, std::initializer_list<std::pair<std::string_view, T>> choices) {
  std::string names;
  std::size_t i = 0;
  for (const auto& [name, result] : choices) {
    if (value == name) return result;
    if (i > 0) names += i + 1 == choices.size() ? " or " : ", ";
    names += name;
    ++i;
  }
  throw Error("expected " + names + ", got '" + value + "'");
}

// Sonames or absolute paths ('mpi library', 'mpi dependency').
std::vector<std::string> parseLibraries(const std::string& value) {
  auto libraries = parseList(value);
  for (const auto& l : libraries)
    if (l.find('/') != std::string::npos && l[0] != '/') throw Error("'" + l + "' is neither a soname nor an absolute path");
  return libraries;
}

// 'registry mirror = REGISTRY = [http[s]://]HOST[:PORT][/PATH] [only]'
RegistryMirror parseMirror(const std::string& value) {
  const std::string shape = "expected REGISTRY = [https://]HOST[:PORT][/PATH] [only], got '" + value + "'";
  const auto eq = value.find('=');
  if (eq == std::string::npos) throw Error(shape);
  RegistryMirror mirror;
  mirror.registry = std::string(trim(std::string_view(value).substr(0, eq)));
  std::istringstream words(value.substr(eq + 1));
  words >> mirror.location;
  for (std::string word; words >> word;) {
    if (word != "only" || mirror.only) throw Error(shape);
    mirror.only = true;
  }
  if (mirror.registry.empty() || mirror.registry.find_first_of("/@ \t") != std::string::npos ||
      mirror.location.empty())
    throw Error(shape);
  std::string_view rest = mirror.location;
  if (rest.starts_with("https://")) rest.remove_prefix(8);
  else if (rest.starts_with("http://")) rest.remove_prefix(7);
  else if (rest.find("://") != std::string_view::npos)
    throw Error("'" + mirror.location + "': a mirror is reached over http:// or https://");
  if (rest.empty() || rest[0] == '/' || rest.find_first_of("@?#") != std::string_view::npos) throw Error(shape);
  return mirror;
}

using Setter = std::function<void(Policy&, const std::string&)>;
using SetterTable = std::map<std::string, Setter, std::less<>>;

// The keys of registry images: pulls, the image cache, the site store, mirrors.
SetterTable pullSetters() {
  return {
      {"pull max blob size", [](Policy& p, const std::string& v) { p.pull.maxBlobBytes = limits::parseSize(v, "size"); }},
      {"pull max total size", [](Policy& p, const std::string& v) { p.pull.maxTotalBytes = limits::parseSize(v, "size"); }},
      {"pull max unpacked size",
       [](Policy& p, const std::string& v) { p.pull.maxUnpackedBytes = limits::parseSize(v, "size"); }},
      {"image cache dir",
       [](Policy& p, const std::string& v) {
         if (!v.empty() && v[0] != '/') throw Error("expected an absolute path, got '" + v + "'");
         p.pull.cacheDir = v;
       }},
      {"image cache max size", [](Policy& p, const std::string& v) { p.pull.cacheMaxBytes = limits::parseSize(v, "size"); }},
      {"registry mirror", [](Policy& p, const std::string& v) { p.pull.mirrors.push_back(parseMirror(v)); }},
      {"pull token realm hosts",
       [](Policy& p, const std::string& v) {
         auto hosts = parseList(v);
         for (const auto& h : hosts) {
           // A host name, an IPv4 address or [IPv6], with an optional :port; no scheme or path.
           if (h.find_first_of("/@?# \t") != std::string::npos)
             throw Error("'" + h + "' is not a host or host:port (no scheme, user or path)");
         }
         p.pull.tokenRealmHosts = hosts;
       }},
      {"image store dir",
       [](Policy& p, const std::string& v) {
         if (!v.empty() && v[0] != '/') throw Error("expected an absolute path, got '" + v + "'");
         if (v.find("%u") != std::string::npos) throw Error("the store is one directory for every user: no %u");
         p.pull.storeDir = v;
       }},
      {"lazy images",
       [](Policy& p, const std::string& v) {
         p.pull.lazyImages = parseChoice<LazyImages>(
             v, {{"no", LazyImages::No}, {"registry", LazyImages::Registry}, {"all", LazyImages::All}});
       }},
      {"lazy cache dir",
       [](Policy& p, const std::string& v) {
         if (v.empty() || v[0] != '/') throw Error("expected an absolute path, got '" + v + "'");
         (void)expandUidPattern(v, 0, "'lazy cache dir'");  // an unknown %X is refused here, not at a launch
         p.pull.lazyCacheDir = v;
       }},
      // on|off too: the words issue 57 gave the setting.
      {"lazy prefetch",
       [](Policy& p, const std::string& v) {
         p.pull.lazyPrefetch = v == "on" || (v != "off" && parseBool(v));
       }},
      {"lazy cache max size",
       [](Policy& p, const std::string& v) { p.pull.lazyCacheMaxBytes = limits::parseSize(v, "size"); }},
      {"lazy unverified",
       [](Policy& p, const std::string& v) {
         p.pull.lazyUnverified = parseChoice<bool>(v, {{"refuse", false}, {"allow", true}});
       }},
      {"image store copy",
       [](Policy& p, const std::string& v) {
         p.pull.storeCopy = parseChoice<StoreCopy>(
             v, {{"never", StoreCopy::Never}, {"always", StoreCopy::Always}, {"auto", StoreCopy::Auto}});
       }},
      {"image store wait",
       [](Policy& p, const std::string& v) {
         p.pull.storeWaitSeconds = parsePositiveInt(v);
       }},
  };
}

std::string absoluteFile(const std::string& v) {
  if (v.empty() || v[0] != '/') throw Error("expected an absolute path, got '" + v + "'");
  return v;
}

SetterTable executionSetters() {
  return {
      {"execution rule",
       [](Policy& p, const std::string& v) {
         // "[DIR] MODE": the mode is the last word, a DIR (which may hold spaces) before it.
         const auto space = v.find_last_of(" \t");
         ExecutionRule rule;
         rule.mode = parseChoice<ExecutionMode>(space == std::string::npos ? v : v.substr(space + 1),
                                                {{"off", ExecutionMode::Off},
                                                 {"whitelist", ExecutionMode::Whitelist},
                                                 {"whitestrict", ExecutionMode::Whitestrict},
                                                 {"blacklist", ExecutionMode::Blacklist}});
         if (space != std::string::npos) {
           rule.dir = absoluteFile(std::string(trim(std::string_view(v).substr(0, space))));
           while (rule.dir.size() > 1 && rule.dir.back() == '/') rule.dir.pop_back();
         }
         for (const auto& r : p.execution.rules)
           if (r.dir == rule.dir) throw Error("a second rule for " + (rule.dir.empty() ? "every image" : rule.dir));
         p.execution.rules.push_back(rule);
       }},
      {"trusted key", [](Policy& p, const std::string& v) { p.execution.trustedKeys.push_back(absoluteFile(v)); }},
      {"blacklisted key", [](Policy& p, const std::string& v) { p.execution.blacklistedKeys.push_back(absoluteFile(v)); }},
  };
}

// The keys of the images ctr fetches and runs: pull limits, the cache and store, execution control.
SetterTable imageSetters() {
  SetterTable table = pullSetters();
  table.merge(executionSetters());
  return table;
}

const SetterTable& setters() {
  static const SetterTable table = [] {
    SetterTable all = imageSetters();
    all.merge(SetterTable{
      {"allow setuid", [](Policy& p, const std::string& v) { p.allowSetuid = parseBool(v); }},
      {"allow user namespaces",
       [](Policy& p, const std::string& v) { p.allowUserNamespaces = parseBool(v); }},
      {"allow user binds",
       [](Policy& p, const std::string& v) { p.allowUserBinds = parseBool(v); }},
      {"image driver",
       [](Policy& p, const std::string& v) {
         p.imageDriver = parseChoice<ImageDriver>(
             v, {{"auto", ImageDriver::Auto}, {"setuid", ImageDriver::Setuid}, {"squashfuse", ImageDriver::Squashfuse}});
       }},
      {"squashfs server",
       [](Policy& p, const std::string& v) {
         p.squashfsServer = parseChoice<SquashfsServer>(v, {{"auto", SquashfsServer::Auto},
                                                            {"ctr-squashfs", SquashfsServer::CtrSquashfs},
                                                            {"squashfuse", SquashfsServer::Squashfuse}});
       }},
      {"stage dir",
       [](Policy& p, const std::string& v) {
         if (v.empty() || v[0] != '/') throw Error("expected an absolute path, got '" + v + "'");
         (void)expandUidPattern(v, 0, "'stage dir'");  // an unknown %X is refused here, not at a launch
         p.stageDir = v;
       }},
      {"stage images",
       [](Policy& p, const std::string& v) {
         p.stageImages = parseChoice<StageImages>(
             v, {{"never", StageImages::Never}, {"auto", StageImages::Auto}, {"always", StageImages::Always}});
       }},
      {"stage max size", [](Policy& p, const std::string& v) { p.stageMaxBytes = limits::parseSize(v, "size"); }},
      {"setuid image directories",
       [](Policy& p, const std::string& v) { p.setuidImageDirectories = parseAbsolutePaths(v); }},
      {"setuid image owners",
       [](Policy& p, const std::string& v) { p.setuidImageOwners = parseList(v); }},
      {"setuid formats",
       [](Policy& p, const std::string& v) {
         auto formats = parseList(v);
         for (const auto& f : formats) {
           if (f != "sif" && f != "squashfs") throw Error("unknown format '" + f + "' (sif, squashfs)");
         }
         p.setuidFormats = formats;
       }},
      {"image linger",
       [](Policy& p, const std::string& v) { p.imageLingerMs = parseLingerMs(v); }},
      {"max loop devices",
       [](Policy& p, const std::string& v) { p.maxLoopDevices = parsePositiveInt(v); }},
      {"max loop devices total",
       [](Policy& p, const std::string& v) { p.maxLoopDevicesTotal = parsePositiveInt(v); }},
      // Repeatable: each line adds binds, as admins list one per line.
      {"bind path",
       [](Policy& p, const std::string& v) {
         for (auto& b : parseList(v)) {
           if (b[0] != '/') throw Error("bind source '" + b + "' is not an absolute path");
           p.defaultBinds.push_back(b);
         }
       }},
      {"max cpus", [](Policy& p, const std::string& v) { p.limitCaps.cpus = limits::parseCpus(v, "value"); }},
      {"max memory", [](Policy& p, const std::string& v) { p.limitCaps.memory = limits::parseSize(v, "size"); }},
      {"refuse overcommit", [](Policy& p, const std::string& v) { p.refuseOvercommit = parseBool(v); }},
      {"max pids", [](Policy& p, const std::string& v) { p.limitCaps.pids = parsePositiveInt(v); }},
      {"max gpus", [](Policy& p, const std::string& v) { p.limitCaps.gpus = parsePositiveInt(v); }},
      {"cgroup delegate", [](Policy& p, const std::string& v) { p.cgroupDelegate = parseOptionalPath(v); }},
      {"cdi spec dirs", [](Policy& p, const std::string& v) { p.cdiSpecDirs = parseAbsolutePaths(v); }},
      {"missing gpu driver",
       [](Policy& p, const std::string& v) {
         p.missingGpuDriverIsError = parseChoice<bool>(v, {{"error", true}, {"warn", false}});
       }},
      {"mpi library",
       [](Policy& p, const std::string& v) {
         for (auto& l : parseLibraries(v)) p.mpiLibraries.push_back(l);
       }},
      {"mpi dependency",
       [](Policy& p, const std::string& v) {
         for (auto& l : parseLibraries(v)) p.mpiDependencies.push_back(l);
       }},
      {"mpi path",
       [](Policy& p, const std::string& v) {
         for (auto& path : parseAbsolutePaths(v)) p.mpiPaths.push_back(path);
       }},
      {"mpi abi check",
       [](Policy& p, const std::string& v) { p.mpiAbiStrict = parseChoice<bool>(v, {{"strict", true}, {"relaxed", false}}); }},
      {"root kernel interfaces",
       [](Policy& p, const std::string& v) {
         p.rootKernelInterfacesReadOnly = parseChoice<bool>(v, {{"read-only", true}, {"writable", false}});
       }},
      {"nvidia library list", [](Policy& p, const std::string& v) { p.nvidiaLibraryList = parseOptionalPath(v); }},
      {"rdma with contain", [](Policy& p, const std::string& v) { p.rdmaWithContain = parseBool(v); }},
      {"rocm library list", [](Policy& p, const std::string& v) { p.rocmLibraryList = parseOptionalPath(v); }},
      {"seccomp profile", [](Policy& p, const std::string& v) { p.seccompProfile = parseOptionalPath(v); }},
    });
    return all;
  }();
  return table;
}

}  // namespace

std::vector<std::string> knownKeys() {
  std::vector<std::string> keys;
  for (const auto& [key, setter] : setters()) keys.push_back(key);
  return keys;
}

Policy parsePolicy(std::string_view text, const std::string& fileName) {
  Policy policy;
  for (const ConfigLine& line : configLines(text)) {
    auto where = fileName + ":" + std::to_string(line.number);
    if (!line.hasEquals) throw Error(where + ": expected 'key = value', got '" + std::string(line.text) + "'");
    auto it = setters().find(line.key);
    if (it == setters().end()) throw Error(where + ": unknown key '" + std::string(line.key) + "'");
    try {
      it->second(policy, std::string(line.value));
    } catch (const Error& e) {
      throw Error(where + ": " + std::string(line.key) + ": " + e.what());
    }
  }
  return policy;
}

Policy loadPolicy(const std::filesystem::path& path) {
  // $CTR_CONFIG names any file the user likes: a FIFO or /dev/zero is refused, not read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      Policy defaults;
      defaults.pull.configFile = path.string();  // where the pull limits' messages send the admin
      return defaults;
    }
    throw sysError("cannot read " + path.string());
  }
  Policy policy = parsePolicy(readCheckedFile(fd.get(), 1u << 20, path.string()), path.string());
  policy.source = path;
  policy.pull.configFile = path.string();
  return policy;
}

Policy loadDefaultPolicy() {
  if (const char* override = std::getenv("CTR_CONFIG"); override && *override) {
    return loadPolicy(override);
  }
  return loadPolicy(sysconfPath());
}

std::string_view toString(ImageDriver driver) {
  switch (driver) {
    case ImageDriver::Auto: return "auto";
    case ImageDriver::Setuid: return "setuid";
    case ImageDriver::Squashfuse: return "squashfuse";
  }
  return "auto";
}

std::string_view toString(SquashfsServer server) {
  switch (server) {
    case SquashfsServer::Auto: return "auto";
    case SquashfsServer::CtrSquashfs: return "ctr-squashfs";
    case SquashfsServer::Squashfuse: return "squashfuse";
  }
  return "auto";
}

std::string_view toString(ExecutionMode mode) {
  switch (mode) {
    case ExecutionMode::Off: return "off";
    case ExecutionMode::Whitelist: return "whitelist";
    case ExecutionMode::Whitestrict: return "whitestrict";
    case ExecutionMode::Blacklist: return "blacklist";
  }
  return "off";
}

const ExecutionRule* executionRuleFor(const ExecutionControl& control, std::string_view realPath) {
  const ExecutionRule* best = nullptr;
  for (const auto& r : control.rules) {
    const bool under = r.dir.empty() || r.dir == "/" ||
                       (realPath.starts_with(r.dir) && (realPath.size() == r.dir.size() || realPath[r.dir.size()] == '/'));
    if (under && (!best || r.dir.size() > best->dir.size())) best = &r;
  }
  return best && best->mode != ExecutionMode::Off ? best : nullptr;
}

std::string_view toString(StageImages stage) {
  switch (stage) {
    case StageImages::Never: return "never";
    case StageImages::Auto: return "auto";
    case StageImages::Always: return "always";
  }
  return "never";
}

}  // namespace ctr::config
