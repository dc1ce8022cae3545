// One logger: spdlog to stderr. Levels follow the global CLI flags: -q (errors only),
// default (warnings), -v (info), -d (debug: every launch step and its duration).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

namespace ctr::log {

enum class Verbosity { Quiet, Normal, Verbose, Debug };

void init(Verbosity verbosity);

// Logs "<step>" at debug level when constructed and "<step>: done in X ms" when destroyed,
// so slow starts at scale can be diagnosed from job output.
class StepTimer {
 public:
  explicit StepTimer(std::string step);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

 private:
  std::string step_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ctr::log
