// The per-node, per-user shared image mount: state directory, lock protocol, holder.
// The protocol and the holder's argv contract are described in ctr/runtime.hpp.
#include "shared_mount.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <optional>

#include "ctr/build_config.hpp"
#include "ctr/error.hpp"
#include "ctr/log.hpp"
#include "ctr/runtime.hpp"
#include "rootfs.hpp"

namespace ctr::runtime {

namespace {

struct StateDir {
  UniqueFd fd;
  std::string path;
};

std::string fallbackStateDir() { return "/tmp/ctr-" + std::to_string(::getuid()); }

// Candidates in /tmp when another user got there first (anyone can create /tmp/ctr-<uid>):
// every rank of a job sees the same directories, so all of them settle on the same one.
constexpr int kStateDirCandidates = 16;

// Opens (creating it if needed) `path` as a state directory. Returns an invalid fd when the
// directory belongs to someone else; throws for anything else that is wrong with it.
UniqueFd openOwnedDir(const std::string& path, uid_t uid) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw sysError("cannot create state directory " + path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && link.st_uid != uid) return {};
    throw sysError("cannot open state directory " + path + " (must be a directory, not a symlink)");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw sysError("fstat " + path);
  if (st.st_uid != uid) return {};
  if ((st.st_mode & 022) != 0)
    throw Error("state directory " + path + " is writable by group or others: refusing to use it");
  return fd;
}

// The state directory must be ours and private: another user who could write there could
// swap our lock or pid files.
StateDir openStateDir(const launch::LaunchPlan& plan) {
  std::string path = plan.stateDir;
  const uid_t uid = ::getuid();
  if (path != fallbackStateDir()) {
    struct stat parent {};
    auto slash = path.find_last_of('/');
    std::string parentPath = slash == 0 ? "/" : path.substr(0, slash);
    if (::stat(parentPath.c_str(), &parent) != 0 || parent.st_uid != uid) path = fallbackStateDir();
  }
  UniqueFd fd = openOwnedDir(path, uid);
  if (!fd && path == fallbackStateDir()) {
    for (int i = 1; i < kStateDirCandidates && !fd; ++i) {
      spdlog::debug("state directory {} belongs to another user: trying the next one", path);
      path = fallbackStateDir() + "." + std::to_string(i);
      fd = openOwnedDir(path, uid);
    }
  }
  if (!fd)
    throw Error("state directory " + path + " and the alternatives before it belong to other "
                "users: set XDG_RUNTIME_DIR to a private directory, or ask the administrator "
                "to remove them");
  if (::mkdirat(fd.get(), "mnt", 0700) != 0 && errno != EEXIST)
    throw sysError("cannot create " + path + "/mnt");
  return {std::move(fd), path};
}

UniqueFd openLockFile(int dirFd, const std::string& name, bool closeOnExec) {
  UniqueFd fd(::openat(dirFd, name.c_str(),
                       O_RDWR | O_CREAT | O_NOFOLLOW | (closeOnExec ? O_CLOEXEC : 0), 0600));
  if (!fd) throw sysError("cannot open lock file " + name);
  return fd;
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
  unsigned long long userIno = 0, mountIno = 0;
  if (std::sscanf(buf.data(), "%ld %llu %llu", &pid, &userIno, &mountIno) != 3 || pid <= 0)
    return std::nullopt;
  const std::string proc = "/proc/" + std::to_string(pid) + "/ns/";
  HolderNamespaces ns{UniqueFd(::open((proc + "user").c_str(), O_RDONLY | O_CLOEXEC)),
                      UniqueFd(::open((proc + "mnt").c_str(), O_RDONLY | O_CLOEXEC))};
  if (!ns.user || !ns.mount || nsInode(ns.user.get()) != userIno ||
      nsInode(ns.mount.get()) != mountIno)
    return std::nullopt;
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
  ::execve(build::kHelperPath, cargv.data(), emptyEnv);
  std::string msg = "error: cannot run " + std::string(build::kHelperPath) + ": " +
                    std::strerror(errno) + "\n";
  (void)!::write(args.readyFd, msg.data(), msg.size());
  ::_exit(kExitFailure);
}

// Starts a holder for `key` and waits for its report. The holder is a grandchild in its own
// session, so it belongs neither to the app's process tree nor to its process group.
void startHolder(const launch::LaunchPlan& plan, const StateDir& state, const std::string& key) {
  log::StepTimer timer("starting the image holder");
  std::array<int, 2> pipeFds{};
  if (::pipe2(pipeFds.data(), O_CLOEXEC) != 0) throw sysError("pipe2");
  UniqueFd readEnd(pipeFds[0]);
  UniqueFd writeEnd(pipeFds[1]);

  HolderArgs args;
  args.stateDir = state.path;
  args.key = key;
  args.image = plan.image.path.string();
  args.offset = plan.image.offset;
  args.size = plan.image.size;
  args.driver = plan.driver == launch::ImageDriver::Directory      ? "directory"
                : plan.driver == launch::ImageDriver::SetuidHelper ? "premounted"
                                                                    : "squashfuse";
  const bool viaHelper = plan.driver == launch::ImageDriver::SetuidHelper;

  pid_t intermediate = ::fork();
  if (intermediate < 0) throw sysError("fork");
  if (intermediate == 0) {
    ::setsid();
    pid_t holder = ::fork();
    if (holder != 0) ::_exit(holder < 0 ? kExitFailure : 0);
    readEnd.reset();
    args.readyFd = writeEnd.release();
    if (viaHelper) {
      ::fcntl(args.readyFd, F_SETFD, 0);
      execSetuidHelper(args);
    }
    ::_exit(holderMain(args));
  }
  writeEnd.reset();
  int status = 0;
  while (::waitpid(intermediate, &status, 0) < 0 && errno == EINTR) {
  }

  std::string report;
  std::array<char, 512> buf{};
  for (;;) {
    ssize_t n = ::read(readEnd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buf.data(), static_cast<size_t>(n));
  }
  while (!report.empty() && report.back() == '\n') report.pop_back();
  if (report == "ok") return;
  if (report.rfind("error: ", 0) == 0) throw Error(report.substr(7));
  throw Error("the image holder exited without reporting (" + report + ")");
}

}  // namespace

