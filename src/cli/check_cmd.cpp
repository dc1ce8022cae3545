// `ctr check`: tells an admin which image mode ctr will use on this host and why, one line
// per check (or --json). Exit 0 when some way to mount images is usable, else 255.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ctr/configured.hpp"
#include "ctr/owned_child.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/inventory.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/launch.hpp"
#include "ctr/limits.hpp"
#include "ctr/run_process.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {
namespace {

enum class Status { Ok, Warn, Fail, Info };

struct Check {
  std::string name;
  Status status;
  std::string detail;
};

std::string_view toString(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Warn: return "warn";
    case Status::Fail: return "fail";
    case Status::Info: return "info";
  }
  return "info";
}

struct Findings {
  std::vector<Check> checks;
  bool userns = false, fuse = false, squashfuse = false, helper = false, configSafe = false;
  config::Policy policy;
  bool policyLoaded = false;
  host::HostFacts host = host::discoverHost();  // as `ctr exec` sees the node, probed by the same entry
};

void checkUserNamespaces(Findings& f) {
  std::string max = readFirstLine("/proc/sys/user/max_user_namespaces");
  bool maxOk = max.empty() || std::atol(max.c_str()) > 0;
  f.checks.push_back({"user.max_user_namespaces", maxOk ? Status::Ok : Status::Fail,
                      max.empty() ? "not present" : max + (maxOk ? "" : " (set it above 0: sysctl -w user.max_user_namespaces=15000)")});
  std::string clone = readFirstLine("/proc/sys/kernel/unprivileged_userns_clone");
  if (!clone.empty())
    f.checks.push_back({"kernel.unprivileged_userns_clone", clone == "1" ? Status::Ok : Status::Fail,
                        clone + (clone == "1" ? "" : " (sysctl -w kernel.unprivileged_userns_clone=1)")});
  std::string aa = readFirstLine("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  if (!aa.empty())
    f.checks.push_back({"kernel.apparmor_restrict_unprivileged_userns", aa == "0" ? Status::Ok : Status::Warn,
                        aa + (aa == "0" ? "" : " (AppArmor may refuse user namespaces to ctr)")});
  int err = host::probeUserNamespace();
  std::string who = ::getuid() == 0 ? " (probed as root: run `ctr check` as a user to be sure)" : "";
  f.checks.push_back({"unshare(CLONE_NEWUSER)", err == 0 ? Status::Ok : Status::Fail,
                      (err == 0 ? std::string("works") : std::string("fails: ") + std::strerror(err)) + who});
  f.userns = maxOk && (clone.empty() || clone == "1") && err == 0;
}

void checkFuse(Findings& f) {
  const auto fuse = host::inspectFuse();
  if (fuse == host::FuseState::Missing) {
    f.checks.push_back({"/dev/fuse", Status::Fail, "missing (load the fuse module: modprobe fuse)"});
  } else if (fuse == host::FuseState::NotAccessible) {
    f.checks.push_back({"/dev/fuse", Status::Fail,
                        "not accessible to uid " + std::to_string(::getuid()) + " (chmod 0666 /dev/fuse, the usual setting)"});
  } else {
    f.fuse = true;
    f.checks.push_back({"/dev/fuse", Status::Ok, "present and read-write for this user"});
  }
  // Either server mounts images without the helper: ctr-squashfs (multithreaded) is the
  // one 'squashfs server = auto' prefers, squashfuse_ll the fallback.
  host::Needs needs;
  needs.squashfsServers = {.ctrSquashfs = true, .squashfuse = true};
  host::discoverNeeds(f.host, needs, f.policy);
  const auto& servers = f.host.squashfsServers;
  f.squashfuse = !servers.ctrSquashfs.empty() || !servers.squashfuse.empty();
  const Status missing = f.squashfuse ? Status::Info : Status::Fail;
  f.checks.push_back({"ctr-squashfs", servers.ctrSquashfs.empty() ? missing : Status::Ok,
                      servers.ctrSquashfs.empty() ? servers.ctrSquashfsMissing : servers.ctrSquashfs});
  f.checks.push_back({"squashfuse", servers.squashfuse.empty() ? missing : Status::Ok,
                      servers.squashfuse.empty() ? servers.squashfuseMissing : servers.squashfuse});
}

void checkHelper(Findings& f) {
  const std::string path = configured::kHelperPath;
  const auto state = f.host.setuidHelper;
  if (state == host::HelperState::Missing) {
    f.checks.push_back({"setuid helper", Status::Info, path + " not installed (optional; kernel squashfs needs it)"});
  } else if (state == host::HelperState::NotSetuidRoot) {
    f.checks.push_back({"setuid helper", Status::Warn,
                        path + " installed but not setuid root (install with -DCTR_INSTALL_SUID_HELPER=ON as root)"});
  } else if (state == host::HelperState::Writable) {
    f.checks.push_back({"setuid helper", Status::Fail, path + " is setuid root but writable by group or others: remove it"});
  } else {
    f.helper = true;
    f.checks.push_back({"setuid helper", Status::Ok, path + " setuid root"});
  }
  const bool loop = f.host.loopControl;
  f.checks.push_back({"/dev/loop-control", loop ? Status::Ok : Status::Info,
                      loop ? "present" : "missing (the setuid helper needs loop devices)"});
  if (!loop) f.helper = false;
}

// Whether mounts the host makes after a launch started reach it and the launches that join
// it (host::inspectRootPropagation).
void checkMountPropagation(Findings& f) {
  const char* later = "mounts the host makes later (automounted home directories, a user's FUSE mounts)";
  switch (host::inspectRootPropagation()) {
    case host::RootPropagation::Shared:
    case host::RootPropagation::Slave:
      f.checks.push_back({"mount propagation", Status::Ok,
                          std::string("/ receives the host's mounts: ") + later + " show in running launches too"});
      break;
    case host::RootPropagation::Private:
      f.checks.push_back(
          {"mount propagation", Status::Warn,
           std::string("/ is private: a launch that joins a running launch of the same image (a job's other ranks, "
                       "a second ctr exec) sees the host's mounts as they were when the first started, not ") +
               later + ", even where it binds them; make / shared at boot, as systemd does: mount --make-rshared /"});
      break;
    case host::RootPropagation::Unknown:
      f.checks.push_back({"mount propagation", Status::Info, "no \"/\" mount in /proc/self/mountinfo"});
      break;
  }
}

// Where --memory/--cpus/... would put their cgroup for this user, by the decision `ctr
// exec` makes (limits::decidePlacement on the same host facts).
void checkLimits(Findings& f) {
  const uid_t uid = f.host.user.uid;
  host::Needs needs;
  needs.limits = true;
  host::discoverNeeds(f.host, needs, f.policy);
  const auto& facts = *f.host.limits;
  limits::Request probe;
  probe.memory = 64u << 20;
  probe.cpus = 1;
  probe.pids = 64;
  const auto placement = limits::decidePlacement(probe, false, facts.mounts, f.host.cgroups, facts.delegated,
                                                 facts.delegatedWritable, uid, "ctr-check");
  f.checks.push_back({"resource limits", placement.backend == limits::Backend::None ? Status::Info : Status::Ok,
                      limits::toString(placement.backend) + ": " + placement.reason});
}

void checkConfig(Findings& f) {
  std::string path = configured::kSysconfPath;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    f.checks.push_back({"config", Status::Info, path + " missing: built-in defaults (allow setuid = no)"});
  } else {
    bool rootOwned = st.st_uid == 0, safe = (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
    f.configSafe = rootOwned && safe;
    f.checks.push_back({"config", f.configSafe ? Status::Ok : Status::Fail,
                        path + (rootOwned ? " owned by root" : " NOT owned by root (the helper refuses it)") +
                            (safe ? ", not writable by group/others" : ", writable by group/others (the helper refuses it)")});
  }
  try {
    f.policy = config::loadDefaultPolicy();  // what `ctr exec` uses ($CTR_CONFIG included)
    f.policyLoaded = true;
    f.checks.push_back({"allow setuid", f.policy.allowSetuid ? Status::Ok : Status::Info,
                        f.policy.allowSetuid ? "yes" : "no (kernel squashfs through the helper disabled)"});
    f.checks.push_back({"allow user namespaces", f.policy.allowUserNamespaces ? Status::Ok : Status::Fail,
                        f.policy.allowUserNamespaces ? "yes" : "no (ctr cannot run containers)"});
    f.checks.push_back({"image driver", Status::Info, std::string(config::toString(f.policy.imageDriver))});
  } catch (const Error& e) {
    f.checks.push_back({"config syntax", Status::Fail, e.oneLine()});
  }
  if (const char* override = std::getenv("CTR_CONFIG"); override && *override)
    f.checks.push_back({"CTR_CONFIG", Status::Info,
                        std::string(override) + " is used by ctr for its own settings; the helper reads only " + path});
  else if (const auto own = sysconfPath(); own != path)
    f.checks.push_back({"relocated config", Status::Info,
                        own.string() + " (beside this ctr) is used by ctr for its own settings; the helper reads only " + path});
}

// Whether ctr.conf has an execution rule other than off.
bool executionRulesOn(const Findings& f) {
  const auto& rules = f.policy.execution.rules;
  return f.policyLoaded && std::any_of(rules.begin(), rules.end(), [](const config::ExecutionRule& r) {
           return r.mode != config::ExecutionMode::Off;
         });
}

// Under an execution rule, every key file is read by ctr's own check (as the user) and, for
// kernel mounts, by the helper's (as configured::kHelperCheckUser): a key one of them cannot
// read refuses every image a rule takes, so say so before a launch does.
void checkExecutionKeys(Findings& f) {
  const auto& control = f.policy.execution;
  if (!executionRulesOn(f)) return;
  const std::string checkUser = configured::kHelperCheckUser;
  const bool helper = f.helper && f.policy.allowSetuid;
  std::vector<std::string> keys = control.trustedKeys;
  keys.insert(keys.end(), control.blacklistedKeys.begin(), control.blacklistedKeys.end());
  std::string problems;
  for (const auto& key : keys) {
    if (::access(key.c_str(), R_OK) != 0)
      problems += "; " + key + ": you cannot read it (" + std::strerror(errno) + "): ctr refuses every image a rule takes";
    if (!helper) continue;
    const host::Readability r = host::readabilityFor(key, checkUser);
    if (r.answer == host::Readability::Unreadable)
      problems += "; " + key + ": " + r.why + ": the setuid helper's check, which runs as '" + checkUser +
                  "', refuses every image a rule takes";
    else if (r.answer == host::Readability::Unknown)
      problems += "; " + key + ": whether '" + checkUser + "' (the setuid helper's check) can read it cannot be told from here (" +
                  r.why + "): run ctr check as root";
  }
  if (keys.empty())
    f.checks.push_back({"execution rule keys", Status::Info, "ctr.conf names no trusted or blacklisted key"});
  else if (!problems.empty())
    f.checks.push_back({"execution rule keys", Status::Warn, problems.substr(2)});
  else
    f.checks.push_back({"execution rule keys", Status::Ok,
                        std::to_string(keys.size()) + " key file(s) readable by you" +
                            (helper ? " and by '" + checkUser + "' (the setuid helper's check)" : "")});
}

// The helper runs an execution rule's check as configured::kHelperCheckUser: not root and not
// the caller, but dumpable once it execs ctr, so any other process of that user could trace it
// (ptrace, same user) into an "allow". Say which run as it now, and that `nobody` is shared by
// design (docs/design-signing.md, section 3).
void checkCheckUser(Findings& f) {
  if (!executionRulesOn(f) || !f.helper || !f.policy.allowSetuid) return;
  const std::string user = configured::kHelperCheckUser, name = "execution rule's check user";
  const std::string fix = ": build the helper with CTR_HELPER_CHECK_USER set to a system user of its own (the Debian "
                          "package's _ctr-verify)";
  const auto running = host::processesRunningAs(user);
  if (!running) {
    f.checks.push_back({name, Status::Fail, "there is no user '" + user + "': the setuid helper refuses every image" + fix});
  } else if (!running->empty()) {
    std::string some;
    for (std::size_t i = 0; i < running->size() && i < 3; i++) some += (i ? ", " : "") + (*running)[i];
    f.checks.push_back({name, Status::Warn,
                        std::to_string(running->size()) + " process(es) run as '" + user + "' now (" + some +
                            (running->size() > 3 ? ", ..." : "") +
                            "): any of them could trace the setuid helper's check into an allow" + fix});
  } else if (user == "nobody") {
    f.checks.push_back({name, Status::Warn,
                        "'nobody' is shared by design: a service run as it could trace the setuid helper's check "
                        "into an allow" + fix});
  } else {
    f.checks.push_back({name, Status::Ok, "'" + user + "', a user of its own: no process runs as it now"});
  }
}

// The decision `ctr exec` makes (launch::decideDriver, same policy, same host facts), plus
// whether that driver can work here at all.
std::pair<std::string, std::string> decideMode(const Findings& f) {
  if (!f.userns || (f.policyLoaded && !f.policy.allowUserNamespaces))
    return {"none", "user namespaces are not usable: enable them (see the checks above); ctr needs them for every launch"};
  launch::DriverDecision decision;
  try {
    decision = launch::decideDriver(f.policy, image::ImageKind::Sif, f.host);
  } catch (const Error& e) {
    return {"none", e.oneLine()};
  }
  const bool fuseUsable = f.fuse && f.squashfuse;
  if (decision.driver == launch::ImageDriver::Squashfuse && !fuseUsable)
    return {"none", decision.reason + ", and squashfuse is not usable: make /dev/fuse usable and install "
                    "squashfuse, or install the setuid helper (directory images still run)"};
  std::string reason = decision.reason;
  // Per image, as `ctr exec --explain` says for each (decideDriver, untrusted_fs.h).
  if (decision.driver == launch::ImageDriver::SetuidHelper)
    reason += decision.fallback ? "; an image on FUSE or another file system users control (vfat, SMB, ...) uses squashfuse"
                                : "; an image on FUSE or another file system users control (vfat, SMB, ...) is refused";
  if (decision.fallback && !fuseUsable) reason += "; the squashfuse fallback is not usable here";
  return {launch::toString(decision.driver), reason};
}

int runCheck(bool json) {
  Findings f;
  checkUserNamespaces(f);
  checkFuse(f);
  checkHelper(f);
  checkConfig(f);
  checkExecutionKeys(f);
  checkCheckUser(f);
  checkLimits(f);
  checkMountPropagation(f);
  auto [mode, reason] = decideMode(f);
  if (json) {
    nlohmann::json out;
    out["checks"] = nlohmann::json::array();
    for (const auto& c : f.checks)
      out["checks"].push_back({{"name", c.name}, {"status", toString(c.status)}, {"detail", c.detail}});
    out["mode"] = mode;
    out["reason"] = reason;
    std::cout << out.dump(2) << '\n';
  } else {
    for (const auto& c : f.checks) std::cout << '[' << toString(c.status) << "] " << c.name << ": " << c.detail << '\n';
    std::cout << "mode: " << mode << ": " << reason << '\n';
  }
  return mode == "none" ? kExitFailure : 0;
}

// ctr check --host: the node's inventory, the hwloc topology (from ctr-topology) and the
// mode ctr would use; the benchmark harness records the JSON as its host fingerprint.
int runHostCheck(bool json) {
  Findings f;
  checkUserNamespaces(f);
  checkFuse(f);
  checkHelper(f);
  checkConfig(f);
  auto [mode, reason] = decideMode(f);
  nlohmann::json out = host::hostInventory(f.policy);
  try {
    ProcessOptions options;
    options.captureStdout = options.captureStderr = true;
    options.captureLimit = 4u << 20;
    const auto result = runProcess({findProgram(Program::Topology)}, options);
    if (!result.ok()) throw Error("ctr-topology " + result.describe() + ": " + result.capturedStderr);
    out["topology"] = nlohmann::json::parse(result.capturedStdout);
  } catch (const std::exception& e) {
    out["topology"] = {{"error", std::string("no topology: ") + e.what()}};
  }
  out["ctr"] = {{"version", configured::kVersion}, {"mode", mode}, {"mode_reason", reason}};
  if (json) {
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << host::describeInventory(out) << "ctr:      " << configured::kVersion << ", mode " << mode << " (" << reason
              << ")\n";
  }
  return 0;
}

}  // namespace

void registerCheck(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("check", "Tell which image mode ctr uses on this host, and why");
  auto json = std::make_shared<bool>(false);
  auto hostReport = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print the checks as JSON");
  cmd->add_flag("--host", *hostReport,
                "Report the node instead: GPUs, RDMA, MPI libraries, hwloc topology (the benchmark's host fingerprint)");
  cmd->callback([&ctx, json, hostReport] {
    ctx.action = [json, hostReport] { return *hostReport ? runHostCheck(*json) : runCheck(*json); };
  });
}

}  // namespace ctr::cli
