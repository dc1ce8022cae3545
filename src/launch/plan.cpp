// The planner: CLI options + policy + image + host facts -> LaunchPlan, as a list of steps
// (mounts.cpp, devices.cpp, resources.cpp, mpi.cpp hold the larger ones). Pure: the host facts
// are gathered before (src/host/host_facts.cpp).
#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <utility>

#include "ctr/configured.hpp"
#include "ctr/error.hpp"
#include "ctr/hash.hpp"
#include "ctr/instance.hpp"
#include "ctr/oci.hpp"
#include "ctr/pathutil.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

// Only the host's root can write the kernel's interfaces; its container runs as uid 0 mapped
// to itself, with no capability left, so read-only binds keep them out of its reach.
KernelInterfaces decideKernelInterfaces(const config::Policy& policy, uid_t uid) {
  if (uid != 0) return {false, "uid " + std::to_string(uid) + " cannot write them"};
  if (!policy.rootKernelInterfacesReadOnly)
    return {false, "writable for the host's root: 'root kernel interfaces = writable' in ctr.conf"};
  return {true, "the host's root: 'root kernel interfaces = read-only'"};
}

bool isValidAppName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; });
}

// A cgroup path without Slurm's per-task level: "/slurm/uid_1/job_7/step_0/task_3" ->
// "/slurm/uid_1/job_7/step_0".
std::string withoutTaskLevel(std::string path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return path;
  const std::string_view last = std::string_view(path).substr(slash + 1);
  if (last.size() > 5 && last.starts_with("task_") &&
      std::all_of(last.begin() + 5, last.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    path.erase(slash == 0 ? 1 : slash);
  return path;
}

// What does not depend on the mounts: the image and its driver, the identity, the state.
// Where a registry image's blobs come from (image::oci::registryEndpoints), for --explain.
std::vector<image::oci::Endpoint> planRegistryEndpoints(const image::ImageSource& image, const config::Policy& policy) {
  std::string_view reference = image.reference;
  if (reference.starts_with("oras://")) reference.remove_prefix(7);
  else if (!reference.starts_with("docker://")) return {};
  image::oci::PullOptions options;
  options.limits = policy.pull;
  return image::oci::registryEndpoints(image::oci::parseReference(reference), options);
}

LaunchPlan planBasics(const LaunchOptions& options, const config::Policy& policy, const image::ImageSource& image,
                      const host::HostFacts& host) {
  LaunchPlan plan;
  plan.command = options.command;
  plan.image = image;
  plan.registryEndpoints = planRegistryEndpoints(image, policy);
  auto decision = image.lazy ? DriverDecision{ImageDriver::Squashfuse,
                                              "read lazily (--lazy): ctr-squashfs serves the chunks read so far from the "
                                              "node cache and fetches the others as they are read",
                                              std::nullopt}
                            : decideDriver(policy, image.kind, host);
  plan.driver = decision.driver;
  plan.driverReason = std::move(decision.reason);
  plan.driverFallback = decision.fallback;
  plan.rootMode = RootMode::Bind;
  plan.user = host.user;
  plan.seccompProfile = policy.seccompProfile;
  plan.stateDir = host.stateDir;
  // A directory image lingers too (a new holder costs a directory launch 1.7 ms, docs/
  // benchmark-guide.md "Where a launch's time goes"), but only while what its prepared root
  // was made from is unchanged (holderKeyPaths, finishIdentityAndEnvironment) and no overlay
  // has the directory as a lower layer: one edited underneath (a sandbox after `build
  // --update`, a file the user changed) may be served stale.
  plan.lingerMs = policy.imageLingerMs;
  plan.lingerUnlessOverlaid = plan.driver == ImageDriver::Directory;
  plan.holderScope = planHolderScope(host.cgroups, host.mountNamespace);
  plan.limits = options.limits;
  if (!options.statsFile.empty())
    plan.statsFile = options.statsFile[0] == '/' ? options.statsFile : joinPath(host.cwd, options.statsFile);
  return plan;
}

// Dataset images (--bind FILE:DST:image-src=PATH): one per file, keyed by its identity, to be
// mounted by the image's holder under the state directory (docs/design-io.md section 3).
// Squashfs and SIF --overlay images are mounted the same way (planOverlay stacks them).
void planDatasets(LaunchPlan& plan, const LaunchOptions& options, const std::vector<BindSpec>& userBinds,
                  const host::HostFacts& host) {
  std::vector<std::pair<std::string, const image::ImageSource*>> wanted;  // what asks, the image
  for (const auto& bind : userBinds) {
    if (bind.imageSrc.empty()) continue;
    auto found = host.datasetImages.find(bind.source);
    if (found == host.datasetImages.end())
      throw Error("--bind " + toString(bind) + ": the dataset image was not looked at");
    wanted.emplace_back("--bind " + toString(bind), &found->second);
  }
  for (const auto& spec : options.overlays) {
    const auto file = host.overlayFiles.find(spec.path);
    if (file != host.overlayFiles.end() && file->second.image)
      wanted.emplace_back("--overlay " + spec.spec, &*file->second.image);
  }
  for (const auto& [what, image] : wanted) {
    const std::string source = image->path.string();
    if (std::any_of(plan.datasets.begin(), plan.datasets.end(),
                    [&](const DatasetImage& d) { return d.source == source; }))
      continue;
    if (plan.datasets.size() == kMaxDatasetImages)
      throw Error(what + ": at most " + std::to_string(kMaxDatasetImages) +
                  " dataset and overlay images per launch (pack them into fewer)")
          .withStatus(1);
    if (plan.stateDir.empty())
      throw Error(what + ": images beside the root are mounted by the image's holder, and every " +
                  "per-user state directory (/tmp/ctr-" + std::to_string(host.user.uid) + "*) is taken");
    DatasetImage dataset;
    dataset.source = source;
    dataset.image = *image;
    const auto& i = dataset.image;
    dataset.key = toHex16(fnv1a64(std::to_string(i.device) + ':' + std::to_string(i.inode) + ':' +
                                  std::to_string(i.mtimeNs) + ':' + std::to_string(i.offset) + ':' +
                                  std::to_string(i.size)));
    dataset.mountDir = joinPath(plan.stateDir, "mnt/data/" + dataset.key);
    plan.datasets.push_back(std::move(dataset));
  }
}

// The FUSE server of the squashfuse driver (or of its fallback). Without one the launch cannot
// mount the image: one line naming what to install, or, where it was only the fallback, no
// fallback.
void planImageServer(LaunchPlan& plan, const config::Policy& policy, const host::HostFacts& host) {
  const bool required = plan.driver == ImageDriver::Squashfuse || !plan.datasets.empty();
  if (!required && plan.driverFallback != ImageDriver::Squashfuse) return;
  const auto& servers = host.squashfsServers;
  const std::string setting = "'squashfs server = " + std::string(config::toString(policy.squashfsServer)) + "'";
  std::optional<ImageServer> chosen;
  std::string missing;
  if (plan.image.lazy) {  // only ctr-squashfs reads a blob lazily, whatever the setting
    if (servers.ctrSquashfs.empty())
      throw Error("cannot read " + plan.image.reference + " lazily: " +
                  (servers.ctrSquashfsMissing.empty() ? "ctr-squashfs is not installed" : servers.ctrSquashfsMissing) +
                  " (without --lazy it is pulled whole)");
    plan.imageServer = ImageServer{servers.ctrSquashfs, "a lazily read image: ctr-squashfs fetches its chunks"};
    return;
  }
  switch (policy.squashfsServer) {
    case config::SquashfsServer::CtrSquashfs:
      if (!servers.ctrSquashfs.empty()) chosen = ImageServer{servers.ctrSquashfs, setting + " in ctr.conf"};
      missing = servers.ctrSquashfsMissing;
      break;
    case config::SquashfsServer::Squashfuse:
      if (!servers.squashfuse.empty()) chosen = ImageServer{servers.squashfuse, setting + " in ctr.conf (one thread)"};
      missing = servers.squashfuseMissing;
      break;
    case config::SquashfsServer::Auto:
      if (!servers.ctrSquashfs.empty())
        chosen = ImageServer{servers.ctrSquashfs, setting + ": ctr's multithreaded server"};
      else if (!servers.squashfuse.empty())
        chosen = ImageServer{servers.squashfuse, setting + " and ctr-squashfs is not installed: squashfuse_ll, one thread"};
      missing = servers.squashfuseMissing.empty() ? servers.ctrSquashfsMissing : servers.squashfuseMissing;
      break;
  }
  if (chosen) {
    plan.imageServer = std::move(chosen);
  } else if (required) {
    const std::string what = plan.driver == ImageDriver::Squashfuse
                                 ? plan.image.path.string() + " without the setuid helper"
                                 : "the dataset image " + plan.datasets.front().image.path.string();
    throw Error("cannot mount " + what + ": " + (missing.empty() ? "no squashfs server found" : missing));
  } else {
    plan.driverFallback.reset();
  }
}

// --fakeroot: the caller is root in the container. Its image's holder makes a user namespace
// with the maps of planFakerootMaps (Apptainer's: subordinate ranges when the user has them,
// else the one id) and mounts the image there, so the image's root-owned files are root's,
// the caller's; the launch joins it as root and keeps root's capabilities there, as a build
// step does (dpkg, pip and chown work in an --overlay). Only squashfuse (or a directory) can
// serve such a namespace: the helper's kernel mount belongs to the host's root.
void planFakeroot(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy,
                  const host::HostFacts& host) {
  if (!options.fakeroot) return;
  if (plan.driver == ImageDriver::SetuidHelper) {
    if (policy.imageDriver == config::ImageDriver::Setuid)
      throw Error("--fakeroot needs the image mounted in the fakeroot user namespace (squashfuse), but " +
                  policy.source.string() + " says 'image driver = setuid'")
          .withStatus(1);
    plan.driver = ImageDriver::Squashfuse;
    plan.driverReason = "--fakeroot: squashfuse in the fakeroot user namespace (the helper's kernel mount would "
                        "show the image's files as nobody's)";
    plan.driverFallback.reset();
  }
  plan.fakeroot = planFakerootMaps(host, host.subordinate.value_or(host::SubordinateIds{}));
  becomeFakeroot(plan, host);
}

// --home SRC[:DST], else the host $HOME at the same path (at /root with --fakeroot, as
// Apptainer mounts it).
HomeDirs planHome(const LaunchOptions& options, const host::HostFacts& host) {
  if (options.home.empty()) return {host.home, options.fakeroot ? "/root" : host.home};
  auto colon = options.home.find(':');
  HomeDirs home;
  home.source = normalizePath(options.home.substr(0, colon));
  home.destination = colon == std::string::npos ? home.source : normalizePath(options.home.substr(colon + 1));
  if (home.source.empty() || home.source[0] != '/' || home.destination.empty() || home.destination[0] != '/')
    throw Error("bad --home '" + options.home + "': paths must be absolute");
  return home;
}

// Namespaces beyond user and mount: --containall brings PID and IPC, --hostname UTS.
Namespaces planNamespaces(const LaunchOptions& options) {
  Namespaces ns;
  // An instance's keeper is PID 1 of its own namespace: stopping it ends every process
  // that ran or joined there.
  ns.pid = (options.pid || options.containAll || options.command == Command::Instance) && !options.noPid;
  if (options.noInit && options.command == Command::Instance)
    throw Error("instance start --no-init: an instance's PID 1 is ctr's keeper, which stops it (--no-pid keeps it "
                "in the host's PID namespace instead)")
        .withStatus(1);
  ns.pidInit = !options.noInit;
  ns.ipc = options.ipc || options.containAll;
  ns.hostname = options.hostname;
  ns.uts = options.uts || !options.hostname.empty();
  if (!options.hostname.empty() &&
      (options.hostname.size() > 64 || options.hostname.find_first_of("/ \t\n") != std::string::npos))
    throw Error("bad --hostname '" + options.hostname + "': at most 64 characters, no '/' or blanks").withStatus(1);
  ns.net = options.net || !options.network.empty();
  if (!options.network.empty() && options.network != "none")
    throw Error("--network " + options.network + ": ctr has only 'none' (loopback only; no CNI plugins)");
  return ns;
}

// -W/--workdir as an absolute host path ("" when not given).
std::string planHostWorkdir(const LaunchOptions& options, const host::HostFacts& host) {
  if (options.workdir.empty()) return {};
  std::string workdir = normalizePath(options.workdir[0] == '/' ? options.workdir : joinPath(host.cwd, options.workdir));
  if (workdir == "/") throw Error("bad --workdir '" + options.workdir + "': not /");
  return workdir;
}

// The working directory in the container: --pwd, else the home with --contain, else the cwd;
// with --image-workdir, the image's recorded WORKDIR before those (they are where a launch
// starts when the image records none).
void planWorkingDirectory(LaunchPlan& plan, const LaunchOptions& options, const HomeDirs& home, const host::HostFacts& host,
                          bool contain) {
  if (options.imageWorkdir) plan.imageWorkdirFile = image::oci::kWorkdirFile;
  if (!options.pwd.empty()) {
    if (options.pwd[0] != '/') throw Error("bad --pwd '" + options.pwd + "': must be absolute");
    plan.workdir = normalizePath(options.pwd);
    plan.workdirRequired = true;
  } else if (contain) {
    plan.workdir = options.noHome ? "/" : home.destination;
  } else {
    plan.workdir = host.cwd.empty() ? "/" : host.cwd;
  }
}

// Apptainer's name of the action (APPTAINER_COMMAND in the container): `instance start`
// is "start", `instance run` "run".
std::string actionName(const LaunchOptions& options) {
  switch (options.command) {
    case Command::Exec: return "exec";
    case Command::Run: return "run";
    case Command::Shell: return "shell";
    case Command::Test: return "test";
    case Command::Instance: return options.instanceRunscript && !options.noStartscript ? "run" : "start";
  }
  return {};
}

// The container's environment from the host's, the image's, the user's and the injections';
// `instance` names the instance the launch starts or joins.
Environment planEnvironment(const LaunchOptions& options, const image::ImageSource& image, const host::HostFacts& host,
                            const HomeDirs& home, DeviceEnvironment devices, std::vector<std::string> firstLibraryDirs,
                            const std::string& instance) {
  EnvironmentInputs envInputs;
  envInputs.host = host.env;
  envInputs.cleanEnv = options.cleanEnv || options.containAll;
  envInputs.imageFirst = options.imageEnvFirst;
  envInputs.noEnv = options.noEnv;
  envInputs.evaluate = !options.noEval;
  envInputs.home = home.destination;
  envInputs.imagePath = image.path.string();
  envInputs.action = actionName(options);
  envInputs.instance = instance;
  envInputs.bindDestinations = bindDestinationsForNesting(options, host.env, host.cwd.empty() ? std::string("/") : host.cwd);
  for (const auto& value : options.envs) {
    auto vars = parseEnvOption(value);
    envInputs.cli.insert(envInputs.cli.end(), vars.begin(), vars.end());
  }
  envInputs.envFiles = options.envFileVars;
  envInputs.devices = std::move(devices.env);
  envInputs.libraryDirs = std::move(devices.libraryDirs);
  envInputs.libraryDirsFirst = std::move(firstLibraryDirs);
  if (!image.environment.empty())
    envInputs.image = parseEnvFile(image.environment, image.path.string() + " (SIF environment object)");
  Environment env = computeEnvironment(envInputs);
  if (!options.app.empty()) {
    if (!isValidAppName(options.app))
      throw Error("bad --app '" + options.app + "': an app name is letters, digits, '_', '-' and '.'").withStatus(1);
    // The image's 95-apps.sh selects the app from these, before the user's settings.
    for (const char* key : {"APPTAINER_APPNAME", "SINGULARITY_APPNAME"}) {
      env.vars[key] = options.app;
      env.fixed.emplace_back(key, options.app);
    }
  }
  return env;
}

// What a directory image's prepared root is made from, as paths of the directory: each
// target and every directory above it (a target the image lacks is made in the nearest of
// them, whose entries an underlay copies; an identity file is made from the image's own).
std::vector<std::string> holderKeyPaths(const PreparedRootSpec& spec) {
  std::set<std::string> paths{"/"};
  for (const auto& m : spec.mounts)
    for (std::string p = m.destination; p.size() > 1; p = p.substr(0, std::max<std::size_t>(p.rfind('/'), 1)))
      paths.insert(p);
  return {paths.begin(), paths.end()};
}

// The home, the prepared root (all but the per-launch mounts) and the environment.
void finishIdentityAndEnvironment(LaunchPlan& plan, const HomeDirs& home, Environment env) {
  plan.user.home = home.destination;
  // What the holder prepares once for every launch: all but the per-launch mounts. Of those,
  // it makes the default, site and host binds (and the host tmpfs) itself, once, rather than
  // every launch (60 binds of --nv's libraries would cost milliseconds each time).
  for (auto& m : plan.mounts) {
    if (m.origin == MountOrigin::User || m.origin == MountOrigin::Cwd) continue;
    const bool shared = m.origin == MountOrigin::Default || m.origin == MountOrigin::Policy || m.origin == MountOrigin::Host;
    m.prebind = shared && (m.kind == MountKind::Bind || (m.kind == MountKind::Tmpfs && m.origin == MountOrigin::Host));
    plan.preparedRoot.mounts.push_back(m);
  }
  plan.preparedRoot.user = plan.user;
  if (plan.driver == ImageDriver::Directory) plan.holderKeyPaths = holderKeyPaths(plan.preparedRoot);
  plan.environment = toEnvp(env);
  for (const auto& kv : plan.environment)
    if (kv.starts_with("PS1=")) plan.envProgram.ps1 = kv.substr(4);  // the shell's prompt, set before it starts
  plan.envProgram.user = std::move(env.user);
  plan.envProgram.fixed = std::move(env.fixed);
  plan.envProgram.hostFallback = std::move(env.hostFallback);
  plan.envProgram.wiringPassesThrough = env.wiringPassesThrough;
  plan.envProgram.uid = plan.user.uid;
  plan.envProgram.gid = plan.user.gid;
  plan.warnings.insert(plan.warnings.end(), env.warnings.begin(), env.warnings.end());
}

// The program: exec's command, or the choices of run, shell and test (Apptainer's order).
void planCommand(LaunchPlan& plan, const LaunchOptions& options) {
  plan.argv = options.args;
  if (!options.app.empty()) plan.appRoot = "/scif/apps/" + options.app;
  const std::string appDir = options.app.empty() ? "" : "/scif/apps/" + options.app + "/scif";
  auto choice = [](std::vector<std::string> program, std::vector<EnvVar> set = {}, std::string note = {}) {
    return CommandChoice{std::move(program), std::move(set), std::move(note)};
  };
  // instance run: the instance's program is chosen as run chooses it.
  const bool instanceRun = options.command == Command::Instance && options.instanceRunscript && !options.noStartscript;
  switch (instanceRun ? Command::Run : options.command) {
    case Command::Exec:
      if (options.args.empty()) throw Error("exec: no command given (usage: ctr exec [options] IMAGE COMMAND [ARGS...])").withStatus(1);
      break;
    case Command::Run:
      if (!appDir.empty()) {
        plan.commandChoices = {choice({appDir + "/runscript"})};
        plan.noCommand = {"no runscript for the app '" + options.app + "' (" + appDir + "/runscript)", 1};
      } else {
        plan.commandChoices = {choice({"/.singularity.d/runscript"}), choice({"/singularity"}), choice({"/apptainer"}),
                               choice({"/bin/sh"}, {}, "the image has no runscript: running /bin/sh")};
        plan.noCommand = {"the image has no runscript (/.singularity.d/runscript, /singularity) and no /bin/sh", 1};
      }
      break;
    case Command::Shell:
      if (!options.shell.empty()) plan.commandChoices.push_back(choice({options.shell}, {{"SHELL", options.shell}}));
      plan.commandChoices.push_back(choice({"/bin/bash", "--norc"}, {{"SHELL", "/bin/bash"}}));
      plan.commandChoices.push_back(choice({"/bin/sh"}, {{"SHELL", "/bin/sh"}}));
      plan.noCommand = {"the image has no shell (" + (options.shell.empty() ? "" : options.shell + ", ") +
                            "/bin/bash, /bin/sh)",
                        1};
      break;
    case Command::Instance:
      if (options.noStartscript) {
        if (!options.args.empty())
          throw Error("instance start --no-startscript: the arguments after NAME are the startscript's, and it "
                      "does not run")
              .withStatus(1);
        break;
      }
      if (!appDir.empty()) {
        // --app NAME: the app's %appstart, as Apptainer runs it.
        plan.commandChoices = {choice({appDir + "/startscript"})};
        plan.noCommand = {"no %appstart for the app '" + options.app + "' (" + appDir + "/startscript)", 1};
        break;
      }
      plan.commandChoices = {choice({"/.singularity.d/startscript"})};
      plan.noCommand = {"the image has no startscript: the instance runs nothing until a launch joins it", 0};
      break;
    case Command::Test:
      if (!appDir.empty()) {
        plan.commandChoices = {choice({appDir + "/test"})};
        plan.noCommand = {"no test for the app '" + options.app + "' (" + appDir + "/test)", 1};
      } else {
        plan.commandChoices = {choice({"/.singularity.d/test"})};
        plan.noCommand = {"the image has no test script (/.singularity.d/test): nothing to test", 0};
      }
      break;
  }
}

}  // namespace

HolderScope planHolderScope(const std::map<std::string, std::string>& ownCgroups, const std::string& mountNamespace) {
  HolderScope scope;
  scope.mountNamespace = mountNamespace;
  if (auto f = ownCgroups.find("freezer"); f != ownCgroups.end()) scope.freezer = withoutTaskLevel(f->second);
  if (auto u = ownCgroups.find(""); u != ownCgroups.end()) scope.unified = withoutTaskLevel(u->second);
  return scope;
}

LaunchPlan planLaunch(const LaunchOptions& given, const config::Policy& policy,
                      const image::ImageSource& image, const host::HostFacts& host) {
  if (!policy.allowUserNamespaces)
    throw Error("user namespaces are disabled by the administrator ('allow user namespaces = "
                "no' in " + policy.source.string() + "); ctr cannot run containers here");
  const NoMount noMount = parseNoMount(given.noMount);
  // --no-mount home is --no-home (a copy only then: the launch path stays lean).
  std::optional<LaunchOptions> withoutHome;
  if (noMount.home && !given.noHome) {
    withoutHome = given;
    withoutHome->noHome = true;
  }
  const LaunchOptions& options = withoutHome ? *withoutHome : given;
  const bool contain = options.contain || options.containAll;
  // --no-mount dev: the small private /dev of --contain instead of the host's, with the
  // devices the launch asks for bound into it.
  const bool privateDev = contain || noMount.dev;
  LaunchPlan plan = planBasics(options, policy, image, host);
  planFakeroot(plan, options, policy, host);
  const std::vector<BindSpec> userBinds = userBindSpecs(options, host.env, host.cwd.empty() ? std::string("/") : host.cwd);
  planDatasets(plan, options, userBinds, host);
  planExecution(plan, policy, host);  // before the mounts are planned: a refused image gets no further
  planStaging(plan, options, policy, host);
  planDatasetDrivers(plan, policy, host);
  planImageServer(plan, policy, host);
  planOverlay(plan, options, host);
  plan.rootReadOnly = plan.rootMode == RootMode::Bind;
  const HomeDirs home = planHome(options, host);
  plan.namespaces = planNamespaces(options);
  // Apptainer's defaults, in mount order; then the site's, the devices', MPI's, the user's.
  plan.kernelInterfaces = decideKernelInterfaces(policy, host.user.uid);
  addSystemMounts(plan.mounts, plan.namespaces.pid, plan.namespaces.net, plan.kernelInterfaces, privateDev);
  const std::string workdir = planHostWorkdir(options, host);
  addTmpAndHomeMounts(plan.mounts, options, home, workdir, contain);
  addSiteMounts(plan.mounts, options, policy, privateDev);
  // The host's drivers and devices, before the user's binds (which win).
  DeviceEnvironment devices = planDevices(plan, options, policy, host, privateDev);
  // After the devices: --gpus adds the device rules of the GPUs it left out.
  planLimits(plan, options, policy, host);
  std::vector<std::string> firstLibraryDirs = planMpi(plan, options, policy, host);
  addUserMounts(plan.mounts, options, userBinds, policy, workdir, plan.datasets);
  // Before the current directory's mount: one that /tmp covered gets its own.
  plan.mountsLeftOut = removeMounts(plan.mounts, noMount);
  if (noMount.home && !given.noHome) plan.mountsLeftOut.push_back(home.destination);
  addCwdMount(plan.mounts, host.cwd, contain);
  if (noMount.cwd) {
    NoMount cwdOnly;
    cwdOnly.cwd = true;
    for (const auto& d : removeMounts(plan.mounts, cwdOnly)) plan.mountsLeftOut.push_back(d);
  }
  addIdentityMounts(plan.mounts);
  orderParentsFirst(plan.mounts);
  planWorkingDirectory(plan, options, home, host, contain);
  Environment env =
      planEnvironment(options, image, host, home, std::move(devices), std::move(firstLibraryDirs), options.instance);
  finishIdentityAndEnvironment(plan, home, std::move(env));
  if (options.noUmask) plan.handover.umask = 022;
  planCommand(plan, options);
  plan.glibcCheck = planGlibcCheck(plan);
  if (options.command == Command::Instance) {
    plan.instance = planInstanceFiles(options.instance, host.stateDir);
    plan.instance->reuse = options.reuseInstance;
    plan.instance->startscript = !options.noStartscript;
    plan.instance->runscript = options.instanceRunscript && !options.noStartscript;
    if (options.stayAsKeeper && plan.namespaces.pid)
      throw Error("instance start --stay: the keeper stays in the caller's PID namespace: give --no-pid too")
          .withStatus(1);
    plan.instance->stay = options.stayAsKeeper;
  }
  return plan;
}

LaunchPlan planJoin(const LaunchOptions& options, const config::Policy& policy, const InstanceRecord& record,
                    const image::ImageSource& image, const host::HostFacts& host) {
  if (!policy.allowUserNamespaces)
    throw Error("user namespaces are disabled by the administrator ('allow user namespaces = "
                "no' in " + policy.source.string() + "); ctr cannot run containers here");
  // What the instance set when it started cannot change for one launch into it.
  std::vector<std::string> refused;
  auto refuse = [&refused](bool given, const char* option) {
    if (given) refused.emplace_back(option);
  };
  refuse(!options.binds.empty() || !options.mounts.empty() || !options.scratch.empty(), "--bind/--mount/--scratch");
  refuse(!options.home.empty() || options.noHome, "--home/--no-home");
  refuse(options.fakeroot, "--fakeroot");
  refuse(options.contain || options.containAll, "--contain/--containall");
  refuse(options.writable || options.writableTmpfs || !options.overlays.empty(), "--writable/--writable-tmpfs/--overlay");
  refuse(!options.workdir.empty(), "--workdir");
  refuse(options.stage.has_value(), "--stage/--no-stage");
  refuse(!options.limits.empty() || !options.statsFile.empty(), "the limits and --stats");
  refuse(options.pid || options.noPid || options.noInit || options.ipc || options.uts || !options.hostname.empty() || options.net ||
             !options.network.empty(),
         "the namespace options");
  refuse(options.nv || options.rocm || !options.devices.empty() || options.rdma || !options.gpus.empty() ||
             !options.mpi.empty(),
         "the device and MPI options");
  if (!refused.empty()) {
    std::string list;
    for (const auto& r : refused) list += (list.empty() ? "" : ", ") + r;
    throw Error(list + " cannot be used with instance://" + record.name +
                ": its mounts, namespaces, devices and limits were set by `ctr instance start`")
        .withStatus(1);
  }
  LaunchPlan plan;
  plan.command = options.command;
  plan.image = image;
  plan.driverReason = "the instance's: its image is mounted while it runs";
  plan.rootMode = RootMode::Join;
  plan.user = host.user;
  if (record.fakeroot) becomeFakeroot(plan, host);
  plan.seccompProfile = policy.seccompProfile;
  plan.stateDir = host.stateDir;
  plan.lingerMs = policy.imageLingerMs;
  plan.holderScope = planHolderScope(host.cgroups, host.mountNamespace);
  plan.namespaces.ownMount = false;
  plan.kernelInterfaces = {false, "the instance's, as it started"};
  for (const auto& ns : record.namespaces) {
    plan.namespaces.pid = plan.namespaces.pid || ns.type == "pid";
    plan.namespaces.ipc = plan.namespaces.ipc || ns.type == "ipc";
    plan.namespaces.uts = plan.namespaces.uts || ns.type == "uts";
    plan.namespaces.net = plan.namespaces.net || ns.type == "net";
  }
  plan.join = JoinPlan{record.name, planInstanceFiles(record.name, host.stateDir).record, record.keeper,
                       record.keeperStart, record.namespaces, {}};
  for (const auto& [controller, dir] : record.cgroups)
    if (std::find(plan.join->cgroups.begin(), plan.join->cgroups.end(), dir) == plan.join->cgroups.end())
      plan.join->cgroups.push_back(dir);
  const HomeDirs home{host.home, record.home.empty() ? host.home : record.home};
  planWorkingDirectory(plan, options, home, host, false);
  Environment env = planEnvironment(options, image, host, home, {}, {}, record.name);
  finishIdentityAndEnvironment(plan, home, std::move(env));
  planCommand(plan, options);
  return plan;
}

DriverDecision decideDriver(const config::Policy& policy, image::ImageKind kind, const host::HostFacts& host) {
  if (kind == image::ImageKind::Directory)
    return {ImageDriver::Directory, "a directory image is bound as it is", std::nullopt};
  std::string helperProblem;
  if (!policy.allowSetuid)
    helperProblem = "'allow setuid = no' in ctr.conf";
  else if (host.setuidHelper == host::HelperState::Writable)
    helperProblem = std::string(configured::kHelperPath) + " is setuid root but writable by group or others (refused)";
  else if (host.setuidHelper != host::HelperState::Usable)
    helperProblem = std::string(configured::kHelperPath) + " is not installed setuid root";
  else if (!host.helperConfigSafe)
    helperProblem = std::string(configured::kSysconfPath) + " is not root-owned and private (the helper refuses it)";
  else if (!host.loopControl)
    helperProblem = "/dev/loop-control is missing";
  else if (!host.imageUntrustedFs.empty())
    helperProblem = "the image is on a " + host.imageUntrustedFs +
                    " file system, whose owner and content users control: the helper refuses it";
  const bool helperUsable = helperProblem.empty();
  switch (policy.imageDriver) {
    case config::ImageDriver::Setuid:
      if (!helperUsable)
        throw Error("ctr.conf says 'image driver = setuid' but the setuid helper is not usable: " +
                    helperProblem);
      return {ImageDriver::SetuidHelper, "'image driver = setuid': kernel squashfs through the helper",
              std::nullopt};
    case config::ImageDriver::Squashfuse:
      return {ImageDriver::Squashfuse, "'image driver = squashfuse' in ctr.conf", std::nullopt};
    case config::ImageDriver::Auto:
      break;
  }
  if (helperUsable)
    return {ImageDriver::SetuidHelper,
            "'image driver = auto' and the setuid helper is usable: kernel squashfs (squashfuse if "
            "the helper cannot proceed)",
            ImageDriver::Squashfuse};
  return {ImageDriver::Squashfuse, "'image driver = auto' and no usable setuid helper (" + helperProblem + ")",
          std::nullopt};
}

std::string whyHelperRefuses(const config::Policy& policy, const host::HostFacts& host,
                             const image::ImageSource& image) {
  const std::string format = image.kind == image::ImageKind::Sif ? "sif" : "squashfs";
  if (std::find(policy.setuidFormats.begin(), policy.setuidFormats.end(), format) == policy.setuidFormats.end())
    return "format " + format + " is not in 'setuid formats'";
  if (const std::string fs = host::untrustedFilesystemName(image.filesystem); !fs.empty())
    return "it is on a " + fs + " file system, whose owner and content users control";
  if (image.links != 1) return "it has " + std::to_string(image.links) + " hard links";
  const auto& owners = policy.setuidImageOwners;
  const auto listed = [&](const std::string& name) { return std::find(owners.begin(), owners.end(), name) != owners.end(); };
  const bool otherNames = std::any_of(owners.begin(), owners.end(), [&](const std::string& name) {
    return name != "root" && name != "self" && name != host.user.name;
  });
  const bool ownerListed = (image.owner == 0 && listed("root")) ||
                           (image.owner == host.user.uid && (listed("self") || listed(host.user.name)));
  if (!ownerListed && !otherNames)
    return "its owner (uid " + std::to_string(image.owner) + ") is not in 'setuid image owners'";
  const auto& dirs = policy.setuidImageDirectories;
  if (!dirs.empty() && std::none_of(dirs.begin(), dirs.end(), [&](const std::string& dir) {
        return isAtOrUnder(image.path.string(), dir);
      }))
    return "it is not under any 'setuid image directories'";
  // ctr_mount_helper.c, check_execution: what an execution rule checked must be what the kernel reads.
  if (config::executionRuleFor(policy.execution, image.path.string())) {
    if (image.owner == host.user.uid && host.user.uid != 0)
      return "an execution rule takes it, and it is the caller's, who could change it after the check";
    if ((image.mode & 022) != 0) return "an execution rule takes it, and a group or others may change it";
  }
  return {};
}

image::ImageSource fileMounted(const LaunchPlan& plan, const host::HostFacts& host, const image::ImageSource& image) {
  image::ImageSource file = image;
  if (plan.staging && std::any_of(plan.staging->files.begin(), plan.staging->files.end(),
                                  [&](const StagedFile& f) { return f.copy == image.path.string(); })) {
    file.owner = host.user.uid;  // the copy is the user's: their launch made it
    file.links = 1;
    file.filesystem = 0;  // the stage directory is node-local
  }
  return file;
}

void planDatasetDrivers(LaunchPlan& plan, const config::Policy& policy, const host::HostFacts& host) {
  for (auto& dataset : plan.datasets) {
    if (plan.driver != ImageDriver::SetuidHelper) {
      dataset.driver = ImageDriver::Squashfuse;
      dataset.driverReason = "the image does not go through the setuid helper";
    } else if (dataset.image.dataPartition) {
      dataset.driver = ImageDriver::Squashfuse;
      dataset.driverReason = "the setuid helper mounts a SIF's primary partition only, and this is a data partition";
    } else if (const std::string why = whyHelperRefuses(policy, host, fileMounted(plan, host, dataset.image));
               !why.empty()) {
      dataset.driver = ImageDriver::Squashfuse;
      dataset.driverReason = "the setuid helper would refuse it: " + why;
    } else {
      dataset.driver = ImageDriver::SetuidHelper;
      dataset.driverReason = "kernel squashfs through the setuid helper, with the image" +
                             std::string(plan.driverFallback ? " (the image server if the helper cannot proceed)" : "");
    }
  }
}

std::vector<GlibcNeed> glibcNeeds(const LaunchPlan& plan) {
  std::vector<GlibcNeed> needs;
  if (plan.devices) {
    for (const auto& driver : plan.devices->drivers)
      if (!driver.needsGlibc.empty())
        needs.push_back({host::toString(driver.vendor) + " driver " + driver.version, driver.needsGlibc, driver.needsGlibcLibrary});
  }
  if (plan.mpi && !plan.mpi->needsGlibc.empty())
    needs.push_back({"host MPI (" + host::toString(plan.mpi->family) + ", --mpi=bind)", plan.mpi->needsGlibc,
                     plan.mpi->needsGlibcLibrary});
  return needs;
}

GlibcCheck planGlibcCheck(const LaunchPlan& plan) {
  GlibcCheck check;
  check.needs = glibcNeeds(plan);
  // The image's libc.so.6 in the multiarch directories of the architectures ctr runs on,
  // then the biarch and plain ones (an image without glibc, musl or static, has none).
  if (!check.needs.empty())
    check.imageLibc = {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
                       "/lib/powerpc64le-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6",
                       "/lib/libc.so.6", "/usr/lib/libc.so.6"};
  return check;
}

}  // namespace ctr::launch
