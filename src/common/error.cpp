#include "ctr/error.hpp"

#include <cstring>

namespace ctr {

Error::Error(std::string message) : std::runtime_error(std::move(message)) {}

Error Error::withContext(std::string context) const {
  Error copy = *this;
  copy.contexts_.insert(copy.contexts_.begin(), std::move(context));
  return copy;
}

Error Error::withStatus(int status) const {
  Error e = *this;
  e.status_ = status;
  return e;
}

std::string Error::oneLine() const {
  std::string line;
  for (const auto& c : contexts_) {
    line += c;
    line += ": ";
  }
  line += what();
  return line;
}

Error sysError(std::string_view what, int err) {
  return Error(std::string(what) + ": " + std::strerror(err));
}

}  // namespace ctr
