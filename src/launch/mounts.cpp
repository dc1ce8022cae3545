// The mounts of a launch that are not a device's or MPI's: Apptainer's defaults, --contain's
// private /dev and /tmp, the home, the site's and the user's binds, the current directory and
// the identity files, and their order.
#include <algorithm>
#include <utility>

#include "ctr/binds.hpp"
#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/strings.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

Mount bindMount(std::string source, std::string destination, bool readOnly, MountOrigin origin) {
  Mount m;
  m.kind = MountKind::Bind;
  m.source = std::move(source);
  m.destination = std::move(destination);
  m.readOnly = readOnly;
  m.origin = origin;
  m.required = origin == MountOrigin::User;
  return m;
}

Mount tmpfsMount(std::string destination, MountOrigin origin, unsigned mode) {
  Mount m;
  m.kind = MountKind::Tmpfs;
  m.destination = std::move(destination);
  m.origin = origin;
  m.tmpfsMode = mode;
  return m;
}

Mount targetsTmpfs(std::string destination) {
  Mount m = tmpfsMount(std::move(destination), MountOrigin::Host, 0755);
  m.tmpfsSizeBytes = kTargetsTmpfsBytes;
  return m;
}

void addMount(std::vector<Mount>& mounts, Mount mount) {
  for (auto& m : mounts) {
    if (m.destination == mount.destination) {
      m = std::move(mount);
      return;
    }
  }
  mounts.push_back(std::move(mount));
}

namespace {

// A minimal /dev (Apptainer's with --contain), not the host's hundreds of nodes.
void addContainedDev(std::vector<Mount>& mounts) {
  addMount(mounts, tmpfsMount("/dev", MountOrigin::Contain, 0755));
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty", "ptmx"}) {
    Mount m = bindMount(std::string("/dev/") + node, std::string("/dev/") + node, false, MountOrigin::Contain);
    m.recursive = false;
    addMount(mounts, std::move(m));
  }
  addMount(mounts, bindMount("/dev/pts", "/dev/pts", false, MountOrigin::Contain));  // the caller's terminal
  addMount(mounts, tmpfsMount("/dev/shm", MountOrigin::Contain, 01777));
  for (const auto& [name, target] : {std::pair<const char*, const char*>{"fd", "/proc/self/fd"},
                                     {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
                                     {"stderr", "/proc/self/fd/2"}}) {
    Mount m;
    m.kind = MountKind::Symlink;
    m.source = target;
    m.destination = std::string("/dev/") + name;
    m.origin = MountOrigin::Contain;
    addMount(mounts, std::move(m));
  }
}

// --scratch: an empty writable directory, from --workdir when given, else a tmpfs.
void addScratchMounts(std::vector<Mount>& mounts, const std::vector<std::string>& scratch, const std::string& workdir) {
  for (const auto& list : scratch) {
    for (auto item : splitList(list)) {
      if (item.empty()) continue;
      const std::string dir = normalizePath(item);
      if (dir.empty() || dir[0] != '/' || dir == "/" || hasDotDotComponent(dir))
        throw Error("bad --scratch '" + std::string(item) + "': an absolute path other than / without '..'");
      if (workdir.empty()) {
        addMount(mounts, tmpfsMount(dir, MountOrigin::User, 0700));
      } else {
        Mount m = bindMount(joinPath(workdir, "scratch" + dir), dir, false, MountOrigin::User);
        m.createSourceMode = 0750;
        addMount(mounts, std::move(m));
      }
    }
  }
}

}  // namespace

void addSystemMounts(std::vector<Mount>& mounts, bool ownPid, bool ownNet, const KernelInterfaces& kernel,
                     bool contain) {
  if (ownPid) {
    Mount proc;
    proc.kind = MountKind::Proc;
    proc.destination = "/proc";
    proc.origin = MountOrigin::Default;
    addMount(mounts, std::move(proc));
  } else {
    addMount(mounts, bindMount("/proc", "/proc", false, MountOrigin::Default));
  }
  if (ownNet) {
    // --network none / --net: the network interfaces the container's sysfs shows are its
    // own (Apptainer does the same); the host's /sys where the kernel refuses a new one.
    Mount sys = bindMount("/sys", "/sys", kernel.readOnly, MountOrigin::Default);
    sys.kind = MountKind::Sysfs;
    addMount(mounts, std::move(sys));
  } else {
    // Recursive: read-only, the cgroup tree below it too.
    addMount(mounts, bindMount("/sys", "/sys", kernel.readOnly, MountOrigin::Default));
  }
  if (kernel.readOnly) {
    for (const auto path : kReadOnlyKernelPaths)
      addMount(mounts, bindMount(std::string(path), std::string(path), true, MountOrigin::Default));
  }
  if (contain)
    addContainedDev(mounts);
  else
    addMount(mounts, bindMount("/dev", "/dev", false, MountOrigin::Default));
  addMount(mounts, bindMount("/etc/hosts", "/etc/hosts", true, MountOrigin::Default));
  addMount(mounts, bindMount("/etc/resolv.conf", "/etc/resolv.conf", true, MountOrigin::Default));
  addMount(mounts, bindMount("/etc/localtime", "/etc/localtime", true, MountOrigin::Default));
}

