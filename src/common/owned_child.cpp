#include "ctr/owned_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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
  if (pid == 0) {
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
  child.pid_ = pid;
  child.pidfd_.reset(pidfdOpen(pid));  // the child is ours and unreaped: the pid is pinned
  return child;
}

Child Child::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  // Everything the child needs is prepared before fork (no allocation after it).
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<int> temporary(options.keepFds.size(), -1);
  const pid_t parent = ::getpid();
  Child child;
  pid_t pid = forkOrThrow();
  if (pid == 0) {
    if (options.dieWithParent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(kExitFailure);
    }
    if (options.defaultSignals) {
      for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
    }
    // Copy the kept fds above every target first, so a target never clobbers a source.
    int above = 3;
    for (const auto& kept : options.keepFds) above = std::max(above, kept.second + 1);
    for (size_t i = 0; i < temporary.size(); ++i) {
      temporary[i] = ::fcntl(options.keepFds[i].first, F_DUPFD_CLOEXEC, above);
      if (temporary[i] < 0) ::_exit(kExitFailure);
    }
    for (size_t i = 0; i < temporary.size(); ++i)
      if (::dup2(temporary[i], options.keepFds[i].second) < 0) ::_exit(kExitFailure);
    int maxKept = 2;
    for (const auto& kept : options.keepFds) maxKept = std::max(maxKept, kept.second);
    ::close_range(static_cast<unsigned>(maxKept) + 1, ~0U, 0);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  child.pid_ = pid;
  child.pidfd_.reset(pidfdOpen(pid));
  return child;
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
