// The planner: CLI options + policy + image + host facts -> LaunchPlan. Pure except for
// discoverHost(), which gathers the host facts once.
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ctr/binds.hpp"
#include "ctr/build_config.hpp"
#include "ctr/environment.hpp"
#include "ctr/error.hpp"
#include "ctr/launch.hpp"
#include "ctr/pathutil.hpp"

extern char** environ;

namespace ctr::launch {

namespace {

std::string envValue(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  }
  return {};
}

Mount bindMount(std::string source, std::string destination, bool readOnly, std::string origin) {
  Mount m;
  m.kind = MountKind::Bind;
  m.source = std::move(source);
  m.destination = std::move(destination);
  m.readOnly = readOnly;
  m.origin = std::move(origin);
  return m;
}

Mount tmpfsMount(std::string destination, std::string origin) {
  Mount m;
  m.kind = MountKind::Tmpfs;
  m.destination = std::move(destination);
  m.origin = std::move(origin);
  return m;
}

// A later mount at the same destination replaces an earlier one (user binds win over
// defaults), keeping the earlier position so parents are still mounted before children.
void addMount(std::vector<Mount>& mounts, Mount mount) {
  for (auto& m : mounts) {
    if (m.destination == mount.destination) {
      m = std::move(mount);
      return;
    }
  }
  mounts.push_back(std::move(mount));
}

ImageDriver chooseDriver(const config::Policy& policy, const image::ImageSource& image,
                         const HostFacts& host) {
  if (image.kind == image::ImageKind::Directory) return ImageDriver::Directory;
  const bool helperUsable = policy.allowSetuid && host.setuidHelperInstalled;
  switch (policy.imageDriver) {
    case config::ImageDriver::Setuid:
      if (!helperUsable)
        throw Error(
            "ctr.conf says 'image driver = setuid' but the setuid helper is not usable "
            "(needs 'allow setuid = yes' and " +
            std::string(build::kHelperPath) + " installed setuid root)");
      return ImageDriver::SetuidHelper;
    case config::ImageDriver::Squashfuse:
      return ImageDriver::Squashfuse;
    case config::ImageDriver::Auto:
      break;
  }
  return helperUsable ? ImageDriver::SetuidHelper : ImageDriver::Squashfuse;
}

}  // namespace

HostFacts discoverHost() {
  HostFacts host;
  host.user = lookupHostUser();
  for (char** e = environ; e && *e; ++e) host.env.emplace_back(*e);
  host.home = envValue(host.env, "HOME");
  if (host.home.empty()) host.home = host.user.home.empty() ? "/" : host.user.home;
  host.runtimeDir = envValue(host.env, "XDG_RUNTIME_DIR");

  std::array<char, PATH_MAX> cwd{};
  if (::getcwd(cwd.data(), cwd.size())) host.cwd = cwd.data();

  struct stat st {};
  host.setuidHelperInstalled = ::stat(build::kHelperPath, &st) == 0 && st.st_uid == 0 &&
                               (st.st_mode & S_ISUID) != 0;
  return host;
}

std::string stateDirFor(const HostFacts& host) {
  if (!host.runtimeDir.empty() && host.runtimeDir[0] == '/')
    return joinPath(host.runtimeDir, "ctr");
  return "/tmp/ctr-" + std::to_string(host.user.uid);
}