std::string imageKey(const launch::LaunchPlan& plan) {
  const std::string identity =
      std::to_string(plan.image.device) + ':' + std::to_string(plan.image.inode) + ':' +
      std::to_string(plan.image.mtimeNs) + ':' + std::to_string(plan.image.offset) + ':' +
      std::to_string(plan.image.size) + ':' + launch::toString(plan.driver);
  std::uint64_t hash = 14695981039346656037ULL;  // FNV-1a
  for (unsigned char c : identity) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx", static_cast<unsigned long long>(hash));
  return hex.data();
}

SharedImage joinSharedImage(const launch::LaunchPlan& plan) {
  log::StepTimer timer("joining the shared image mount");
  StateDir state = openStateDir(plan);
  const std::string key = imageKey(plan);

  UniqueFd setup = openLockFile(state.fd.get(), key + ".setup", true);
  lockFile(setup.get(), LOCK_EX, "setup lock");
  // Not O_CLOEXEC: the app and everything it starts keep the image alive through this fd.
  UniqueFd users = openLockFile(state.fd.get(), key + ".users", false);
  lockFile(users.get(), LOCK_SH, "users lock");

  auto ns = findHolder(state.fd.get(), key);
  if (!ns) {
    startHolder(plan, state, key);
    ns = findHolder(state.fd.get(), key);
    if (!ns) throw Error("the image holder for " + plan.image.path.string() + " vanished");
  } else {
    log::StepTimer reuse("reusing the mounted image " + key);
  }
  if (::setns(ns->user.get(), CLONE_NEWUSER) != 0) throw sysError("setns(user namespace)");
  if (::setns(ns->mount.get(), CLONE_NEWNS) != 0) throw sysError("setns(mount namespace)");
  setup.reset();  // joined: from now on our LOCK_SH keeps the holder alive
  if (::unshare(CLONE_NEWNS) != 0) throw sysError("unshare(mount namespace)");
  return {std::move(users), state.path + "/mnt/img", state.path + "/mnt/stage",
          state.path + "/mnt/base"};
}

// ---- the holder ----

namespace {

void writeFile(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw sysError("write " + path);
}

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

pid_t startSquashfuse(const HolderArgs& args, const std::string& imageDir) {
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

  const pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) throw sysError("fork");
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitFailure);
    if (fuse.get() == 3) ::fcntl(3, F_SETFD, 0);
    else if (::dup2(fuse.get(), 3) < 0) ::_exit(kExitFailure);
    for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE})
      ::signal(sig, SIG_DFL);
    std::string offset = "offset=" + std::to_string(args.offset);
    std::vector<char*> argv = {const_cast<char*>(build::kSquashfuse), const_cast<char*>("-f"),
                               const_cast<char*>("-o"), offset.data(),
                               const_cast<char*>(args.image.c_str()),
                               const_cast<char*>("/dev/fd/3"), nullptr};
    ::execv(build::kSquashfuse, argv.data());
    ::_exit(127);
  }
  fuse.reset();  // squashfuse holds the only connection fd: if it dies, accesses fail at once
  // The first access waits for squashfuse to answer FUSE_INIT, or fails when it exits.
  struct stat st {};
  if (::stat(imageDir.c_str(), &st) != 0) {
    int err = errno;
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::umount2(imageDir.c_str(), MNT_DETACH);
    throw Error("squashfuse could not mount " + args.image + " (" + std::strerror(err) + ", " +
                build::kSquashfuse + " " +
                (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                   : "killed by a signal") +
                "): not a valid squashfs image?");
  }
  return child;
}

