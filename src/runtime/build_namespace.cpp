// enterBuildNamespaces: "fakeroot" for build steps (see docs/architecture.md, "Builds").
#include "build_namespace.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include "ctr/owned_child.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/run_process.hpp"
#include "ctr/runtime.hpp"

namespace ctr::runtime {

namespace {

std::string mapText(const std::vector<host::IdRange>& ranges) {
  std::string text;
  for (const auto& r : ranges)
    text += std::to_string(r.inside) + ' ' + std::to_string(r.outside) + ' ' + std::to_string(r.count) + '\n';
  return text;
}

std::vector<std::string> helperArgv(const std::string& program, pid_t pid, const std::vector<host::IdRange>& ranges) {
  std::vector<std::string> argv{program, std::to_string(pid)};
  for (const auto& r : ranges) {
    argv.push_back(std::to_string(r.inside));
    argv.push_back(std::to_string(r.outside));
    argv.push_back(std::to_string(r.count));
  }
  return argv;
}

// The maps written from a child outside the new namespace, once it exists: newuidmap and
// newgidmap (subordinate ranges), or the files themselves when the caller is root. Mapping
// more than one's own id needs CAP_SETUID in the parent namespace, which a process loses
// for its opens once it has unshared (user_namespaces(7), "Defining user and group ID
// mappings").
void unshareMappedFromOutside(const launch::FakerootMaps& build) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw sysError("pipe");
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  const pid_t target = ::getpid();
  Child mapper = Child::fork([&]() -> int {
    writeEnd.reset();
    char byte = 0;
    if (::read(readEnd.get(), &byte, 1) != 1) return 1;  // the parent failed to unshare
    if (!build.mapHelpers) {
      const std::string proc = "/proc/" + std::to_string(target);
      writeFile(proc + "/uid_map", mapText(build.uidMap));
      writeFile(proc + "/gid_map", mapText(build.gidMap));
      return 0;
    }
    for (const auto& argv : {helperArgv(build.newuidmap, target, build.uidMap),
                             helperArgv(build.newgidmap, target, build.gidMap)}) {
      auto result = runProcess(argv);
      if (!result.ok()) return 2;
    }
    return 0;
  });
  readEnd.reset();
  if (::unshare(CLONE_NEWUSER) != 0) throw sysError("unshare(user namespace) for the build step");
  if (::write(writeEnd.get(), "x", 1) != 1) throw sysError("start the id mapper");
  const int status = mapper.wait();
  if (shellStatus(status) != 0)
    throw Error(build.mapHelpers ? "newuidmap/newgidmap could not map the subordinate ids (" + build.mapNote +
                                       "); check /etc/subuid and /etc/subgid and that both programs are installed "
                                       "setuid root"
                                 : "could not write the build namespace's id maps");
}

}  // namespace

void enterBuildUserNamespace(const launch::FakerootMaps& build) {
  if (build.mapHelpers || ::getuid() == 0) {
    unshareMappedFromOutside(build);
  } else {
    // One's own id, written by the process itself; it must deny setgroups before it may
    // write a gid map (user_namespaces(7), "/proc/PID/setgroups").
    if (::unshare(CLONE_NEWUSER) != 0) throw sysError("unshare(user namespace) for the build step");
    writeFile("/proc/self/setgroups", "deny");
    writeFile("/proc/self/uid_map", mapText(build.uidMap));
    writeFile("/proc/self/gid_map", mapText(build.gidMap));
  }
  if (::setresgid(0, 0, 0) != 0) throw sysError("become root (gid 0) in the build's user namespace");
  if (::setresuid(0, 0, 0) != 0) throw sysError("become root (uid 0) in the build's user namespace");
  // The host's supplementary groups mean nothing in the image: dropped where setgroups is
  // allowed (not after "deny" above, where the call fails harmlessly).
  (void)::setgroups(0, nullptr);
}

SharedImage enterBuildNamespaces(const launch::BuildRoot& build) {
  enterBuildUserNamespace(build);
  if (::unshare(CLONE_NEWNS) != 0) throw sysError("unshare(mount namespace) for the build step");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    throw sysError("make the build step's mounts private");
  SharedImage image;
  image.imageDir = build.sandbox;
  image.stageDir = build.stageDir;
  return image;
}

int runAsBuildRoot(const launch::BuildRoot& build, const std::vector<std::string>& argv) {
  Child child = Child::fork([&]() -> int {
    enterBuildUserNamespace(build);
    auto result = runProcess(argv);
    return result.signal != 0 ? 128 + result.signal : result.exitCode;
  });
  return shellStatus(child.wait());
}

std::string runAsBuildRoot(const launch::BuildRoot& build, const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw sysError("pipe");
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  // The child answers "r" and the body's result, or "e" and the error's one line.
  Child child = Child::fork([&]() -> int {
    readEnd.reset();
    std::string answer;
    try {
      enterBuildUserNamespace(build);
      answer = "r" + body();
    } catch (const Error& e) {
      answer = "e" + e.oneLine();
    }
    std::size_t done = 0;
    while (done < answer.size()) {
      const ssize_t n = ::write(writeEnd.get(), answer.data() + done, answer.size() - done);
      if (n <= 0) return 1;
      done += static_cast<std::size_t>(n);
    }
    return answer[0] == 'r' ? 0 : 1;
  });
  writeEnd.reset();
  const std::string answer = readAll(readEnd.get());
  const int status = shellStatus(child.wait());
  if (!answer.empty() && answer[0] == 'e') throw Error(answer.substr(1));
  if (status != 0 || answer.empty())
    throw Error("a step as root of the build's user namespace failed (exit status " + std::to_string(status) + ")");
  return answer.substr(1);
}

}  // namespace ctr::runtime