LaunchPlan planLaunch(const LaunchOptions& options, const config::Policy& policy,
                      const image::ImageSource& image, const HostFacts& host) {
  if (!policy.allowUserNamespaces)
    throw Error("user namespaces are disabled by the administrator ('allow user namespaces = "
                "no' in " + policy.source.string() + "); ctr cannot run containers here");

  LaunchPlan plan;
  plan.command = options.command;
  plan.image = image;
  plan.driver = chooseDriver(policy, image, host);
  plan.rootMode = options.writableTmpfs ? RootMode::Overlay : RootMode::Bind;
  plan.user = host.user;
  plan.seccompProfile = policy.seccompProfile;
  plan.stateDir = stateDirFor(host);
  plan.namespaces = {"user (shared by the user's launches of this image)",
                     "mount (own copy of the shared one)"};

  const bool contain = options.contain || options.containAll;
  const bool cleanEnv = options.cleanEnv || options.containAll;

  // Home: --home SRC[:DST], else the host $HOME at the same path.
  std::string homeSource = host.home;
  std::string homeDest = host.home;
  if (!options.home.empty()) {
    auto colon = options.home.find(':');
    homeSource = normalizePath(options.home.substr(0, colon));
    homeDest = colon == std::string::npos ? homeSource
                                          : normalizePath(options.home.substr(colon + 1));
    if (homeSource.empty() || homeSource[0] != '/' || homeDest.empty() || homeDest[0] != '/')
      throw Error("bad --home '" + options.home + "': paths must be absolute");
  }

  // Apptainer's defaults, in mount order.
  auto& mounts = plan.mounts;
  addMount(mounts, bindMount("/proc", "/proc", false, "default"));
  addMount(mounts, bindMount("/sys", "/sys", false, "default"));
  addMount(mounts, bindMount("/dev", "/dev", false, "default"));
  addMount(mounts, bindMount("/etc/hosts", "/etc/hosts", true, "default"));
  addMount(mounts, bindMount("/etc/resolv.conf", "/etc/resolv.conf", true, "default"));
  if (contain) {
    addMount(mounts, tmpfsMount("/tmp", "contain"));
    addMount(mounts, tmpfsMount("/var/tmp", "contain"));
  } else {
    addMount(mounts, bindMount("/tmp", "/tmp", false, "default"));
    addMount(mounts, bindMount("/var/tmp", "/var/tmp", false, "default"));
  }
  if (!options.noHome) {
    if (contain && options.home.empty())
      addMount(mounts, tmpfsMount(homeDest, "contain"));
    else
      addMount(mounts, bindMount(homeSource, homeDest, false, "default"));
  }
  for (const auto& spec : policy.defaultBinds) {
    for (auto& b : withContext("in ctr.conf 'bind path'", [&] { return parseBindSpecs(spec); }))
      addMount(mounts, bindMount(b.source, b.destination, b.readOnly, "policy"));
  }
  std::vector<std::string> userBinds;
  if (auto fromEnv = envValue(host.env, "CTR_BIND"); !fromEnv.empty()) userBinds.push_back(fromEnv);
  userBinds.insert(userBinds.end(), options.binds.begin(), options.binds.end());
  if (!userBinds.empty() && !policy.allowUserBinds)
    throw Error("user bind mounts are disabled by the administrator ('allow user binds = no')");
  for (const auto& spec : userBinds) {
    for (auto& b : parseBindSpecs(spec))
      addMount(mounts, bindMount(b.source, b.destination, b.readOnly, "user"));
  }
  // The current directory, unless contained or already under a bound path.
  if (!contain && !host.cwd.empty() && host.cwd != "/") {
    bool covered = false;
    for (const auto& m : mounts) {
      if (m.kind == MountKind::Bind && m.source == m.destination &&
          (host.cwd == m.source || host.cwd.rfind(m.source + "/", 0) == 0) &&
          m.destination != "/dev" && m.destination != "/proc" && m.destination != "/sys")
        covered = true;
    }
    if (!covered) addMount(mounts, bindMount(host.cwd, host.cwd, false, "default"));
  }

  // Identity files; content is filled in by the runtime from the image's own files.
  for (const char* file : {"/etc/passwd", "/etc/group"}) {
    Mount m;
    m.kind = MountKind::File;
    m.destination = file;
    m.readOnly = true;
    m.origin = "identity";
    mounts.push_back(std::move(m));
  }

  // Working directory.
  if (!options.pwd.empty()) {
    if (options.pwd[0] != '/') throw Error("bad --pwd '" + options.pwd + "': must be absolute");
    plan.workdir = normalizePath(options.pwd);
  } else if (contain) {
    plan.workdir = options.noHome ? "/" : homeDest;
  } else {
    plan.workdir = host.cwd.empty() ? "/" : host.cwd;
  }

  EnvironmentInputs envInputs;
  envInputs.host = host.env;
  envInputs.cleanEnv = cleanEnv;
  envInputs.home = homeDest;
  envInputs.imagePath = image.path.string();
  for (const auto& value : options.envs) {
    auto vars = parseEnvOption(value);
    envInputs.cli.insert(envInputs.cli.end(), vars.begin(), vars.end());
  }
  envInputs.envFiles = options.envFileVars;
  if (!image.environment.empty()) {
    envInputs.image = parseEnvFile(image.environment, image.path.string() + " (SIF environment object)");
  }
  Environment env = computeEnvironment(envInputs);
  plan.user.home = homeDest;
  plan.environment = toEnvp(env);
  for (const auto& name : env.userSet) plan.userEnvironment.push_back(name + '=' + env.vars[name]);

  switch (options.command) {
    case Command::Exec:
      if (options.args.empty()) throw Error("exec: no command given");
      plan.argv = options.args;
      break;
    case Command::Run:
      // The runtime picks /.singularity.d/runscript, else /singularity.
      plan.argv = {"/.singularity.d/runscript"};
      plan.argv.insert(plan.argv.end(), options.args.begin(), options.args.end());
      break;
    case Command::Shell:
      plan.argv = {"/bin/sh"};
      plan.argv.insert(plan.argv.end(), options.args.begin(), options.args.end());
      break;
  }
  return plan;
}

