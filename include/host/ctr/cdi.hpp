// Container Device Interface (CDI) specifications: the vendor's own statement of what a
// container needs for a device class ("nvidia.com/gpu"): device nodes, mounts, environment
// and hooks. ctr reads them from /etc/cdi and /var/run/cdi (JSON or YAML) and turns the
// edits of the requested devices into plan data; it runs no hook as root (issue 8).
// Spec format: github.com/cncf-tags/container-device-interface, SPEC.md (cdiVersion 0.3-0.8).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::host {

struct CdiDeviceNode {
  std::string path;      // in the container
  std::string hostPath;  // on the host; empty = same as path
  std::string type;      // "c", "b", ... (informative: ctr binds the host node)
  std::string permissions;
  std::string from;      // set by resolveCdiDevices: "FILE:LINE device NAME" (for --explain)
};

struct CdiMount {
  std::string hostPath;
  std::string containerPath;
  std::string type;                  // "bind" or empty
  std::vector<std::string> options;  // "ro", "nosuid", "nodev", "bind", "rbind", ...
  std::string from;                  // as CdiDeviceNode::from
};

struct CdiHook {
  std::string hookName;  // createContainer, startContainer, ...
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
};

struct CdiEdits {
  std::vector<std::string> env;  // "K=V"
  std::vector<CdiDeviceNode> deviceNodes;
  std::vector<CdiMount> mounts;
  std::vector<CdiHook> hooks;
  std::vector<std::uint32_t> additionalGids;
};

struct CdiDevice {
  std::string name;  // "0", "GPU-1b2c...", "all"
  int line = 0;      // where it is defined (YAML; 0 for JSON, whose parser gives no positions)
  CdiEdits edits;
};

struct CdiSpec {
  std::string file;     // where it was read from (for messages)
  std::string version;  // cdiVersion
  std::string kind;     // "nvidia.com/gpu"
  std::vector<CdiDevice> devices;
  CdiEdits edits;       // applied whenever any device of this spec is requested
};

// Parses one spec. `file` decides the syntax (".json": JSON, else YAML) and names the spec
// in errors: one-line ctr::Error "FILE: what is wrong".
[[nodiscard]] CdiSpec parseCdiSpec(std::string_view text, const std::string& file);

// The specs in `dirs` (*.json, *.yaml, *.yml; in each directory by name), in order of rising
// priority as CDI defines it (/etc/cdi, then /var/run/cdi). A missing directory is no error;
// a spec that cannot be read or parsed is skipped with a warning in `warnings`, as CDI
// registries do, so that one broken vendor file does not stop every container.
struct CdiRegistry {
  std::vector<CdiSpec> specs;
  std::vector<std::string> warnings;
};
[[nodiscard]] CdiRegistry loadCdiSpecs(std::span<const std::string> dirs);

// What the requested devices add to a container: the spec-wide edits of every spec used
// once, then each device's edits, in request order.
struct CdiSelection {
  std::vector<std::string> devices;  // qualified names, as resolved
  std::vector<std::string> specFiles;
  CdiEdits edits;
};

// The CDI kinds of the GPU vendors (--nv, --gpus; --rocm).
inline constexpr std::string_view kNvidiaCdiKind = "nvidia.com/gpu";
inline constexpr std::string_view kAmdCdiKind = "amd.com/gpu";

// A CDI device named by a GPU index ("0", "3"; not a UUID or "all"): that index.
[[nodiscard]] std::optional<unsigned> cdiGpuIndex(std::string_view name);

// Whether a spec of `kind` is known.
[[nodiscard]] bool hasCdiKind(const CdiRegistry& registry, std::string_view kind);

// Resolves qualified names "vendor.com/class=name" against the specs; a device of a later
// (higher-priority) spec replaces one of the same name in an earlier spec. "=all" means the
// spec's device named "all" when there is one, else every device of that kind. Throws a
// one-line ctr::Error for a malformed name, an unknown kind (naming the directories searched)
// or an unknown device (naming the devices there are).
[[nodiscard]] CdiSelection resolveCdiDevices(const CdiRegistry& registry, std::span<const std::string> names,
                                             std::span<const std::string> searchedDirs);

}  // namespace ctr::host
