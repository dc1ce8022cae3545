#include <gtest/gtest.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "child_helper.hpp"
#include "ctr/error.hpp"
#include "ctr/handover.hpp"

using namespace ctr::runtime;
using ctr::test::inChild;

namespace {

std::map<std::string, std::string> procStatus() {
  std::map<std::string, std::string> fields;
  std::ifstream file("/proc/self/status");
  std::string line;
  while (std::getline(file, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    fields[line.substr(0, colon)] = value;
  }
  return fields;
}

// As a non-root user, a fresh user namespace gives the child a full set to drop; as root
// the child already has real capabilities.
std::string enterNamespaceIfUnprivileged() {
  if (geteuid() != 0 && unshare(CLONE_NEWUSER) != 0) return "unshare(CLONE_NEWUSER) failed";
  return "";
}

}  // namespace

TEST(Capabilities, DropAllLeavesNoCapabilityAndNoNewPrivsIsSet) {
  auto message = inChild([] {
    if (auto e = enterNamespaceIfUnprivileged(); !e.empty()) return e;
    auto before = procStatus();
    if (before["CapEff"] == "0000000000000000") return std::string("test setup: no capabilities to drop");
    setNoNewPrivs();
    dropAllCapabilities();
    auto after = procStatus();
    std::string failures;
    for (const char* field : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      if (after[field] != "0000000000000000") failures += std::string(field) + "=" + after[field] + "; ";
    }
    if (after["NoNewPrivs"] != "1") failures += "NoNewPrivs=" + after["NoNewPrivs"] + "; ";
    return failures;
  });
  EXPECT_EQ(message, "");
}

TEST(Capabilities, DroppedCapabilitiesDoNotComeBackThroughExecve) {
  // As (namespace) root, execve normally grants the full bounding set again; an empty
  // bounding set is what stops that.
  auto message = inChild([] {
    if (auto e = enterNamespaceIfUnprivileged(); !e.empty()) return e;
    dropAllCapabilities();
    int fds[2];
    if (pipe(fds) != 0) return std::string("pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      execl("/bin/grep", "grep", "^CapEff", "/proc/self/status", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    char buf[256] = {};
    ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
    int status = 0;
    waitpid(pid, &status, 0);
    std::string out(buf, n > 0 ? static_cast<size_t>(n) : 0);
    if (out.find("0000000000000000") == std::string::npos) return "after execve: " + out;
    return std::string();
  });
  EXPECT_EQ(message, "");
}

TEST(Capabilities, NoNewPrivsIsReportedByTheKernel) {
  auto message = inChild([] {
    setNoNewPrivs();
    return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ? std::string() : std::string("not set");
  });
  EXPECT_EQ(message, "");
}
