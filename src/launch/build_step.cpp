// planBuildStep: the plan of one build step (%post, %test while building), see
// docs/architecture.md, "Builds". Pure: the subordinate ids come from ctr::host.
#include "ctr/error.hpp"
#include "ctr/launch.hpp"
#include "ctr/fd.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

Mount defaultBind(std::string path, bool recursive) {
  Mount m;
  m.kind = MountKind::Bind;
  m.source = path;
  m.destination = std::move(path);
  m.recursive = recursive;
  m.origin = MountOrigin::Default;
  return m;
}

// What the caller's root in the namespace maps to, and how the maps get written.
}  // namespace

FakerootMaps planFakerootMaps(const host::HostFacts& host, const host::SubordinateIds& subordinate) {
  FakerootMaps root;
  const std::uint32_t uid = host.user.uid, gid = host.user.gid;
  if (uid == 0) {
    // Root may write any map itself: the namespace sees the host's ids unchanged.
    root.uidMap = {{0, 0, 4294967295u}};
    root.gidMap = {{0, 0, 4294967295u}};
    root.mapNote = "the caller is root: ids map to themselves";
    return root;
  }
  root.uidMap = {{0, uid, 1}};
  root.gidMap = {{0, gid, 1}};
  if (subordinate.uids && subordinate.gids && subordinate.uids->count > 0 && subordinate.gids->count > 0) {
    root.uidMap.push_back({1, subordinate.uids->outside, subordinate.uids->count});
    root.gidMap.push_back({1, subordinate.gids->outside, subordinate.gids->count});
    root.mapHelpers = true;
    root.newuidmap = "/usr/bin/newuidmap";
    root.newgidmap = "/usr/bin/newgidmap";
    root.mapNote = "root is " + host.user.name + "; ids 1.." + std::to_string(subordinate.uids->count) +
                   " are the subordinate ranges of /etc/subuid and /etc/subgid";
  } else {
    root.mapNote = "root is " + host.user.name + " and no other id is mapped: " + host.user.name +
                   " has no range in /etc/subuid and /etc/subgid, so programs that switch to another "
                   "user (apt-get's _apt) fail";
  }
  return root;
}

void becomeFakeroot(LaunchPlan& plan, const host::HostFacts& host) {
  plan.user = host.user;
  plan.user.uid = 0;
  plan.user.gid = 0;
  plan.user.name = "root";
  plan.user.gecos = "root";
  plan.user.home = "/root";
  plan.user.shell = "/bin/sh";
  plan.user.primaryGroup = {0, "root"};
  plan.user.groups.clear();
  plan.handover.keepCapabilities = true;
}

BuildRoot planBuildRoot(const host::HostFacts& host, const host::SubordinateIds& subordinate) {
  BuildRoot root;
  static_cast<FakerootMaps&>(root) = planFakerootMaps(host, subordinate);
  return root;
}

LaunchPlan planBuildStep(const BuildStepOptions& options, const config::Policy& policy, const host::HostFacts& host,
                         const host::SubordinateIds& subordinate) {
  if (!policy.allowUserNamespaces)
    throw Error("user namespaces are disabled by the administrator ('allow user namespaces = no' in " +
                policy.source.string() + "); ctr cannot run build steps here");
  if (options.argv.empty()) throw Error("internal error: a build step without a command");
  LaunchPlan plan;
  plan.command = options.section == BuildSection::Post ? Command::Exec : Command::Test;
  plan.image.path = options.sandbox;
  plan.image.kind = image::ImageKind::Directory;
  plan.driver = ImageDriver::Directory;
  plan.driverReason = "a build step runs in the stage's sandbox directory";
  plan.rootMode = RootMode::Sandbox;
  plan.namespaces.sharedUser = false;
  plan.build = planBuildRoot(host, subordinate);
  plan.build->sandbox = options.sandbox;
  plan.build->stageDir = options.stageDir;
  // As Apptainer's builds: root in the namespace keeps its capabilities (dpkg chowns files)
  // and no seccomp filter is loaded.
  plan.handover.seccomp = false;
  becomeFakeroot(plan, host);
  plan.stateDir = host.stateDir;

  // Apptainer's mounts during %post and %test: the kernel's file systems (the step's own
  // /proc) and the host's name resolution (apt needs it), nothing of the user's.
  // Its own PID namespace: what a step starts ends with it, and a signal that interrupts
  // the build reaches every process of the step (apt-get under the script's shell too).
  plan.namespaces.pid = true;
  plan.namespaces.signalAll = true;
  Mount proc;
  proc.kind = MountKind::Proc;
  proc.destination = "/proc";
  proc.origin = MountOrigin::Default;
  plan.mounts = {proc, defaultBind("/sys", true), defaultBind("/dev", true),
                 defaultBind("/etc/resolv.conf", false), defaultBind("/etc/hosts", false)};
  if (options.section == BuildSection::Test) {
    // The tree as it will run: read-only, or (--writable-tmpfs) with a tmpfs over it whose
    // changes vanish; a scratch /tmp and /var/tmp either way (mpirun, compilers).
    if (options.writableTmpfs) {
      plan.rootMode = RootMode::Overlay;
      plan.overlay.tmpfsUpper = true;
    } else {
      // The finished tree is tested as it will be run, read-only (Apptainer's), so that
      // nothing the test writes goes into the image.
      plan.rootReadOnly = true;
    }
    plan.mounts.push_back(tmpfsMount("/tmp", MountOrigin::Default, 01777));
    plan.mounts.push_back(tmpfsMount("/var/tmp", MountOrigin::Default, 01777));
  }

  // A clean environment (Apptainer: --cleanenv), the build's variables, and what a user
  // sets for network access and the terminal.
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                  "HOME=/root", "LANG=C",
                                  "APPTAINER_ROOTFS=/", "SINGULARITY_ROOTFS=/",
                                  "APPTAINER_ENVIRONMENT=/.singularity.d/env/91-environment.sh",
                                  "SINGULARITY_ENVIRONMENT=/.singularity.d/env/91-environment.sh",
                                  "APPTAINER_LABELS=/.build.labels", "SINGULARITY_LABELS=/.build.labels",
                                  "APPTAINER_CONTAINER=" + options.sandbox,
                                  "SINGULARITY_CONTAINER=" + options.sandbox};
  for (const auto& kv : options.hostEnv) {
    const std::string name = kv.substr(0, kv.find('='));
    if (name == "TERM" || name == "http_proxy" || name == "https_proxy" || name == "no_proxy" ||
        name == "HTTP_PROXY" || name == "HTTPS_PROXY" || name == "NO_PROXY" || name == "SOURCE_DATE_EPOCH")
      env.push_back(kv);
  }
  plan.environment = std::move(env);
  plan.envProgram.uid = plan.user.uid;
  plan.envProgram.gid = plan.user.gid;
  plan.sourceEnvScripts = options.section == BuildSection::Test;
  plan.workdir = "/";
  plan.argv = options.argv;
  return plan;
}

}  // namespace ctr::launch
