// A child process owned by an object. Destroying a Child that was neither waited for nor
// released kills it (SIGKILL) and reaps it, so no error path leaves a process behind.
// The pid is pinned by a pidfd (pidfd_open(2)) taken right after fork: signals go through
// the pidfd, never to a recycled pid.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ctr/fd.hpp"

namespace ctr {

struct SpawnOptions {
  // {fd in the parent, fd number in the child}: the child gets exactly these (plus 0-2);
  // every other descriptor is closed before exec.
  std::vector<std::pair<int, int>> keepFds;
  bool dieWithParent = false;    // PR_SET_PDEATHSIG(SIGKILL), checked against a fork race
  bool defaultSignals = true;    // dispositions and mask reset to the defaults before exec
};

class Child {
 public:
  Child() = default;
  ~Child();
  Child(Child&& other) noexcept { *this = std::move(other); }
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Forks; the child runs `body` and _exits with its return value (a ctr::Error or other
  // exception: its message on stderr, exit 255). Throws ctr::Error if fork fails.
  [[nodiscard]] static Child fork(const std::function<int()>& body);

  // Starts argv[0] (a path) with `argv`, the caller's environment and the fds of `options`,
  // as posix_spawn does (the child shares our memory until it execs; we wait until then).
  // A failed exec exits 127. Throws ctr::Error if the child cannot be created.
  [[nodiscard]] static Child spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] int pidfd() const { return pidfd_.get(); }
  explicit operator bool() const { return pid_ > 0; }

  // Sends `sig` (no-op once reaped). Returns false if the child is already gone.
  bool signal(int sig) const;
  // Waits for the child (EINTR-safe) and returns its wait(2) status; the Child is empty after.
  int wait();
  // The wait status if the child has ended, without blocking; with `usage`, also its
  // resource usage (wait4: the child and the descendants it waited for).
  std::optional<int> tryWait(::rusage* usage = nullptr);
  // Gives up ownership: the child is neither killed nor reaped by this object.
  pid_t release();

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
};

// A mount this process owns: detached (umount2 MNT_DETACH) on destruction unless released.
class ScopedMount {
 public:
  ScopedMount() = default;
  explicit ScopedMount(std::string path) : path_(std::move(path)) {}
  ~ScopedMount() { reset(); }
  ScopedMount(ScopedMount&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScopedMount& operator=(ScopedMount&& other) noexcept {
    if (this != &other) {
      reset();
      path_ = std::exchange(other.path_, {});
    }
    return *this;
  }
  ScopedMount(const ScopedMount&) = delete;
  ScopedMount& operator=(const ScopedMount&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  void reset();
  std::string release() { return std::exchange(path_, {}); }

 private:
  std::string path_;
};

// Runs `body` in a daemon: a grandchild in a session of its own, reparented at once to init
// (or the nearest subreaper), so it is neither our child nor in our process group; it
// _exits with body's return value (an exception: its message on stderr, exit 255). The
// intermediate shares our memory until it forks (vfork semantics), so a daemon costs one
// copy of our page tables, not two. Returns once the intermediate has exited; throws
// ctr::Error if the daemon could not be created.
void forkDaemon(const std::function<int()>& body);

}  // namespace ctr
