// ctr check --host: the node's inventory from /proc and /sys (ctr/inventory.hpp).
#include "ctr/inventory.hpp"
#include "ctr/mpi.hpp"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ctr/cdi.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/gpu.hpp"
#include "ctr/ldcache.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/strings.hpp"
#include "scan_files.hpp"

namespace ctr::host {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<std::string> sortedEntries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// "Key:   value" lines (/proc/driver/nvidia/gpus/*/information, /proc/meminfo).
std::string field(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon != std::string::npos && trim(std::string_view(line).substr(0, colon)) == key)
      return std::string(trim(std::string_view(line).substr(colon + 1)));
  }
  return {};
}

json numaOf(const std::string& sysDeviceDir) {
  const std::string node = readFirstLine(sysDeviceDir + "/numa_node");
  if (node.empty()) return nullptr;
  try {
    const int n = std::stoi(node);
    return n < 0 ? json(nullptr) : json(n);  // -1: the platform does not say
  } catch (const std::exception&) {
    return nullptr;
  }
}

json memoryTotal(const std::string& root) {
  const std::string kb = field(readFileIfPresent(underRoot(root, "/proc/meminfo")), "MemTotal");
  try {
    return kb.empty() ? json(nullptr) : json(std::stoull(kb) * 1024);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// The CUDA driver API version libcuda reports (12040 = 12.4), without cuInit.
json cudaDriverApiVersion() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  json out = nullptr;
  using GetVersion = int (*)(int*);
  if (auto get = reinterpret_cast<GetVersion>(::dlsym(lib, "cuDriverGetVersion"))) {
    int version = 0;
    if (get(&version) == 0) out = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  }
  ::dlclose(lib);
  return out;
}

json nvidiaInventory(const config::Policy& policy, const std::string& root) {
  const std::string version = nvidiaDriverVersion(root);
  json gpus = json::array();
  const std::string gpuDir = underRoot(root, "/proc/driver/nvidia/gpus");
  for (const auto& bus : sortedEntries(gpuDir)) {
    const std::string info = readFileIfPresent(gpuDir + "/" + bus + "/information");
    gpus.push_back({{"model", field(info, "Model")},
                    {"uuid", field(info, "GPU UUID")},
                    {"bus", bus},
                    {"minor", field(info, "Device Minor")},
                    {"numa_node", numaOf(underRoot(root, "/sys/bus/pci/devices/" + bus))}});
  }
  const CdiRegistry cdi = loadCdiSpecs(policy.cdiSpecDirs);
  std::string source;
  for (const auto& spec : cdi.specs)
    if (spec.kind == "nvidia.com/gpu") source = "CDI (" + spec.file + ")";
  if (source.empty()) source = version.empty() ? "none" : "ld.so cache";
  return {{"driver", version.empty() ? json(nullptr) : json(version)},
          {"cuda_driver_api", version.empty() ? json(nullptr) : cudaDriverApiVersion()},
          {"gpus", gpus},
          {"devices", nvidiaDeviceNodes(root)},
          {"source", source},
          {"cdi_warnings", cdi.warnings}};
}

// AMD: /dev/kfd, and each KFD topology node with a GPU (gfx_target_version non-zero).
json amdInventory(const std::string& root) {
  json gpus = json::array();
  const std::string nodes = underRoot(root, "/sys/class/kfd/kfd/topology/nodes");
  for (const auto& node : sortedEntries(nodes)) {
    const std::string props = readFileIfPresent(nodes + "/" + node + "/properties");
    std::istringstream in(props);
    std::string gfx, domain, location;
    for (std::string key, value; in >> key >> value;) {
      if (key == "gfx_target_version") gfx = value;
      if (key == "location_id") location = value;
      if (key == "domain") domain = value;
    }
    if (gfx.empty() || gfx == "0") continue;
    gpus.push_back({{"node", node}, {"gfx_target_version", gfx}, {"location_id", location}, {"domain", domain}});
  }
  const std::string version = readFirstLine(underRoot(root, "/sys/module/amdgpu/version"));
  return {{"kfd", ::access(underRoot(root, "/dev/kfd").c_str(), F_OK) == 0},
          {"driver", version.empty() ? json(nullptr) : json(version)},
          {"gpus", gpus}};
}

json rdmaInventory(const std::string& root) {
  json devices = json::array();
  const std::string ib = underRoot(root, "/sys/class/infiniband");
  for (const auto& name : sortedEntries(ib)) {
    json ports = json::array();
    for (const auto& port : sortedEntries(ib + "/" + name + "/ports")) {
      const std::string p = ib + "/" + name + "/ports/" + port;
      ports.push_back({{"port", port},
                       {"state", readFirstLine(p + "/state")},
                       {"link_layer", readFirstLine(p + "/link_layer")},
                       {"rate", readFirstLine(p + "/rate")}});
    }
    devices.push_back({{"name", name},
                       {"node_type", readFirstLine(ib + "/" + name + "/node_type")},
                       {"ports", ports},
                       {"numa_node", numaOf(ib + "/" + name + "/device")}});
  }
  json providers = json::array();
  for (const auto& file : sortedEntries(underRoot(root, "/etc/libibverbs.d")))
    if (file.ends_with(".driver")) providers.push_back(file.substr(0, file.size() - 7));
  return {{"devices", devices},
          {"uverbs", ::access(underRoot(root, "/dev/infiniband").c_str(), F_OK) == 0},
          {"providers", providers}};
}

// MPI libraries the ld.so cache knows, by the ABI their soname promises: libmpi.so.40 is
// Open MPI 3-5; libmpi.so.12 / libmpich.so.12 the MPICH ABI (MPICH, Intel MPI, Cray MPICH).
json mpiInventory(const config::Policy& policy, const std::string& root) {
  json libraries = json::array();
  // The host MPI the admin configured for --mpi=bind ('mpi library'), resolved as a launch
  // resolves it; null when none is configured, {"error": ...} when it does not resolve.
  json configured = nullptr;
  if (!policy.mpiLibraries.empty()) {
    MpiScanInputs in;
    in.root = root;
    in.libraries = policy.mpiLibraries;
    in.dependencies = policy.mpiDependencies;
    in.paths = policy.mpiPaths;
    try {
      configured = toJson(scanHostMpi(in));
      configured["abi_check"] = policy.mpiAbiStrict ? "strict" : "relaxed";
    } catch (const Error& e) {
      configured = {{"error", e.what()}};
    }
  }
  LdCache cache;
  try {
    cache = readLdCache(underRoot(root, "/etc/ld.so.cache"));
  } catch (const Error& e) {
    return {{"libraries", libraries}, {"error", e.what()}, {"configured_host_mpi", configured}};
  }
  const ElfIdentity hostId = hostElfIdentity();
  const auto flags = ldCacheFlagsFor(hostId);
  for (const auto& e : cache.entries) {
    const bool openMpi = e.soname.starts_with("libmpi.so.") && e.soname != "libmpi.so.12";
    const bool mpich = e.soname.starts_with("libmpich.so.") || e.soname == "libmpi.so.12";
    if (!openMpi && !mpich) continue;
    if (flags && e.flags != *flags) continue;
    std::error_code ec;
    const fs::path real = fs::canonical(underRoot(root, e.path), ec);
    libraries.push_back({{"soname", e.soname},
                         {"path", e.path},
                         {"file", ec ? e.path : real.filename().string()},
                         {"abi", openMpi ? "Open MPI" : "MPICH ABI"}});
  }
  return {{"libraries", libraries}, {"configured_host_mpi", configured}};
}

}  // namespace

