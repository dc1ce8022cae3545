#include "ctr/fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

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

std::string fileTypeName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
  }
  return "of unknown type";
}

std::string readCheckedFile(int fd, std::size_t limit, const std::string& what, PipesAllowed pipes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw sysError("stat " + what);
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return {};  // /dev/null: empty, the usual idiom
  const bool pipe = S_ISFIFO(st.st_mode) && pipes == PipesAllowed::Yes;
  if (!S_ISREG(st.st_mode) && !pipe)
    throw Error(what + " is " + fileTypeName(st.st_mode) + ", not a regular file: refusing to read it");
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > limit)
    throw Error(what + " is larger than " + std::to_string(limit) + " bytes (" + std::to_string(st.st_size) +
                "): refusing to read it");
  if (pipe) {
    // Opened with O_NONBLOCK so that a FIFO with no writer could not block the open; reading
    // a pipe blocks again (a FIFO with no writer reads as end of file at once).
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  return readAllBounded(fd, limit, what);
}

std::string readCheckedFile(const std::string& path, std::size_t limit, const std::string& what,
                            PipesAllowed pipes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) throw sysError("cannot open " + what);
  return readCheckedFile(fd.get(), limit, what, pipes);
}

std::string readFileIfPresent(const std::string& path) {
  // Without blocking: a FIFO (or a device) someone put at the path is no file to read, and
  // its open must not hang whoever reads it (root's epilog listing a user's instances).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  return readAllBounded(fd.get(), kFileIfPresentLimit, path);
}

std::string readFirstLine(const std::string& path) {
  std::string text = readFileIfPresent(path);
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

void writeFile(const std::string& path, std::string_view content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw sysError("open " + path + " for writing");
  writeAllTo(fd.get(), content, path);
}

void writeAllTo(int fd, std::string_view content, const std::string& what) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw sysError("write " + what, n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
}

void copyFileData(int in, int out, const std::string& what) {
  for (;;) {
    const ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, std::size_t{1} << 30, 0);
    if (n > 0) continue;
    if (n == 0) return;
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) throw sysError("copy " + what);
    break;  // the rest by hand, from where copy_file_range left both offsets
  }
  std::vector<char> buffer(std::size_t{1} << 20);
  for (;;) {
    const ssize_t r = ::read(in, buffer.data(), buffer.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw sysError("read " + what);
    if (r == 0) return;
    writeAllTo(out, std::string_view(buffer.data(), static_cast<std::size_t>(r)), what);
  }
}

}  // namespace ctr
