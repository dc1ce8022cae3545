#include "ctr/owned_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include "ctr/error.hpp"

namespace ctr {

namespace {

int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Forks; the parent gets a Child holding the pid and a pidfd for it.
pid_t forkOrThrow() {
  std::fflush(nullptr);  // else the child's exit would write our buffered output a second time
  pid_t pid = ::fork();
  if (pid < 0) throw sysError("fork");
  return pid;
}

[[noreturn]] void runBody(const std::function<int()>& body) {
  int status = kExitFailure;
  try {
    status = body();
  } catch (const Error& e) {
    std::fprintf(stderr, "ctr: error: %s\n", e.oneLine().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctr: error: %s\n", e.what());
  }
  std::fflush(nullptr);
  ::_exit(status);
}

// Runs fn(arg) in a child that shares our memory until it execs or exits (CLONE_VM |
// CLONE_VFORK: we wait until then), on a stack of its own, with every signal blocked (no
// handler of ours may run in the shared memory); `mask` gets our mask, restored after.
// Returns the child's pid, or throws.
pid_t cloneSharingMemory(int (*fn)(void*), void* arg, size_t stackSize, sigset_t& mask, const std::string& what) {
  void* stack = ::mmap(nullptr, stackSize, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED) throw sysError("mmap a stack to " + what);
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &mask);
  const pid_t pid = ::clone(fn, static_cast<char*>(stack) + stackSize, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
  const int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  ::munmap(stack, stackSize);  // the child has exec'd or exited: it no longer runs on it
  if (pid < 0) throw Error("clone to " + what + ": " + std::strerror(err));
  return pid;
}

}  // namespace

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) {
      signal(SIGKILL);
      (void)wait();
    }
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
  }
  return *this;
}

Child::~Child() {
  if (pid_ > 0) {
    signal(SIGKILL);
    (void)wait();
  }
}

Child Child::fork(const std::function<int()>& body) {
  Child child;
  pid_t pid = forkOrThrow();
  if (pid == 0) runBody(body);
  child.pid_ = pid;
  child.pidfd_.reset(pidfdOpen(pid));  // the child is ours and unreaped: the pid is pinned
  return child;
}

namespace {

// What the spawned child reads: prepared by the parent, whose memory it shares until exec.
struct SpawnTask {
  char* const* argv;
  const SpawnOptions* options;
  int* temporary;  // one slot per kept fd
  pid_t parent;
  sigset_t parentMask;
};

// Runs on its own small stack in the parent's memory (CLONE_VM | CLONE_VFORK), as
// posix_spawn's child does: only system calls here, nothing that allocates or takes a lock.
// Every signal arrives blocked (the parent blocked them all before clone), so no handler of
// the parent's can run in the shared memory before the dispositions are reset.
int spawnedChild(void* arg) {
  const SpawnTask& task = *static_cast<const SpawnTask*>(arg);
  const SpawnOptions& options = *task.options;
  if (options.dieWithParent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != task.parent) ::_exit(kExitFailure);
  }
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    // A handler of the parent's never runs here; an ignored signal stays ignored unless
    // the defaults were asked for.
    if (current.sa_handler == SIG_DFL || (current.sa_handler == SIG_IGN && !options.defaultSignals)) continue;
    ::signal(sig, SIG_DFL);
  }
  // Copy the kept fds above every target first, so a target never clobbers a source.
  int above = 3;
  for (const auto& kept : options.keepFds) above = std::max(above, kept.second + 1);
  const size_t count = options.keepFds.size();
  for (size_t i = 0; i < count; ++i) {
    task.temporary[i] = ::fcntl(options.keepFds[i].first, F_DUPFD_CLOEXEC, above);
    if (task.temporary[i] < 0) ::_exit(kExitFailure);
  }
  for (size_t i = 0; i < count; ++i)
    if (::dup2(task.temporary[i], options.keepFds[i].second) < 0) ::_exit(kExitFailure);
  int maxKept = 2;
  for (const auto& kept : options.keepFds) maxKept = std::max(maxKept, kept.second);
  ::close_range(static_cast<unsigned>(maxKept) + 1, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, options.defaultSignals ? &none : &task.parentMask, nullptr);
  ::execv(task.argv[0], task.argv);
  ::_exit(127);
}

}  // namespace

// The child shares the parent's memory until it execs (vfork semantics, the parent waits):
// no copy of the parent's page tables and no copy-on-write faults on either side, about 2 ms
// of a fork of ctr on a small VM, on the path of every cold launch (the squashfs server).
Child Child::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  // Everything the child needs is prepared before clone (no allocation after it).
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<int> temporary(options.keepFds.size(), -1);
  SpawnTask task{cargv.data(), &options, temporary.data(), ::getpid(), {}};
  const pid_t pid = cloneSharingMemory(spawnedChild, &task, 64 * 1024, task.parentMask, "spawn " + argv.at(0));
  Child child;
  child.pid_ = pid;
  child.pidfd_.reset(pidfdOpen(pid));
  return child;
}

namespace {

struct DaemonTask {
  const std::function<int()>* body;
  sigset_t parentMask;
  int forkErrno;  // written by the intermediate when its fork fails
};

// The intermediate: shares the caller's memory (the caller waits, as after vfork) and only
// makes system calls until it forks. The fork copies that memory, this stack included, into
// the daemon, which runs `body` on it; the intermediate exits at once.
int daemonIntermediate(void* arg) {
  DaemonTask& task = *static_cast<DaemonTask*>(arg);
  ::setsid();
  const pid_t daemon = ::fork();
  if (daemon < 0) task.forkErrno = errno;
  if (daemon != 0) ::_exit(daemon < 0 ? kExitFailure : 0);
  ::sigprocmask(SIG_SETMASK, &task.parentMask, nullptr);
  runBody(*task.body);
}

}  // namespace

void forkDaemon(const std::function<int()>& body) {
  std::fflush(nullptr);  // else the daemon's exit would write our buffered output a second time
  // The daemon runs on the intermediate's stack (its copy): 8 MiB reserved, not committed.
  DaemonTask task{&body, {}, 0};
  const pid_t pid = cloneSharingMemory(daemonIntermediate, &task, 8 << 20, task.parentMask, "start a daemon");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(std::string("fork: ") + std::strerror(task.forkErrno != 0 ? task.forkErrno : ECHILD));
}

bool Child::signal(int sig) const {
  if (pid_ <= 0) return false;
  if (pidfd_) return ::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) == 0;
  return ::kill(pid_, sig) == 0;
}

int Child::wait() {
  int status = 0;
  if (pid_ <= 0) return status;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) break;
  }
  pid_ = -1;
  pidfd_.reset();
  return status;
}

std::optional<int> Child::tryWait(::rusage* usage) {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t r = ::wait4(pid_, &status, WNOHANG, usage);
  if (r != pid_) return std::nullopt;
  pid_ = -1;
  pidfd_.reset();
  return status;
}

pid_t Child::release() {
  pidfd_.reset();
  return std::exchange(pid_, -1);
}

void ScopedMount::reset() {
  if (!path_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
  path_.clear();
}

}  // namespace ctr
