#include "launch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"

namespace ctr::bench {

namespace {

volatile sig_atomic_t gInterrupted = 0;

void onSignal(int) { gInterrupted = 1; }

constexpr size_t kKeep = 8u << 20;

void appendKeepingTail(std::string& s, const char* data, size_t n) {
  s.append(data, n);
  if (s.size() > kKeep) s.erase(0, s.size() - kKeep / 2);
}

// `pid` and its descendants. A timed-out launch is signalled as its process group and as
// every one of these: mpirun puts the ranks it starts into process groups of their own, so
// a group kill alone would leave them running (and holding their ports).
std::vector<pid_t> processTree(pid_t pid) {
  std::vector<std::pair<pid_t, pid_t>> parentOf;  // (pid, ppid) of every process
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = readFirstLine("/proc/" + name + "/stat");
    const auto close = stat.rfind(')');  // comm may hold spaces and parentheses
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    parentOf.emplace_back(static_cast<pid_t>(std::stol(name)), static_cast<pid_t>(std::atol(stat.c_str() + close + 4)));
  }
  std::vector<pid_t> tree{pid};
  for (size_t i = 0; i < tree.size(); ++i)
    for (const auto& [child, parent] : parentOf)
      if (parent == tree[i]) tree.push_back(child);
  return tree;
}

// The tree is taken once, at the timeout: once a parent dies its children belong to init.
void signalTree(pid_t pid, const std::vector<pid_t>& tree, int sig) {
  ::kill(-pid, sig);
  for (pid_t p : tree) ::kill(p, sig);
}

}  // namespace

void installInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll/waitpid return EINTR and the flag is seen at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interruptRequested() { return gInterrupted != 0; }

std::string findInPath(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(pos, colon - pos);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + program;
      if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate)) return candidate;
    }
    pos = colon + 1;
  }
  return "";
}

std::string LaunchResult::describe() const {
  if (interrupted) return "interrupted";
  if (timedOut) return "timed out after " + std::to_string(static_cast<int>(wallS)) + " s";
  if (signal != 0) return std::string("killed by signal ") + sigabbrev_np(signal);
  return "exit status " + std::to_string(exitCode);
}

std::string LaunchResult::stderrTail(size_t lines) const {
  size_t end = err.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  size_t pos = end + 1;
  for (size_t n = 0; n < lines && pos > 0; ++n) {
    size_t nl = err.rfind('\n', pos - 1);
    pos = nl == std::string::npos ? 0 : nl;
    if (nl == std::string::npos) break;
  }
  std::string tail = err.substr(pos, end + 1 - pos);
  if (!tail.empty() && tail[0] == '\n') tail.erase(0, 1);
  if (tail.size() > 4000) tail = tail.substr(tail.size() - 4000);
  return tail;
}

LaunchResult launch(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::filesystem::path& cwd, double timeoutS) {
  if (argv.empty()) throw Error("launch: empty command");
  std::string path;
  for (const auto& e : env)
    if (e.starts_with("PATH=")) path = e.substr(5);
  std::string program = findInPath(argv[0], path);
  if (program.empty()) throw Error(argv[0] + ": not found (PATH=" + path + ")");

  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  std::array<int, 2> outPipe{}, errPipe{};
  if (::pipe2(outPipe.data(), O_CLOEXEC) != 0 || ::pipe2(errPipe.data(), O_CLOEXEC) != 0) throw sysError("pipe2");
  UniqueFd outRead(outPipe[0]), outWrite(outPipe[1]), errRead(errPipe[0]), errWrite(errPipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, outWrite.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, errWrite.get(), STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: killed as one
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  LaunchResult r;
  auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw sysError("cannot run " + program, rc);
  outWrite.reset();
  errWrite.reset();

  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  // The child's exit is watched through a pidfd, so the wall time ends when it exits even
  // if a daemon it started (a lingering image holder) keeps the output pipes open.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw sysError("pidfd_open");
  }
  std::array<pollfd, 3> pfds{{{outRead.get(), POLLIN, 0}, {errRead.get(), POLLIN, 0}, {pidfd.get(), POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&r.out, &r.err};
  std::array<char, 65536> buf{};
  bool killed = false;
  double killedAt = 0;
  std::vector<pid_t> doomed;
  int status = 0;
  for (;;) {
    if (!killed && (gInterrupted || elapsed() > timeoutS)) {
      r.interrupted = gInterrupted != 0;
      r.timedOut = !r.interrupted;
      doomed = processTree(pid);
      signalTree(pid, doomed, SIGTERM);
      killed = true;
      killedAt = elapsed();
    } else if (killed && elapsed() - killedAt > 3) {
      signalTree(pid, doomed, SIGKILL);
    }
    int n = ::poll(pfds.data(), pfds.size(), 100);
    if (n < 0 && errno != EINTR) throw sysError("poll");
    if (n <= 0) continue;
    for (size_t i = 0; i < 2; ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      ssize_t got = ::read(pfds[i].fd, buf.data(), buf.size());
      if (got > 0) {
        appendKeepingTail(*sinks[i], buf.data(), static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        pfds[i].fd = -1;
      }
    }
    if (pfds[2].revents != 0) {
      r.wallS = elapsed();
      while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) throw sysError("waitpid " + program);
      break;
    }
  }
  // Whatever the group left behind goes too (never for a clean exit: a holder that
  // double-forked lives in its own session, not in this group).
  if (killed) ::kill(-pid, SIGKILL);
  // Drain what is already buffered without waiting for daemons that hold the pipes.
  for (size_t i = 0; i < 2; ++i) {
    if (pfds[i].fd < 0) continue;
    int flags = ::fcntl(pfds[i].fd, F_GETFL);
    ::fcntl(pfds[i].fd, F_SETFL, flags | O_NONBLOCK);
    for (ssize_t got; (got = ::read(pfds[i].fd, buf.data(), buf.size())) > 0;)
      appendKeepingTail(*sinks[i], buf.data(), static_cast<size_t>(got));
  }
  if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  } else {
    r.exitCode = WEXITSTATUS(status);
  }
  return r;
}

}  // namespace ctr::bench
