// The host's GPU driver as `--nv` (NVIDIA) and `--rocm` (AMD) inject it when the host has
// no CDI specification for the vendor's GPUs: the libraries of etc/nvliblist.conf or
// etc/rocmliblist.conf picked from the ld.so cache, the driver's programs and files, its
// sockets and device nodes (issue 8). Plain data: the planner decides where each goes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ctr/ldcache.hpp"

namespace ctr::host {

enum class GpuVendor { Nvidia, Amd };

// "NVIDIA", "AMD".
[[nodiscard]] std::string toString(GpuVendor vendor);

struct GpuDriver {
  GpuVendor vendor = GpuVendor::Nvidia;
  std::string version;                      // "535.104.05"; AMD: amdgpu's module version or "in-tree"
  std::vector<SelectedLibrary> libraries;   // host files, one per soname
  std::vector<SkippedLibrary> skipped;      // listed but not injected, with why
  std::vector<std::pair<std::string, std::string>> binaries;  // name, host path
  std::vector<std::string> files;           // listed absolute files that exist (ICD json)
  std::vector<std::string> sockets;         // nvidia-persistenced's, when it runs
  std::string needsGlibc;                   // the highest GLIBC_x.y a library needs ("2.34")
  std::string needsGlibcLibrary;            // ... which library
  std::vector<std::string> devices;         // /dev/nvidiactl, /dev/nvidia0 / /dev/kfd, /dev/dri (not cached)
  bool fromCache = false;                   // the scan was read from the state directory
  // Where the node's files are: "/" on a node; a fixture tree in tests and benchmarks
  // (CTR_HOST_ROOT). Libraries and programs above are already under it; files, sockets and
  // devices are the paths the container sees, found on the host at hostPath().
  std::string root = "/";
};

// The GPU index of /dev/nvidiaN (not of nvidiactl, nvidia-uvm, ...).
[[nodiscard]] std::optional<unsigned> nvidiaGpuIndex(const std::string& node);

// `path` (a file, socket or device of `driver`) on the host.
[[nodiscard]] std::string hostPath(const GpuDriver& driver, const std::string& path);

// Where a scan looks. Tests point `root` at a fixture tree; everything else is under it.
struct GpuScanInputs {
  GpuVendor vendor = GpuVendor::Nvidia;
  std::string root = "/";
  std::string ldCache = "/etc/ld.so.cache";
  std::string libraryList;  // etc/nvliblist.conf or etc/rocmliblist.conf of the install
  std::string searchPath;   // the host's PATH, for the programs
  std::string cacheDir;     // the user's state directory; empty = no cache
};

// The driver version from /proc/driver/nvidia/version under `root`; "" when the driver is
// not loaded (no such file).
[[nodiscard]] std::string nvidiaDriverVersion(const std::string& root = "/");

// The device nodes of the driver under root/dev: nvidiactl, nvidia-uvm, nvidia-uvm-tools,
// nvidia-modeset, /dev/nvidia-caps, and /dev/nvidiaN in N order.
[[nodiscard]] std::vector<std::string> nvidiaDeviceNodes(const std::string& root = "/");

// The AMD driver's version: amdgpu's module version when it is a DKMS build, "in-tree" for
// the kernel's own amdgpu; "" when there is no /dev/kfd under `root`.
[[nodiscard]] std::string amdDriverVersion(const std::string& root = "/");

// /dev/kfd and /dev/dri under root, where present.
[[nodiscard]] std::vector<std::string> amdDeviceNodes(const std::string& root = "/");

// Scans the host. Throws a one-line ctr::Error when the driver is not loaded ("no NVIDIA
// driver on this host: ...") or the list or cache cannot be read. With `cacheDir`, the scan
// (all but the device nodes) is kept there, keyed by the ld.so cache's identity (device,
// inode, size, mtime), the driver version, the list file's identity and the search path, so
// that the next launch on the node reads one file instead of scanning.
[[nodiscard]] GpuDriver scanGpuDriver(const GpuScanInputs& inputs);

// The file in inputs.cacheDir that keeps the scan of the driver `version` (the driver's
// version as read from the node); "" without a cacheDir.
[[nodiscard]] std::string scanCachePath(const GpuScanInputs& inputs, const std::string& version);

[[nodiscard]] nlohmann::json toJson(const GpuDriver& driver);
// The scan cache's record: toJson's object, read without a DOM. nullopt for text that is
// not one (damaged, cut short, another ctr's): scan again. `devices`, `fromCache` and
// `root` are the caller's to set.
[[nodiscard]] std::optional<GpuDriver> gpuDriverFromJson(std::string_view text);

}  // namespace ctr::host
