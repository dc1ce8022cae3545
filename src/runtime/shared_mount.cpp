// The per-node, per-user shared image mount: state directory, lock protocol, holder.
// The protocol and the holder's argv contract are described in ctr/runtime.hpp.
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

#include "ctr/build_config.hpp"
#include "ctr/child.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/error.hpp"
#include "ctr/log.hpp"
#include "ctr/programs.hpp"
#include "ctr/runtime.hpp"
#include "ctr/strings.hpp"
#include "rootfs.hpp"

namespace ctr::runtime {

namespace {

struct StateDir {
  UniqueFd fd;
  std::string path;
};

// In a private state directory (see openStateDir): the holder removes the directory.
constexpr const char* kPrivateMarker = "private";

// Opens (creating it if needed) the state directory the plan names. The planner chose it
// (launch::chooseStateDir); here it must still be ours and private, else another user could
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

UniqueFd openLockFile(int dirFd, const std::string& name) {
  UniqueFd fd(::openat(dirFd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw sysError("cannot open lock file " + name);
  return fd;
}

// The address of the holder's registration socket <state>/K.sock, named through the state
// directory's fd: sun_path holds 108 bytes, a state directory under a long $XDG_RUNTIME_DIR
// may not fit, "/proc/self/fd/N/K.sock" always does.
sockaddr_un registrationAddress(int dirFd, const std::string& key) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = "/proc/self/fd/" + std::to_string(dirFd) + "/" + key + ".sock";
  if (path.size() >= sizeof addr.sun_path) throw Error("image key too long: " + key);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

enum class Registration { Done, HolderGone };

// The registration message, as sent and as received: one byte and room for one fd
// (SCM_RIGHTS).
struct FdMessage {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
  msghdr msg{};
  explicit FdMessage(char b) : byte(b) {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

// Registers the calling process, the one that becomes the app, with the holder of `key`
// (whose process `holderPidfd` is): it sends the holder a pidfd of itself (SCM_RIGHTS), and
// the holder keeps the image mounted while that process lives. Called holding K.setup, so
// the holder, which decides to tear down only holding K.setup, finds the message queued
// when it next looks; no answer is awaited (the launch costs no round trip to the holder).
// Nothing of it stays open: the app inherits no fd of ctr's.
Registration registerWithHolder(int dirFd, const std::string& key, int holderPidfd) {
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
  FdMessage message('r');
  msghdr& msg = message.msg;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  const int fd = self.get();
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  while (::sendmsg(sock.get(), &msg, MSG_NOSIGNAL) != 1) {
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) return Registration::HolderGone;
    throw sysError("register with the image holder " + key);
  }
  // Killed since findHolder saw it? (Later, it is as if it were killed after the join.)
  pollfd gone{holderPidfd, POLLIN, 0};
  return ::poll(&gone, 1, 0) > 0 ? Registration::HolderGone : Registration::Done;
}

// Blocking flock that survives EINTR. Returns false only for LOCK_NB and EWOULDBLOCK.
bool lockFile(int fd, int operation, const char* what) {
  while (::flock(fd, operation) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && (operation & LOCK_NB)) return false;
    throw sysError(std::string("flock ") + what);
  }
  return true;
}

struct HolderNamespaces {
  UniqueFd user;
  UniqueFd mount;
  UniqueFd pidfd;  // the holder process
  UniqueFd ready;  // its ready namespace (see SharedImage), if it has one
};

std::uint64_t nsInode(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// A live holder for `key`: its pid file names a process whose namespaces are the ones it
// recorded (so a recycled pid is not mistaken for it).
std::optional<HolderNamespaces> findHolder(int dirFd, const std::string& key) {
  UniqueFd pidFile(::openat(dirFd, (key + ".pid").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!pidFile) return std::nullopt;
  std::array<char, 128> buf{};
  ssize_t n = ::read(pidFile.get(), buf.data(), buf.size() - 1);
  if (n <= 0) return std::nullopt;
  long pid = 0;
  unsigned long long userIno = 0, mountIno = 0, readyIno = 0;
  int readyFd = -1;
  const int fields = std::sscanf(buf.data(), "%ld %llu %llu %d %llu", &pid, &userIno, &mountIno, &readyFd, &readyIno);
  if (fields < 3 || pid <= 0) return std::nullopt;
  // The pidfd first: the namespaces checked below then prove it is the holder's process.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
  const std::string proc = "/proc/" + std::to_string(pid) + "/";
  HolderNamespaces ns{UniqueFd(::open((proc + "ns/user").c_str(), O_RDONLY | O_CLOEXEC)),
                      UniqueFd(::open((proc + "ns/mnt").c_str(), O_RDONLY | O_CLOEXEC)), std::move(pidfd), {}};
  if (!ns.pidfd || !ns.user || !ns.mount || nsInode(ns.user.get()) != userIno ||
      nsInode(ns.mount.get()) != mountIno)
    return std::nullopt;
  // The ready namespace is an fd the holder keeps open: reached through its /proc fd
  // table, and used only if it is the namespace the holder recorded.
  if (fields == 5 && readyFd >= 0) {
    ns.ready.reset(::open((proc + "fd/" + std::to_string(readyFd)).c_str(), O_RDONLY | O_CLOEXEC));
    if (ns.ready && nsInode(ns.ready.get()) != readyIno) ns.ready.reset();
  }
  return ns;
}

[[noreturn]] void execSetuidHelper(const HolderArgs& args) {
  // ctr-mount-helper IMAGE HOLDER-ARG...: it mounts the image in a private mount namespace,
  // drops privileges for good and execs `ctr __holder --premounted DIR HOLDER-ARG...`,
  // leaving the report fd open (src/helper/ctr_mount_helper.c).
  std::vector<std::string> argv = {build::kHelperPath, args.image};
  auto rest = holderArgv(args);
  argv.insert(argv.end(), rest.begin(), rest.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  char* emptyEnv[] = {nullptr};
  // The helper's own one-line refusal ("ctr-mount-helper: ...") arrives on the report
  // channel, so the launch can show it (the holder sets stderr to /dev/null once it runs).
  ::dup2(args.readyFd, STDERR_FILENO);
  ::execve(build::kHelperPath, cargv.data(), emptyEnv);
  std::string msg = "error: cannot run " + std::string(build::kHelperPath) + ": " +
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
  args.driver = driver == launch::ImageDriver::Directory      ? "directory"
                : driver == launch::ImageDriver::SetuidHelper ? "premounted"
                                                               : "squashfuse";
  const bool viaHelper = driver == launch::ImageDriver::SetuidHelper;

  Child intermediate = Child::fork([&] {
    ::setsid();
    pid_t holder = ::fork();
    if (holder != 0) return holder < 0 ? kExitFailure : 0;
    launchEnd.reset();
    args.readyFd = holderEnd.release();
    if (viaHelper) {
      ::fcntl(args.readyFd, F_SETFD, 0);
      execSetuidHelper(args);
    }
    return holderMain(args);
  });
  holderEnd.reset();
  (void)intermediate.wait();

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

std::string imageKey(const image::ImageSource& image, launch::ImageDriver driver) {
  const std::string identity =
      std::to_string(image.device) + ':' + std::to_string(image.inode) + ':' +
      std::to_string(image.mtimeNs) + ':' + std::to_string(image.offset) + ':' +
      std::to_string(image.size) + ':' + launch::toString(driver);
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
                             const StateDir& state, const std::string& key) {
  UniqueFd setup;
  for (;;) {
    setup = openLockFile(state.fd.get(), key + ".setup");
    lockFile(setup.get(), LOCK_EX, "setup lock");
    // A holder tearing down removes the lock files while holding them: locked a removed one?
    struct stat st {};
    if (::fstat(setup.get(), &st) == 0 && st.st_nlink > 0) break;
  }
  auto ns = findHolder(state.fd.get(), key);
  if (ns && registerWithHolder(state.fd.get(), key, ns->pidfd.get()) == Registration::HolderGone) {
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
    if (!ns || registerWithHolder(state.fd.get(), key, ns->pidfd.get()) == Registration::HolderGone)
      throw Error("the image holder for " + plan.image.path.string() + " vanished");
  } else {
    spdlog::debug("reusing the mounted image {}", key);
  }
  return std::move(*ns);
}

}  // namespace

SharedImage joinSharedImage(const launch::LaunchPlan& plan) {
  log::StepTimer timer("joining the shared image mount");
  StateDir state = openStateDir(plan);
  spdlog::debug("image driver: {} ({})", launch::toString(plan.driver), plan.driverReason);
  HolderNamespaces joined;
  try {
    joined = joinOrStart(plan, plan.driver, state, imageKey(plan.image, plan.driver));
  } catch (const Error& e) {
    if (!plan.driverFallback) throw;
    spdlog::warn("{} could not mount {} ({}): using {} instead", launch::toString(plan.driver),
                 plan.image.path.string(), e.oneLine(), launch::toString(*plan.driverFallback));
    joined = joinOrStart(plan, *plan.driverFallback, state, imageKey(plan.image, *plan.driverFallback));
  }
  if (::setns(joined.user.get(), CLONE_NEWUSER) != 0) throw sysError("setns(user namespace)");
  if (::setns(joined.mount.get(), CLONE_NEWNS) != 0) throw sysError("setns(mount namespace)");
  // Joined: the holder watches this process (registered, K.setup released when joinOrStart
  // returned) and keeps the image mounted while it lives. Still in the holder's own mount
  // namespace: assembleRoot joins the ready one or unshares before it mounts anything.
  return {state.path + "/mnt/img", state.path + "/mnt/stage", state.path + "/mnt/base",
          std::move(joined.ready), true, std::nullopt};
}

// ---- the holder ----

namespace {

void createUserAndMountNamespace() {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    int err = errno;
    throw Error(std::string("unprivileged user namespaces are not available (unshare: ") +
                std::strerror(err) +
                "); the administrator can enable them with 'sysctl -w "
                "user.max_user_namespaces=15000' (and 'kernel.unprivileged_userns_clone=1' "
                "where that sysctl exists; on Ubuntu also "
                "'kernel.apparmor_restrict_unprivileged_userns=0')");
  }
  // Map the user to themselves (user_namespaces(7): an unprivileged process may map its own
  // ids once setgroups is denied).
  writeFile("/proc/self/uid_map", std::to_string(uid) + ' ' + std::to_string(uid) + " 1\n");
  writeFile("/proc/self/setgroups", "deny\n");
  writeFile("/proc/self/gid_map", std::to_string(gid) + ' ' + std::to_string(gid) + " 1\n");
}

Child startSquashfuse(const HolderArgs& args, const std::string& imageDir, ScopedMount& mount) {
  UniqueFd fuse(::open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!fuse) {
    int err = errno;
    if (err == ENOENT)
      throw Error("/dev/fuse is missing, so squashfs images cannot be mounted without "
                  "privilege: the administrator can load the fuse module (modprobe fuse) or "
                  "install ctr's setuid mount helper");
    throw Error(std::string("/dev/fuse is not accessible (") + std::strerror(err) +
                "), so squashfs images cannot be mounted without privilege: the administrator "
                "can make it usable ('chmod 0666 /dev/fuse', the usual setting on clusters) or "
                "install ctr's setuid mount helper");
  }
  // We mount the FUSE file system ourselves (we hold CAP_SYS_ADMIN in U) and hand the
  // connection to squashfuse as /dev/fd/N (libfuse >= 3.3), so squashfuse needs no privilege.
  const std::string options = "fd=" + std::to_string(fuse.get()) +
                              ",rootmode=40000,user_id=" + std::to_string(::getuid()) +
                              ",group_id=" + std::to_string(::getgid());
  if (::mount("squashfuse", imageDir.c_str(), "fuse.squashfuse", MS_RDONLY | MS_NOSUID | MS_NODEV,
              options.c_str()) != 0)
    throw sysError("mount fuse.squashfuse on " + imageDir);
  mount = ScopedMount(imageDir);

  // squashfuse reads the file we opened and checked, as /dev/fd/4: an image path swapped for
  // a FIFO after the launch looked at it cannot hang squashfuse in open().
  UniqueFd image(::open(args.image.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat imageStat {};
  if (!image || ::fstat(image.get(), &imageStat) != 0) throw sysError("open image " + args.image);
  if (!S_ISREG(imageStat.st_mode))
    throw Error("image " + args.image + " is " + fileTypeName(imageStat.st_mode) + ", not a regular file");
  SpawnOptions spawn;
  spawn.keepFds = {{fuse.get(), 3}, {image.get(), 4}};
  spawn.dieWithParent = true;
  const std::string squashfuse = findProgram(Program::Squashfuse);
  Child server = Child::spawn({squashfuse, "-f", "-o", "offset=" + std::to_string(args.offset),
                               "/dev/fd/4", "/dev/fd/3"},
                              spawn);
  image.reset();
  fuse.reset();  // squashfuse holds the only connection fd: if it dies, accesses fail at once
  // The first access waits for squashfuse to answer FUSE_INIT, or fails when it exits.
  struct stat st {};
  if (::stat(imageDir.c_str(), &st) != 0) {
    int err = errno;
    server.signal(SIGKILL);
    const int status = server.wait();
    throw Error("squashfuse could not mount " + args.image + " (" + std::strerror(err) + ", " +
                squashfuse + " " +
                (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                   : "killed by a signal") +
                "): not a valid squashfs image?");
  }
  return server;
}

void bindImageDirectory(const std::string& source, const std::string& imageDir) {
  if (::mount(source.c_str(), imageDir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    throw sysError("bind " + source);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (::mount_setattr(AT_FDCWD, imageDir.c_str(), AT_RECURSIVE, &attr, sizeof attr) != 0)
    throw sysError("make " + imageDir + " read-only");
}

// "PID USER-NS-INODE MOUNT-NS-INODE [READY-FD READY-NS-INODE]".
void writePidFile(int dirFd, const std::string& key, const UniqueFd& ready) {
  UniqueFd user(::open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC));
  UniqueFd mnt(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  std::string text = std::to_string(::getpid()) + ' ' + std::to_string(nsInode(user.get())) + ' ' +
                     std::to_string(nsInode(mnt.get()));
  if (ready) text += ' ' + std::to_string(ready.get()) + ' ' + std::to_string(nsInode(ready.get()));
  text += '\n';
  const std::string tmp = key + ".pid.tmp" + std::to_string(::getpid());
  UniqueFd fd(::openat(dirFd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                       0600));
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw sysError("write pid file");
  if (::renameat(dirFd, tmp.c_str(), dirFd, (key + ".pid").c_str()) != 0)
    throw sysError("rename pid file");
}

// Removes the pid file only if it still names us (a later holder may have replaced it).
void removePidFile(int dirFd, const std::string& key) {
  UniqueFd fd(::openat(dirFd, (key + ".pid").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return;
  std::array<char, 128> buf{};
  if (::read(fd.get(), buf.data(), buf.size() - 1) <= 0) return;
  if (std::atol(buf.data()) == ::getpid()) ::unlinkat(dirFd, (key + ".pid").c_str(), 0);
}

// The holder's registration socket, <state>/K.sock (see registrationAddress). A killed
// holder's socket file is replaced: we are started under K.setup when no holder is alive.
UniqueFd listenForRegistrations(int dirFd, const std::string& key) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw sysError("socket");
  const sockaddr_un addr = registrationAddress(dirFd, key);
  ::unlinkat(dirFd, (key + ".sock").c_str(), 0);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    throw sysError("bind " + key + ".sock");
  if (::listen(fd.get(), SOMAXCONN) != 0) throw sysError("listen on " + key + ".sock");
  return fd;
}

bool hasExited(const UniqueFd& pidfd) {
  pollfd p{pidfd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

// The pidfd a registering launch sent over `conn` (SCM_RIGHTS), checked to be a pidfd of
// the connecting process (SO_PEERCRED: same uid, same pid); empty if none came within a
// second (the launch died or stopped between connect and send) or it is not that.
UniqueFd receiveLaunchPidfd(int conn) {
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.pid <= 0 || peer.uid != ::getuid())
    return {};
  pollfd ready{conn, POLLIN, 0};
  if (::poll(&ready, 1, 1000) <= 0) return {};
  FdMessage message(0);
  msghdr& msg = message.msg;
  if (::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) != 1) return {};
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (!cmsg || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len != CMSG_LEN(sizeof(int)))
    return {};
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
  UniqueFd pidfd(fd);
  // A pidfd's fdinfo names its process ("Pid:\tN").
  const std::string info = readFileIfPresent("/proc/self/fdinfo/" + std::to_string(fd));
  const auto at = info.find("\nPid:\t");
  if (at == std::string::npos || std::atol(info.c_str() + at + 6) != peer.pid) return {};
  return pidfd;
}

// Accepts every pending registration: each launch's process is watched through the pidfd
// it sent. Returns how many were taken.
std::size_t acceptRegistrations(int listenFd, std::vector<UniqueFd>& apps) {
  std::size_t taken = 0;
  for (;;) {
    UniqueFd conn(::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return taken;
      throw sysError("accept a registration");
    }
    if (UniqueFd pidfd = receiveLaunchPidfd(conn.get())) {
      apps.push_back(std::move(pidfd));
      ++taken;
    }
  }
}

// How often the holder takes the registrations waiting in its accept queue while apps it
// knows of live. Waking for each one as it came cost every launch ~0.1 ms on a 2-core node
// (the holder's accept, checks and poll ran beside the launch); the queue is taken at once
// whenever the last known app ends, so this only bounds its length.
constexpr int kDrainMs = 1000;

// Returns holding K.setup exclusively once no registered app lives, `lingerMs` have passed
// since the last one ended with no registration meanwhile, and no launch is registering: a
// launch registers only while it holds K.setup, so once we hold it every registration is
// done or waits in the accept queue, and an empty queue means none can come any more.
// Launches pay nothing for the linger. While known apps live, registrations wait in the
// queue (kDrainMs); with none, each is taken as it comes.
void waitUntilUnused(int listenFd, int setupFd, std::uint32_t lingerMs) {
  std::vector<UniqueFd> apps;
  bool lingered = lingerMs == 0;
  for (;;) {
    if (acceptRegistrations(listenFd, apps) > 0) lingered = lingerMs == 0;
    std::erase_if(apps, hasExited);
    if (apps.empty()) {
      if (!lingered) {
        pollfd p{listenFd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(lingerMs)) != 0) continue;  // a launch came (or EINTR)
        lingered = true;
      }
      if (lockFile(setupFd, LOCK_EX | LOCK_NB, "setup lock")) {
        if (acceptRegistrations(listenFd, apps) == 0) return;
        ::flock(setupFd, LOCK_UN);
        lingered = lingerMs == 0;
        continue;
      }
    }
    // Wait for an app to end, or (with none) for a launch to register. With no app, a launch
    // holds K.setup: we never block on it, but look again every 20 ms in case it ends
    // without registering.
    std::vector<pollfd> fds = {{listenFd, static_cast<short>(apps.empty() ? POLLIN : 0), 0}};
    for (const auto& app : apps) fds.push_back({app.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), apps.empty() ? 20 : kDrainMs) < 0 && errno != EINTR)
      throw sysError("poll");
  }
}

// Removes this key's state files and, for a private state directory, the directory itself.
// Called holding K.setup exclusively: a launch blocked on K.setup notices the file is gone
// (joinOrStart) and starts over with a new one; none can be connecting to K.sock.
void removeStateFiles(int dirFd, const std::string& stateDir, const std::string& key) {
  for (const char* suffix : {".sock", ".setup"}) ::unlinkat(dirFd, (key + suffix).c_str(), 0);
  if (::faccessat(dirFd, kPrivateMarker, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    ::unlinkat(dirFd, kPrivateMarker, 0);
    // In the holder's mount namespace "mnt" is its tmpfs (with the image under it): detach
    // the tree (the destructors' own detaches then find nothing) so the directory can go.
    ::umount2((stateDir + "/mnt").c_str(), MNT_DETACH);
    ::unlinkat(dirFd, "mnt", AT_REMOVEDIR);
    // The seccomp cache, if this launch wrote one.
    if (DIR* d = ::fdopendir(::dup(dirFd))) {
      while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') ::unlinkat(dirFd, e->d_name, 0);
      ::closedir(d);
    }
    ::rmdir(stateDir.c_str());
  }
}

void report(int fd, const std::string& line) {
  std::string text = line + '\n';
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

// Whether a bind of the prepared root (base/bound: "DESTINATION\t..." lines) is at or above
// the env scripts: its content could change under the holder's copy.
bool bindReachesEnvScripts(const std::string& bound) {
  for (const std::string_view line : splitLines(bound)) {
    const std::string_view destination = line.substr(0, line.find('\t'));
    if (destination == "/environment" || destination == "/" || destination == "/.singularity.d" ||
        destination.starts_with("/.singularity.d/"))
      return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> holderArgv(const HolderArgs& args) {
  std::vector<std::string> argv = {"--state", args.stateDir, "--key", args.key,
                                   "--driver", args.driver, "--image", args.image,
                                   "--offset", std::to_string(args.offset),
                                   "--size", std::to_string(args.size),
                                   "--linger-ms", std::to_string(args.lingerMs),
                                   "--ready-fd", std::to_string(args.readyFd)};
  if (!args.premounted.empty()) {
    argv.push_back("--premounted");
    argv.push_back(args.premounted);
  }
  return argv;
}

int holderMain(const HolderArgs& args) {
  // Keep only the report fd (as fd 3) and stdio on /dev/null: an inherited pipe would block
  // `$(ctr exec ...)`.
  int readyFd = args.readyFd;
  if (readyFd < 0) return kExitFailure;
  if (readyFd != 3) {
    if (::dup3(readyFd, 3, O_CLOEXEC) < 0) return kExitFailure;
    readyFd = 3;
  }
  int devNull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; ++fd) ::dup2(devNull, fd);
  ::close_range(4, ~0U, 0);
  for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTTOU, SIGTTIN})
    ::signal(sig, SIG_IGN);
  ::prctl(PR_SET_NAME, "ctr-holder");

  // Each registered app costs a pidfd: allow as many as the hard limit lets us.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  UniqueFd stateFd, setupFd, listenFd;
  const std::string mntDir = args.stateDir + "/mnt";
  const std::string imageDir = mntDir + "/img";
  const std::string baseDir = mntDir + "/base";
  Child server;
  ScopedMount imageMount, baseMount, baseRootMount;
  UniqueFd ready;  // closed first: it holds copies of the mounts above
  try {
    // The launch's prepared-root spec comes first on the report channel, up to EOF.
    const auto spec = launch::preparedRootFromJson(readAllBounded(readyFd, 1 << 20, "prepared-root spec"));
    stateFd.reset(::open(args.stateDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!stateFd) throw sysError("open " + args.stateDir);
    setupFd = openLockFile(stateFd.get(), args.key + ".setup");
    createUserAndMountNamespace();
    // Slave, not private: host mounts made later (automounted home directories) still show up.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
      throw sysError("make / a slave mount");
    if (::mount("ctr", mntDir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") != 0)
      throw sysError("mount tmpfs on " + mntDir);
    if (::mkdir(imageDir.c_str(), 0700) != 0 || ::mkdir((mntDir + "/stage").c_str(), 0700) != 0 ||
        ::mkdir(baseDir.c_str(), 0700) != 0)
      throw sysError("mkdir in " + mntDir);
    if (args.driver == "squashfuse") {
      server = startSquashfuse(args, imageDir, imageMount);
    } else if (args.driver == "directory") {
      bindImageDirectory(args.image, imageDir);
      imageMount = ScopedMount(imageDir);
    } else if (args.driver == "premounted") {
      if (args.premounted.empty()) throw Error("__holder: --premounted DIR missing");
      if (::mount(args.premounted.c_str(), imageDir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        throw sysError("bind " + args.premounted);
      imageMount = ScopedMount(imageDir);
    } else {
      throw Error("__holder: unknown driver '" + args.driver + "'");
    }
    // The root every launch of this user can reuse (optional: without it, each launch
    // builds its own).
    try {
      baseMount = ScopedMount(baseDir);
      baseRootMount = ScopedMount(baseDir + "/root");
      prepareBaseRoot(imageDir, baseDir, spec);
    } catch (const Error& e) {
      spdlog::debug("no prepared root for {}: {}", args.image, e.oneLine());
      baseRootMount.reset();
      baseMount.reset();
    }
    if (!baseRootMount.path().empty()) {
      // A copy of the env scripts only for what a read-only image alone decides: not for a
      // directory image (the user may edit it while it is held), not if a bind reaches them.
      const bool copyScripts =
          args.driver != "directory" && !bindReachesEnvScripts(readFileIfPresent(baseDir + "/bound"));
      std::optional<std::vector<EnvScript>> scripts;
      try {
        ready = makeReadyNamespace(baseDir + "/root", [&] {
          if (!copyScripts) return;
          try {
            scripts = readAllEnvScripts();
          } catch (const Error& e) {
            spdlog::debug("no copy of the env scripts of {}: {}", args.image, e.oneLine());
          }
        });
        if (scripts) writeEnvScriptCopy(baseDir + "/env-scripts", *scripts);
      } catch (const Error& e) {
        spdlog::debug("no ready namespace for {}: {}", args.image, e.oneLine());
      }
    }
    listenFd = listenForRegistrations(stateFd.get(), args.key);
    writePidFile(stateFd.get(), args.key, ready);
  } catch (const Error& e) {
    if (listenFd) ::unlinkat(stateFd.get(), (args.key + ".sock").c_str(), 0);
    report(readyFd, "error: " + e.oneLine());
    return kExitFailure;  // server, if started, is killed and reaped; mounts detached
  }
  report(readyFd, "ok");

  try {
    waitUntilUnused(listenFd.get(), setupFd.get(), args.lingerMs);
  } catch (const Error&) {
    // Cannot wait: tear down now rather than leak; launches fail loudly on ENOTCONN.
  }
  removePidFile(stateFd.get(), args.key);
  removeStateFiles(stateFd.get(), args.stateDir, args.key);
  // Closed, detached and killed in this order by the destructors: the ready namespace, base
  // root, base, image, server.
  return 0;
}

}  // namespace ctr::runtime