json hostInventory(const config::Policy& policy, const std::string& root) {
  json out;
  struct utsname u {};
  if (::uname(&u) == 0) out["kernel"] = {{"release", u.release}, {"machine", u.machine}, {"hostname", u.nodename}};
  out["cpu_model"] = field(readFileIfPresent(underRoot(root, "/proc/cpuinfo")), "model name");
  out["online_cpus"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  out["memory_total_bytes"] = memoryTotal(root);
  out["nvidia"] = nvidiaInventory(policy, root);
  out["amd"] = amdInventory(root);
  out["rdma"] = rdmaInventory(root);
  out["mpi"] = mpiInventory(policy, root);
  return out;
}

std::string describeInventory(const json& inv) {
  std::ostringstream o;
  auto str = [](const json& j) { return j.is_string() ? j.get<std::string>() : j.is_null() ? std::string("-") : j.dump(); };
  if (inv.contains("kernel"))
    o << "kernel:   " << str(inv["kernel"]["release"]) << " (" << str(inv["kernel"]["machine"]) << ")\n";
  o << "cpu:      " << str(inv["cpu_model"]) << ", " << str(inv["online_cpus"]) << " online\n";
  if (inv["memory_total_bytes"].is_number())
    o << "memory:   " << inv["memory_total_bytes"].get<std::uint64_t>() / (1024 * 1024) << " MiB (/proc/meminfo)\n";
  const json& nv = inv["nvidia"];
  o << "nvidia:   ";
  if (nv["driver"].is_null()) {
    o << "no driver loaded";
  } else {
    o << "driver " << str(nv["driver"]) << ", CUDA driver API " << str(nv["cuda_driver_api"]) << ", "
      << nv["gpus"].size() << " GPU(s), --nv source: " << str(nv["source"]);
  }
  o << '\n';
  for (const auto& g : nv["gpus"])
    o << "  " << str(g["bus"]) << ' ' << str(g["model"]) << ' ' << str(g["uuid"]) << " NUMA " << str(g["numa_node"]) << '\n';
  const json& amd = inv["amd"];
  o << "amd:      " << (amd["kfd"].get<bool>() ? "/dev/kfd present" : "no /dev/kfd") << ", " << amd["gpus"].size()
    << " GPU(s)\n";
  const json& rdma = inv["rdma"];
  o << "rdma:     " << rdma["devices"].size() << " device(s)";
  for (const auto& d : rdma["devices"]) o << ' ' << str(d["name"]);
  o << "; verbs providers configured: " << rdma["providers"].size() << '\n';
  o << "mpi:      ";
  std::string seen;
  for (const auto& l : inv["mpi"]["libraries"]) {
    const std::string s = str(l["soname"]);
    if (s.find("libmpi.so.") == 0 || s.find("libmpich.so.") == 0) seen += (seen.empty() ? "" : ", ") + s + " (" + str(l["abi"]) + ", " + str(l["file"]) + ")";
  }
  o << (seen.empty() ? "none in the ld.so cache" : seen) << "; host MPI for --mpi=bind: ";
  const json& configured = inv["mpi"].contains("configured_host_mpi") ? inv["mpi"]["configured_host_mpi"] : json();
  if (configured.is_null()) {
    o << "not configured\n";
  } else if (configured.contains("error")) {
    o << str(configured["error"]) << '\n';
  } else {
    std::string libs;
    for (const auto& l : configured["libraries"]) libs += (libs.empty() ? "" : ", ") + str(l["soname"]) + " " + str(l["version"]);
    o << str(configured["abi"]) << " (" << libs << "), " << configured["dependencies"].size() << " dependencies, ABI check "
      << str(configured["abi_check"]) << '\n';
  }
  if (inv.contains("topology")) {
    const json& t = inv["topology"];
    if (t.contains("error")) {
      o << "topology: " << str(t["error"]) << '\n';
    } else {
      o << "topology: " << str(t["packages"]) << " package(s), " << str(t["numa_nodes"]) << " NUMA node(s), "
        << str(t["cores"]) << " cores, " << str(t["pus"]) << " PUs (hwloc API " << str(t["hwloc_api"]) << ")\n";
      for (const auto& d : t["os_devices"])
        o << "  " << str(d["type"]) << ' ' << str(d["name"]) << " NUMA " << str(d["numa_nodes"]) << '\n';
    }
  }
  return o.str();
}

}  // namespace ctr::host
