// The FUSE servers of an overlay root with ext3 layers (fuse_union.hpp).
#include "fuse_union.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/owned_child.hpp"
#include "ctr/strings.hpp"

namespace ctr::runtime {

namespace {

// How long a FUSE server may take to answer its mount (fuse2fs reads the image's bitmaps).
constexpr auto kFuseMountWait = std::chrono::seconds(20);
// How long endFuseServers waits for the servers to end (fuse2fs writes the image back).
constexpr int kFuseEndWaitMs = 60'000;

// A server this process started: its pidfd (a server reaped by someone's waitpid(-1)
// cannot be mistaken for a process that took its pid), its pid, program name, and the
// device number of its mount (its connection in /sys/fs/fuse/connections).
struct StartedServer {
  UniqueFd pidfd;
  pid_t pid = -1;
  std::string name;
  dev_t device = 0;
};
std::vector<StartedServer>& startedServers() {
  static std::vector<StartedServer> servers;
  return servers;
}

// In the forked child, before execve: a server of this launch's process, which becomes the
// app, ends (SIGTERM: libfuse unmounts, fuse2fs writes the image back) when the app does;
// it keeps CAP_SYS_ADMIN of the user namespace across execve (ambient) to mount /dev/fuse
// itself; `keepFd` (an ext3 layer's locked image file) stays open in it, so the lock lasts
// until it has ended. `quiet`: its stderr too goes to /dev/null.
//
// It runs in a mount namespace of its own, a copy of the launch's taken now, whose stage
// directory is a peer of the launch's (startFuseServer made it shared), so its mount shows
// in the launch's. Never in the launch's own: the launch pivots into the container's root
// after this starts, and pivot_root(2) moves the root of every process of the namespace
// that had the old one, this server's too. fuse-overlayfs's root would then be its own
// mount: it reaches the files' extended attributes through /proc/self/fd/N, so a write at
// the container's root (the kernel asks for security.capability) made it ask itself for
// the root's attributes while it waited for that very answer, single-threaded: the writer,
// fuse-overlayfs and the launch hung for good (issue 58, item 1).
[[noreturn]] void execFuseServer(const std::vector<std::string>& argv, pid_t parent, int keepFd, bool quiet) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);
  if (::unshare(CLONE_NEWNS) != 0) {
    std::fprintf(stderr, "ctr: cannot give %s a mount namespace of its own: %s\n", argv[0].c_str(), std::strerror(errno));
    ::_exit(126);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) == 0) {
    data[CAP_TO_INDEX(CAP_SYS_ADMIN)].inheritable |= CAP_TO_MASK(CAP_SYS_ADMIN);
    if (::syscall(SYS_capset, &header, data) == 0)
      ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0);
  }
  if (keepFd >= 0) ::fcntl(keepFd, F_SETFD, 0);
  // fuse2fs says "Writing to the journal is not supported" on stdout for every ext3 image:
  // a server that fails says so in its exit status.
  if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    if (quiet) ::dup2(null, STDERR_FILENO);
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  ::execv(cargv[0], cargv.data());
  std::fprintf(stderr, "ctr: cannot run %s: %s\n", cargv[0], std::strerror(errno));
  ::_exit(127);
}

dev_t deviceOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw sysError("stat " + path);
  return st.st_dev;
}

// Starts `argv` (a FUSE server mounting at `mountPoint`, in the foreground) and waits until
// its file system is there. The server is left running, the launch's (see execFuseServer).
void startFuseServer(const std::vector<std::string>& argv, const std::string& mountPoint, int keepFd,
                     const std::string& what, bool quiet) {
  const std::string parentDir = mountPoint.substr(0, mountPoint.rfind('/'));
  const dev_t before = deviceOf(parentDir);
  const pid_t parent = ::getpid();
  // The stage directory (a tmpfs of this launch's) shared while the server starts, so that
  // its mount, made in its own namespace, shows here; private again once it is there
  // (pivot_root refuses a shared root, and the container's mounts need not reach it).
  if (::mount(nullptr, parentDir.c_str(), nullptr, MS_SHARED, nullptr) != 0)
    throw sysError(what + ": make " + parentDir + " shared");
  struct Private {
    const std::string& dir;
    ~Private() { ::mount(nullptr, dir.c_str(), nullptr, MS_PRIVATE | MS_REC, nullptr); }
  } privateAgain{parentDir};
  Child server = Child::fork([&]() -> int { execFuseServer(argv, parent, keepFd, quiet); });
  const auto deadline = std::chrono::steady_clock::now() + kFuseMountWait;
  for (;;) {
    if (const auto status = server.tryWait())
      throw Error(what + ": " + argv[0] + " ended before its mount was there (" +
                  (WIFEXITED(*status) ? "exit status " + std::to_string(WEXITSTATUS(*status))
                                      : std::string("signal ") + strsignal(WTERMSIG(*status))) +
                  ")")
          .withStatus(1);
    if (deviceOf(mountPoint) != before) break;
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error(what + ": " + argv[0] + " did not mount " + mountPoint + " within 20 s").withStatus(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  spdlog::debug("{}: {} (pid {}) mounted {}", what, argv[0], server.pid(), mountPoint);
  StartedServer started;
  started.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, server.pid(), 0)));
  started.pid = server.pid();
  started.name = argv[0].substr(argv[0].rfind('/') + 1);
  started.device = deviceOf(mountPoint);
  startedServers().push_back(std::move(started));
  server.release();
}

}  // namespace

