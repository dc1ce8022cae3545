// ctr instance save: a running instance's root file system as a squashfs image (pyxis's
// --container-save, enroot's export). What is saved is the container's root mount alone:
// the image with what its writable layer holds, none of the mounts on it (home, /tmp, the
// binds, /proc, the passwd and group ctr made), so the image's own /etc/passwd is what the
// saved image has.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/log.hpp"
#include "ctr/owned_child.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/run_process.hpp"
#include "ctr/runtime.hpp"
#include "holder_protocol.hpp"
#include "instance_state.hpp"

namespace ctr::runtime {

namespace {

// One fd over the socketpair, in the holder protocol's message (FdMessage).
void sendFd(int sock, int fd) {
  FdMessage message('t');
  msghdr& msg = message.msg;
  msg.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  while (::sendmsg(sock, &msg, MSG_NOSIGNAL) != 1)
    if (errno != EINTR) throw sysError("pass the root's mount back (sendmsg)");
}

UniqueFd receiveFd(int sock) {
  FdMessage message(0);
  ssize_t n;
  while ((n = ::recvmsg(sock, &message.msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
  const cmsghdr* cmsg = n == 1 ? CMSG_FIRSTHDR(&message.msg) : nullptr;
  if (!cmsg || cmsg->cmsg_type != SCM_RIGHTS || cmsg->cmsg_len != CMSG_LEN(sizeof(int))) return UniqueFd();
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
  return UniqueFd(fd);
}

// A clone of the instance's root mount, without the mounts on it: taken by a child in the
// instance's user and mount namespaces (a clone is made where the mount is) and passed back.
UniqueFd cloneRootMount(const launch::InstanceRecord& record) {
  launch::JoinPlan join{record.name, {}, record.keeper, record.keeperStart, {}, {}};
  for (const auto& ns : record.namespaces)
    if (ns.type == "user" || ns.type == "mnt") join.namespaces.push_back(ns);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) throw sysError("socketpair");
  UniqueFd mine(pair[0]), theirs(pair[1]);
  Child child = Child::fork([&]() -> int {
    mine.reset();
    (void)enterInstance(join);
    UniqueFd root(::open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (!root) throw sysError("clone the root mount of instance " + record.name + " (open_tree)");
    sendFd(theirs.get(), root.get());
    return 0;
  });
  theirs.reset();
  UniqueFd root = receiveFd(mine.get());
  const int status = child.wait();
  if (!root || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("instance save: cannot reach the root of instance " + record.name + " (the line above says why)");
  return root;
}

}  // namespace

void saveInstance(const launch::InstanceRecord& record, const std::string& file) {
  if (file.empty() || file.back() == '/')
    throw Error("instance save: '" + file + "' names a directory: give the image file's path").withStatus(1);
  std::array<char, PATH_MAX> cwd{};
  if (!::getcwd(cwd.data(), cwd.size())) throw sysError("getcwd");
  const std::string target = normalizePath(file[0] == '/' ? file : joinPath(cwd.data(), file));
  const std::string dir = target.substr(0, target.rfind('/'));
  std::array<char, 256> host{};
  (void)::gethostname(host.data(), host.size() - 1);
  // Beside the target (the rename is then atomic), named by node and process: nodes that
  // share the directory save at once.
  const std::string temp = joinPath(dir.empty() ? "/" : dir, ".ctr-save-" + std::string(host.data()) + "-" + std::to_string(::getpid()) + "-" +
                                                              target.substr(target.rfind('/') + 1));
  UniqueFd root = cloneRootMount(record);
  // mksquashfs reads the clone as its working directory ("."): the clone has no path.
  UniqueFd here(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!here || ::fchdir(root.get()) != 0) throw sysError("instance save: enter the root's clone");
  ProcessOptions options;
  options.captureStderr = true;
  options.captureLimit = 1u << 20;
  options.silenceStdout = true;
  ProcessResult result;
  try {
    result = runProcess({"mksquashfs", ".", temp, "-noappend", "-all-root", "-no-progress", "-quiet"}, options);
  } catch (...) {
    (void)::fchdir(here.get());
    throw;
  }
  if (::fchdir(here.get()) != 0) throw sysError("instance save: back to the working directory");
  if (!result.ok()) {
    ::unlink(temp.c_str());
    std::string why = result.capturedStderr;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    if (const auto nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);
    throw Error("instance save: mksquashfs failed writing " + target + " (" + result.describe() + "): " + why);
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    throw sysError("instance save: rename to " + target);
  }
  // Files the user may not read (an image's 0600 root files) are saved empty: said, not hidden.
  if (result.capturedStderr.find("Failed to read") != std::string::npos)
    spdlog::warn("instance save: some files could not be read and were saved empty (mksquashfs: {})",
                 result.capturedStderr.substr(0, result.capturedStderr.find('\n')));
}

}  // namespace ctr::runtime
