// execute(): join the shared image, assemble the root, hand over, execve. No supervisor:
// the process that mpirun or the scheduler started becomes the app.
#include <sched.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <net/if.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "ctr/owned_child.hpp"
#include "ctr/env_script_interpreter.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/glibc_version.hpp"
#include "ctr/run_process.hpp"
#include "ctr/handover.hpp"
#include "ctr/limits.hpp"
#include "ctr/log.hpp"
#include "ctr/runtime.hpp"
#include "ctr/strings.hpp"
#include "build_namespace.hpp"
#include "cgroup.hpp"
#include "fuse_union.hpp"
#include "image_env_scripts.hpp"
#include "instance_state.hpp"
#include "rootfs.hpp"
#include "shared_mount.hpp"

namespace ctr::runtime {

namespace {

// A host driver built against a newer glibc than the image's fails in the loader with a
// message that names a symbol, not the driver: say it before the app starts (issue 8). The
// root is the container's now. An image without glibc (musl, static) is not checked.
void checkGlibcNeeds(const launch::GlibcCheck& check) {
  if (check.needs.empty()) return;
  log::StepTimer timer("checking the image's glibc");
  for (const auto& need : check.needs) {
    const auto needed = host::parseGlibcVersionName("GLIBC_" + need.version);
    for (const auto& libc : check.imageLibc) {
      // Most candidates are absent (the others' architectures): an access(2) each, not an
      // ElfFile error thrown and caught (7 of them were 0.06 ms of a --nv launch).
      if (::access(libc.c_str(), F_OK) != 0) continue;
      std::optional<host::GlibcVersion> image;
      try {
        image = host::glibcDefinedBy(libc);
      } catch (const Error&) {
        continue;
      }
      if (image && needed && *image < *needed)
        throw Error("the host's " + need.what + " needs glibc " + need.version + " (" + need.library +
                    "), but the image has glibc " +
                    host::toString(*image) + " (" + libc + "): use an image with a newer glibc, or a host build for an older one");
      break;
    }
  }
}

bool isExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// /.singularity.d/env/*.sh in the order the shell's glob gives (byte order); for images
// built before Singularity 2.3, which have no such directory, their /environment.
// The environment the env program (launch::envProgramScript) gives when sh runs it,
// computed without a shell, or nullopt when it is outside the interpreter's subset (the
// reason is logged): a script's or a value's command substitution, a loop, ...
// `copies`: the image's scripts as the holder read them (SharedImage::envScripts), if any.
std::optional<std::vector<std::string>> interpretEnvProgram(const std::string& program,
                                                            const launch::LaunchPlan& plan,
                                                            const std::vector<EnvScript>* copies) {
  launch::ShellVars vars;
  for (const auto& kv : plan.environment) {
    auto eq = kv.find('=');
    vars.vars[kv.substr(0, eq)] = {kv.substr(eq + 1), true, true};
  }
  // The shell sets PWD when it starts unless the inherited one names the current directory.
  auto pwd = vars.vars.find("PWD");
  struct stat here {}, named {};
  if (pwd == vars.vars.end() || ::stat(".", &here) != 0 || ::stat(pwd->second.value.c_str(), &named) != 0 ||
      here.st_dev != named.st_dev || here.st_ino != named.st_ino) {
    std::array<char, PATH_MAX> cwd{};
    if (::getcwd(cwd.data(), cwd.size())) vars.vars["PWD"] = {cwd.data(), true, true};
  }
  // `[ -r F ]` then `. F` is how the program sources each script: one open answers both
  // (through squashfuse every file operation is a round trip to the server).
  std::map<std::string, std::optional<std::string>> read;
  if (copies)
    for (const auto& c : *copies) read.emplace(c.path, c.text);
  auto readScript = [&read](const std::string& path) -> const std::optional<std::string>& {
    auto it = read.find(path);
    if (it != read.end()) return it->second;
    return read.emplace(path, readEnvScript(path)).first->second;
  };
  launch::ShellHost host;
  host.readFile = [&](const std::string& path) { return readScript(path); };
  host.testFile = [&](char op, const std::string& path) {
    struct stat st {};
    switch (op) {
      case 'r': return readScript(path).has_value();
      case 'x': return ::access(path.c_str(), X_OK) == 0;
      case 'f': return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
      case 'd': return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      default: return ::stat(path.c_str(), &st) == 0;
    }
  };
  if (auto why = launch::interpretEnvScript(program, vars, &host); !why.empty()) {
    spdlog::debug("{}: applying the environment with /bin/sh", why);
    return std::nullopt;
  }
  std::vector<std::string> env;
  for (const auto& [name, var] : vars.vars)
    if (var.set && var.exported) env.push_back(name + '=' + var.value);
  return env;
}

// execvpe(3) with the container's PATH (glibc's reads the caller's): `program` itself when
// it holds a '/', else each PATH directory's `program` in turn. Each candidate is tried by
// execve alone, with no stat or access before it: through squashfuse every path walk that
// meets a symlink (/bin/true -> busybox, /bin -> usr/bin) is a round trip to the server.
// A script without "#!" runs with /bin/sh, as execvp does. Throws when none can be run.
[[noreturn]] void execCommand(const std::string& program, const std::vector<std::string>& argv,
                              const std::vector<std::string>& env, const std::string& path) {
  auto toC = [](const std::vector<std::string>& v) {
    std::vector<char*> c;
    for (const auto& s : v) c.push_back(const_cast<char*>(s.c_str()));
    c.push_back(nullptr);
    return c;
  };
  auto cargv = toC(argv);
  auto cenv = toC(env);
  std::vector<std::string> candidates;
  if (program.find('/') != std::string::npos) {
    candidates.push_back(program);
  } else {
    for (size_t start = 0;;) {
      size_t end = path.find(':', start);
      std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
      candidates.push_back((dir.empty() ? "." : dir) + "/" + program);
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  bool denied = false;
  for (const auto& candidate : candidates) {
    ::execve(candidate.c_str(), cargv.data(), cenv.data());
    const int err = errno;
    if (err == ENOEXEC) {
      std::vector<std::string> shArgv = {"/bin/sh", candidate};
      shArgv.insert(shArgv.end(), argv.begin() + 1, argv.end());
      auto cshArgv = toC(shArgv);
      ::execve("/bin/sh", cshArgv.data(), cenv.data());
      throw sysError("cannot run the script " + candidate + " with /bin/sh in the container");
    }
    if (err == EACCES) {
      denied = true;  // a directory, or no x permission: execvp goes on looking too
      continue;
    }
    if (err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT) continue;
    errno = err;
    throw sysError("cannot execute " + candidate + " in the container");
  }
  if (denied)
    throw Error("command '" + program + "' in the container is not an executable file (permission denied)");
  throw Error("command '" + program + "' not found in the container");
}

[[noreturn]] void executeIn(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, int report = -1,
                            const InstanceReady* ready = nullptr);

// The signals a scheduler or a user sends: every process of ctr that stands between them
// and the app forwards them.
sigset_t forwardedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGTSTP, SIGWINCH, SIGALRM})
    sigaddset(&set, sig);
  return set;
}

// Waits for `child`, forwarding what `signals` (a signalfd of blocked signals) reads to it;
// returns its wait status (and resource usage).
int waitForwarding(Child& child, int signals, rusage* usage) {
  std::array<pollfd, 2> fds{pollfd{signals, POLLIN, 0}, pollfd{child.pidfd(), POLLIN, 0}};
  for (;;) {
    if (auto status = child.tryWait(usage)) return *status;
    if (::poll(fds.data(), child.pidfd() >= 0 ? 2 : 1, child.pidfd() >= 0 ? -1 : 50) < 0 && errno != EINTR)
      throw sysError("poll");
    signalfd_siginfo info{};
    while (fds[0].revents & POLLIN) {
      if (::read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) break;
      child.signal(static_cast<int>(info.ssi_signo));
      pollfd again{signals, POLLIN, 0};
      if (::poll(&again, 1, 0) <= 0) break;
    }
  }
}

// Loopback up in a new network namespace (--net: "none" is loopback only).
void bringUpLoopback() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) throw sysError("socket for the loopback interface");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) throw sysError("read the loopback interface's flags");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) throw sysError("bring the loopback interface up");
}