std::vector<std::string> mountExt3Layers(const launch::RootOverlay& overlay, const std::vector<UniqueFd>& locks,
                                         const std::string& stageDir) {
  std::vector<std::string> mounts(overlay.layers.size());
  if (!overlay.hasExt3()) return mounts;
  const std::string fuse2fs = findProgram(Program::Fuse2fs);
  size_t lockIndex = 0;
  for (size_t i = 0; i < overlay.layers.size(); ++i) {
    const auto& layer = overlay.layers[i];
    if (layer.image) continue;  // no lock of its own
    const int lock = lockIndex < locks.size() ? locks[lockIndex].get() : -1;
    ++lockIndex;
    if (!layer.ext3) continue;
    const std::string mnt = stageDir + "/ext3-" + std::to_string(i);
    if (::mkdir(mnt.c_str(), 0755) != 0) throw sysError("mkdir " + mnt);
    std::string options = "fakeroot";
    if (!layer.writable) options += ",ro";
    if (layer.ext3->offset != 0) options += ",offset=" + std::to_string(layer.ext3->offset);
    startFuseServer({fuse2fs, layer.path, mnt, "-f", "-o", options}, mnt, lock, "--overlay " + layer.path, false);
    // An ext3 image made by mkfs alone has no layout yet: a writable one gets it, as
    // Apptainer gives it (`overlay create` makes both).
    if (layer.writable)
      for (const char* dir : {"/upper", "/work"})
        if (::mkdir((mnt + dir).c_str(), 0755) != 0 && errno != EEXIST)
          throw sysError("--overlay " + layer.path + ": cannot make " + std::string(dir + 1) + "/ in it");
    mounts[i] = mnt;
  }
  return mounts;
}

