// --explain: the plan as text (toText) and JSON (toJson), and the names of its enums.
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ctr/launch.hpp"
#include "ctr/limits.hpp"

namespace ctr::launch {

namespace {

std::string holderScopeText(const HolderScope& scope) {
  std::string text;
  if (!scope.freezer.empty()) text = "freezer " + scope.freezer;
  if (!scope.unified.empty()) text += (text.empty() ? "v2 " : ", v2 ") + scope.unified;
  return text.empty() ? "none known" : text;
}

std::string limitsText(const limits::Request& r) {
  std::vector<std::string> parts;
  char buf[64];
  if (r.cpus) {
    std::snprintf(buf, sizeof buf, "cpus %g", *r.cpus);
    parts.emplace_back(buf);
  }
  if (!r.cpusetCpus.empty()) parts.push_back("cpuset-cpus " + r.cpusetCpus);
  if (!r.cpusetMems.empty()) parts.push_back("cpuset-mems " + r.cpusetMems);
  if (r.memory) parts.push_back("memory " + limits::formatSize(*r.memory));
  if (r.memorySwap)
    parts.push_back("memory+swap " + (*r.memorySwap < 0 ? std::string("unlimited")
                                                        : limits::formatSize(static_cast<std::uint64_t>(*r.memorySwap))));
  if (r.pids) parts.push_back("pids " + std::to_string(*r.pids));
  if (r.blkioWeight) parts.push_back("blkio-weight " + std::to_string(*r.blkioWeight));
  if (parts.empty()) return "none";
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : ", ") + p;
  return text;
}

std::vector<std::string> namespaceLines(const Namespaces& ns) {
  std::vector<std::string> lines;
  if (ns.sharedUser) lines.emplace_back("user (shared by the user's launches of this image)");
  if (ns.ownMount) lines.emplace_back("mount (the holder's ready one if the prepared root is exactly this root, else an own copy)");
  if (ns.pid)
    lines.emplace_back(!ns.pidInit ? "pid (own: the app is PID 1, no init: --no-init; it gets only the signals it "
                                     "handles and reaps what it leaves)"
                       : ns.signalAll ? "pid (own: ctr's init is PID 1, the app PID 2; signals go to every process)"
                                      : "pid (own: ctr's init is PID 1, the app PID 2)");
  if (ns.ipc) lines.emplace_back("ipc (own)");
  if (ns.uts) lines.emplace_back("uts (own" + (ns.hostname.empty() ? std::string(")") : ", hostname " + ns.hostname + ")"));
  if (ns.net) lines.emplace_back("network (own: loopback only)");
  std::string host;
  for (const auto& [own, name] : {std::pair{ns.net, "network"}, {ns.ipc, "ipc"}, {ns.pid, "pid"}, {ns.uts, "uts"}})
    if (!own) host += std::string(host.empty() ? "" : ", ") + name;
  if (!host.empty()) lines.push_back("host " + host);
  return lines;
}


}  // namespace

std::string toString(Command command) {
  switch (command) {
    case Command::Exec: return "exec";
    case Command::Run: return "run";
    case Command::Shell: return "shell";
    case Command::Test: return "test";
    case Command::Instance: return "instance start";
  }
  return "?";
}

std::string toString(ImageDriver driver) {
  switch (driver) {
    case ImageDriver::Directory: return "directory";
    case ImageDriver::Squashfuse: return "squashfuse";
    case ImageDriver::SetuidHelper: return "setuid-helper";
  }
  return "?";
}

std::string toString(MountKind kind) {
  switch (kind) {
    case MountKind::Bind: return "bind";
    case MountKind::Tmpfs: return "tmpfs";
    case MountKind::File: return "file";
    case MountKind::Identity: return "identity";
    case MountKind::Proc: return "proc";
    case MountKind::Symlink: return "symlink";
    case MountKind::Sysfs: return "sysfs";
  }
  return "?";
}

std::string toString(MountOrigin origin) {
  switch (origin) {
    case MountOrigin::Default: return "default";
    case MountOrigin::Cwd: return "cwd";
    case MountOrigin::Contain: return "contain";
    case MountOrigin::Policy: return "policy";
    case MountOrigin::User: return "user";
    case MountOrigin::Identity: return "identity";
    case MountOrigin::Host: return "host";
  }
  return "?";
}

std::string toString(RootMode mode) {
  switch (mode) {
    case RootMode::Bind:
      return "image (read-only; a missing mount target is made in a tmpfs over the deepest directory the image "
             "has on its path, with that directory's entries bound in, up to " +
             std::to_string(kUnderlayMaxEntries) + "; else an overlay of that directory)";
    case RootMode::Overlay: return "overlay (layers over the image)";
    case RootMode::Sandbox: return "sandbox (the build's writable directory)";
    case RootMode::Writable: return "the image directory itself, read-write (--writable; missing mount targets are made in it)";
    case RootMode::Join: return "the running instance's (its mount namespace entered)";
  }
  return "?";
}

