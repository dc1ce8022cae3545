// One logger: spdlog to stderr. Levels follow the global CLI flags: -q (errors only),
// default (warnings), -v (info), -d (debug: every launch step and its duration).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

namespace ctr::log {

enum class Verbosity { Quiet, Normal, Verbose, Debug };

void init(Verbosity verbosity);

// Times one step of a launch at debug level: logs "<step>" when constructed and
// "<step>: done in X ms" when stopped or destroyed, and records top-level steps (not those
// nested in another) for stepSummary(), so slow starts at scale can be diagnosed from job
// output. Costs nothing below debug level.
class StepTimer {
 public:
  explicit StepTimer(std::string step);
  ~StepTimer() { stop(); }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  void stop();

 private:
  std::string step_;
  std::chrono::steady_clock::time_point start_;
  bool running_ = false;
  bool topLevel_ = false;
};

// "planning 0.16 ms, joining 0.06 ms, ...; total 0.52 ms since ctr started": the recorded
// top-level steps and the time since init(). Logged once, just before execve.
void logStepSummary();

}  // namespace ctr::log
