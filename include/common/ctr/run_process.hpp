// The one subprocess helper: run a program with an explicit argv (no shell, no PATH
// search unless the path has no '/'), wait for it, and report how it ended.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ctr {

struct ProcessResult {
  int exitCode = -1;  // valid when !signaled
  int signal = 0;     // non-zero when killed by a signal
  std::string capturedStdout;
  std::string capturedStderr;
  bool overflowed = false;  // a capture passed ProcessOptions::captureLimit and was cut off
  bool timedOut = false;    // killed (SIGKILL, with its process group) at ProcessOptions::timeout

  [[nodiscard]] bool ok() const { return signal == 0 && exitCode == 0; }
  // "exit status N" or "killed by signal SIGX"
  [[nodiscard]] std::string describe() const;
};

struct ProcessOptions {
  bool captureStdout = false;
  bool captureStderr = false;
  bool silenceStdout = false;  // redirect to /dev/null when not captured
  std::vector<std::string> env;  // empty = inherit
  bool replaceEnv = false;        // use `env` even if empty
  // Most bytes kept of each captured stream: past it the pipe is closed (the program gets
  // SIGPIPE) and the result says `overflowed`, so no program can balloon our memory.
  std::size_t captureLimit = std::string::npos;
  // Given: the program's stdin is a pipe holding this text, then its end (at most 64 KiB,
  // what a pipe holds without a reader); else stdin is inherited.
  std::optional<std::string> input;
  // Past this the program and its process group (its own) are killed: `timedOut`.
  std::optional<std::chrono::milliseconds> timeout;
};

// Throws ctr::Error if the program cannot be started.
ProcessResult runProcess(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Runs and throws ctr::Error naming the program and its stderr if it does not exit 0.
ProcessResult runProcessChecked(const std::vector<std::string>& argv,
                                const ProcessOptions& options = {});

// Exit status a shell would report for a wait(2) status: the exit code, or 128+N.
int shellStatus(int waitStatus);

// For cleanup from a signal handler (`ctr build` stopping its mksquashfs, apt, ... on
// SIGINT): prepareChildTermination remembers where this thread's children are listed and
// must be called before the handler is installed; terminateChildren sends `sig` to each of
// them and is async-signal-safe.
void prepareChildTermination();
void terminateChildren(int sig);

}  // namespace ctr
