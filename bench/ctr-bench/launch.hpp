// One timed, interruptible process launch per sample. ctr's runProcess cannot serve here:
// a launch runs in its own process group (mpirun and its ranks, or ctr and its app, go down
// together on Ctrl-C or a timeout) and its wall time is measured around spawn and wait.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ctr::bench {

struct LaunchResult {
  int exitCode = -1;
  int signal = 0;
  bool timedOut = false;
  bool interrupted = false;  // stopped because ctr-bench got SIGINT/SIGTERM
  double wallS = 0;
  std::string out;  // stdout (its last 8 MiB)
  std::string err;  // stderr (its last 8 MiB)

  [[nodiscard]] bool ok() const { return !timedOut && !interrupted && signal == 0 && exitCode == 0; }
  [[nodiscard]] std::string describe() const;  // "exit status 1", "timed out after 600 s", ...
  [[nodiscard]] std::string stderrTail(size_t lines = 10) const;
};

// Runs argv[0] (an absolute path, or looked up in the PATH of `env`) with exactly `env`,
// in `cwd`, stdin from /dev/null. Throws ctr::Error if it cannot be started.
LaunchResult launch(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::filesystem::path& cwd, double timeoutS);

// SIGINT and SIGTERM set a flag (no restart) that launch() and the runner check; the
// running launch's process group is then killed.
void installInterruptHandlers();
bool interruptRequested();

// `program` as execve would find it with this PATH ("a:b"), or "" if nowhere.
std::string findInPath(const std::string& program, const std::string& path);

}  // namespace ctr::bench