std::string toString(Command command) {
  switch (command) {
    case Command::Exec: return "exec";
    case Command::Run: return "run";
    case Command::Shell: return "shell";
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
  }
  return "?";
}

std::string toString(RootMode mode) {
  switch (mode) {
    case RootMode::Bind: return "image (read-only; overlay if a mount target is missing)";
    case RootMode::Overlay: return "overlay (image + private tmpfs)";
  }
  return "?";
}

nlohmann::json toJson(const LaunchPlan& plan) {
  nlohmann::json j;
  j["command"] = toString(plan.command);
  j["image"] = {{"path", plan.image.path.string()},
                {"kind", image::toString(plan.image.kind)},
                {"offset", plan.image.offset},
                {"size", plan.image.size}};
  j["driver"] = toString(plan.driver);
  j["root"] = plan.rootMode == RootMode::Overlay ? "overlay" : "image";
  j["mounts"] = nlohmann::json::array();
  for (const auto& m : plan.mounts) {
    nlohmann::json mj = {{"kind", toString(m.kind)},
                         {"destination", m.destination},
                         {"readonly", m.readOnly},
                         {"origin", m.origin}};
    if (m.kind == MountKind::Bind) mj["source"] = m.source;
    j["mounts"].push_back(std::move(mj));
  }
  j["environment"] = plan.environment;
  j["argv"] = plan.argv;
  j["workdir"] = plan.workdir;
  j["uid"] = plan.user.uid;
  j["gid"] = plan.user.gid;
  j["user"] = plan.user.name;
  j["groups"] = nlohmann::json::array();
  for (const auto& g : plan.user.groups) j["groups"].push_back(g.gid);
  j["namespaces"] = plan.namespaces;
  j["seccomp_profile"] = plan.seccompProfile.empty() ? "built-in default" : plan.seccompProfile;
  j["state_dir"] = plan.stateDir;
  return j;
}

std::string toText(const LaunchPlan& plan) {
  std::ostringstream out;
  out << "command:    " << toString(plan.command) << '\n'
      << "image:      " << plan.image.path.string() << " (" << image::toString(plan.image.kind);
  if (plan.image.kind != image::ImageKind::Directory)
    out << ", squashfs at offset " << plan.image.offset << ", " << plan.image.size << " bytes";
  out << ")\n"
      << "driver:     " << toString(plan.driver) << '\n'
      << "root:       " << toString(plan.rootMode) << '\n'
      << "identity:   uid " << plan.user.uid << ", gid " << plan.user.gid << " (" << plan.user.name
      << ")\n"
      << "namespaces:";
  for (const auto& ns : plan.namespaces) out << ' ' << ns << ';';
  out << " host network, ipc, pid\n"
      << "seccomp:    " << (plan.seccompProfile.empty() ? "built-in default" : plan.seccompProfile)
      << '\n'
      << "state dir:  " << plan.stateDir << '\n'
      << "mounts (in order):\n";
  for (const auto& m : plan.mounts) {
    out << "  " << toString(m.kind) << ' ';
    if (m.kind == MountKind::Bind) out << m.source << " -> ";
    out << m.destination << (m.readOnly ? " (ro)" : " (rw)") << " [" << m.origin << "]\n";
  }
  out << "workdir:    " << plan.workdir << '\n' << "argv:      ";
  for (const auto& a : plan.argv) out << " '" << a << '\'';
  out << "\nenvironment:\n";
  for (const auto& kv : plan.environment) out << "  " << kv << '\n';
  return out.str();
}

}  // namespace ctr::launch