// The namespaces the plan asks for besides user and mount, created in the holder's user
// namespace (where this process holds the capabilities for them).
void enterOwnNamespaces(const launch::Namespaces& ns) {
  const int flags = (ns.ipc ? CLONE_NEWIPC : 0) | (ns.uts ? CLONE_NEWUTS : 0) | (ns.net ? CLONE_NEWNET : 0);
  if (flags != 0 && ::unshare(flags) != 0) throw sysError("unshare(ipc, uts or network namespace)");
  if (ns.uts && !ns.hostname.empty() && ::sethostname(ns.hostname.data(), ns.hostname.size()) != 0)
    throw sysError("set the hostname " + ns.hostname);
  if (ns.net) bringUpLoopback();
}

// Waits for `pid` (an unreaped child, so its pid cannot be reused), forwarding what
// `signals` reads to it, then exits with its status as a shell reports it.
// `terminalGroup`: the foreground process group of the terminal on stdin, to give back
// when the app, which took it inside the namespace, has ended (-1: none).
// `cgroupDirs`: an instance's cgroup, removed once its keeper (`pid`) has ended.
[[noreturn]] void standInFor(pid_t pid, int signals, pid_t terminalGroup,
                             const std::map<std::string, std::string>* cgroupDirs = nullptr) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  std::array<pollfd, 2> fds{pollfd{signals, POLLIN, 0}, pollfd{pidfd.get(), POLLIN, 0}};
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      if (terminalGroup > 0) {
        ::signal(SIGTTOU, SIG_IGN);
        (void)::tcsetpgrp(STDIN_FILENO, terminalGroup);
      }
      if (cgroupDirs) removeCgroupDirs(*cgroupDirs);
      ::_exit(shellStatus(status));
    }
    if (::poll(fds.data(), pidfd ? 2 : 1, pidfd ? -1 : 50) < 0 && errno != EINTR) ::_exit(kExitFailure);
    signalfd_siginfo info{};
    while (fds[0].revents & POLLIN) {
      if (::read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) break;
      if (info.ssi_signo != SIGCHLD) ::kill(pid, static_cast<int>(info.ssi_signo));
      pollfd again{signals, POLLIN, 0};
      if (::poll(&again, 1, 0) <= 0) break;
    }
  }
}

