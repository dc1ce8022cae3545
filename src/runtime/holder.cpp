// The image holder (`ctr __holder`): mounts one image for the user's launches on this
// node, keeps it mounted while a registered launch lives, then tears down. Its other side,
// the launch that joins or starts it, is shared_mount.cpp; what both know, holder_protocol.hpp.

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

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <map>
#include <string_view>

#include "ctr/configured.hpp"
#include "ctr/owned_child.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/error.hpp"
#include "ctr/log.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/runtime.hpp"
#include "ctr/strings.hpp"
#include "build_namespace.hpp"
#include "holder_protocol.hpp"
#include "rootfs.hpp"


namespace ctr::runtime {


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

// Mounts the squashfs at `offset` of the file `imagePath` read-only on `imageDir`, served by
// `server` (args.server), and returns the server.
Child startSquashfuse(const std::string& server, const std::string& imagePath, std::uint64_t offset,
                      const std::string& imageDir, ScopedMount& mount, const std::string& lazySpec = "") {
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
  // connection to the server (ctr-squashfs or squashfuse_ll) as /dev/fd/N
  // (libfuse >= 3.3), so the server needs no privilege.
  const std::string options = "fd=" + std::to_string(fuse.get()) +
                              ",rootmode=40000,user_id=" + std::to_string(::getuid()) +
                              ",group_id=" + std::to_string(::getgid());
  if (::mount("squashfuse", imageDir.c_str(), "fuse.squashfuse", MS_RDONLY | MS_NOSUID | MS_NODEV,
              options.c_str()) != 0)
    throw sysError("mount fuse.squashfuse on " + imageDir);
  mount = ScopedMount(imageDir);

  SpawnOptions spawn;
  spawn.dieWithParent = true;
  if (server.empty()) throw Error("__holder: --server PATH missing");
  UniqueFd image;
  std::vector<std::string> argv = {server, "-f", "-o", "offset=" + std::to_string(offset), "/dev/fd/4", "/dev/fd/3"};
  if (!lazySpec.empty()) {
    // A lazily read image: the server reads its blob through the node cache, by the spec.
    argv[3] += ",lazy=" + lazySpec;
    argv[4] = "-";
    spawn.keepFds = {{fuse.get(), 3}};
  } else {
    // The server reads the file we opened and checked, as /dev/fd/4: an image path swapped
    // for a FIFO after the launch looked at it cannot hang it in open().
    image.reset(::open(imagePath.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat imageStat {};
    if (!image || ::fstat(image.get(), &imageStat) != 0) throw sysError("open image " + imagePath);
    if (!S_ISREG(imageStat.st_mode))
      throw Error("image " + imagePath + " is " + fileTypeName(imageStat.st_mode) + ", not a regular file");
    spawn.keepFds = {{fuse.get(), 3}, {image.get(), 4}};
  }
  Child child = Child::spawn(argv, spawn);
  image.reset();
  fuse.reset();  // the server holds the only connection fd: if it dies, accesses fail at once
  // The first access waits for the server to answer FUSE_INIT, or fails when it exits.
  struct stat st {};
  if (::stat(imageDir.c_str(), &st) != 0) {
    int err = errno;
    child.signal(SIGKILL);
    const int status = child.wait();
    throw Error("squashfuse could not mount " + imagePath + " (" + std::strerror(err) + ", " +
                server + " " +
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

// The dataset images ("KEY:OFFSET:PATH"), each read-only at DIR/KEY: bound from where the
// setuid helper mounted it as kernel squashfs (args.premountedDatasets), else served as a
// squashfs image is (args.server), whatever the image's own driver.
void mountDatasets(const HolderArgs& args, const std::string& dir, std::vector<Child>& servers,
                   std::vector<ScopedMount>& mounts) {
  if (args.datasets.empty()) return;
  if (::mkdir(dir.c_str(), 0700) != 0) throw sysError("mkdir " + dir);
  for (const std::string& spec : args.datasets) {
    // KEY (16 hex digits), OFFSET, PATH (the rest: it may hold ':').
    const size_t a = spec.find(':');
    const size_t b = a == std::string::npos ? a : spec.find(':', a + 1);
    std::uint64_t offset = 0;
    const std::string key = spec.substr(0, a);
    const bool keyOk = key.size() == 16 && key.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (b == std::string::npos || !keyOk ||
        std::from_chars(spec.data() + a + 1, spec.data() + b, offset).ptr != spec.data() + b)
      throw Error("__holder: bad --dataset '" + spec + "'");
    const std::string mountDir = dir + "/" + key;
    if (::mkdir(mountDir.c_str(), 0700) != 0) throw sysError("mkdir " + mountDir);
    const auto premounted = std::find_if(args.premountedDatasets.begin(), args.premountedDatasets.end(),
                                         [&](const std::string& p) { return p.starts_with(key + ':'); });
    if (premounted != args.premountedDatasets.end()) {
      bindImageDirectory(premounted->substr(key.size() + 1), mountDir);
      mounts.emplace_back(mountDir);
      continue;
    }
    mounts.emplace_back();
    servers.push_back(startSquashfuse(args.server, spec.substr(b + 1), offset, mountDir, mounts.back()));
  }
}

// K.pid, replaced atomically (see HolderRecord).
void writePidFile(int dirFd, const std::string& key, const UniqueFd& ready) {
  UniqueFd user(::open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC));
  UniqueFd mnt(::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC));
  HolderRecord record{::getpid(), nsInode(user.get()), nsInode(mnt.get()), -1, 0};
  if (ready) {
    record.readyFd = ready.get();
    record.readyNs = nsInode(ready.get());
  }
  const std::string text = formatHolderRecord(record);
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
  UniqueFd fd(::openat(dirFd, (key + ".pid").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return;
  std::array<char, 128> buf{};
  const ssize_t n = ::read(fd.get(), buf.data(), buf.size() - 1);
  if (n <= 0) return;
  const auto record = parseHolderRecord(std::string_view(buf.data(), static_cast<size_t>(n)));
  if (record && record->pid == ::getpid()) ::unlinkat(dirFd, (key + ".pid").c_str(), 0);
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

// A registered launch: its process, and the overlay layers' locks it handed over, held
// (their fds open) until it ends.
struct RegisteredApp {
  UniqueFd pidfd;
  std::vector<UniqueFd> holds;
};

bool hasExited(const RegisteredApp& app) {
  pollfd p{app.pidfd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

// The registration a launch sent over `conn`: a pidfd of the connecting process (checked:
// SO_PEERCRED, same uid and pid), then its locks (SCM_RIGHTS); empty if none came within a
// second (the launch died or stopped between connect and send) or it is not that.
std::optional<RegisteredApp> receiveRegistration(int conn) {
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.pid <= 0 || peer.uid != ::getuid())
    return std::nullopt;
  pollfd ready{conn, POLLIN, 0};
  if (::poll(&ready, 1, 1000) <= 0) return std::nullopt;
  FdMessage message(0);
  msghdr& msg = message.msg;
  if (::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) != 1) return std::nullopt;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (!cmsg || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len < CMSG_LEN(sizeof(int)))
    return std::nullopt;
  const std::size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  RegisteredApp app;
  for (std::size_t i = 0; i < count; ++i) {
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof fd);
    (i == 0 ? app.pidfd : app.holds.emplace_back()) = UniqueFd(fd);
  }
  // A pidfd's fdinfo names its process ("Pid:\tN").
  const std::string info = readFileIfPresent("/proc/self/fdinfo/" + std::to_string(app.pidfd.get()));
  const auto at = info.find("\nPid:\t");
  if (at == std::string::npos || std::atol(info.c_str() + at + 6) != peer.pid) return std::nullopt;
  return app;
}

// Accepts every pending registration: each launch's process is watched through the pidfd
// it sent. Returns how many were taken.
std::size_t acceptRegistrations(int listenFd, std::vector<RegisteredApp>& apps) {
  std::size_t taken = 0;
  for (;;) {
    UniqueFd conn(::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return taken;
      throw sysError("accept a registration");
    }
    if (auto app = receiveRegistration(conn.get())) {
      apps.push_back(std::move(*app));
      ++taken;
    }
  }
}

// How often the holder takes the registrations waiting in its accept queue while apps it
// knows of live. Waking for each one as it came cost every launch ~0.1 ms on a 2-core node
// (the holder's accept, checks and poll ran beside the launch); the queue is taken at once
// whenever the last known app ends, so this only bounds its length.
constexpr int kDrainMs = 1000;

// The write end of the pipe whose read end waitUntilUnused watches: onTerminate writes to it.
int terminateWrite = -1;

// SIGTERM from someone who is not the holder's user: the node's root (the batch system's
// epilog ending what a finished job left, an admin). The user's own processes, the apps in
// its containers among them (`kill -TERM -1`), do not end it: their SIGTERM stays ignored.
void onTerminate(int, siginfo_t* info, void*) {
  if (info->si_code == SI_USER && info->si_uid != ::getuid() && terminateWrite >= 0) {
    const int saved = errno;
    [[maybe_unused]] auto n = ::write(terminateWrite, "t", 1);
    errno = saved;
  }
}

// Returns holding K.setup exclusively once no registered app lives, `lingerMs` have passed
// since the last one ended with no registration meanwhile, and no launch is registering: a
// launch registers only while it holds K.setup, so once we hold it every registration is
// done or waits in the accept queue, and an empty queue means none can come any more.
// Launches pay nothing for the linger. While known apps live, registrations wait in the
// queue (kDrainMs); with none, each is taken as it comes. Returns at once (holding K.setup)
// when `terminateFd` is readable (onTerminate), whatever apps still run.
void waitUntilUnused(int listenFd, int setupFd, int terminateFd, std::uint32_t lingerMs) {
  std::vector<RegisteredApp> apps;
  bool lingered = lingerMs == 0;
  for (;;) {
    pollfd end{terminateFd, POLLIN, 0};
    if (::poll(&end, 1, 0) > 0) {
      lockFile(setupFd, LOCK_EX, "setup lock");
      return;
    }
    if (acceptRegistrations(listenFd, apps) > 0) lingered = lingerMs == 0;
    std::erase_if(apps, hasExited);
    if (apps.empty()) {
      if (!lingered) {
        pollfd p[] = {{listenFd, POLLIN, 0}, {terminateFd, POLLIN, 0}};
        if (::poll(p, 2, static_cast<int>(lingerMs)) != 0) continue;  // a launch came, SIGTERM, EINTR
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
    std::vector<pollfd> fds = {{listenFd, static_cast<short>(apps.empty() ? POLLIN : 0), 0},
                               {terminateFd, POLLIN, 0}};
    for (const auto& app : apps) fds.push_back({app.pidfd.get(), POLLIN, 0});
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

// Keeps only the report fd (as fd 3) and stdio on /dev/null: an inherited pipe would block
// `$(ctr exec ...)`. Returns the report fd, or -1.
int keepOnlyReportFd(int readyFd) {
  if (readyFd < 0) return -1;
  if (readyFd != 3) {
    if (::dup3(readyFd, 3, O_CLOEXEC) < 0) return -1;
    readyFd = 3;
  }
  int devNull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; ++fd) ::dup2(devNull, fd);
  ::close_range(4, ~0U, 0);
  return readyFd;
}

void ignoreHolderSignals() {
  for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTTOU, SIGTTIN})
    ::signal(sig, SIG_IGN);
}

// Root's SIGTERM (onTerminate). Returns the read end of the pipe it writes to, which
// waitUntilUnused watches, or an invalid fd.
UniqueFd catchTerminateFromRoot() {
  int terminatePipe[2];
  if (::pipe2(terminatePipe, O_CLOEXEC | O_NONBLOCK) != 0) return {};
  UniqueFd terminateRead(terminatePipe[0]);
  terminateWrite = terminatePipe[1];
  struct sigaction term {};
  term.sa_sigaction = onTerminate;
  term.sa_flags = SA_SIGINFO | SA_RESTART;
  ::sigaction(SIGTERM, &term, nullptr);
  return terminateRead;
}

// Each registered app costs a pidfd: allow as many as the hard limit lets us.
void raiseOpenFileLimit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
}

// <state>/mnt, the holder's tmpfs, and what it holds.
struct MountDirs {
  explicit MountDirs(const std::string& stateDir)
      : mnt(stateDir + "/mnt"), image(mnt + "/img"), base(mnt + "/base") {}
  std::string mnt, image, base;
};

// What the holder keeps open and mounted while it lives. The destructors run in reverse
// order of the members: that order is the teardown's.
struct Holding {
  UniqueFd stateFd, setupFd, listenFd;
  Child server;
  std::vector<Child> datasetServers;
  std::vector<ScopedMount> datasetMounts;  // detached before their servers are killed
  ScopedMount imageMount, baseMount, baseRootMount;
  UniqueFd ready;  // closed first: it holds copies of the mounts above
  bool imageOverlaid = false;  // an overlay of the prepared root has the image as its lower layer
};

void enterHolderNamespaces(const HolderArgs& args) {
  if (args.uidMap.empty()) {
    createUserAndMountNamespace();
  } else {
    // --fakeroot: the caller is root here, and the image's root-owned files its own.
    launch::FakerootMaps maps;
    maps.uidMap = parseIdMap(args.uidMap);
    maps.gidMap = parseIdMap(args.gidMap);
    maps.mapHelpers = !args.newuidmap.empty();
    maps.newuidmap = args.newuidmap;
    maps.newgidmap = args.newgidmap;
    maps.mapNote = "the --fakeroot holder's maps";
    enterBuildUserNamespace(maps);
    if (::unshare(CLONE_NEWNS) != 0) throw sysError("unshare(mount namespace)");
  }
  // Slave, not private: host mounts made later (automounted home directories) still show up.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
    throw sysError("make / a slave mount");
}

void mountHolderTmpfs(const MountDirs& dirs) {
  if (::mount("ctr", dirs.mnt.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") != 0)
    throw sysError("mount tmpfs on " + dirs.mnt);
  if (::mkdir(dirs.image.c_str(), 0700) != 0 || ::mkdir((dirs.mnt + "/stage").c_str(), 0700) != 0 ||
      ::mkdir(dirs.base.c_str(), 0700) != 0)
    throw sysError("mkdir in " + dirs.mnt);
}

void mountHeldImage(const HolderArgs& args, const std::string& imageDir, Holding& holding) {
  if (args.driver == "squashfuse") {
    holding.server =
        startSquashfuse(args.server, args.image, args.offset, imageDir, holding.imageMount, args.lazySpec);
  } else if (args.driver == "directory") {
    bindImageDirectory(args.image, imageDir);
    holding.imageMount = ScopedMount(imageDir);
  } else if (args.driver == "premounted") {
    if (args.premounted.empty()) throw Error("__holder: --premounted DIR missing");
    if (::mount(args.premounted.c_str(), imageDir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
      throw sysError("bind " + args.premounted);
    holding.imageMount = ScopedMount(imageDir);
  } else {
    throw Error("__holder: unknown driver '" + args.driver + "'");
  }
}

// The root every launch of this user can reuse (optional: without it, each launch
// builds its own).
std::optional<launch::PreparedRootManifest> prepareSharedRoot(const HolderArgs& args, const MountDirs& dirs,
                                                              const launch::PreparedRootSpec& spec,
                                                              Holding& holding) {
  try {
    holding.baseMount = ScopedMount(dirs.base);
    holding.baseRootMount = ScopedMount(dirs.base + "/root");
    return prepareBaseRoot(dirs.image, dirs.base, spec, &holding.imageOverlaid);
  } catch (const Error& e) {
    spdlog::debug("no prepared root for {}: {}", args.image, e.oneLine());
    holding.baseRootMount.reset();
    holding.baseMount.reset();
  }
  return std::nullopt;
}

// The namespace launches enter with the shared root ready (optional too).
void makeSharedReadyNamespace(const HolderArgs& args, const std::string& baseDir,
                              const launch::PreparedRootManifest& manifest, Holding& holding) {
  // A copy of the env scripts only for what a read-only image alone decides: not for a
  // directory image (the user may edit it while it is held), not if a bind reaches them.
  const bool copyScripts = args.driver != "directory" && !launch::preboundReachesEnvScripts(manifest);
  std::optional<std::vector<EnvScript>> scripts;
  try {
    holding.ready = makeReadyNamespace(baseDir + "/root", [&] {
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

// Everything up to the "ok" report: the image and its datasets mounted, the shared root
// prepared where it can be, the registration socket listening and the pid file written.
void setUpHolder(const HolderArgs& args, int readyFd, const MountDirs& dirs, Holding& holding) {
  // The launch's prepared-root spec comes first on the report channel, up to EOF.
  const auto spec = launch::preparedRootFromJson(readAllBounded(readyFd, 1 << 20, "prepared-root spec"));
  holding.stateFd.reset(::open(args.stateDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!holding.stateFd) throw sysError("open " + args.stateDir);
  holding.setupFd = openLockFile(holding.stateFd.get(), args.key + ".setup");
  enterHolderNamespaces(args);
  mountHolderTmpfs(dirs);
  mountHeldImage(args, dirs.image, holding);
  mountDatasets(args, dirs.mnt + "/data", holding.datasetServers, holding.datasetMounts);
  if (const auto manifest = prepareSharedRoot(args, dirs, spec, holding))
    makeSharedReadyNamespace(args, dirs.base, *manifest, holding);
  holding.listenFd = listenForRegistrations(holding.stateFd.get(), args.key);
  writePidFile(holding.stateFd.get(), args.key, holding.ready);
}

}  // namespace

std::vector<std::string> holderArgv(const HolderArgs& args) {
  std::vector<std::string> argv = {"--state", args.stateDir, "--key", args.key,
                                   "--driver", args.driver, "--image", args.image,
                                   "--offset", std::to_string(args.offset),
                                   "--size", std::to_string(args.size),
                                   "--linger-ms", std::to_string(args.lingerMs),
                                   "--ready-fd", std::to_string(args.readyFd)};
  if (args.lingerUnlessOverlaid) argv.emplace_back("--linger-unless-overlaid");
  for (const auto& [option, value] : {std::pair<const char*, const std::string&>{"--premounted", args.premounted},
                                      {"--server", args.server},
                                      {"--lazy-spec", args.lazySpec}}) {
    if (value.empty()) continue;
    argv.push_back(option);
    argv.push_back(value);
  }
  for (const auto& [option, list] : {std::pair<const char*, const std::vector<std::string>&>{"--dataset", args.datasets},
                                     {"--premounted-dataset", args.premountedDatasets}}) {
    for (const auto& value : list) {
      argv.push_back(option);
      argv.push_back(value);
    }
  }
  for (const auto& [option, value] : {std::pair<const char*, const std::string&>{"--uid-map", args.uidMap},
                                      {"--gid-map", args.gidMap}, {"--newuidmap", args.newuidmap},
                                      {"--newgidmap", args.newgidmap}}) {
    if (value.empty()) continue;
    argv.push_back(option);
    argv.push_back(value);
  }
  return argv;
}

int holderMain(const HolderArgs& args) {
  const int readyFd = keepOnlyReportFd(args.readyFd);
  if (readyFd < 0) return kExitFailure;
  ignoreHolderSignals();
  const UniqueFd terminateRead = catchTerminateFromRoot();
  if (!terminateRead) return kExitFailure;
  ::prctl(PR_SET_NAME, "ctr-holder");
  raiseOpenFileLimit();

  const MountDirs dirs(args.stateDir);
  Holding holding;
  try {
    setUpHolder(args, readyFd, dirs, holding);
  } catch (const Error& e) {
    if (holding.listenFd) ::unlinkat(holding.stateFd.get(), (args.key + ".sock").c_str(), 0);
    report(readyFd, "error: " + e.oneLine());
    return kExitFailure;  // server, if started, is killed and reaped; mounts detached
  }
  report(readyFd, "ok");

  const std::uint32_t lingerMs = args.lingerUnlessOverlaid && holding.imageOverlaid ? 0 : args.lingerMs;
  if (lingerMs != args.lingerMs) spdlog::debug("no linger for {}: an overlay has it as its lower layer", args.image);
  try {
    waitUntilUnused(holding.listenFd.get(), holding.setupFd.get(), terminateRead.get(), lingerMs);
  } catch (const Error&) {
    // Cannot wait: tear down now rather than leak; launches fail loudly on ENOTCONN.
  }
  removePidFile(holding.stateFd.get(), args.key);
  removeStateFiles(holding.stateFd.get(), args.stateDir, args.key);
  // Closed, detached and killed in this order by the destructors: the ready namespace, base
  // root, base, image, server.
  return 0;
}

}  // namespace ctr::runtime