void addTmpAndHomeMounts(std::vector<Mount>& mounts, const LaunchOptions& options, const HomeDirs& home,
                         const std::string& workdir, bool contain) {
  // -W/--workdir: with --contain, /tmp and /var/tmp come from there (Apptainer's layout).
  if (contain && !workdir.empty()) {
    for (const auto& [source, destination] : {std::pair<std::string, std::string>{"tmp", "/tmp"}, {"var_tmp", "/var/tmp"}}) {
      Mount m = bindMount(joinPath(workdir, source), destination, false, MountOrigin::Contain);
      m.createSourceMode = 01777;
      addMount(mounts, std::move(m));
    }
  } else if (contain) {
    addMount(mounts, tmpfsMount("/tmp", MountOrigin::Contain, 01777));
    addMount(mounts, tmpfsMount("/var/tmp", MountOrigin::Contain, 01777));
  } else {
    addMount(mounts, bindMount("/tmp", "/tmp", false, MountOrigin::Default));
    addMount(mounts, bindMount("/var/tmp", "/var/tmp", false, MountOrigin::Default));
  }
  if (!options.noHome) {
    if (contain && options.home.empty() && !workdir.empty()) {
      // Apptainer's --workdir with --contain: the home is WORKDIR/home (kept between runs).
      Mount m = bindMount(joinPath(workdir, "home"), home.destination, false, MountOrigin::Contain);
      m.createSourceMode = 0700;
      addMount(mounts, std::move(m));
    } else if (contain && options.home.empty()) {
      addMount(mounts, tmpfsMount(home.destination, MountOrigin::Contain, 0700));
    } else {
      addMount(mounts, bindMount(home.source, home.destination, false, MountOrigin::Default));
    }
  }
}

void addSiteMounts(std::vector<Mount>& mounts, const LaunchOptions& options, const config::Policy& policy,
                   bool contain) {
  for (const auto& spec : policy.defaultBinds) {
    for (auto& b : withContext("in ctr.conf 'bind path'", [&] { return parseBindSpecs(spec); })) {
      if (!b.imageSrc.empty())
        throw Error("in ctr.conf 'bind path': " + toString(b) + ": image-src= is for users' --bind, not site binds");
      addMount(mounts, bindMount(b.source, b.destination, b.readOnly, MountOrigin::Policy));
    }
  }
  // The fabric: with a private /dev, the verbs and RDMA CM devices on request or by policy
  // (/sys/class/infiniband is there with /sys). The whole directory, recursively: its
  // uverbsN and rdma_cm nodes, whatever the HCAs.
  if (contain && (options.rdma || policy.rdmaWithContain)) {
    Mount m = bindMount("/dev/infiniband", "/dev/infiniband", false, MountOrigin::Host);
    m.from = options.rdma ? "--rdma" : "ctr.conf 'rdma with contain = yes'";
    addMount(mounts, std::move(m));
  }
}

namespace {
constexpr const char* kBindVariables[] = {"CTR_BIND", "APPTAINER_BIND", "APPTAINER_BINDPATH", "SINGULARITY_BIND",
                                          "SINGULARITY_BINDPATH"};
}  // namespace

std::vector<BindSpec> userBindSpecs(const LaunchOptions& options, const std::vector<std::string>& env,
                                    const std::string& cwd) {
  // Binds from the environment first (site modules set APPTAINER_BIND), then the flags:
  // for the same destination the flag wins.
  std::vector<BindSpec> binds;
  auto add = [&](const std::string& spec) {
    for (auto& b : parseBindSpecs(spec, cwd)) binds.push_back(std::move(b));
  };
  for (const char* name : kBindVariables)
    if (auto fromEnv = envValue(env, name); !fromEnv.empty()) add(fromEnv);
  for (const auto& spec : options.binds) add(spec);
  return binds;
}

std::vector<std::string> bindDestinationsForNesting(const LaunchOptions& options, const std::vector<std::string>& env,
                                                    const std::string& cwd) {
  std::vector<std::string> destinations;
  auto add = [&](const std::string& spec) {
    for (const auto& b : parseBindSpecs(spec, cwd)) destinations.push_back(b.destination);
  };
  for (const auto& spec : options.binds) add(spec);
  for (const char* name : kBindVariables)
    if (auto fromEnv = envValue(env, name); !fromEnv.empty()) add(fromEnv);
  return destinations;
}

