#include "scan_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/pathutil.hpp"

namespace ctr::host {

std::string underRoot(const std::string& root, const std::string& path) {
  return root == "/" ? path : joinPath(root, path);
}

std::string fileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + ":missing";
  return fmt::format("{}:{}:{}:{}:{}.{}", path, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

void writeScanCache(const std::string& path, const std::string& content, const std::string& what) {
  // Only into a state directory of the user's own that nobody else can write (one taken
  // by another user since the launch chose it gets no cache: they could rewrite it).
  const std::string dir = path.substr(0, path.rfind('/'));
  UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!dirFd || ::fstat(dirFd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    throw Error("no " + what + " in " + dir + ": not a directory of this user's that only it can write");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw sysError("cannot write " + what + " " + tmp);
  if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    ::unlink(tmp.c_str());
    throw sysError("cannot write " + what + " " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw sysError("cannot rename " + what + " to " + path);
  }
}

}  // namespace ctr::host
