// The launch's side of the per-node, per-user shared image mount: the state directory, and
// joining the image's holder or starting one (holder.cpp is the holder; the protocol is in
// holder_protocol.hpp, the holder's argv contract in ctr/runtime.hpp).
#include "shared_mount.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <dirent.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <optional>
#include <map>
#include <string_view>

#include "ctr/configured.hpp"
#include "ctr/owned_child.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/error.hpp"
#include "ctr/stage.hpp"
#include "ctr/log.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/runtime.hpp"
#include "ctr/strings.hpp"
#include "holder_protocol.hpp"
#include "overlay_locks.hpp"
#include "rootfs.hpp"

namespace ctr::runtime {

namespace {

struct StateDir {
  UniqueFd fd;
  std::string path;
};

// Opens (creating it if needed) the state directory the plan names. The planner chose it
// (host::chooseStateDir); here it must still be ours and private, else another user could
// swap our lock or pid files. An empty plan.stateDir (every shared name taken by others)
// gets a private directory of this launch's own, which its holder removes when it ends.
StateDir openStateDir(const launch::LaunchPlan& plan) {
  std::string path = plan.stateDir;
  const uid_t uid = ::getuid();
  if (path.empty()) {
    std::string tmpl = "/tmp/ctr-" + std::to_string(uid) + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw sysError("cannot create a private state directory in /tmp");
    path = tmpl;
    spdlog::warn("the state directories /tmp/ctr-{}[.1-15] belong to other users: using {} (no "
                 "sharing of the image mount with your other launches)", uid, path);
    writeFile(path + "/" + kPrivateMarker, "");
  } else if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    throw sysError("cannot create state directory " + path);
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw sysError("cannot open state directory " + path + " (must be a directory, not a symlink)");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw sysError("fstat " + path);
  if (st.st_uid != uid)
    throw Error("state directory " + path + " belongs to uid " + std::to_string(st.st_uid) +
                " (created since this launch was planned): run again");
  if ((st.st_mode & 022) != 0)
    throw Error("state directory " + path + " is writable by group or others: refusing to use it");
  if (::mkdirat(fd.get(), "mnt", 0700) != 0 && errno != EEXIST)
    throw sysError("cannot create " + path + "/mnt");
  return {std::move(fd), path};
}

enum class Registration { Done, HolderGone };

// Registers the calling process, the one that becomes the app, with the holder of `key`
// (whose process `holderPidfd` is): it sends the holder a pidfd of itself (SCM_RIGHTS), and
// the holder keeps the image mounted while that process lives. With it go `holds`, the
// overlay layers' locked fds, which the holder keeps open (so the locks held) as long.
// Called holding K.setup, so the holder, which decides to tear down only holding K.setup,
// finds the message queued when it next looks; no answer is awaited (the launch costs no
// round trip to the holder). Nothing of it stays open: the app inherits no fd of ctr's.
Registration registerWithHolder(int dirFd, const std::string& key, int holderPidfd, const std::vector<int>& holds) {
  UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock) throw sysError("socket");
  const sockaddr_un addr = registrationAddress(dirFd, key);
  while (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno == EINTR) continue;
    if (errno == EISCONN) break;  // connected while the interrupted call was under way
    if (errno == ECONNREFUSED || errno == ENOENT) return Registration::HolderGone;
    throw sysError("connect to the image holder's " + key + ".sock");
  }
  UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  if (!self) throw sysError("pidfd_open of the launch");
  std::vector<int> fds = {self.get()};
  fds.insert(fds.end(), holds.begin(), holds.end());
  if (fds.size() > kMaxRegistrationFds) throw Error("internal: too many overlay locks to register");
  FdMessage message('r');
  msghdr& msg = message.msg;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  while (::sendmsg(sock.get(), &msg, MSG_NOSIGNAL) != 1) {
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) return Registration::HolderGone;
    throw sysError("register with the image holder " + key);
  }
  // Killed since findHolder saw it? (Later, it is as if it were killed after the join.)
  pollfd gone{holderPidfd, POLLIN, 0};
  return ::poll(&gone, 1, 0) > 0 ? Registration::HolderGone : Registration::Done;
}

