#include "ctr/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <string>
#include <utility>
#include <vector>

namespace ctr::log {

namespace {

// Taken by the static initialisers, before main: only the exec and the dynamic loader
// (~0.1 ms) come before it.
std::chrono::steady_clock::time_point processStart = std::chrono::steady_clock::now();
int depth = 0;
std::vector<std::pair<std::string, double>> steps;  // top-level steps, in order

double msSince(std::chrono::steady_clock::time_point t) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - t)
                                 .count()) /
         1000.0;
}

}  // namespace

void init(Verbosity verbosity) {
  // What came before logging could be set up (the static initialisers, CLI11 building and
  // parsing the command line) is the first step of the summary.
  steps.emplace_back("start-up and command line", msSince(processStart));
  auto logger = spdlog::stderr_logger_st("ctr");
  logger->set_pattern("ctr: %l: %v");
  switch (verbosity) {
    case Verbosity::Quiet: logger->set_level(spdlog::level::err); break;
    case Verbosity::Normal: logger->set_level(spdlog::level::warn); break;
    case Verbosity::Verbose: logger->set_level(spdlog::level::info); break;
    case Verbosity::Debug:
      logger->set_level(spdlog::level::debug);
      logger->set_pattern("ctr[%P] %H:%M:%S.%f %l: %v");
      break;
  }
  spdlog::set_default_logger(logger);
}

StepTimer::StepTimer(std::string step) : step_(std::move(step)) {
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("{}", step_);
    running_ = true;
    topLevel_ = depth++ == 0;
    start_ = std::chrono::steady_clock::now();
  }
}

void StepTimer::stop() {
  if (!running_) return;
  running_ = false;
  --depth;
  const double ms = msSince(start_);
  spdlog::debug("{}: done in {:.3f} ms", step_, ms);
  if (topLevel_) steps.emplace_back(step_, ms);
}

void logStepSummary() {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  std::string text;
  for (const auto& [name, ms] : steps) text += fmt::format("{}{} {:.3f} ms", text.empty() ? "" : ", ", name, ms);
  spdlog::debug("launch steps: {}; total {:.3f} ms since ctr started", text, msSince(processStart));
}

}  // namespace ctr::log