nlohmann::json toJson(const limits::Request& r) {
  nlohmann::json j = nlohmann::json::object();
  if (r.cpus) j["cpus"] = *r.cpus;
  if (!r.cpusetCpus.empty()) j["cpuset_cpus"] = r.cpusetCpus;
  if (!r.cpusetMems.empty()) j["cpuset_mems"] = r.cpusetMems;
  if (r.memory) j["memory_bytes"] = *r.memory;
  if (r.memorySwap) j["memory_swap_bytes"] = *r.memorySwap;
  if (r.pids) j["pids"] = *r.pids;
  if (r.blkioWeight) j["blkio_weight"] = *r.blkioWeight;
  return j;
}

namespace {

nlohmann::json mapsJson(const FakerootMaps& maps) {
  auto ranges = [](const std::vector<host::IdRange>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : list) a.push_back({r.inside, r.outside, r.count});
    return a;
  };
  return {{"uid_map", ranges(maps.uidMap)}, {"gid_map", ranges(maps.gidMap)}, {"map_helpers", maps.mapHelpers},
          {"map_note", maps.mapNote}};
}

nlohmann::json buildJson(const BuildRoot& build, const Handover& handover) {
  nlohmann::json j = mapsJson(build);
  j["sandbox"] = build.sandbox;
  j["keep_capabilities"] = handover.keepCapabilities;
  j["seccomp"] = handover.seccomp;
  return j;
}

nlohmann::json handoverJson(const Handover& h, const std::optional<std::string>& prompt) {
  nlohmann::json j = {{"seccomp", h.seccomp}, {"keep_capabilities", h.keepCapabilities},
                      {"no_new_privs", h.noNewPrivs}};
  if (prompt) j["prompt"] = *prompt;
  if (h.umask) j["umask"] = *h.umask;
  return j;
}

std::string handoverText(const Handover& h, const std::string& profile, const std::optional<std::string>& prompt) {
  std::string text = h.seccomp ? "seccomp " + (profile.empty() ? std::string("built-in default") : profile)
                               : std::string("no seccomp filter");
  text += h.keepCapabilities ? "; root keeps its capabilities" : "; capabilities dropped";
  if (h.noNewPrivs) text += "; no_new_privs";
  if (prompt) text += "; PS1='" + *prompt + "'";
  if (h.umask) {
    char mask[8];
    std::snprintf(mask, sizeof mask, "%04o", *h.umask);
    text += std::string("; umask ") + mask + " (--no-umask)";
  }
  return text;
}

nlohmann::json mountsJson(const std::vector<Mount>& mounts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : mounts) {
    nlohmann::json mj = {{"kind", toString(m.kind)},
                         {"destination", m.destination},
                         {"readonly", m.readOnly},
                         {"origin", toString(m.origin)},
                         {"required", m.required}};
    if (m.kind == MountKind::Bind || m.kind == MountKind::Symlink || m.kind == MountKind::Sysfs) mj["source"] = m.source;
    if (m.createSourceMode) mj["create_source_mode"] = *m.createSourceMode;
    if (m.kind == MountKind::Tmpfs) mj["tmpfs_mode"] = m.tmpfsMode;
    if (m.tmpfsSizeBytes) mj["tmpfs_size_bytes"] = *m.tmpfsSizeBytes;
    mj["prebind"] = m.prebind;
    if (!m.from.empty()) mj["from"] = m.from;
    out.push_back(std::move(mj));
  }
  return out;
}

nlohmann::json userEnvironmentJson(const UserEnvironment& user) {
  nlohmann::json j = {{"evaluated", user.evaluate}, {"variables", nlohmann::json::array()}};
  for (const auto& [name, value] : user.vars) j["variables"].push_back({{"name", name}, {"value", value}});
  if (user.path) j["path"] = *user.path;
  if (!user.prependPath.empty()) j["prepend_path"] = user.prependPath;
  if (!user.appendPath.empty()) j["append_path"] = user.appendPath;
  return j;
}

nlohmann::json commandChoicesJson(const std::vector<CommandChoice>& choices) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : choices) {
    nlohmann::json cj = {{"argv", c.argv}, {"env", nlohmann::json::object()}};
    for (const auto& [k, v] : c.env) cj["env"][k] = v;
    out.push_back(std::move(cj));
  }
  return out;
}