void bindImageDirectory(const std::string& source, const std::string& imageDir) {
  if (::mount(source.c_str(), imageDir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    throw sysError("bind " + source);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (::mount_setattr(AT_FDCWD, imageDir.c_str(), AT_RECURSIVE, &attr, sizeof attr) != 0)
    throw sysError("make " + imageDir + " read-only");
}

void writePidFile(int dirFd, const std::string& key) {
  UniqueFd user(::open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC));
  UniqueFd mnt(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  const std::string text = std::to_string(::getpid()) + ' ' +
                           std::to_string(nsInode(user.get())) + ' ' +
                           std::to_string(nsInode(mnt.get())) + '\n';
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

// Returns holding K.users and K.setup exclusively: no launch uses the image, none can join.
void waitUntilUnused(int usersFd, int setupFd) {
  for (;;) {
    lockFile(usersFd, LOCK_EX, "users lock");
    if (lockFile(setupFd, LOCK_EX | LOCK_NB, "setup lock")) return;
    // A launch holds K.setup and may be blocked on K.users: let it in, then try again.
    ::flock(usersFd, LOCK_UN);
    lockFile(setupFd, LOCK_EX, "setup lock");
    ::flock(setupFd, LOCK_UN);
  }
}

void report(int fd, const std::string& line) {
  std::string text = line + '\n';
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

}  // namespace

std::vector<std::string> holderArgv(const HolderArgs& args) {
  std::vector<std::string> argv = {"--state", args.stateDir, "--key", args.key,
                                   "--driver", args.driver, "--image", args.image,
                                   "--offset", std::to_string(args.offset),
                                   "--size", std::to_string(args.size),
                                   "--ready-fd", std::to_string(args.readyFd)};
  if (!args.premounted.empty()) {
    argv.push_back("--premounted");
    argv.push_back(args.premounted);
  }
  return argv;
}

int holderMain(const HolderArgs& args) {
  // Keep only the report fd (as fd 3) and stdio on /dev/null: an inherited lock fd would
  // keep the image alive forever, an inherited pipe would block `$(ctr exec ...)`.
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

  UniqueFd stateFd, usersFd, setupFd;
  const std::string mntDir = args.stateDir + "/mnt";
  const std::string imageDir = mntDir + "/img";
  const std::string baseDir = mntDir + "/base";
  pid_t server = -1;
  try {
    stateFd.reset(::open(args.stateDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!stateFd) throw sysError("open " + args.stateDir);
    usersFd = openLockFile(stateFd.get(), args.key + ".users", true);
    setupFd = openLockFile(stateFd.get(), args.key + ".setup", true);
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
      server = startSquashfuse(args, imageDir);
    } else if (args.driver == "directory") {
      bindImageDirectory(args.image, imageDir);
    } else if (args.driver == "premounted") {
      if (args.premounted.empty()) throw Error("__holder: --premounted DIR missing");
      if (::mount(args.premounted.c_str(), imageDir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        throw sysError("bind " + args.premounted);
    } else {
      throw Error("__holder: unknown driver '" + args.driver + "'");
    }
    // The root every launch of this user can reuse (optional: without it, each launch
    // builds its own).
    try {
      prepareBaseRoot(imageDir, baseDir);
    } catch (const Error&) {
      ::umount2((baseDir + "/root").c_str(), MNT_DETACH);
      ::umount2(baseDir.c_str(), MNT_DETACH);
    }
    writePidFile(stateFd.get(), args.key);
  } catch (const Error& e) {
    if (server > 0) ::kill(server, SIGKILL);
    report(readyFd, "error: " + e.oneLine());
    return kExitFailure;
  }
  report(readyFd, "ok");

  try {
    waitUntilUnused(usersFd.get(), setupFd.get());
  } catch (const Error&) {
    // Cannot wait: tear down now rather than leak; launches fail loudly on ENOTCONN.
  }
  removePidFile(stateFd.get(), args.key);
  ::umount2((baseDir + "/root").c_str(), MNT_DETACH);
  ::umount2(baseDir.c_str(), MNT_DETACH);
  ::umount2(imageDir.c_str(), MNT_DETACH);
  if (server > 0) {
    ::kill(server, SIGKILL);
    while (::waitpid(server, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  return 0;
}

}  // namespace ctr::runtime
