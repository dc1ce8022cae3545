#include "ctr/fd.hpp"

#include <fcntl.h>

#include <cerrno>

#include "ctr/error.hpp"

namespace ctr {

std::size_t readAt(int fd, std::int64_t offset, std::span<std::byte> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done,
                        static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sysError("read");
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

std::string readAll(int fd) { return readAllBounded(fd, std::string::npos, "file"); }

std::string readAllBounded(int fd, std::size_t limit, const std::string& what) {
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw sysError("read " + what);
    }
    if (n == 0) return text;
    if (text.size() + static_cast<size_t>(n) > limit)
      throw Error(what + " is larger than " + std::to_string(limit) + " bytes: refusing to read it");
    text.append(buf, static_cast<size_t>(n));
  }
}

std::string readFileIfPresent(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd ? readAll(fd.get()) : std::string();
}

void writeFile(const std::string& path, std::string_view content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw sysError("open " + path + " for writing");
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw sysError("write " + path);
    done += static_cast<size_t>(n);
  }
}

}  // namespace ctr
