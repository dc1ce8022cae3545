// Child::spawn: the child gets exactly the kept fds, default signal dispositions and an empty
// mask, a failed exec exits 127, and the parent's own mask and handlers are left as they were.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "ctr/fd.hpp"
#include "ctr/owned_child.hpp"

namespace ctr {
namespace {

void onUsr1(int) {}

int exitStatus(Child& child) {
  const int status = child.wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

TEST(ChildSpawn, KeptFdsArriveAtTheirNumbersAndNothingElse) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  // Not close-on-exec, and above the kept fd's number: must still not arrive.
  UniqueFd stray(::fcntl(STDERR_FILENO, F_DUPFD, 20));
  ASSERT_TRUE(stray);
  SpawnOptions options;
  options.keepFds = {{writeEnd.get(), 5}};
  Child child = Child::spawn(
      {"/bin/sh", "-c",
       "echo kept >&5; if [ -e /proc/$$/fd/" + std::to_string(stray.get()) +
           " ]; then echo open >&5; else echo closed >&5; fi"},
      options);
  writeEnd.reset();
  std::string out;
  char buf[64];
  ssize_t n;
  while ((n = ::read(readEnd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(exitStatus(child), 0);
  EXPECT_EQ(out, "kept\nclosed\n");
}

TEST(ChildSpawn, FailedExecExits127) {
  Child child = Child::spawn({"/nonexistent/program"});
  EXPECT_EQ(exitStatus(child), 127);
}

TEST(ChildSpawn, ChildGetsDefaultSignalsAndParentKeepsItsOwn) {
  struct sigaction handler {};
  handler.sa_handler = onUsr1;
  struct sigaction oldUsr1 {}, oldTerm {};
  ASSERT_EQ(::sigaction(SIGUSR1, &handler, &oldUsr1), 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGTERM, &ignore, &oldTerm), 0);
  sigset_t blocked, oldMask;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR2);
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, &blocked, &oldMask), 0);

  // The child kills itself with SIGTERM: ignored in the parent, the default (death) in it.
  Child killed = Child::spawn({"/bin/sh", "-c", "kill -TERM $$; exit 3"});
  EXPECT_EQ(exitStatus(killed), 1000 + SIGTERM);
  // Its mask is empty: SigBlk of /proc/self/status is all zeros.
  Child mask = Child::spawn({"/bin/sh", "-c", "grep -q '^SigBlk:[[:space:]]*0*$' /proc/self/status"});
  EXPECT_EQ(exitStatus(mask), 0);

  sigset_t now;
  ASSERT_EQ(::sigprocmask(SIG_BLOCK, nullptr, &now), 0);
  EXPECT_TRUE(sigismember(&now, SIGUSR2));
  EXPECT_FALSE(sigismember(&now, SIGUSR1));
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, &onUsr1);
  ASSERT_EQ(::sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_IGN);

  ::sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  ::sigaction(SIGUSR1, &oldUsr1, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
}

TEST(ChildSpawn, DiesWithItsParent) {
  // An intermediate (forked) spawns `sleep` with dieWithParent and exits: the sleeper must
  // be gone soon after. Its pid comes back through a pipe.
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  Child intermediate = Child::fork([&] {
    SpawnOptions options;
    options.dieWithParent = true;
    Child sleeper = Child::spawn({"/bin/sleep", "30"}, options);
    const pid_t pid = sleeper.release();
    return ::write(writeEnd.get(), &pid, sizeof pid) == sizeof pid ? 0 : 1;
  });
  writeEnd.reset();
  pid_t sleeper = 0;
  ASSERT_EQ(::read(readEnd.get(), &sleeper, sizeof sleeper), static_cast<ssize_t>(sizeof sleeper));
  EXPECT_EQ(exitStatus(intermediate), 0);
  // Gone, or a zombie waiting for init (or a subreaper) to reap it.
  auto isGone = [&] {
    if (::kill(sleeper, 0) != 0) return true;
    char state = 0;
    if (FILE* f = std::fopen(("/proc/" + std::to_string(sleeper) + "/stat").c_str(), "r")) {
      if (std::fscanf(f, "%*d %*s %c", &state) != 1) state = 0;
      std::fclose(f);
    }
    return state == 'Z' || state == 0;
  };
  bool gone = false;
  for (int i = 0; i < 500 && !(gone = isGone()); ++i) ::usleep(10000);
  EXPECT_TRUE(gone) << "the spawned child outlived its parent";
}

TEST(ForkDaemon, RunsTheBodyInItsOwnSessionAndNotAsOurChild) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd readEnd(fds[0]), writeEnd(fds[1]);
  const pid_t us = ::getpid();
  const pid_t ourSession = ::getsid(0);
  int touched = 1;
  forkDaemon([&] {
    touched = 2;  // the daemon's copy of our memory, not ours
    readEnd.reset();
    // A session of its own (the intermediate's: the daemon cannot take a terminal).
    const pid_t self = ::getpid();
    const std::string line = std::to_string(::getsid(0) != ourSession) + ' ' + std::to_string(self != us) + ' ' +
                             std::to_string(touched) + '\n';
    return ::write(writeEnd.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 1;
  });
  writeEnd.reset();
  std::string out;
  char buf[64];
  ssize_t n;
  while ((n = ::read(readEnd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(out, "1 1 2\n");
  EXPECT_EQ(touched, 1);
  // Not our child: nothing for us to wait for.
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace ctr