// A PID namespace: this process forks the namespace's PID 1 and stays outside as the
// app's stand-in (the process mpirun or the scheduler started): it forwards their signals
// and exits with the status PID 1 reports, which is the app's. Returns only in PID 1, with
// the forwarded signals and SIGCHLD blocked and read from `signals`.
// `foreground` tells whether ctr had the terminal: the app then takes it in the namespace
// (a shell there needs it for job control).
// `join`: the PID namespace of a running instance to enter (setns) instead of a new one;
// the child is then an ordinary process of that namespace, not its init.
// `report` (instance start): the stand-in writes "pid N" (the init's host pid) there and
// closes its copy.
// `cgroupDirs`: the instance's cgroup, which the stand-in removes when the keeper has ended.
void enterPidNamespace(UniqueFd& signals, sigset_t* previousMask, bool* foreground, int join, int* report,
                       const std::map<std::string, std::string>* cgroupDirs = nullptr) {
  const pid_t terminalGroup = ::isatty(STDIN_FILENO) ? ::tcgetpgrp(STDIN_FILENO) : -1;
  *foreground = terminalGroup > 0 && terminalGroup == ::getpgrp();
  sigset_t set = forwardedSignals();
  sigaddset(&set, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &set, previousMask) != 0) throw sysError("sigprocmask");
  signals.reset(::signalfd(-1, &set, SFD_CLOEXEC));
  if (!signals) throw sysError("signalfd");
  if (join >= 0) {
    if (::setns(join, CLONE_NEWPID) != 0) throw sysError("enter the instance's PID namespace (setns)");
  } else if (::unshare(CLONE_NEWPID) != 0) {
    throw sysError("unshare(pid namespace)");
  }
  UniqueFd outside(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  const pid_t init = ::fork();
  if (init < 0) throw sysError(join >= 0 ? "fork into the instance's PID namespace" : "fork the PID namespace's init");
  if (init > 0) {
    if (report && *report >= 0) {
      const std::string line = "pid " + std::to_string(init) + "\n";
      (void)!::write(*report, line.data(), line.size());
      ::close(std::exchange(*report, -1));
    }
    standInFor(init, signals.get(), *foreground ? terminalGroup : -1, cgroupDirs);
  }
  // PID 1 (its parent is outside: getppid() is 0) dies with the stand-in; if that already
  // died before this was set, stop here.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  pollfd gone{outside.get(), POLLIN, 0};
  if (outside && ::poll(&gone, 1, 0) > 0) ::_exit(kExitFailure);
}

// The caller's process group is outside the PID namespace: the app leads its own and
// takes the terminal, with SIGTTOU (which that raises) blocked meanwhile.
void takeTerminal() {
  sigset_t ttou;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &ttou, nullptr);
  ::setpgid(0, 0);
  (void)::tcsetpgrp(STDIN_FILENO, ::getpgrp());
}

