// runProcess's input and time limit (what a Docker credential helper is run with): the
// text reaches the program's stdin, and a program that does not end in time is killed
// with its process group, children included, the result saying so.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

#include "ctr/run_process.hpp"

TEST(RunProcess, InputReachesStdin) {
  ctr::ProcessOptions options;
  options.captureStdout = true;
  options.input = "registry.site\n";
  const auto r = ctr::runProcess({"/bin/sh", "-c", "read line; echo \"got $line\""}, options);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.capturedStdout, "got registry.site\n");
}

TEST(RunProcess, InputToAProgramThatReadsNothingIsNoSigpipe) {
  ctr::ProcessOptions options;
  options.input = std::string(1000, 'x');
  const auto r = ctr::runProcess({"/bin/true"}, options);  // this process lives on to check it
  EXPECT_TRUE(r.ok());
}

TEST(RunProcess, TimeoutKillsTheProgramAndItsChildren) {
  ctr::ProcessOptions options;
  options.captureStdout = true;
  options.timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  // The grandchild holds stdout: reading to EOF alone would wait for it.
  const auto r = ctr::runProcess({"/bin/sh", "-c", "sleep 30 & echo $!; wait"}, options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(r.timedOut);
  EXPECT_FALSE(r.ok());
  // Gone, or a zombie its new parent has yet to reap (some inits reap late).
  const auto alive = [pid = std::stol(r.capturedStdout)] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto name = text.rfind(')');
    return name != std::string::npos && name + 2 < text.size() && text[name + 2] != 'Z';
  };
  for (int i = 0; i < 100 && alive(); ++i) ::usleep(10000);
  EXPECT_FALSE(alive()) << "the program's child outlived the time limit";
}

TEST(RunProcess, AProgramWithinItsTimeIsNotMarked) {
  ctr::ProcessOptions options;
  options.timeout = std::chrono::seconds(10);
  const auto r = ctr::runProcess({"/bin/sh", "-c", "exit 3"}, options);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 3);
}
