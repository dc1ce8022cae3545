// One error type for all of ctr's modules. An Error carries a chain of context added as it
// propagates ("while mounting image X" -> "attaching loop device" -> "EBUSY"), so the user
// gets one line that says what failed and why.
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ctr {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message);

  // Returns a copy with `context` prepended (outermost first when printed).
  [[nodiscard]] Error withContext(std::string context) const;

  // "context: context: innermost message", the one line a user sees.
  [[nodiscard]] std::string oneLine() const;
  [[nodiscard]] const std::vector<std::string>& contexts() const { return contexts_; }
  // The exit status ctr ends with (kExitFailure unless set): 1 for what Apptainer treats
  // as a usage error; 0 for an outcome that is only reported ("no test script").
  [[nodiscard]] Error withStatus(int status) const;
  [[nodiscard]] int status() const { return status_; }

 private:
  std::vector<std::string> contexts_;  // outermost first
  int status_ = 255;
};

// Error for a failed system call: "<what>: <strerror(err)>".
[[nodiscard]] Error sysError(std::string_view what, int err = errno);

// Runs `body`; if it throws ctr::Error, rethrows it with `context` prepended.
template <typename F>
decltype(auto) withContext(std::string_view context, F&& body) {
  try {
    return body();
  } catch (const Error& e) {
    throw e.withContext(std::string(context));
  }
}

// Exit status for ctr's own failures (the app's status is passed through unchanged).
inline constexpr int kExitFailure = 255;

}  // namespace ctr