// The signals as the app gets them: the caller's mask back, the forwarded ones unblocked.
void restoreAppSignals(const sigset_t& previousMask) {
  ::sigprocmask(SIG_SETMASK, &previousMask, nullptr);
  const sigset_t forwarded = forwardedSignals();
  ::sigprocmask(SIG_UNBLOCK, &forwarded, nullptr);
}

// In a child of PID 1: the caller's signal mask back, the forwarded signals unblocked,
// then `app` (which execs). A failed exec (command not found) is reported here: unwinding
// further would run the destructors of the init's objects in this copy of it.
[[noreturn]] void runApp(const std::function<void()>& app, const sigset_t& previousMask) {
  restoreAppSignals(previousMask);
  try {
    app();
  } catch (const Error& e) {
    std::fflush(stdout);
    const std::string line = "ctr: error: " + e.oneLine() + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(e.status());
  }
  ::_exit(kExitFailure);
}

// PID 1 of the container: starts the app (which execs `argv`) as PID 2, forwards the
// signals to it, reaps every orphan, and exits with the app's status when it ends, after
// the FUSE servers of an ext3 overlay have written their images back (the kernel then ends
// whatever the app left).
// `signalAll` (the plan's): every signal goes to every process of the namespace instead.
[[noreturn]] void initOf(const std::function<void()>& app, int signals, const sigset_t& previousMask,
                         bool foreground, bool signalAll) {
  // Named before the fork: the app may read /proc/1/comm at once (the child bears the name
  // too until its exec).
  ::prctl(PR_SET_NAME, "ctr-init");
  const pid_t child = ::fork();
  if (child < 0) throw sysError("fork the app");
  if (child == 0) {
    if (foreground) takeTerminal();
    runApp(app, previousMask);
  }
  for (;;) {
    int status = 0;
    for (pid_t done; (done = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      if (done != child) continue;
      endFuseServers();  // --overlay ext3: written back before the namespace's end kills them
      ::_exit(shellStatus(status));
    }
    signalfd_siginfo info{};
    if (::read(signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info) && info.ssi_signo != SIGCHLD)
      ::kill(signalAll ? -1 : child, static_cast<int>(info.ssi_signo));
  }
}

// The signals after which an instance's init ends, once every process of the instance
// has ended (it passes each on to all of them first).
bool endsInstance(int sig) { return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT; }

// The keeper of an instance (`ctr instance start`): starts `app` (the startscript), if
// any, and stays after it ends. As PID 1 of the instance's PID namespace (`pidNamespace`)
// it reaps what the instance's processes leave, passes every signal it gets (from
// `ctr instance stop`) to every process of the namespace and, after one of endsInstance's,
// exits once none is left: the namespace ends with it. Without one (--no-pid: launches
// into the instance are their callers' children, a Slurm step's tasks slurmstepd's), it is
// the subreaper of the startscript's processes, passes signals to the startscript, and
// exits once its own descendants have ended.
// `files`: the instance's files, which the keeper removes when it ends (removeOwnInstanceFiles),
// so that stopping an instance need not wait for it.
[[noreturn]] void keeperOf(const std::function<void()>* app, int signals, const sigset_t& previousMask,
                           bool pidNamespace, const InstanceFiles& files) {
  if (!pidNamespace) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_NAME, "ctr-instance");  // before the fork, as initOf
  pid_t child = -1;
  if (app) {
    child = ::fork();
    if (child < 0) throw sysError("fork the startscript");
    if (child == 0) runApp(*app, previousMask);
  }
  bool ending = false;
  for (;;) {
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(-1, &status, WNOHANG)) > 0)
      if (done == child) child = -1;
    // Launches that joined are children of their stand-ins outside, not of this process:
    // kill(-1, 0) tells whether any process of the namespace is left.
    if (ending && (pidNamespace ? ::kill(-1, 0) != 0 && errno == ESRCH : done < 0 && errno == ECHILD)) {
      removeOwnInstanceFiles(files);
      ::_exit(0);
    }
    pollfd ready{signals, POLLIN, 0};
    if (::poll(&ready, 1, ending ? 20 : -1) <= 0) continue;
    signalfd_siginfo info{};
    if (::read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info) || info.ssi_signo == SIGCHLD)
      continue;
    const int sig = static_cast<int>(info.ssi_signo);
    if (pidNamespace)
      ::kill(-1, sig);  // every process of the namespace but this one
    else if (child > 0)
      ::kill(child, sig);
    ending = ending || endsInstance(sig);
  }
}

