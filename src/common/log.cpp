#include "ctr/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

namespace ctr::log {

void init(Verbosity verbosity) {
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
    start_ = std::chrono::steady_clock::now();
  }
}

StepTimer::~StepTimer() {
  if (spdlog::should_log(spdlog::level::debug)) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start_)
                  .count();
    spdlog::debug("{}: done in {:.3f} ms", step_, static_cast<double>(us) / 1000.0);
  }
}

}  // namespace ctr::log