nlohmann::json cgroupJson(const LaunchPlan& plan) {
  nlohmann::json j = {{"backend", limits::toString(plan.cgroup.backend)},
                      {"reason", plan.cgroup.reason},
                      {"directories", plan.cgroup.dirs},
                      {"sweep", plan.cgroup.sweepDirs}};
  if (!plan.limits.denyDevices.empty()) {
    nlohmann::json denied = nlohmann::json::array();
    for (const auto& rule : plan.limits.denyDevices)
      denied.push_back({{"path", rule.path}, {"type", std::string(1, rule.type)}, {"major", rule.major}, {"minor", rule.minor}});
    j["deny_devices"] = {{"devices", denied},
                         {"enforced", plan.cgroup.devicesEnforced},
                         {"reason", plan.cgroup.devicesReason}};
  }
  return j;
}

nlohmann::json devicesJson(const std::optional<DeviceInjection>& devices) {
  if (!devices) return nullptr;
  const auto& d = *devices;
  nlohmann::json drivers = nlohmann::json::array();
  for (const auto& driver : d.drivers)
    drivers.push_back({{"vendor", host::toString(driver.vendor)}, {"version", driver.version},
                       {"libraries", driver.libraries}, {"scan_from_cache", driver.scanFromCache},
                       {"needs_glibc", driver.needsGlibc}, {"needs_glibc_library", driver.needsGlibcLibrary}});
  return {{"cdi_devices", d.cdiDevices}, {"cdi_spec_files", d.cdiSpecFiles}, {"drivers", drivers},
          {"left_out", d.notes}};
}

nlohmann::json mpiJson(const std::optional<MpiInjection>& mpi) {
  if (!mpi) return nullptr;
  nlohmann::json replace = nlohmann::json::array();
  for (const auto& r : mpi->replace) replace.push_back({{"soname", r.soname}, {"host_path", r.hostPath}, {"from", r.from}});
  return {{"mode", "bind"}, {"abi", host::toString(mpi->family)}, {"abi_check", host::toString(mpi->check)},
          {"replace", replace}, {"dependencies", mpi->dependencies}, {"scan_from_cache", mpi->scanFromCache},
          {"needs_glibc", mpi->needsGlibc}, {"needs_glibc_library", mpi->needsGlibcLibrary}, {"left_out", mpi->notes}};
}

nlohmann::json imageJson(const image::ImageSource& image) {
  nlohmann::json j = {{"path", image.path.string()},
                      {"kind", image::toString(image.kind)},
                      {"offset", image.offset},
                      {"size", image.size}};
  if (image.lazy)
    j["lazy"] = {{"spec", image.lazy->spec},   {"url", image.lazy->url},       {"cache", image.path.string()},
                 {"log", image.lazy->log},    {"prefetch", image.lazy->prefetch},
                 {"verified", image.lazy->verified}, {"chunks", image.lazy->chunks}, {"cached_chunks", image.lazy->cached}};
  if (!image.reference.empty()) {
    j["reference"] = image.reference;
    j["digest"] = image.digest;
    j["via"] = image.via;
  }
  return j;
}

nlohmann::json endpointsJson(const std::vector<image::oci::Endpoint>& endpoints) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : endpoints)
    out.push_back({{"scheme", e.scheme}, {"host", e.host}, {"prefix", e.prefix}, {"mirror", e.mirror}});
  return out;
}

nlohmann::json executionJson(const std::optional<ExecutionCheck>& e) {
  if (!e) return nullptr;
  return {{"rule_dir", e->ruleDir},
          {"mode", config::toString(e->mode)},
          {"image", e->image},
          {"signers", e->signers},
          {"cached", e->cached}};
}

// "whitelist for /apps (ctr.conf): /apps/x.sif signed by SHA256:... (verified now)".
std::string executionText(const ExecutionCheck& e) {
  std::string signers;
  for (const auto& s : e.signers) signers += (signers.empty() ? "" : ", ") + s;
  return std::string(config::toString(e.mode)) + " for " + (e.ruleDir.empty() ? "every image" : e.ruleDir) +
         " (ctr.conf): " + e.image + (signers.empty() ? std::string(" allowed") : " signed by " + signers) +
         (e.cached ? " (the verdict kept for this file)" : " (verified now)");
}

nlohmann::json datasetsJson(const std::vector<DatasetImage>& datasets) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : datasets)
    out.push_back({{"path", d.image.path.string()}, {"kind", image::toString(d.image.kind)},
                   {"offset", d.image.offset}, {"size", d.image.size}, {"key", d.key}, {"mount", d.mountDir},
                   {"driver", toString(d.driver)}, {"driver_reason", d.driverReason},
                   {"execution", executionJson(d.execution)}});
  return out;
}

nlohmann::json stagingJson(const std::optional<Staging>& staging) {
  if (!staging) return nullptr;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : staging->files)
    files.push_back({{"what", f.what}, {"source", f.source}, {"copy", f.copy}, {"bytes", f.bytes},
                     {"mtime_ns", f.mtimeNs}, {"reason", f.reason}});
  return {{"dir", staging->dir}, {"max_bytes", staging->maxBytes}, {"files", files}};
}