void addUserMounts(std::vector<Mount>& mounts, const LaunchOptions& options, const std::vector<BindSpec>& userBinds,
                   const config::Policy& policy, const std::string& workdir, const std::vector<DatasetImage>& datasets) {
  if ((!userBinds.empty() || !options.mounts.empty() || !options.workdir.empty()) && !policy.allowUserBinds)
    throw Error("user bind mounts are disabled by the administrator ('allow user binds = no')");
  for (const auto& b : userBinds) {
    if (b.imageSrc.empty()) {
      addMount(mounts, bindMount(b.source, b.destination, b.readOnly, MountOrigin::User));
      continue;
    }
    // A dataset image: PATH of its mount in the holder (planDatasets made one per file).
    const auto dataset = std::find_if(datasets.begin(), datasets.end(),
                                      [&](const DatasetImage& d) { return d.source == b.source; });
    if (dataset == datasets.end()) throw Error("--bind " + toString(b) + ": the dataset image was not resolved");
    Mount m = bindMount(joinPath(dataset->mountDir, b.imageSrc), b.destination, true, MountOrigin::User);
    m.from = "--bind " + toString(b) + " (dataset image)";
    addMount(mounts, std::move(m));
  }
  for (const auto& spec : options.mounts) {
    auto b = parseMountSpec(spec);
    addMount(mounts, bindMount(b.source, b.destination, b.readOnly, MountOrigin::User));
  }
  addScratchMounts(mounts, options.scratch, workdir);
}

void addCwdMount(std::vector<Mount>& mounts, const std::string& cwd, bool contain) {
  if (contain || cwd.empty() || cwd == "/") return;
  // Covered: a mount already provides that path in the container (a custom --home
  // X:$HOME started from $HOME keeps X there, as in Apptainer).
  for (const auto& m : mounts) {
    if ((cwd == m.destination || cwd.rfind(m.destination + "/", 0) == 0) && m.destination != "/dev" &&
        m.destination != "/proc" && m.destination != "/sys")
      return;
  }
  addMount(mounts, bindMount(cwd, cwd, false, MountOrigin::Cwd));
}

NoMount parseNoMount(const std::vector<std::string>& specs) {
  NoMount no;
  for (const auto& spec : specs) {
    for (auto word : splitList(spec)) {
      const std::string w(trim(word));
      if (w.empty()) continue;
      if (w == "proc") no.proc = true;
      else if (w == "sys") no.sys = true;
      else if (w == "dev") no.dev = true;
      else if (w == "devpts") no.devpts = true;
      else if (w == "home") no.home = true;
      else if (w == "tmp") no.tmp = true;
      else if (w == "cwd") no.cwd = true;
      else if (w == "bind-paths") no.bindPaths = true;
      else if (w == "hostfs") continue;  // ctr never binds the host's file systems
      else if (w[0] == '/') no.paths.push_back(normalizePath(w));
      else
        throw Error("--no-mount '" + w + "': expected proc, sys, dev, devpts, home, tmp, hostfs, cwd, bind-paths "
                    "or the absolute destination of a default or site bind")
            .withStatus(1);
    }
  }
  return no;
}

std::vector<std::string> removeMounts(std::vector<Mount>& mounts, const NoMount& no) {
  if (!no.any()) return {};
  auto under = [](const std::string& path, std::string_view dir) {
    return path == dir || (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
  };
  // Apptainer's own default binds (its apptainer.conf 'bind path' entries) are these two.
  auto defaultBindPath = [](const Mount& m) {
    return m.origin == MountOrigin::Default && (m.destination == "/etc/hosts" || m.destination == "/etc/localtime");
  };
  std::vector<std::string> removed;
  std::erase_if(mounts, [&](const Mount& m) {
    bool drop = false;
    if (m.origin == MountOrigin::Default || m.origin == MountOrigin::Contain) {
      drop = (no.proc && under(m.destination, "/proc")) || (no.sys && under(m.destination, "/sys")) ||
             (no.devpts && m.destination == "/dev/pts") ||
             (no.tmp && (m.destination == "/tmp" || m.destination == "/var/tmp"));
    }
    if (no.cwd && m.origin == MountOrigin::Cwd) drop = true;
    if ((m.origin == MountOrigin::Policy || defaultBindPath(m)) &&
        (no.bindPaths || std::find(no.paths.begin(), no.paths.end(), m.destination) != no.paths.end()))
      drop = true;
    if (drop) removed.push_back(m.destination);
    return drop;
  });
  return removed;
}

void addIdentityMounts(std::vector<Mount>& mounts) {
  for (const IdentityFile file : {IdentityFile::Passwd, IdentityFile::Group}) {
    Mount m;
    m.kind = MountKind::Identity;
    m.identity = file;
    m.destination = identityFilePath(file);
    m.readOnly = true;
    m.origin = MountOrigin::Identity;
    mounts.push_back(std::move(m));
  }
}

void orderParentsFirst(std::vector<Mount>& mounts) {
  // -B d/file:/canary/file2 -B d:/canary: the file's bind moves after its directory's;
  // unrelated mounts keep their order.
  auto isUnder = [](const std::string& path, const std::string& dir) {
    return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < mounts.size() && !moved; ++i) {
      for (size_t j = mounts.size(); j-- > i + 1;) {
        if (isUnder(mounts[i].destination, mounts[j].destination)) {
          std::rotate(mounts.begin() + static_cast<std::ptrdiff_t>(i), mounts.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                      mounts.begin() + static_cast<std::ptrdiff_t>(j) + 1);
          moved = true;
          break;
        }
      }
    }
  }
}

}  // namespace ctr::launch
