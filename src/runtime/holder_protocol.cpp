#include "holder_protocol.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "ctr/error.hpp"

namespace ctr::runtime {

UniqueFd openLockFile(int dirFd, const std::string& name) {
  UniqueFd fd(::openat(dirFd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw sysError("cannot open lock file " + name);
  return fd;
}

bool lockFile(int fd, int operation, const char* what) {
  while (::flock(fd, operation) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && (operation & LOCK_NB)) return false;
    throw sysError(std::string("flock ") + what);
  }
  return true;
}

sockaddr_un registrationAddress(int dirFd, const std::string& key) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = "/proc/self/fd/" + std::to_string(dirFd) + "/" + key + ".sock";
  if (path.size() >= sizeof addr.sun_path) throw Error("image key too long: " + key);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

std::string formatIdMap(const std::vector<host::IdRange>& ranges) {
  std::string text;
  for (const auto& r : ranges)
    text += (text.empty() ? "" : ",") + std::to_string(r.inside) + ':' + std::to_string(r.outside) + ':' +
            std::to_string(r.count);
  return text;
}

std::vector<host::IdRange> parseIdMap(std::string_view text) {
  std::vector<host::IdRange> ranges;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string item(text.substr(start, end - start));
    unsigned long long inside = 0, outside = 0, count = 0;
    int used = 0;
    if (std::sscanf(item.c_str(), "%llu:%llu:%llu%n", &inside, &outside, &count, &used) != 3 ||
        used != static_cast<int>(item.size()) || count == 0 || inside > UINT32_MAX || outside > UINT32_MAX ||
        count > UINT32_MAX)
      throw Error("bad id map '" + std::string(text) + "' (INSIDE:OUTSIDE:COUNT,...)");
    ranges.push_back({static_cast<std::uint32_t>(inside), static_cast<std::uint32_t>(outside),
                      static_cast<std::uint32_t>(count)});
    start = end + 1;
  }
  return ranges;
}

std::uint64_t nsInode(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

std::string formatHolderRecord(const HolderRecord& r) {
  std::string text = std::to_string(r.pid) + ' ' + std::to_string(r.userNs) + ' ' + std::to_string(r.mountNs);
  if (r.readyFd >= 0) text += ' ' + std::to_string(r.readyFd) + ' ' + std::to_string(r.readyNs);
  return text + '\n';
}

std::optional<HolderRecord> parseHolderRecord(std::string_view text) {
  const std::string s(text.substr(0, 127));
  long pid = 0;
  unsigned long long userNs = 0, mountNs = 0, readyNs = 0;
  int readyFd = -1;
  const int fields = std::sscanf(s.c_str(), "%ld %llu %llu %d %llu", &pid, &userNs, &mountNs, &readyFd, &readyNs);
  if (fields < 3 || pid <= 0) return std::nullopt;
  HolderRecord r{static_cast<pid_t>(pid), userNs, mountNs, -1, 0};
  if (fields == 5 && readyFd >= 0) {
    r.readyFd = readyFd;
    r.readyNs = readyNs;
  }
  return r;
}

}  // namespace ctr::runtime