struct HolderNamespaces {
  UniqueFd user;
  UniqueFd mount;
  UniqueFd pidfd;  // the holder process
  UniqueFd ready;  // its ready namespace (see SharedImage), if it has one
};

// A live holder for `key`: its pid file names a process whose namespaces are the ones it
// recorded (so a recycled pid is not mistaken for it).
std::optional<HolderNamespaces> findHolder(int dirFd, const std::string& key) {
  UniqueFd pidFile(::openat(dirFd, (key + ".pid").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (!pidFile) return std::nullopt;
  std::array<char, 128> buf{};
  ssize_t n = ::read(pidFile.get(), buf.data(), buf.size() - 1);
  if (n <= 0) return std::nullopt;
  const auto record = parseHolderRecord(std::string_view(buf.data(), static_cast<size_t>(n)));
  if (!record) return std::nullopt;
  // The pidfd first: the namespaces checked below then prove it is the holder's process.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, record->pid, 0)));
  const std::string proc = "/proc/" + std::to_string(record->pid) + "/";
  HolderNamespaces ns{UniqueFd(::open((proc + "ns/user").c_str(), O_RDONLY | O_CLOEXEC)),
                      UniqueFd(::open((proc + "ns/mnt").c_str(), O_RDONLY | O_CLOEXEC)), std::move(pidfd), {}};
  if (!ns.pidfd || !ns.user || !ns.mount || nsInode(ns.user.get()) != record->userNs ||
      nsInode(ns.mount.get()) != record->mountNs)
    return std::nullopt;
  // The ready namespace is an fd the holder keeps open: reached through its /proc fd
  // table, and used only if it is the namespace the holder recorded.
  if (record->readyFd >= 0) {
    ns.ready.reset(::open((proc + "fd/" + std::to_string(record->readyFd)).c_str(), O_RDONLY | O_CLOEXEC));
    if (ns.ready && nsInode(ns.ready.get()) != record->readyNs) ns.ready.reset();
  }
  return ns;
}

// ctr-mount-helper [--dataset FILE]... IMAGE HOLDER-ARG...: it mounts the image at
// RUNDIR/mnt (and the I-th dataset given, `kernelDatasets`, at RUNDIR/data/I) in a private
// mount namespace, drops privileges for good and execs `ctr __holder HOLDER-ARG...`, leaving
// the report fd open (src/helper/ctr_mount_helper.c). HOLDER-ARG already names those mount
// points (--premounted, --premounted-dataset: startHolder).
[[noreturn]] void execSetuidHelper(const HolderArgs& args, const std::vector<std::string>& kernelDatasets) {
  std::vector<std::string> argv = {configured::kHelperPath};
  for (const auto& dataset : kernelDatasets) {
    argv.push_back("--dataset");
    argv.push_back(dataset);
  }
  argv.push_back(args.image);
  auto rest = holderArgv(args);
  argv.insert(argv.end(), rest.begin(), rest.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  char* emptyEnv[] = {nullptr};
  // The helper's own one-line refusal ("ctr-mount-helper: ...") arrives on the report
  // channel, so the launch can show it (the holder sets stderr to /dev/null once it runs).
  ::dup2(args.readyFd, STDERR_FILENO);
  ::execve(configured::kHelperPath, cargv.data(), emptyEnv);
  std::string msg = "error: cannot run " + std::string(configured::kHelperPath) + ": " +
                    std::strerror(errno) + "\n";
  (void)!::write(args.readyFd, msg.data(), msg.size());
  ::_exit(kExitFailure);
}

// Starts a holder for `key` and waits for its report. The holder is a grandchild in its own
// session, so it belongs neither to the app's process tree nor to its process group. The
// report channel is a socket pair: the launch first sends the prepared-root spec (JSON) and
// shuts its side for writing; the holder reads it to EOF, then reports one line.
void startHolder(const launch::LaunchPlan& plan, launch::ImageDriver driver, const StateDir& state,
                 const std::string& key) {
  log::StepTimer timer("starting the image holder");
  std::array<int, 2> sockFds{};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockFds.data()) != 0)
    throw sysError("socketpair");
  UniqueFd launchEnd(sockFds[0]);
  UniqueFd holderEnd(sockFds[1]);
  const std::string spec = launch::preparedRootToJson(plan.preparedRoot);
  if (::write(launchEnd.get(), spec.data(), spec.size()) != static_cast<ssize_t>(spec.size()) ||
      ::shutdown(launchEnd.get(), SHUT_WR) != 0)
    throw sysError("send the prepared-root spec to the holder");

  HolderArgs args;
  args.stateDir = state.path;
  args.key = key;
  args.image = plan.image.path.string();
  args.offset = plan.image.offset;
  args.size = plan.image.size;
  args.lingerMs = plan.lingerMs;
  args.lingerUnlessOverlaid = plan.lingerUnlessOverlaid;
  if (plan.fakeroot) {
    args.uidMap = formatIdMap(plan.fakeroot->uidMap);
    args.gidMap = formatIdMap(plan.fakeroot->gidMap);
    if (plan.fakeroot->mapHelpers) {
      args.newuidmap = plan.fakeroot->newuidmap;
      args.newgidmap = plan.fakeroot->newgidmap;
    }
  }
  args.driver = driver == launch::ImageDriver::Directory      ? "directory"
                : driver == launch::ImageDriver::SetuidHelper ? "premounted"
                                                               : "squashfuse";
  const bool viaHelper = driver == launch::ImageDriver::SetuidHelper;
  if (driver == launch::ImageDriver::Squashfuse || !plan.datasets.empty()) {
    if (!plan.imageServer) throw Error("the plan names no squashfs server for " + args.image);
    args.server = plan.imageServer->program;
  }
  if (plan.image.lazy) args.lazySpec = plan.image.lazy->spec;
  const std::string helperRundir = configured::kHelperRundir;
  if (viaHelper) args.premounted = helperRundir + "/mnt";
  std::vector<std::string> kernelDatasets;  // the helper's --dataset files, in order
  for (const auto& d : plan.datasets) {
    args.datasets.push_back(d.key + ':' + std::to_string(d.image.offset) + ':' + d.image.path.string());
    if (!viaHelper || d.driver != launch::ImageDriver::SetuidHelper) continue;
    args.premountedDatasets.push_back(d.key + ':' + helperRundir + "/data/" + std::to_string(kernelDatasets.size()));
    kernelDatasets.push_back(d.image.path.string());
  }

  try {
    forkDaemon([&] {
      launchEnd.reset();
      args.readyFd = holderEnd.release();
      if (viaHelper) {
        ::fcntl(args.readyFd, F_SETFD, 0);
        execSetuidHelper(args, kernelDatasets);
      }
      return holderMain(args);
    });
  } catch (const Error& e) {
    throw Error("cannot start the image holder for " + args.image + ": " + e.oneLine());
  }
  holderEnd.reset();

  std::string report;
  std::array<char, 512> buf{};
  for (;;) {
    ssize_t n = ::read(launchEnd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buf.data(), static_cast<size_t>(n));
  }
  while (!report.empty() && report.back() == '\n') report.pop_back();
  if (report == "ok") return;
  if (report.rfind("error: ", 0) == 0) throw Error(report.substr(7));
  if (report.rfind("ctr-mount-helper: ", 0) == 0) throw Error(report);
  throw Error("the image holder ended before it reported (killed?)" +
              (report.empty() ? std::string() : ": " + report));
}

}  // namespace