void endFuseServers() {
  auto& servers = startedServers();
  for (const auto& server : servers)
    if (server.pidfd) ::syscall(SYS_pidfd_send_signal, server.pidfd.get(), SIGTERM, nullptr, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kFuseEndWaitMs);
  for (const auto& server : servers) {
    const UniqueFd& pidfd = server.pidfd;
    if (!pidfd) continue;
    pollfd ended{pidfd.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    while (::poll(&ended, 1, static_cast<int>(std::max<long>(left.count(), 0))) < 0 && errno == EINTR) {
    }
    siginfo_t info{};
    ::waitid(P_PIDFD, static_cast<id_t>(pidfd.get()), &info, WEXITED | WNOHANG);  // ECHILD: reaped already
  }
  servers.clear();
}

namespace {

constexpr auto kWatchdogTick = std::chrono::milliseconds(500);

// Whether the thread /proc/PID/task/TID (`task`) sleeps uninterruptibly with SIGKILL
// pending: the kernel has killed it (a fatal signal becomes SIGKILL for every thread) and
// it cannot die until the wait it is in ends.
bool killedButStuck(const std::string& task) {
  const std::string stat = readFileIfPresent(task + "/stat");
  const auto name = stat.rfind(')');
  if (name == std::string::npos || name + 2 >= stat.size() || stat[name + 2] != 'D') return false;
  const std::string status = readFileIfPresent(task + "/status");
  for (const std::string key : {"\nSigPnd:", "\nShdPnd:"}) {
    const auto at = status.find(key);
    if (at == std::string::npos) continue;
    const unsigned long long pending = std::strtoull(status.c_str() + at + key.size(), nullptr, 16);
    if (pending & (1ULL << (SIGKILL - 1))) return true;
  }
  return false;
}

// `pid` and its descendants (through /proc/PID/task/TID/children), less `skip`, each with
// its threads: a stuck one, or nullopt.
std::optional<pid_t> stuckIn(pid_t pid, const std::vector<pid_t>& skip, int depth = 0) {
  if (depth > 64 || std::find(skip.begin(), skip.end(), pid) != skip.end()) return std::nullopt;
  const std::string proc = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(proc, ec)) {
    if (killedButStuck(task.path().string())) return pid;
    std::istringstream children(readFileIfPresent(task.path().string() + "/children"));
    for (pid_t child = 0; children >> child;)
      if (const auto stuck = stuckIn(child, skip, depth + 1)) return stuck;
  }
  return std::nullopt;
}

void say(const std::string& line) { (void)!::write(STDERR_FILENO, line.data(), line.size()); }

// The watchdog's process (see startFuseWatchdog); `parent` is the launch's process.
[[noreturn]] void watchFuseServers(pid_t parent, std::chrono::seconds grace) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);
  ::prctl(PR_SET_NAME, "ctr-fuse-watch");
  // A terminal's Ctrl-C or timeout(1) signals the whole process group: this must outlive it.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_IGN);
  auto& servers = startedServers();
  // Nothing of the launch's stays open here (its images, the overlays' locks) but stderr
  // and the servers' pidfds.
  std::vector<int> keep{STDERR_FILENO};
  for (const auto& server : servers) keep.push_back(server.pidfd.get());
  std::sort(keep.begin(), keep.end());
  unsigned from = 3;
  for (int fd : keep)
    if (fd >= 3) {
      if (static_cast<unsigned>(fd) > from) ::syscall(SYS_close_range, from, static_cast<unsigned>(fd) - 1, 0);
      from = static_cast<unsigned>(fd) + 1;
    }
  ::syscall(SYS_close_range, from, ~0U, 0);
  if (const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
  }
  // A mount namespace of its own, as the servers' (the launch's pivot_root would move this
  // root too), with a /proc of its PID namespace where the launch made one.
  if (::unshare(CLONE_NEWNS) == 0) {
    ::mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr);
    char self[32]{};
    if (::readlink("/proc/self", self, sizeof self - 1) <= 0 || std::atoi(self) != ::getpid())
      ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  }
  std::vector<pid_t> skip{::getpid()};
  for (const auto& server : servers) skip.push_back(server.pid);
  using Clock = std::chrono::steady_clock;
  Clock::time_point since{};  // when a stuck process was first seen; epoch: none is
  const Clock::time_point none{};
  for (;;) {
    std::this_thread::sleep_for(kWatchdogTick);
    bool running = false;
    for (const auto& server : servers) {
      pollfd ended{server.pidfd.get(), POLLIN, 0};
      running = running || (server.pidfd && ::poll(&ended, 1, 0) == 0);
    }
    if (!running) ::_exit(0);
    const auto stuck = stuckIn(parent, skip);
    if (!stuck) {
      since = none;
      continue;
    }
    const auto now = Clock::now();
    if (since == none) since = now;
    if (now - since < grace) continue;
    std::string names;
    for (const auto& server : servers) names += (names.empty() ? "" : ", ") + server.name;
    say("ctr: process " + std::to_string(*stuck) + " of the container was killed but has waited " +
        std::to_string(grace.count()) + " s on the overlay's FUSE servers, which no longer answer: ending them (" +
        names + "); an ext3 overlay image may need e2fsck\n");
    for (const auto& server : servers) {
      // Where fusectl is mounted the connection ends at once, even a server's own request
      // to itself; elsewhere with the server (its /dev/fuse closes as it dies).
      const auto id = (static_cast<unsigned long>(major(server.device)) << 20) | minor(server.device);
      UniqueFd abort(::open(("/sys/fs/fuse/connections/" + std::to_string(id) + "/abort").c_str(), O_WRONLY | O_CLOEXEC));
      if (abort) (void)!::write(abort.get(), "1", 1);
    }
    for (const auto& server : servers)
      if (server.pidfd) ::syscall(SYS_pidfd_send_signal, server.pidfd.get(), SIGKILL, nullptr, 0);
    ::_exit(0);
  }
}

}  // namespace

void startFuseWatchdog(std::chrono::seconds grace) {
  if (grace.count() <= 0 || startedServers().empty()) return;
  const pid_t parent = ::getpid();
  Child watchdog = Child::fork([&]() -> int { watchFuseServers(parent, grace); });
  spdlog::debug("FUSE watchdog (pid {}): servers aborted {} s after a killed process waits on them", watchdog.pid(),
                grace.count());
  watchdog.release();
}

void mountFuseOverlayfs(const std::string& layerOptions, const std::string& target, uid_t uid, gid_t gid) {
  // The image's files belong to ids the user namespace does not map: shown as the user's
  // (squash_to_uid/gid), fuse-overlayfs can copy them up into the user's upper layer.
  const std::string options =
      layerOptions + ",squash_to_uid=" + std::to_string(uid) + ",squash_to_gid=" + std::to_string(gid);
  startFuseServer({findProgram(Program::FuseOverlayfs), "-f", "-o", options, target}, target, -1,
                  "--overlay (fuse-overlayfs)", true);
}

}  // namespace ctr::runtime
