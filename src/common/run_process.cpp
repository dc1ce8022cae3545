#include "ctr/run_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"

extern char** environ;

namespace ctr {

std::string ProcessResult::describe() const {
  if (signal != 0) return std::string("killed by signal ") + sigabbrev_np(signal);
  return "exit status " + std::to_string(exitCode);
}

int shellStatus(int waitStatus) {
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return WEXITSTATUS(waitStatus);
}

namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe makePipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw sysError("pipe2");
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Reads both pipes to EOF without deadlocking on either, keeping at most `limit` bytes of
// each; a pipe that passes it is closed and `*overflowed` set. At `deadline` (when given)
// the process group `pid` is killed and reading stops (a grandchild may hold the pipes).
void drain(Pipe* out, std::string* outText, Pipe* err, std::string* errText, std::size_t limit,
           bool* overflowed, pid_t pid, std::optional<std::chrono::steady_clock::time_point> deadline,
           bool* timedOut) {
  std::array<pollfd, 2> pfds{};
  std::array<std::string*, 2> sinks{outText, errText};
  std::array<Pipe*, 2> pipes{out, err};
  for (size_t i = 0; i < 2; ++i) pfds[i] = {pipes[i] ? pipes[i]->read.get() : -1, POLLIN, 0};
  std::array<char, 65536> buf{};
  while (pfds[0].fd >= 0 || pfds[1].fd >= 0) {
    int wait = -1;
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ::kill(-pid, SIGKILL);
        *timedOut = true;
        return;
      }
      wait = static_cast<int>(left.count());
    }
    if (::poll(pfds.data(), pfds.size(), wait) < 0) {
      if (errno == EINTR) continue;
      throw sysError("poll");
    }
    for (size_t i = 0; i < 2; ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      ssize_t n = ::read(pfds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        if (sinks[i]->size() + static_cast<size_t>(n) > limit) {
          *overflowed = true;
          pipes[i]->read.reset();
          pfds[i].fd = -1;
          continue;
        }
        sinks[i]->append(buf.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        pfds[i].fd = -1;
      }
    }
  }
}

// Writes `text` (it fits the pipe: never blocks); a program that exited without reading
// gives EPIPE, not a SIGPIPE that would end this process.
void writeWithoutSigpipe(int fd, const std::string& text) {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe, &old);
  const bool broken = ::write(fd, text.data(), text.size()) < 0 && errno == EPIPE;
  if (broken) {
    const timespec none{0, 0};
    while (::sigtimedwait(&pipe, nullptr, &none) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// The pipes to the child's stdout, stderr and stdin, those `options` ask for.
struct ChildStdio {
  Pipe out, err, in;
};

ChildStdio redirectStdio(const ProcessOptions& options, posix_spawn_file_actions_t& actions) {
  ChildStdio stdio;
  if (options.captureStdout) {
    stdio.out = makePipe();
    posix_spawn_file_actions_adddup2(&actions, stdio.out.write.get(), STDOUT_FILENO);
  } else if (options.silenceStdout) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  }
  if (options.captureStderr) {
    stdio.err = makePipe();
    posix_spawn_file_actions_adddup2(&actions, stdio.err.write.get(), STDERR_FILENO);
  }
  if (options.input) {
    if (options.input->size() > 65536) throw Error("runProcess: more input than a pipe holds");
    stdio.in = makePipe();
    ::fcntl(stdio.in.write.get(), F_SETPIPE_SZ, 65536);
    posix_spawn_file_actions_adddup2(&actions, stdio.in.read.get(), STDIN_FILENO);
  }
  return stdio;
}

// Starts `argv` with its stdio as `options` ask (the pipes in `stdio`); returns its pid.
pid_t spawnProcess(const std::vector<std::string>& argv, const ProcessOptions& options, ChildStdio& stdio) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  char** envArg = environ;
  if (options.replaceEnv || !options.env.empty()) {
    for (const auto& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    envArg = envp.data();
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  stdio = redirectStdio(options, actions);
  // A program with a time limit leads a process group of its own, killed whole at the limit.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (options.timeout) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }

  pid_t pid = -1;
  int rc = argv[0].find('/') == std::string::npos
               ? ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attributes, args.data(), envArg)
               : ::posix_spawn(&pid, argv[0].c_str(), &actions, &attributes, args.data(), envArg);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) throw sysError("cannot run " + argv[0], rc);
  return pid;
}

void recordStatus(int status, ProcessResult& result) {
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.exitCode = WEXITSTATUS(status);
  }
}

// Its output ended; it may still run: the rest of the time, then the group is killed.
// Returns whether it ended in time (its status then in `result`).
bool endedBefore(std::chrono::steady_clock::time_point deadline, pid_t pid, const std::string& program,
                 ProcessResult& result) {
  for (int status = 0;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      recordStatus(status, result);
      return true;
    }
    if (done < 0 && errno != EINTR) throw sysError("waitpid " + program);
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      result.timedOut = true;
      return false;
    }
    ::usleep(2000);
  }
}

void waitForEnd(pid_t pid, const std::string& program, ProcessResult& result) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw sysError("waitpid " + program);
  }
  recordStatus(status, result);
}

}  // namespace

ProcessResult runProcess(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw Error("runProcess: empty argv");
  ChildStdio stdio;
  const pid_t pid = spawnProcess(argv, options, stdio);
  stdio.out.write.reset();
  stdio.err.write.reset();
  if (options.input) {
    stdio.in.read.reset();
    writeWithoutSigpipe(stdio.in.write.get(), *options.input);
    stdio.in.write.reset();
  }

  ProcessResult result;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (options.timeout) deadline = std::chrono::steady_clock::now() + *options.timeout;
  drain(options.captureStdout ? &stdio.out : nullptr, &result.capturedStdout,
        options.captureStderr ? &stdio.err : nullptr, &result.capturedStderr, options.captureLimit,
        &result.overflowed, pid, deadline, &result.timedOut);
  if (deadline && !result.timedOut && endedBefore(*deadline, pid, argv[0], result)) return result;
  waitForEnd(pid, argv[0], result);
  return result;
}

ProcessResult runProcessChecked(const std::vector<std::string>& argv,
                                const ProcessOptions& options) {
  ProcessOptions opts = options;
  opts.captureStderr = true;
  ProcessResult result = runProcess(argv, opts);
  if (!result.ok()) {
    std::string detail = result.capturedStderr;
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
    if (auto nl = detail.rfind('\n'); nl != std::string::npos) detail = detail.substr(nl + 1);
    throw Error(argv[0] + " failed (" + result.describe() + ")" +
                (detail.empty() ? "" : ": " + detail));
  }
  return result;
}

namespace {
char gChildrenFile[64];
}  // namespace

// /proc/PID/task/TID/children lists this thread's children (proc(5)); the file name is
// formatted in advance because a signal handler may not allocate.
void terminateChildren(int sig) {
  int fd = ::open(gChildrenFile, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return;
  pid_t pid = 0;
  for (ssize_t i = 0; i <= n; ++i) {
    char c = i < n ? buf[i] : ' ';
    if (c >= '0' && c <= '9') {
      pid = pid * 10 + (c - '0');
    } else if (pid > 0) {
      ::kill(pid, sig);
      pid = 0;
    }
  }
}

void prepareChildTermination() {
  std::snprintf(gChildrenFile, sizeof gChildrenFile, "/proc/self/task/%d/children",
                static_cast<int>(::getpid()));
}

}  // namespace ctr
