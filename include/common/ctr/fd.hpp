// RAII for file descriptors, so no error path can leak one.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace ctr {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Reads up to out.size() bytes at `offset` (retrying short reads and EINTR); returns how
// many were read, fewer only at end of file. Throws ctr::Error on a read error.
std::size_t readAt(int fd, std::int64_t offset, std::span<std::byte> out);

// Reads `fd` from its current position to end of file. Throws ctr::Error on a read error.
std::string readAll(int fd);

// Reads `fd` to end of file, refusing more than `limit` bytes: throws ctr::Error naming
// `what` when the file is larger (a hostile image's 1 GiB /etc/passwd, --env-file /dev/zero).
std::string readAllBounded(int fd, std::size_t limit, const std::string& what);

// Whether a checked read accepts a pipe (`--env-file <(...)`) besides a regular file.
enum class PipesAllowed : bool { No, Yes };

// Reads the file open at `fd` as data that decides what a launch does (identity files from
// an image, env files, ctr.conf, seccomp profiles): refuses, with a ctr::Error naming `what`
// and why, anything but a regular file (or a pipe, where allowed) and anything over `limit`
// bytes, judged by st_size before reading so that a sparse 1 GiB file costs nothing.
// /dev/null reads as an empty file (`CTR_CONFIG=/dev/null`, `--env-file /dev/null`).
std::string readCheckedFile(int fd, std::size_t limit, const std::string& what,
                            PipesAllowed pipes = PipesAllowed::No);

// Opens `path` without blocking (a FIFO with no writer cannot hang the open) and reads it as
// readCheckedFile(fd, ...) does. Throws ctr::Error naming `what` when it cannot be opened.
std::string readCheckedFile(const std::string& path, std::size_t limit, const std::string& what,
                            PipesAllowed pipes = PipesAllowed::No);

// "a FIFO", "a directory", ...: a file type for messages.
std::string fileTypeName(unsigned mode);

// The whole file at `path`, or "" when it cannot be opened (a state file not written yet)
// or is not a regular file (a FIFO there cannot block the open or the read). Throws
// ctr::Error when it holds more than kFileIfPresentLimit bytes.
inline constexpr std::size_t kFileIfPresentLimit = 64u << 20;
std::string readFileIfPresent(const std::string& path);
// Its first line without the newline (a /proc/sys or cgroup file), or "".
std::string readFirstLine(const std::string& path);

// Creates or truncates `path` and writes `content` to it. Throws ctr::Error naming the path.
void writeFile(const std::string& path, std::string_view content);
// Writes all of `content` to `fd`. Throws ctr::Error "write WHAT: ...".
void writeAllTo(int fd, std::string_view content, const std::string& what);
// Copies what is left of `in` (from its offset) to `out` (at its offset): copy_file_range,
// or read and write where the kernel cannot copy between the two. Throws ctr::Error
// "copy WHAT: ..." (read WHAT, write WHAT).
void copyFileData(int in, int out, const std::string& what);

template <typename T>
std::size_t readAt(int fd, std::int64_t offset, std::span<T> out) {
  return readAt(fd, offset, std::as_writable_bytes(out));
}

}  // namespace ctr