// Where the root's files come from, as the plan's root mode says: the image, mounted once
// for this user by its holder, or a build step's sandbox in namespaces of its own.
SharedImage enterRootSource(const launch::LaunchPlan& plan) {
  switch (plan.rootMode) {
    case launch::RootMode::Bind:
    case launch::RootMode::Overlay:
    case launch::RootMode::Writable:
      return joinSharedImage(plan);
    case launch::RootMode::Sandbox:
      if (!plan.build) throw Error("internal: a sandbox root without its build root in the plan");
      return enterBuildNamespaces(*plan.build);
    case launch::RootMode::Join:
      break;  // enterInstance
  }
  throw Error("internal: unknown root mode");
}

}  // namespace

void execute(const launch::LaunchPlan& plan) { executeIn(plan, nullptr); }

void executeInstance(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, int report) {
  executeIn(plan, cgroup, report);
}

void executeInstanceHere(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, const InstanceReady& ready) {
  executeIn(plan, cgroup, -1, &ready);
}

namespace {

// An instance whose environment only /bin/sh applies (scripts with what ctr does not
// interpret, a command substitution): the image's scripts run once, under the app's
// restrictions (no_new_privs, capabilities, seccomp are in place by now), and the
// environment they export is the instance's record, which the join information gives to
// processes that join without a shell (the Slurm plugin's tasks). Launches through ctr
// evaluate the scripts themselves. If the shell fails, the environment before the scripts,
// with a warning.
std::vector<std::string> shellEnvironment(const std::string& script, const std::vector<std::string>& environment) {
  ProcessOptions options;
  options.captureStdout = true;
  options.captureLimit = 4u << 20;
  options.env = environment;
  options.replaceEnv = true;
  try {
    const auto result = runProcess(launch::envProgramArgv(script, {"env", "-0"}), options);
    if (result.ok() && !result.overflowed) {
      std::vector<std::string> exported;
      const std::string& out = result.capturedStdout;
      for (std::size_t at = 0; at < out.size();) {
        const std::size_t end = std::min(out.find('\0', at), out.size());
        const std::string kv = out.substr(at, end - at);
        at = end + 1;
        // The shell's own, SHLVL and _, keep the values they had before it.
        if (!kv.empty() && !kv.starts_with("_=") && !kv.starts_with("SHLVL=")) exported.push_back(kv);
      }
      for (const auto& kv : environment)
        if (kv.starts_with("_=") || kv.starts_with("SHLVL=")) exported.push_back(kv);
      return exported;
    }
    spdlog::warn("the image's environment scripts, run with /bin/sh for the instance's record: {}; processes "
                 "that join it without ctr get the environment before them",
                 result.overflowed ? "more than 4 MiB of environment" : result.describe());
  } catch (const Error& e) {
    spdlog::warn("the image's environment scripts could not be run for the instance's record: {}", e.what());
  }
  return environment;
}

// Where a launch stands once it is in the container: the image it holds, and for PID 1 of
// a PID namespace (or an instance's stand-in) the signals it forwards.
struct Entered {
  SharedImage image;
  UniqueFd initSignals;  // PID 1 only
  sigset_t previousMask{};
  bool foreground = false;
};

// Into the running instance's namespaces: an ordinary process of the instance (its init
// reaps what it leaves); this process stays outside as its stand-in.
void enterJoined(const launch::LaunchPlan& plan, Entered& in) {
  if (!plan.join) throw Error("internal: a join without its instance in the plan");
  log::StepTimer timer("joining the instance");
  enterCgroupDirs(plan.join->cgroups);  // on the host, before its namespaces
  UniqueFd pid = enterInstance(*plan.join);
  if (!pid) return;
  enterPidNamespace(in.initSignals, &in.previousMask, &in.foreground, pid.get(), nullptr);
  if (in.foreground) takeTerminal();
  in.initSignals.reset();
  restoreAppSignals(in.previousMask);
}

// The image's root, the plan's namespaces and the assembled root; `report`: see executeIn.
void enterOwnRoot(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, int& report, Entered& in) {
  in.image = enterRootSource(plan);
  enterOwnNamespaces(plan.namespaces);
  if (plan.namespaces.pid)
    enterPidNamespace(in.initSignals, &in.previousMask, &in.foreground, -1, &report,
                      plan.instance && cgroup ? &cgroup->dirs() : nullptr);
  assembleRoot(plan, in.image);
  checkGlibcNeeds(plan.glibcCheck);
}

// The WORKDIR the image records in `file` (--image-workdir): one absolute path; "" when the
// file is not there. The image is the user's own, so a bad record is a warning, not an end.
std::string recordedWorkdir(const std::string& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) return {};
  struct stat st{};
  std::string text(PATH_MAX, '\0');
  const ssize_t n = ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) ? ::read(fd.get(), text.data(), text.size()) : -1;
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  if (text.ends_with('\n')) text.pop_back();
  if (!text.starts_with('/') || text.find_first_of(std::string_view("\n\0", 2)) != std::string::npos) {
    spdlog::warn("{} does not hold an absolute path: ignored", file);
    return {};
  }
  return text;
}

