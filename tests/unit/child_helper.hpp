// For tests of steps that cannot be undone in the test process (seccomp filters, dropped
// capabilities, namespaces): run them in a forked child and collect its verdict.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <string>

namespace ctr::test {

// Runs `body` in a forked child and returns what it reports: "" for success, else a
// description of the failure (an exception's message, or an abnormal child status).
inline std::string inChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string message;
    try {
      message = body();
    } catch (const std::exception& e) {
      message = std::string("exception: ") + e.what();
    }
    (void)!write(fds[1], message.data(), message.size());
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) message.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    message += " (child status " + std::to_string(status) + ")";
  }
  return message;
}

}  // namespace ctr::test
