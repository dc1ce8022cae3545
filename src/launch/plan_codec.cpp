// The plan as bytes for the launch memo (ctr/plan_codec.hpp). Each struct's fields are
// listed once, in its `fields` visitor, which the Writer and the Reader both walk: what is
// read is what was written, in the same order. Lengths are 32-bit counts, numbers their own
// bytes as they are in memory, enums and bools one byte.
#include "ctr/plan_codec.hpp"

#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/gpu.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/image.hpp"
#include "ctr/launch.hpp"
#include "ctr/limits.hpp"
#include "ctr/mpi.hpp"
#include "ctr/oci.hpp"

namespace ctr::launch {

namespace {

// Raised whenever the encoding changes (a field added, removed or moved, a type changed):
// a memo written in another format is refused, not misread.
constexpr std::uint32_t kPlanFormat = 2;

// Each struct at the size it had when its visitor was written (x86-64 with libstdc++, where
// the sizes below hold): a field added changes the size, and the build stops at its visitor.
// A field that fits in padding (a bool after a bool) does not change it: look there too.
#if defined(__x86_64__) && defined(__GLIBCXX__) && !defined(_GLIBCXX_DEBUG)
#define PLAN_FIELDS_SIZE(T, N) \
  static_assert(sizeof(T) == (N), #T ": a field was added or changed: add it to its visitor in plan_codec.cpp, then update this size")
#else
#define PLAN_FIELDS_SIZE(T, N) static_assert(true)
#endif

// A visitor's struct, const (writing) or not (reading).
template <class S, class T>
concept Is = std::same_as<std::remove_const_t<S>, T>;

// The base `B` of `s`, as const as `s`.
template <class B, class S>
auto& base(S& s) {
  if constexpr (std::is_const_v<S>) return static_cast<const B&>(s);
  else return static_cast<B&>(s);
}

template <class V, Is<image::ImageSource::Lazy> S>
void fields(V& v, S& s) {
  v(s.spec, s.url, s.log, s.chunks, s.cached, s.prefetch, s.verified);
}
PLAN_FIELDS_SIZE(image::ImageSource::Lazy, 120);

template <class V, Is<image::ImageSource> S>
void fields(V& v, S& s) {
  v(s.path, s.kind, s.offset, s.size, s.arch, s.environment, s.overlayOffset, s.overlaySize, s.dataPartition,
    s.device, s.inode, s.mtimeNs, s.ctimeNs, s.fileBytes, s.filesystem, s.owner, s.links, s.mode, s.reference,
    s.digest, s.via, s.lazy);
}
PLAN_FIELDS_SIZE(image::ImageSource, 448);

template <class V, Is<image::oci::Endpoint> S>
void fields(V& v, S& s) {
  v(s.scheme, s.host, s.prefix, s.mirror);
}
PLAN_FIELDS_SIZE(image::oci::Endpoint, 104);

template <class V, Is<host::HostGroup> S>
void fields(V& v, S& s) {
  v(s.gid, s.name);
}
PLAN_FIELDS_SIZE(host::HostGroup, 40);

template <class V, Is<host::HostUser> S>
void fields(V& v, S& s) {
  v(s.uid, s.gid, s.name, s.gecos, s.home, s.shell, s.primaryGroup, s.groups);
}
PLAN_FIELDS_SIZE(host::HostUser, 200);

template <class V, Is<host::IdRange> S>
void fields(V& v, S& s) {
  v(s.inside, s.outside, s.count);
}
PLAN_FIELDS_SIZE(host::IdRange, 12);

template <class V, Is<limits::DeviceRule> S>
void fields(V& v, S& s) {
  v(s.type, s.major, s.minor, s.path);
}
PLAN_FIELDS_SIZE(limits::DeviceRule, 48);

template <class V, Is<limits::Request> S>
void fields(V& v, S& s) {
  v(s.cpus, s.cpusetCpus, s.cpusetMems, s.memory, s.memorySwap, s.pids, s.blkioWeight, s.denyDevices);
}
PLAN_FIELDS_SIZE(limits::Request, 160);

template <class V, Is<limits::Placement> S>
void fields(V& v, S& s) {
  v(s.backend, s.reason, s.dirs, s.devicesEnforced, s.devicesReason, s.sweepDirs);
}
PLAN_FIELDS_SIZE(limits::Placement, 152);

template <class V, Is<limits::NodeCapacity> S>
void fields(V& v, S& s) {
  v(s.cpus, s.memNodes, s.memoryBytes);
}
PLAN_FIELDS_SIZE(limits::NodeCapacity, 56);

template <class V, Is<ImageServer> S>
void fields(V& v, S& s) {
  v(s.program, s.reason);
}
PLAN_FIELDS_SIZE(ImageServer, 64);

template <class V, Is<ExecutionCheck> S>
void fields(V& v, S& s) {
  v(s.ruleDir, s.mode, s.image, s.signers, s.cached);
}
PLAN_FIELDS_SIZE(ExecutionCheck, 104);

template <class V, Is<DatasetImage> S>
void fields(V& v, S& s) {
  v(s.source, s.image, s.key, s.mountDir, s.driver, s.driverReason, s.execution);
}
PLAN_FIELDS_SIZE(DatasetImage, 696);

template <class V, Is<StagedFile> S>
void fields(V& v, S& s) {
  v(s.what, s.source, s.copy, s.bytes, s.mtimeNs, s.reason);
}
PLAN_FIELDS_SIZE(StagedFile, 144);

template <class V, Is<Staging> S>
void fields(V& v, S& s) {
  v(s.dir, s.maxBytes, s.files);
}
PLAN_FIELDS_SIZE(Staging, 64);

template <class V, Is<GlibcNeed> S>
void fields(V& v, S& s) {
  v(s.what, s.version, s.library);
}
PLAN_FIELDS_SIZE(GlibcNeed, 96);

template <class V, Is<GlibcCheck> S>
void fields(V& v, S& s) {
  v(s.needs, s.imageLibc);
}
PLAN_FIELDS_SIZE(GlibcCheck, 48);

template <class V, Is<OverlayLayer::Ext3> S>
void fields(V& v, S& s) {
  v(s.offset, s.size);
}
PLAN_FIELDS_SIZE(OverlayLayer::Ext3, 16);

template <class V, Is<OverlayLayer> S>
void fields(V& v, S& s) {
  v(s.path, s.writable, s.dir, s.workDir, s.create, s.image, s.ext3);
}
PLAN_FIELDS_SIZE(OverlayLayer, 136);

template <class V, Is<RootOverlay> S>
void fields(V& v, S& s) {
  v(s.layers, s.tmpfsUpper, s.driver, s.stuckServerGrace);
}
PLAN_FIELDS_SIZE(RootOverlay, 40);

template <class V, Is<Mount> S>
void fields(V& v, S& s) {
  v(s.kind, s.source, s.destination, s.readOnly, s.recursive, s.required, s.origin, s.content, s.identity,
    s.createSourceMode, s.tmpfsMode, s.tmpfsSizeBytes, s.prebind, s.from);
}
PLAN_FIELDS_SIZE(Mount, 184);

template <class V, Is<PreparedRootSpec> S>
void fields(V& v, S& s) {
  v(s.mounts, s.user);
}
PLAN_FIELDS_SIZE(PreparedRootSpec, 224);

template <class V, Is<UserEnvironment> S>
void fields(V& v, S& s) {
  v(s.vars, s.path, s.prependPath, s.appendPath, s.evaluate);
}
PLAN_FIELDS_SIZE(UserEnvironment, 136);

template <class V, Is<EnvProgram> S>
void fields(V& v, S& s) {
  v(s.scripts, s.user, s.fixed, s.hostFallback, s.uid, s.gid, s.ps1, s.wiringPassesThrough);
}
PLAN_FIELDS_SIZE(EnvProgram, 264);

template <class V, Is<CommandChoice> S>
void fields(V& v, S& s) {
  v(s.argv, s.env, s.note);
}
PLAN_FIELDS_SIZE(CommandChoice, 80);

template <class V, Is<NoCommand> S>
void fields(V& v, S& s) {
  v(s.message, s.status);
}
PLAN_FIELDS_SIZE(NoCommand, 40);

template <class V, Is<Handover> S>
void fields(V& v, S& s) {
  v(s.seccomp, s.keepCapabilities, s.noNewPrivs, s.umask);
}
PLAN_FIELDS_SIZE(Handover, 12);

template <class V, Is<Namespaces> S>
void fields(V& v, S& s) {
  v(s.sharedUser, s.ownMount, s.pid, s.pidInit, s.signalAll, s.ipc, s.uts, s.hostname, s.net);
}
PLAN_FIELDS_SIZE(Namespaces, 48);

template <class V, Is<HolderScope> S>
void fields(V& v, S& s) {
  v(s.freezer, s.unified, s.mountNamespace);
}
PLAN_FIELDS_SIZE(HolderScope, 96);

template <class V, Is<InjectedDriver> S>
void fields(V& v, S& s) {
  v(s.vendor, s.version, s.needsGlibc, s.needsGlibcLibrary, s.libraries, s.scanFromCache);
}
PLAN_FIELDS_SIZE(InjectedDriver, 120);

template <class V, Is<DeviceInjection> S>
void fields(V& v, S& s) {
  v(s.cdiDevices, s.cdiSpecFiles, s.drivers, s.notes);
}
PLAN_FIELDS_SIZE(DeviceInjection, 96);

template <class V, Is<MpiReplacement> S>
void fields(V& v, S& s) {
  v(s.soname, s.hostPath, s.from);
}
PLAN_FIELDS_SIZE(MpiReplacement, 96);

template <class V, Is<MpiInjection> S>
void fields(V& v, S& s) {
  v(s.family, s.check, s.replace, s.dependencies, s.scanFromCache, s.needsGlibc, s.needsGlibcLibrary, s.notes);
}
PLAN_FIELDS_SIZE(MpiInjection, 136);

template <class V, Is<FakerootMaps> S>
void fields(V& v, S& s) {
  v(s.uidMap, s.gidMap, s.mapHelpers, s.newuidmap, s.newgidmap, s.mapNote);
}
PLAN_FIELDS_SIZE(FakerootMaps, 152);

template <class V, Is<BuildRoot> S>
void fields(V& v, S& s) {
  v(base<FakerootMaps>(s), s.sandbox, s.stageDir);
}
PLAN_FIELDS_SIZE(BuildRoot, 216);

template <class V, Is<InstancePlan> S>
void fields(V& v, S& s) {
  v(s.name, s.dir, s.record, s.lock, s.logOut, s.logErr, s.seccomp, s.join, s.reuse, s.startscript, s.runscript,
    s.stay);
}
PLAN_FIELDS_SIZE(InstancePlan, 264);

template <class V, Is<JoinNamespace> S>
void fields(V& v, S& s) {
  v(s.type, s.inode);
}
PLAN_FIELDS_SIZE(JoinNamespace, 40);

template <class V, Is<JoinPlan> S>
void fields(V& v, S& s) {
  v(s.name, s.record, s.keeper, s.keeperStart, s.namespaces, s.cgroups);
}
PLAN_FIELDS_SIZE(JoinPlan, 128);

template <class V, Is<KernelInterfaces> S>
void fields(V& v, S& s) {
  v(s.readOnly, s.reason);
}
PLAN_FIELDS_SIZE(KernelInterfaces, 40);

// supervised() is derived from cgroup and statsFile, not stored.
template <class V, Is<LaunchPlan> S>
void fields(V& v, S& s) {
  v(s.command, s.image, s.driver, s.driverReason, s.driverFallback, s.imageServer, s.datasets, s.staging,
    s.glibcCheck, s.registryEndpoints, s.rootMode, s.rootReadOnly, s.overlay, s.mounts, s.preparedRoot,
    s.environment, s.envProgram, s.warnings, s.mountsLeftOut, s.argv, s.commandChoices, s.noCommand, s.appRoot,
    s.sourceEnvScripts, s.workdir, s.workdirRequired, s.execution, s.imageWorkdirFile, s.user, s.seccompProfile,
    s.handover, s.namespaces, s.stateDir, s.lingerMs, s.lingerUnlessOverlaid, s.holderKeyPaths, s.holderScope,
    s.limits, s.cgroup, s.admitAgainst, s.statsFile, s.devices, s.mpi, s.build, s.fakeroot, s.instance, s.join,
    s.kernelInterfaces);
}
PLAN_FIELDS_SIZE(LaunchPlan, 3632);

#undef PLAN_FIELDS_SIZE

// The last value of each enum in the plan: a decoded value above it is refused. A new last
// value must be named here, or plans holding it are refused (and planned again).
constexpr auto lastOf(Command) { return Command::Instance; }
constexpr auto lastOf(image::ImageKind) { return image::ImageKind::Directory; }
constexpr auto lastOf(ImageDriver) { return ImageDriver::SetuidHelper; }
constexpr auto lastOf(config::ExecutionMode) { return config::ExecutionMode::Blacklist; }
constexpr auto lastOf(RootMode) { return RootMode::Join; }
constexpr auto lastOf(UnionDriver) { return UnionDriver::FuseOverlayfs; }
constexpr auto lastOf(MountKind) { return MountKind::Sysfs; }
constexpr auto lastOf(MountOrigin) { return MountOrigin::Host; }
constexpr auto lastOf(IdentityFile) { return IdentityFile::Group; }
constexpr auto lastOf(limits::Backend) { return limits::Backend::V2; }
constexpr auto lastOf(host::GpuVendor) { return host::GpuVendor::Amd; }
constexpr auto lastOf(host::MpiFamily) { return host::MpiFamily::Mpich; }
constexpr auto lastOf(host::MpiAbiCheck) { return host::MpiAbiCheck::Relaxed; }

template <class T, template <class...> class Of>
constexpr bool kIs = false;
template <template <class...> class Of, class... A>
constexpr bool kIs<Of<A...>, Of> = true;

template <class T>
constexpr bool kIsDuration = false;
template <class R, class P>
constexpr bool kIsDuration<std::chrono::duration<R, P>> = true;

class Writer {
 public:
  std::string bytes;

  template <class... T>
  void operator()(const T&... x) {
    (put(x), ...);
  }

 private:
  template <class T>
  void put(const T& x) {
    if constexpr (std::is_same_v<T, bool> || std::is_enum_v<T>) {
      raw(static_cast<std::uint8_t>(x));
    } else if constexpr (std::is_arithmetic_v<T>) {
      raw(x);
    } else if constexpr (std::is_same_v<T, std::string>) {
      text(x);
    } else if constexpr (std::is_same_v<T, std::filesystem::path>) {
      text(x.native());
    } else if constexpr (kIsDuration<T>) {
      raw(x.count());
    } else if constexpr (kIs<T, std::optional>) {
      put(x.has_value());
      if (x) put(*x);
    } else if constexpr (kIs<T, std::pair>) {
      put(x.first);
      put(x.second);
    } else if constexpr (kIs<T, std::vector> || kIs<T, std::map>) {
      count(x.size());
      for (const auto& e : x) put(e);
    } else {
      fields(*this, x);
    }
  }

  template <class T>
  void raw(T x) {
    bytes.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  void count(std::size_t n) {
    if (n > std::numeric_limits<std::uint32_t>::max()) throw Error("a launch plan too large to encode");
    raw(static_cast<std::uint32_t>(n));
  }
  void text(const std::string& s) {
    count(s.size());
    bytes.append(s);
  }
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  template <class... T>
  void operator()(T&... x) {
    (get(x), ...);
  }

  [[nodiscard]] std::size_t left() const { return static_cast<std::size_t>(end_ - at_); }

  template <class T>
  T raw() {
    if (left() < sizeof(T)) truncated();
    T x;
    std::memcpy(&x, at_, sizeof x);
    at_ += sizeof x;
    return x;
  }

 private:
  const char* at_;
  const char* end_;

  [[noreturn]] static void truncated() { throw Error("the encoded launch plan ends early"); }

  template <class T>
  void get(T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      const auto b = raw<std::uint8_t>();
      if (b > 1) throw Error("the encoded launch plan has " + std::to_string(b) + " for a bool");
      x = b != 0;
    } else if constexpr (std::is_enum_v<T>) {
      static_assert(static_cast<unsigned>(lastOf(T{})) <= 0xff, "an enum of the plan is written as one byte");
      const auto n = raw<std::uint8_t>();
      if (n > static_cast<unsigned>(lastOf(T{})))
        throw Error("the encoded launch plan has " + std::to_string(n) + " for an enum whose last value is " +
                    std::to_string(static_cast<unsigned>(lastOf(T{}))));
      x = static_cast<T>(n);
    } else if constexpr (std::is_arithmetic_v<T>) {
      x = raw<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      const auto n = count();
      x.assign(at_, n);
      at_ += n;
    } else if constexpr (std::is_same_v<T, std::filesystem::path>) {
      std::string s;
      get(s);
      x = std::move(s);
    } else if constexpr (kIsDuration<T>) {
      x = T(raw<typename T::rep>());
    } else if constexpr (kIs<T, std::optional>) {
      bool present = false;
      get(present);
      // From a value: clang (14) decides whether a nested struct with member initializers
      // (ImageSource::Lazy) can be made from nothing while its enclosing struct is being
      // defined, says no, and refuses emplace().
      if (present) get(x.emplace(typename T::value_type{}));
      else x.reset();
    } else if constexpr (kIs<T, std::pair>) {
      get(x.first);
      get(x.second);
    } else if constexpr (kIs<T, std::vector>) {
      x.clear();
      x.resize(count());
      for (auto& e : x) get(e);
    } else if constexpr (kIs<T, std::map>) {
      x.clear();
      for (auto n = count(); n > 0; --n) {
        std::pair<typename T::key_type, typename T::mapped_type> kv;
        get(kv);
        x.emplace_hint(x.end(), std::move(kv));
      }
    } else {
      fields(*this, x);
    }
  }

  // Every element and character takes a byte at least: a count beyond what is left is not
  // allocated for.
  std::size_t count() {
    const std::size_t n = raw<std::uint32_t>();
    if (n > left()) truncated();
    return n;
  }
};

}  // namespace

std::string encodePlan(const LaunchPlan& plan) {
  Writer w;
  w.bytes.reserve(16 * 1024);
  w(kPlanFormat, plan);
  return std::move(w.bytes);
}

LaunchPlan decodePlan(std::string_view bytes) {
  Reader r(bytes);
  if (const auto format = r.raw<std::uint32_t>(); format != kPlanFormat)
    throw Error("the encoded launch plan is of format " + std::to_string(format) + ", not " +
                std::to_string(kPlanFormat));
  LaunchPlan plan;
  r(plan);
  if (r.left() != 0) throw Error("the encoded launch plan has " + std::to_string(r.left()) + " bytes after its end");
  return plan;
}

}  // namespace ctr::launch