void enterWorkdir(const launch::LaunchPlan& plan) {
  if (!plan.imageWorkdirFile.empty()) {
    const std::string dir = recordedWorkdir(plan.imageWorkdirFile);
    if (!dir.empty() && ::chdir(dir.c_str()) == 0) return;
    if (!dir.empty())
      spdlog::warn("the image's WORKDIR {} is not available in the container ({}): using {}", dir,
                   std::strerror(errno), plan.workdir);
  }
  if (::chdir(plan.workdir.c_str()) == 0) return;
  if (plan.workdirRequired) throw sysError("--pwd " + plan.workdir + ": cannot change to it in the container");
  spdlog::warn("working directory {} is not available in the container ({}): using /", plan.workdir,
               std::strerror(errno));
  if (::chdir("/") != 0) throw sysError("chdir /");
}

// What runs: the plan's argv, or for run, shell and test the first program the image has
// (the planner's order) with its own arguments and variables. Empty for an instance with
// nothing to start.
struct AppCommand {
  std::vector<std::string> argv;
  std::vector<launch::EnvVar> env;
};
AppCommand chooseCommand(const launch::LaunchPlan& plan) {
  if (struct stat st {}; !plan.appRoot.empty() && (::stat(plan.appRoot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
    throw Error("--app: the image has no app '" + plan.appRoot.substr(plan.appRoot.rfind('/') + 1) + "' (no " +
                plan.appRoot + ")")
        .withStatus(1);
  if (plan.commandChoices.empty()) return {plan.argv, {}};
  auto chosen = std::find_if(plan.commandChoices.begin(), plan.commandChoices.end(),
                             [](const launch::CommandChoice& c) { return isExecutableFile(c.argv[0]); });
  if (chosen == plan.commandChoices.end()) {
    if (!plan.instance || plan.noCommand.status != 0) throw Error(plan.noCommand.message).withStatus(plan.noCommand.status);
    spdlog::info("{}", plan.noCommand.message);
    return {};
  }
  if (!chosen->note.empty()) spdlog::warn("{}", chosen->note);
  AppCommand command{chosen->argv, chosen->env};
  command.argv.insert(command.argv.end(), plan.argv.begin(), plan.argv.end());
  return command;
}

// The command with its environment applied: the plan's environment program (the image's
// scripts added, as the holder read them or as listed here), interpreted by ctr, or else
// run by /bin/sh before the command.
struct Ready {
  std::string program;                  // what execve runs ("/bin/sh" when the shell applies the environment)
  std::vector<std::string> argv;
  std::vector<std::string> environment;
  std::string script;                   // the environment program
  bool interpreted = false;
};
Ready applyEnvironment(const launch::LaunchPlan& plan, const SharedImage& image, AppCommand command) {
  launch::EnvProgram program = plan.envProgram;
  if (plan.sourceEnvScripts) {
    if (image.envScripts)
      for (const auto& c : *image.envScripts) program.scripts.push_back(c.path);
    else
      program.scripts = listEnvScripts();
  }
  program.fixed.insert(program.fixed.end(), command.env.begin(), command.env.end());
  Ready ready;
  ready.script = launch::envProgramScript(program);
  ready.argv = std::move(command.argv);
  ready.program = ready.argv.empty() ? std::string("/bin/sh") : ready.argv[0];
  log::StepTimer envTimer("environment");
  auto interpreted = interpretEnvProgram(ready.script, plan, image.envScripts ? &*image.envScripts : nullptr);
  envTimer.stop();
  if (interpreted) {
    ready.environment = std::move(*interpreted);
    ready.interpreted = true;
    return ready;
  }
  ready.environment = plan.environment;
  // The program may change PATH: the shell looks the command up after it. (An instance
  // records the environment the shell leaves: see shellEnvironment.)
  if (!ready.argv.empty()) ready.argv = launch::envProgramArgvLookingUp(ready.script, ready.argv);
  ready.program = "/bin/sh";
  if (!ready.argv.empty() && !isExecutableFile(ready.program))
    throw Error("applying the environment needs /bin/sh (a command substitution or a script outside "
                "what ctr interprets), and the image has none");
  return ready;
}

// The last steps before the app: its cgroup, umask, no_new_privs, capabilities, seccomp.
void handOver(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, const SeccompProgram& seccomp) {
  if (cgroup) cgroup->enter();
  if (plan.handover.umask) ::umask(static_cast<mode_t>(*plan.handover.umask));
  if (plan.handover.noNewPrivs) setNoNewPrivs();
  if (!plan.handover.keepCapabilities) dropAllCapabilities();
  if (plan.handover.seccomp) installSeccomp(seccomp);
}

// instance start: reports the instance ready (its environment as recorded) and keeps it:
// its init, or with --no-pid this process, in the host's PID namespace.
[[noreturn]] void keepInstance(const launch::LaunchPlan& plan, Entered& in, const Ready& app, int report,
                               const InstanceReady* ready, const SeccompProgram& seccomp,
                               const InstanceFiles& instanceFiles) {
  if (!in.initSignals) {
    sigset_t set = forwardedSignals();
    sigaddset(&set, SIGCHLD);
    if (::sigprocmask(SIG_BLOCK, &set, &in.previousMask) != 0) throw sysError("sigprocmask");
    in.initSignals.reset(::signalfd(-1, &set, SFD_CLOEXEC));
    if (!in.initSignals) throw sysError("signalfd");
  }
  const auto recorded = app.interpreted ? app.environment : shellEnvironment(app.script, app.environment);
  if (ready)
    (*ready)(recorded, plan.handover.seccomp ? &seccomp : nullptr);
  else
    reportInstanceReady(report, recorded);
  const bool pidNamespace = plan.namespaces.pid;
  if (app.argv.empty()) keeperOf(nullptr, in.initSignals.get(), in.previousMask, pidNamespace, instanceFiles);
  // Looked up in the PATH the image's env scripts left (conda images change it).
  const std::string path = envValue(app.environment, "PATH");
  const std::function<void()> run = [&] { execCommand(app.program, app.argv, app.environment, path); };
  keeperOf(&run, in.initSignals.get(), in.previousMask, pidNamespace, instanceFiles);
}

// execute(), entering `cgroup` (when given) right before the hand-over: after the image
// holder was started or joined, so the holder, shared by other launches, stays outside.
// `report`: instance start's channel (see executeInstance); `ready`: instead of it, with
// --stay (see executeInstanceHere).
[[noreturn]] void executeIn(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, int report,
                            const InstanceReady* ready) {
  // Read on the host, before any namespace change.
  InstanceFiles instanceFiles;
  if (plan.instance) instanceFiles = openInstanceFiles(*plan.instance);
  SeccompProgram seccomp;
  if (plan.handover.seccomp) {
    log::StepTimer timer("loading the seccomp filter");
    seccomp = withContext("seccomp profile",
                          [&] { return loadSeccompProgram(plan.seccompProfile, plan.stateDir); });
  }

  Entered in;
  if (plan.rootMode == launch::RootMode::Join)
    enterJoined(plan, in);
  else
    enterOwnRoot(plan, cgroup, report, in);

  log::StepTimer handover("hand-over");
  enterWorkdir(plan);
  const Ready app = applyEnvironment(plan, in.image, chooseCommand(plan));
  handOver(plan, cgroup, seccomp);
  handover.stop();
  log::logStepSummary();
  if (plan.instance) keepInstance(plan, in, app, report, ready, seccomp, instanceFiles);
  // Looked up in the PATH the image's env scripts left (conda images change it).
  const std::string path = envValue(app.environment, "PATH");
  if (in.initSignals && plan.namespaces.pidInit)
    initOf([&] { execCommand(app.program, app.argv, app.environment, path); }, in.initSignals.get(),
           in.previousMask, in.foreground, plan.namespaces.signalAll);
  if (in.initSignals) {  // --no-init: the app itself is PID 1, with the signals of a child of init
    in.initSignals.reset();
    restoreAppSignals(in.previousMask);
  }
  execCommand(app.program, app.argv, app.environment, path);
}

double secondsOf(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

// --stats FILE: one JSON record of the run, written when it has ended.
void writeStats(const launch::LaunchPlan& plan, const LaunchCgroup& cgroup, double wallSeconds,
                const rusage& usage, int status, int exitCode, bool oomKilled) {
  nlohmann::json j;
  j["image"] = plan.image.path.string();
  j["argv"] = plan.argv;
  j["exit_code"] = exitCode;
  j["signal"] = WIFSIGNALED(status) ? nlohmann::json(sigabbrev_np(WTERMSIG(status))) : nlohmann::json();
  j["oom_killed"] = oomKilled;
  j["wall_seconds"] = wallSeconds;
  j["user_seconds"] = secondsOf(usage.ru_utime);
  j["system_seconds"] = secondsOf(usage.ru_stime);
  // ru_maxrss (KiB): the largest single process; the cgroup's peak covers them all.
  j["max_rss_bytes"] = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  j["io_read_bytes"] = static_cast<std::uint64_t>(usage.ru_inblock) * 512;
  j["io_write_bytes"] = static_cast<std::uint64_t>(usage.ru_oublock) * 512;
  j["cgroup"] = limits::toString(plan.cgroup.backend);
  if (cgroup) {
    const auto counted = cgroup.usage();
    if (counted.cpuSeconds) j["cgroup_cpu_seconds"] = *counted.cpuSeconds;
    if (counted.peakMemoryBytes) j["peak_memory_bytes"] = *counted.peakMemoryBytes;
  }
  j["limits"] = launch::toJson(plan.limits);
  // Written beside the target and renamed: a reader never sees half a record.
  const std::string tmp = plan.statsFile + ".tmp" + std::to_string(::getpid());
  try {
    writeFile(tmp, j.dump(2) + "\n");
    if (::rename(tmp.c_str(), plan.statsFile.c_str()) != 0) throw sysError("rename " + tmp);
  } catch (const Error& e) {
    ::unlink(tmp.c_str());
    spdlog::warn("--stats {}: {}", plan.statsFile, e.what());
  }
}

}  // namespace

int run(const launch::LaunchPlan& plan) {
  // The signals a scheduler or a user sends: forwarded to the container, whose status we
  // return. Blocked here (and unblocked in the child before it becomes the app).
  const sigset_t forwarded = forwardedSignals();
  sigset_t previous;
  if (::sigprocmask(SIG_BLOCK, &forwarded, &previous) != 0) throw sysError("sigprocmask");
  struct Restore {
    sigset_t mask;
    ~Restore() { ::sigprocmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};
  UniqueFd signals(::signalfd(-1, &forwarded, SFD_CLOEXEC));
  if (!signals) throw sysError("signalfd");

  // The limits' cgroup, created before the app's process exists; stale ones of launches
  // that were SIGKILLed go first.
  LaunchCgroup cgroup;
  if (plan.cgroup.backend != limits::Backend::None) {
    sweepStaleCgroups(plan);
    cgroup = LaunchCgroup::create(plan);
  }
  const auto started = std::chrono::steady_clock::now();
  const pid_t supervisor = ::getpid();
  Child child = Child::fork([&]() -> int {
    // The app gets the forwarded signals unblocked, whatever the caller had blocked.
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    ::sigprocmask(SIG_UNBLOCK, &forwarded, nullptr);
    // A supervisor SIGKILLed takes its app along, as a rank's app dies with its ctr.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != supervisor) return kExitFailure;
    executeIn(plan, cgroup ? &cgroup : nullptr);
  });
  auto finish = [&](int status, const rusage& usage) {
    int code = shellStatus(status);
    // SIGKILLed, or (with a PID namespace) its init reporting that as 137.
    const bool killed = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                        (plan.namespaces.pid && WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
    const bool oom = cgroup && killed && cgroup.oomKilled();
    if (oom) {
      std::fprintf(stderr, "ctr: killed: memory limit %s reached\n",
                   plan.limits.memory ? limits::formatSize(*plan.limits.memory).c_str() : "(of the cgroup)");
      code = 137;
    }
    if (!plan.statsFile.empty()) {
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      writeStats(plan, cgroup, wall, usage, status, code, oom);
    }
    cgroup.remove();
    return code;
  };
  rusage usage{};
  const int status = waitForwarding(child, signals.get(), &usage);
  return finish(status, usage);
}

}  // namespace ctr::runtime