const char* rootName(RootMode mode) {
  return mode == RootMode::Overlay    ? "overlay"
         : mode == RootMode::Sandbox  ? "sandbox"
         : mode == RootMode::Join     ? "instance"
         : mode == RootMode::Writable ? "writable"
                                      : "image";
}

nlohmann::json overlayJson(const RootOverlay& overlay) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : overlay.layers) {
    nlohmann::json layer = {{"path", l.path}, {"writable", l.writable}, {"dir", l.dir},
                            {"lock", l.image ? "none" : l.writable ? "exclusive" : "shared"}, {"image", l.image}};
    if (l.writable) {
      layer["work_dir"] = l.workDir;
      layer["create"] = l.create;
    }
    layer["ext3"] = l.ext3 ? nlohmann::json{{"offset", l.ext3->offset}, {"size", l.ext3->size},
                                            {"server", "fuse2fs"}, {"read_only", !l.writable}}
                           : nlohmann::json();
    layers.push_back(std::move(layer));
  }
  return {{"layers", std::move(layers)},
          {"driver", toString(overlay.driver)},
          {"stuck_server_grace_s", overlay.stuckServerGrace.count()},
          {"upper", overlay.writable() ? "overlay"
                    : overlay.tmpfsUpper ? "tmpfs"
                                         : "none"}};
}

nlohmann::json instanceJson(const InstancePlan& instance, const Namespaces& namespaces) {
  return {{"name", instance.name},       {"record", instance.record},
          {"lock", instance.lock},       {"log_out", instance.logOut},
          {"log_err", instance.logErr}, {"join", instance.join},
          {"reuse", instance.reuse},   {"startscript", instance.startscript},
          {"runscript", instance.runscript},   {"stay", instance.stay},
          {"keeper", namespaces.pid ? "ctr's init, PID 1 of the instance's PID namespace"
                     : instance.stay ? "this ctr process, in the host's PID namespace (--no-pid --stay)"
                                     : "ctr's keeper, in the host's PID namespace (--no-pid)"}};
}

nlohmann::json joinJson(const JoinPlan& join) {
  nlohmann::json ns = nlohmann::json::array();
  for (const auto& n : join.namespaces) ns.push_back({{"type", n.type}, {"inode", n.inode}});
  return {{"name", join.name},     {"record", join.record},
          {"keeper", join.keeper}, {"keeper_start", join.keeperStart},
          {"namespaces", ns}};
}

}  // namespace

nlohmann::json toJson(const LaunchPlan& plan) {
  nlohmann::json j;
  j["command"] = toString(plan.command);
  j["image"] = imageJson(plan.image);
  if (!plan.registryEndpoints.empty()) j["image"]["endpoints"] = endpointsJson(plan.registryEndpoints);
  j["driver"] = toString(plan.driver);
  j["driver_reason"] = plan.driverReason;
  j["driver_fallback"] = plan.driverFallback ? nlohmann::json(toString(*plan.driverFallback)) : nlohmann::json();
  j["image_server"] = plan.imageServer ? nlohmann::json{{"program", plan.imageServer->program},
                                                        {"reason", plan.imageServer->reason}}
                                       : nlohmann::json();
  j["datasets"] = datasetsJson(plan.datasets);
  j["staging"] = stagingJson(plan.staging);
  j["root"] = rootName(plan.rootMode);
  if (plan.rootMode == RootMode::Overlay) j["overlay"] = overlayJson(plan.overlay);
  if (plan.instance) j["instance"] = instanceJson(*plan.instance, plan.namespaces);
  if (plan.join) j["join"] = joinJson(*plan.join);
  if (plan.build) j["build"] = buildJson(*plan.build, plan.handover);
  if (plan.fakeroot) j["fakeroot"] = mapsJson(*plan.fakeroot);
  j["mounts"] = mountsJson(plan.mounts);
  j["mounts_left_out"] = plan.mountsLeftOut;
  j["environment"] = plan.environment;
  j["user_environment"] = userEnvironmentJson(plan.envProgram.user);
  j["host_fallback"] = nlohmann::json::object();
  for (const auto& [name, value] : plan.envProgram.hostFallback) j["host_fallback"][name] = value;
  j["launcher_wiring_passes_through"] = plan.envProgram.wiringPassesThrough;
  j["warnings"] = plan.warnings;
  j["argv"] = plan.argv;
  j["command_choices"] = commandChoicesJson(plan.commandChoices);
  if (!plan.commandChoices.empty()) j["no_command"] = {{"message", plan.noCommand.message}, {"status", plan.noCommand.status}};
  if (!plan.appRoot.empty()) j["app_root"] = plan.appRoot;
  j["workdir_required"] = plan.workdirRequired;
  j["workdir"] = plan.workdir;
  if (!plan.imageWorkdirFile.empty()) j["image_workdir_file"] = plan.imageWorkdirFile;
  if (plan.execution) j["execution"] = executionJson(plan.execution);
  j["uid"] = plan.user.uid;
  j["gid"] = plan.user.gid;
  j["user"] = plan.user.name;
  j["groups"] = nlohmann::json::array();
  for (const auto& g : plan.user.groups) j["groups"].push_back(g.gid);
  j["namespaces"] = namespaceLines(plan.namespaces);
  j["prepared_root_targets"] = nlohmann::json::array();
  for (const auto& m : plan.preparedRoot.mounts) j["prepared_root_targets"].push_back(m.destination);
  j["image_linger_ms"] = plan.lingerMs;
  j["linger_unless_overlaid"] = plan.lingerUnlessOverlaid;
  j["holder_key_paths"] = plan.holderKeyPaths;
  j["holder_scope"] = {{"freezer", plan.holderScope.freezer},
                       {"unified", plan.holderScope.unified},
                       {"mount_namespace", plan.holderScope.mountNamespace}};
  j["seccomp_profile"] = plan.seccompProfile.empty() ? "built-in default" : plan.seccompProfile;
  j["handover"] = handoverJson(plan.handover, plan.envProgram.ps1);
  j["state_dir"] = plan.stateDir;
  j["limits"] = toJson(plan.limits);
  j["cgroup"] = cgroupJson(plan);
  j["kernel_interfaces"] = {{"read_only", plan.kernelInterfaces.readOnly}, {"reason", plan.kernelInterfaces.reason}};
  j["stats_file"] = plan.statsFile;
  j["refuse_overcommit"] = plan.admitAgainst.has_value();
  j["devices"] = devicesJson(plan.devices);
  j["mpi"] = mpiJson(plan.mpi);
  return j;
}

