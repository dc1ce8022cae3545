// For tests of steps that cannot be undone in the test process (seccomp filters, dropped
// capabilities, namespaces): run them in a forked child and collect its verdict.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <string>

#include "ctr/owned_child.hpp"
#include "ctr/fd.hpp"

namespace ctr::test {

// Runs `body` in a forked child (a ctr::Child, so a failing assertion cannot leave it
// behind) and returns what it reports: "" for success, else a description of the failure
// (an exception's message, or an abnormal child status).
inline std::string inChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  Child child;
  try {
    child = Child::fork([&] {
      readEnd.reset();
      std::string message;
      try {
        message = body();
      } catch (const std::exception& e) {
        message = std::string("exception: ") + e.what();
      }
      (void)!write(writeEnd.get(), message.data(), message.size());
      return 0;
    });
  } catch (const std::exception& e) {
    return std::string("fork failed: ") + e.what();
  }
  writeEnd.reset();
  std::string message = readAll(readEnd.get());
  const int status = child.wait();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    message += " (child status " + std::to_string(status) + ")";
  }
  return message;
}

}  // namespace ctr::test