std::string imageKey(const launch::LaunchPlan& plan, launch::ImageDriver driver) {
  const image::ImageSource& image = plan.image;
  const launch::FakerootMaps* fakeroot = plan.fakeroot ? &*plan.fakeroot : nullptr;
  std::string identity =
      std::to_string(image.device) + ':' + std::to_string(image.inode) + ':' +
      std::to_string(image.mtimeNs) + ':' + std::to_string(image.offset) + ':' +
      std::to_string(image.size) + ':' + launch::toString(driver);
  if (fakeroot)
    identity += ":fakeroot:" + formatIdMap(fakeroot->uidMap) + '/' + formatIdMap(fakeroot->gidMap) + '/' +
                fakeroot->newuidmap + '/' + fakeroot->newgidmap;
  if ((driver == launch::ImageDriver::Squashfuse || !plan.datasets.empty()) && plan.imageServer)
    identity += ":server:" + plan.imageServer->program;
  // Launches in other cgroups or mount namespaces get a holder of their own (launch::HolderScope).
  identity += ":freezer:" + plan.holderScope.freezer + ":unified:" + plan.holderScope.unified +
              ":mnt:" + plan.holderScope.mountNamespace;
  // A directory image: what its prepared root was made from, as it is now (a change of an
  // entry list, an identity file's source or a target starts a new holder; missing: "-").
  if (!plan.holderKeyPaths.empty()) {
    UniqueFd dir(::open(image.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    for (const auto& path : plan.holderKeyPaths) {
      struct stat st {};
      const std::string relative = path == "/" ? "." : path.substr(1);
      if (dir && ::fstatat(dir.get(), relative.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        identity += ':' + std::to_string(st.st_ino) + '.' + std::to_string(st.st_mtim.tv_sec) + '.' +
                    std::to_string(st.st_mtim.tv_nsec) + '.' + std::to_string(st.st_size);
      else
        identity += ":-";
    }
  }
  for (const auto& d : plan.datasets)
    identity += ":dataset:" + d.key +
                (driver == launch::ImageDriver::SetuidHelper && d.driver == launch::ImageDriver::SetuidHelper ? ":kernel" : "");
  return toHex16(fnv1a64(identity));
}

namespace {

// Removes the state files (K.setup, K.sock, K.pid, K.pid.tmpN; K.users of earlier versions)
// of keys whose holder was SIGKILLed and so could not remove them itself. Safe by the
// teardown's own argument: with K.setup held exclusively nobody is starting or registering
// with that key's holder, and a launch blocked on K.setup notices the removed file and
// starts over. The dead holder's apps hold nothing of these files (they run on in their own
// namespaces). Costs a readdir of a directory of a few files; a key with a live holder is
// not touched. Run by launches that start a holder (they mount an image anyway), so a
// killed holder's files go with the next fresh mount of any image.
void sweepDeadHolders(const StateDir& state) {
  std::map<std::string, std::vector<std::string>> files;  // key -> its state files
  if (DIR* d = ::fdopendir(::dup(state.fd.get()))) {
    while (dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      const auto dot = name.find('.');
      if (dot == 16 && (name.substr(dot) == ".setup" || name.substr(dot) == ".sock" ||
                        name.substr(dot) == ".users" || name.substr(dot).starts_with(".pid")))
        files[std::string(name.substr(0, dot))].emplace_back(name);
    }
    ::closedir(d);
  }
  for (const auto& [key, names] : files) {
    if (findHolder(state.fd.get(), key)) continue;
    // K.setup is taken (created if it is gone) as a launch takes it: nothing can start a
    // holder for the key while we hold it.
    UniqueFd setup = openLockFile(state.fd.get(), key + ".setup");
    if (!lockFile(setup.get(), LOCK_EX | LOCK_NB, "setup lock")) continue;  // being set up
    if (findHolder(state.fd.get(), key)) continue;
    spdlog::debug("removing the state files of {}, whose holder was killed", key);
    for (const auto& name : names) ::unlinkat(state.fd.get(), name.c_str(), 0);
    ::unlinkat(state.fd.get(), (key + ".setup").c_str(), 0);  // if we created it
  }
}

// Joins (or starts) the holder of `key` and registers this process with it, so the image
// stays mounted while this process (the app, once it has exec'd) lives.
HolderNamespaces joinOrStart(const launch::LaunchPlan& plan, launch::ImageDriver driver,
                             const StateDir& state, const std::string& key, const std::vector<int>& holds) {
  UniqueFd setup;
  for (;;) {
    setup = openLockFile(state.fd.get(), key + ".setup");
    lockFile(setup.get(), LOCK_EX, "setup lock");
    // A holder tearing down removes the lock files while holding them: locked a removed one?
    struct stat st {};
    if (::fstat(setup.get(), &st) == 0 && st.st_nlink > 0) break;
  }
  auto ns = findHolder(state.fd.get(), key);
  if (ns && registerWithHolder(state.fd.get(), key, ns->pidfd.get(), holds) == Registration::HolderGone) {
    // We hold K.setup, so it is not tearing down: it was killed since findHolder saw it.
    spdlog::debug("the holder of {} ended before it registered this launch: starting another", key);
    ns.reset();
  }
  if (!ns) {
    // This launch pays for a mount anyway: the moment to clear what SIGKILLed holders left
    // (joins of a live holder, the fast path, never pay for it).
    sweepDeadHolders(state);
    try {
      startHolder(plan, driver, state, key);
    } catch (const Error&) {
      // No holder: a launch waiting for K.setup notices it was removed and starts over.
      // Leave nothing behind for an image that failed.
      for (const char* suffix : {".sock", ".setup"}) ::unlinkat(state.fd.get(), (key + suffix).c_str(), 0);
      throw;
    }
    ns = findHolder(state.fd.get(), key);
    if (!ns || registerWithHolder(state.fd.get(), key, ns->pidfd.get(), holds) == Registration::HolderGone)
      throw Error("the image holder for " + plan.image.path.string() + " vanished");
  } else {
    spdlog::debug("reusing the mounted image {}", key);
  }
  return std::move(*ns);
}

}  // namespace

SharedImage joinSharedImage(const launch::LaunchPlan& plan) {
  if (plan.staging) {
    // Before the holder's lock: a launch waiting for a copy holds nothing another needs.
    log::StepTimer staging("staging the image files to the node");
    for (const auto& f : plan.staging->files)
      image::stage::ensure(plan.staging->dir, {f.source, f.copy, f.bytes, f.mtimeNs}, plan.staging->maxBytes);
  }
  log::StepTimer timer("joining the shared image mount");
  StateDir state = openStateDir(plan);
  spdlog::debug("image driver: {} ({})", launch::toString(plan.driver), plan.driverReason);
  // Before K.setup: a lock another container holds is waited for a moment (lockOverlayLayers).
  std::vector<UniqueFd> locks = lockOverlayLayers(plan.overlay);
  std::vector<int> holds;
  for (const auto& fd : locks) holds.push_back(fd.get());
  HolderNamespaces joined;
  try {
    joined = joinOrStart(plan, plan.driver, state, imageKey(plan, plan.driver), holds);
  } catch (const Error& e) {
    if (!plan.driverFallback) throw;
    spdlog::warn("{} could not mount {} ({}): using {} instead", launch::toString(plan.driver),
                 plan.image.path.string(), e.oneLine(), launch::toString(*plan.driverFallback));
    joined = joinOrStart(plan, *plan.driverFallback, state, imageKey(plan, *plan.driverFallback), holds);
  }
  if (::setns(joined.user.get(), CLONE_NEWUSER) != 0) throw sysError("setns(user namespace)");
  if (::setns(joined.mount.get(), CLONE_NEWNS) != 0) throw sysError("setns(mount namespace)");
  // Joined: the holder watches this process (registered, K.setup released when joinOrStart
  // returned) and keeps the image mounted while it lives. Still in the holder's own mount
  // namespace: assembleRoot joins the ready one or unshares before it mounts anything.
  return {state.path + "/mnt/img", state.path + "/mnt/stage", state.path + "/mnt/base",
          std::move(joined.ready), true, std::nullopt, std::move(locks)};
}

}  // namespace ctr::runtime