namespace {

void writeImage(std::ostream& out, const LaunchPlan& plan) {
  out << "image:      " << plan.image.path.string() << " (" << image::toString(plan.image.kind);
  if (plan.image.kind != image::ImageKind::Directory)
    out << ", squashfs at offset " << plan.image.offset << ", " << plan.image.size << " bytes";
  out << ")\n";
  if (!plan.image.reference.empty())
    out << "from:       " << plan.image.reference << " (" << plan.image.digest << ", "
        << (plan.image.via.empty() ? "the image cache" : plan.image.via) << ")\n";
  if (plan.image.lazy)
    out << "lazy:       chunks from " << plan.image.lazy->url
        << (plan.image.lazy->verified ? ", each checked against the image's chunk table (verified) before use; "
                                      : ", NOT checked one by one (no chunk table; 'lazy unverified = allow'): the whole "
                                        "blob is checked against its digest once every chunk is cached; ")
        << plan.image.lazy->cached << " of " << plan.image.lazy->chunks
        << " cached in " << plan.image.path.string() << "; a chunk that fails is logged in " << plan.image.lazy->log
        << (plan.image.lazy->prefetch ? "; the rest is fetched while the link is idle ('lazy prefetch')" : "") << "\n";
  for (std::size_t i = 0; i < plan.registryEndpoints.size(); ++i) {
    const auto& e = plan.registryEndpoints[i];
    out << (i == 0 ? "endpoints:  " : "            then ") << (e.mirror ? "mirror " : "the registry ") << e.scheme
        << "://" << e.host << "/v2/" << e.prefix << '\n';
  }
  out
      << "driver:     " << (plan.join ? std::string("the instance's") : toString(plan.driver)) << " ("
      << plan.driverReason << ")\n";
  if (plan.imageServer && !plan.join)
    out << "server:     " << plan.imageServer->program << " (" << plan.imageServer->reason << ")\n";
  for (const auto& d : plan.datasets)
    out << "dataset:    " << d.image.path.string() << " (" << image::toString(d.image.kind) << ", squashfs at offset "
        << d.image.offset << ", " << d.image.size << " bytes), read-only at " << d.mountDir
        << " in the image's holder, by "
        << (d.driver == ImageDriver::SetuidHelper ? std::string("the setuid helper")
                                                  : plan.imageServer ? plan.imageServer->program : std::string("?"))
        << " (" << d.driverReason << ")\n";
  if (plan.staging)
    for (const auto& f : plan.staging->files)
      out << "staged:     " << f.source << " -> " << f.copy << " (" << f.what << ", " << f.bytes << " bytes, " << f.reason
          << "; copied once per node, again when its size or mtime changes)\n";
}

void writeOverlay(std::ostream& out, const RootOverlay& overlay) {
  // Top first, as overlayfs stacks them.
  out << "  union:    " << toString(overlay.driver)
      << (overlay.driver == UnionDriver::FuseOverlayfs
              ? " (a FUSE server of this launch: an ext3 layer is a FUSE mount, which the kernel's overlayfs takes "
                "in no user namespace as its upper layer; it ends with the container)"
              : " (the kernel's)")
      << '\n';
  if (overlay.stuckServerGrace.count() > 0)
    out << "  watchdog: the FUSE servers are aborted when a killed process of the container has waited on them "
        << overlay.stuckServerGrace.count() << " s\n";
  for (const auto& l : overlay.layers) {
    if (l.ext3) {
      out << "  layer:    " << l.dir << "/ of ext3 image " << l.path << " (offset " << l.ext3->offset << ", "
          << l.ext3->size << " bytes; mounted by fuse2fs for this launch"
          << (l.writable ? ", writable upper layer, work " + l.workDir + "/; locked exclusively"
                         : ", read-only; locked shared")
          << " until fuse2fs has written it back)\n";
      continue;
    }
    out << "  layer:    " << l.dir
        << (l.writable ? " (writable upper layer, work " + l.workDir + "; " + l.path +
                             " created if missing; locked exclusively while the container lives)"
            : l.image  ? " (read-only image " + l.path + ", mounted by the image's holder)"
                       : " (read-only; " + l.path + " locked shared while the container lives)")
        << '\n';
  }
  if (overlay.tmpfsUpper) out << "  layer:    a private tmpfs (writable upper layer, changes kept in memory)\n";
  out << "  layer:    the image (read-only)" << (overlay.writable() || overlay.tmpfsUpper ? "" : "; the root is read-only")
      << '\n';
}

void writeInstance(std::ostream& out, const InstancePlan& instance, const Namespaces& namespaces) {
  out << "\ninstance:   " << instance.name << ": kept running by "
      << (namespaces.pid   ? "ctr's init (PID 1 of its PID namespace)"
          : instance.stay ? "this ctr process itself (no PID namespace, --stay: it prints the join "
                            "information, closes its output and stays; its caller reaps it)"
                          : "ctr's keeper (no PID namespace: --no-pid)")
      << (!instance.startscript ? ", which runs nothing (--no-startscript)"
          : instance.runscript  ? " after the runscript ends (instance run)"
                                : " after the startscript ends")
      << ", until `ctr instance stop`; record " << instance.record << ", output "
      << instance.logOut << " and " << instance.logErr << ", join file " << instance.join
      << (instance.reuse ? "; if it already runs with this image, it is taken as it is (--reuse)" : "");
}

// identity .. instance: who runs, in which namespaces, and how an instance is kept.
void writeNamespaces(std::ostream& out, const LaunchPlan& plan) {
  out
      << "identity:   uid " << plan.user.uid << ", gid " << plan.user.gid << " (" << plan.user.name
      << ")\n"
      << "namespaces:";
  if (plan.join) {
    out << " the instance's, entered in this order:";
    for (const auto& ns : plan.join->namespaces) out << ' ' << ns.type;
    out << "\njoin:       instance " << plan.join->name << ": keeper pid " << plan.join->keeper << " (checked: start time "
        << plan.join->keeperStart << " and the namespace inodes of " << plan.join->record << ")"
        << (plan.namespaces.pid ? "; the launch forks into its PID namespace and stands in outside" : "");
  } else {
    for (const auto& line : namespaceLines(plan.namespaces)) out << ' ' << line << ';';
  }
  if (plan.instance) writeInstance(out, *plan.instance, plan.namespaces);
  out << "\n";
}

// hand-over .. kernel: what the process keeps, where ctr keeps its state, and the limits.
void writeIsolation(std::ostream& out, const LaunchPlan& plan) {
  out << "hand-over:  " << handoverText(plan.handover, plan.seccompProfile, plan.envProgram.ps1) << '\n'
      << "state dir:  "
      << (plan.stateDir.empty() ? "(a private one per launch: the shared names are taken)" : plan.stateDir)
      << "\nlinger:     " << plan.lingerMs << " ms after the image's last launch"
      << (plan.lingerUnlessOverlaid ? " (none where an overlay has the directory as its lower layer)" : "")
      << (plan.holderKeyPaths.empty() ? std::string()
                                      : "; a new holder when one of " + std::to_string(plan.holderKeyPaths.size()) +
                                            " paths of the directory changes")
      << "\n"
      << "holder:     shared by the launches in this one's cgroups (" << holderScopeText(plan.holderScope)
      << "): a batch system ends the processes of a cgroup together; and mount namespace ("
      << (plan.holderScope.mountNamespace.empty() ? std::string("unknown") : plan.holderScope.mountNamespace)
      << "): the holder's mounts are a copy of it\n"
      << "limits:     " << limitsText(plan.limits) << '\n'
      << "kernel:     ";
  if (plan.kernelInterfaces.readOnly) {
    out << "read-only:";
    for (const auto path : kReadOnlyKernelPaths) out << ' ' << path;
    out << " /sys";
  } else {
    out << "/proc/sys and /sys bound as they are";
  }
  out << " (" << plan.kernelInterfaces.reason << ")\n";
}

// command .. kernel: what the launch is and how it is isolated.
void writeSummary(std::ostream& out, const LaunchPlan& plan) {
  out << "command:    " << toString(plan.command) << '\n';
  writeImage(out, plan);
  out << "root:       " << toString(plan.rootMode) << (plan.build ? " " + plan.build->sandbox : "") << '\n';
  if (plan.rootMode == RootMode::Overlay) writeOverlay(out, plan.overlay);
  writeNamespaces(out, plan);
  writeIsolation(out, plan);
}

void writeCgroup(std::ostream& out, const LaunchPlan& plan) {
  if (plan.cgroup.backend != limits::Backend::None || !plan.limits.empty()) {
    out << "cgroup:     " << limits::toString(plan.cgroup.backend) << " (" << plan.cgroup.reason << ")\n";
    for (const auto& [controller, dir] : plan.cgroup.dirs)
      out << "  " << (controller.empty() ? "" : controller + ": ") << dir << '\n';
  }
  if (!plan.limits.denyDevices.empty()) {
    out << "denied:    ";
    for (const auto& rule : plan.limits.denyDevices)
      out << ' ' << rule.path << " (" << rule.type << ' ' << rule.major << ':' << rule.minor << ')';
    out << "\n  " << (plan.cgroup.devicesEnforced ? "enforced: " : "") << plan.cgroup.devicesReason << '\n';
  }
  if (!plan.statsFile.empty()) out << "stats:      " << plan.statsFile << '\n';
}

void writeDevices(std::ostream& out, const DeviceInjection& d) {
  for (const auto& driver : d.drivers)
    out << "devices:    " << host::toString(driver.vendor) << " driver " << driver.version << " from the ld.so cache, "
        << driver.libraries << " libraries in " << kContainerLibDir
        << (driver.scanFromCache ? " (scan read from the state directory's cache)" : " (scanned now)")
        << (driver.needsGlibc.empty() ? "" : "; needs glibc >= " + driver.needsGlibc + " (" + driver.needsGlibcLibrary + ")")
        << '\n';
  if (!d.cdiDevices.empty()) {
    out << "devices:    CDI";
    for (const auto& name : d.cdiDevices) out << ", " << name;
    out << '\n';
  }
  for (const auto& file : d.cdiSpecFiles) out << "  CDI spec: " << file << '\n';
  for (const auto& note : d.notes) out << "  left out: " << note << '\n';
}

void writeMpi(std::ostream& out, const MpiInjection& mpi) {
  out << "mpi:        bind: the host's " << host::toString(mpi.family) << " replaces the image's ";
  for (size_t i = 0; i < mpi.replace.size(); ++i) out << (i ? ", " : "") << mpi.replace[i].soname;
  out << " after the ABI check ('mpi abi check = " << host::toString(mpi.check) << "': same family and major"
      << (mpi.check == host::MpiAbiCheck::Strict ? ", host minor >= image minor" : "") << "); " << mpi.dependencies
      << " dependencies in " << kContainerMpiDir << " (first on LD_LIBRARY_PATH)"
      << (mpi.scanFromCache ? "; scan read from the state directory's cache" : "; scanned now")
      << (mpi.needsGlibc.empty() ? "" : "; needs glibc >= " + mpi.needsGlibc + " (" + mpi.needsGlibcLibrary + ")") << '\n';
  for (const auto& r : mpi.replace) out << "  replace: " << r.soname << " <- " << r.hostPath << " from " << r.from << '\n';
  for (const auto& note : mpi.notes) out << "  left out: " << note << '\n';
}

// The id maps of a build step's namespace, or of a --fakeroot launch's holder.
void writeMaps(std::ostream& out, const FakerootMaps& maps) {
  auto ranges = [](const std::vector<host::IdRange>& list) {
    std::string text;
    for (const auto& r : list)
      text += (text.empty() ? "" : ", ") + std::to_string(r.inside) + " -> " + std::to_string(r.outside) +
              " (" + std::to_string(r.count) + ")";
    return text;
  };
  out << "uid map:    " << ranges(maps.uidMap) << (maps.mapHelpers ? " (newuidmap)" : "") << '\n'
      << "gid map:    " << ranges(maps.gidMap) << (maps.mapHelpers ? " (newgidmap)" : "") << '\n'
      << "            " << maps.mapNote << '\n';
}

std::string tmpfsText(const Mount& m) {
  if (m.kind != MountKind::Tmpfs) return {};
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", m.tmpfsMode);
  return std::string(", mode ") + mode + (m.tmpfsSizeBytes ? ", " + std::to_string(*m.tmpfsSizeBytes) + " bytes" : "");
}

void writeMounts(std::ostream& out, const std::vector<Mount>& mounts) {
  out << "mounts (in order):\n";
  for (const auto& m : mounts) {
    out << "  " << toString(m.kind) << ' ';
    if (m.kind == MountKind::Bind) out << m.source << " -> ";
    if (m.kind == MountKind::Symlink) out << m.source << " <- ";
    out << m.destination << (m.readOnly ? " (ro)" : " (rw)") << " [" << toString(m.origin)
        << (m.kind == MountKind::Bind && !m.required && !m.createSourceMode ? ", skipped if absent" : "")
        << (m.createSourceMode ? ", source created if absent" : "") << tmpfsText(m) << "]"
        << (m.from.empty() ? "" : " from " + m.from) << (m.prebind ? " (made once by the image's holder)" : "")
        << (m.kind == MountKind::Sysfs ? " (of the container's network namespace; the host's " + m.source +
                                             " if the kernel refuses it)"
                                       : "")
        << '\n';
  }
}

// workdir, the program and its arguments, the environment and the warnings.
void writeCommand(std::ostream& out, const LaunchPlan& plan) {
  out << "workdir:    " << plan.workdir << (plan.workdirRequired ? " (--pwd: must exist)" : "");
  if (!plan.imageWorkdirFile.empty()) out << " unless the image records its WORKDIR in " << plan.imageWorkdirFile;
  out << '\n';
  if (plan.execution) out << "execution:  " << executionText(*plan.execution) << '\n';
  for (const auto& d : plan.datasets)
    if (d.execution) out << "execution:  " << executionText(*d.execution) << '\n';
  if (!plan.appRoot.empty()) out << "app:        " << plan.appRoot << " (must exist, else exit 1)\n";
  for (const auto& c : plan.commandChoices) {
    out << "program:   ";
    for (const auto& a : c.argv) out << " '" << a << '\'';
    for (const auto& [k, v] : c.env) out << " (" << k << '=' << v << ')';
    out << " (if executable)\n";
  }
  if (!plan.commandChoices.empty()) out << "otherwise:  " << plan.noCommand.message << " (exit " << plan.noCommand.status << ")\n";
  out << "argv:      ";
  for (const auto& a : plan.argv) out << " '" << a << '\'';
  out << "\nenvironment (before the image's env scripts):\n";
  for (const auto& kv : plan.environment) out << "  " << kv << '\n';
  if (!plan.envProgram.hostFallback.empty()) {
    out << "host environment kept from the image's scripts (--image-env-first), set after them where they set nothing:\n";
    for (const auto& [name, value] : plan.envProgram.hostFallback) out << "  " << name << '=' << value << '\n';
  }
  const auto& user = plan.envProgram.user;
  if (!user.empty()) {
    out << "user environment (after the image's scripts up to 99-base.sh, "
        << (user.evaluate ? "evaluated as \"VALUE\" in sh" : "literal: --no-eval") << "):\n";
    for (const auto& [name, value] : user.vars) out << "  " << name << '=' << value << '\n';
    if (!user.prependPath.empty()) out << "  PREPEND_PATH=" << user.prependPath << '\n';
    if (!user.appendPath.empty()) out << "  APPEND_PATH=" << user.appendPath << '\n';
    if (user.path) out << "  PATH=" << *user.path << " (replaces PATH after all scripts)\n";
  }
  for (const auto& w : plan.warnings) out << "warning:    " << w << '\n';
}

}  // namespace

std::string toText(const LaunchPlan& plan) {
  std::ostringstream out;
  writeSummary(out, plan);
  writeCgroup(out, plan);
  if (plan.devices) writeDevices(out, *plan.devices);
  if (plan.mpi) writeMpi(out, *plan.mpi);
  if (plan.build) writeMaps(out, *plan.build);
  if (plan.fakeroot) {
    out << "fakeroot:   root in the container; the image's holder for --fakeroot launches makes the user namespace:\n";
    writeMaps(out, *plan.fakeroot);
  }
  writeMounts(out, plan.mounts);
  if (!plan.mountsLeftOut.empty()) {
    out << "left out (--no-mount):";
    for (const auto& d : plan.mountsLeftOut) out << ' ' << d;
    out << '\n';
  }
  writeCommand(out, plan);
  return out.str();
}

}  // namespace ctr::launch
