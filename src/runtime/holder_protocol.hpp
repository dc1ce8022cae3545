// Runtime-internal: what a launch and the image holder both know of each other, the two
// sides of the shared image mount (shared_mount.cpp joins or starts a holder, holder.cpp is
// the holder). In the state directory, per image key K: K.setup (the lock a launch holds
// while it joins or starts the holder, and the holder while it tears down), K.pid (the
// holder's record, below), K.sock (where launches register with the holder, one pidfd
// each, with their overlay layers' locks), and the marker file of a private state directory.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ctr/fd.hpp"
#include "ctr/launch.hpp"

namespace ctr::runtime {

// In a private state directory (one launch's own, see openStateDir): the holder removes
// the directory when it ends.
inline constexpr const char* kPrivateMarker = "private";

// Opens (creating it) the lock file `name` in the state directory.
UniqueFd openLockFile(int dirFd, const std::string& name);

// Blocking flock that survives EINTR. Returns false only for LOCK_NB and EWOULDBLOCK.
bool lockFile(int fd, int operation, const char* what);

// The address of the holder's registration socket <state>/K.sock, named through the state
// directory's fd: sun_path holds 108 bytes, a state directory under a long $XDG_RUNTIME_DIR
// may not fit, "/proc/self/fd/N/K.sock" always does.
sockaddr_un registrationAddress(int dirFd, const std::string& key);

// The most fds one registration carries: the launch's pidfd, then one lock per overlay
// layer (the holder keeps them open, and so the locks held, while the launch lives).
inline constexpr std::size_t kMaxRegistrationFds = 1 + launch::kMaxOverlayLayers;

// The registration message, as sent and as received: one byte and room for
// kMaxRegistrationFds fds (SCM_RIGHTS).
struct FdMessage {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * kMaxRegistrationFds)> control{};
  msghdr msg{};
  explicit FdMessage(char b) : byte(b) {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

// A user namespace's id map as the holder's argv carries it: "INSIDE:OUTSIDE:COUNT,..."
// (--fakeroot), and back. Throws ctr::Error for text that is not one.
[[nodiscard]] std::string formatIdMap(const std::vector<host::IdRange>& ranges);
[[nodiscard]] std::vector<host::IdRange> parseIdMap(std::string_view text);

// The inode of a namespace (or any) fd; 0 when it cannot be read.
std::uint64_t nsInode(int fd);

// K.pid: "PID USER-NS-INODE MOUNT-NS-INODE [READY-FD READY-NS-INODE]\n". A launch trusts
// the pid only when the process's namespaces are the recorded ones (a recycled pid is not
// the holder), and reaches the ready namespace through the holder's fd table.
struct HolderRecord {
  pid_t pid = 0;
  std::uint64_t userNs = 0;
  std::uint64_t mountNs = 0;
  int readyFd = -1;  // -1: the holder has no ready namespace
  std::uint64_t readyNs = 0;
};
[[nodiscard]] std::string formatHolderRecord(const HolderRecord& record);
[[nodiscard]] std::optional<HolderRecord> parseHolderRecord(std::string_view text);

}  // namespace ctr::runtime
