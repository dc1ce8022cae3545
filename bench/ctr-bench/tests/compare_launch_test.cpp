#include "compare.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "ctr/error.hpp"
#include "launch.hpp"
#include "runner.hpp"

using namespace ctr::bench;
using json = nlohmann::json;

namespace {

Result run(const std::string& mode, std::vector<double> a, std::vector<double> b) {
  FomResult f;
  f.name = "dgemm";
  f.unit = "GFLOP/s";
  f.direction = "higher";
  f.delta = 0.02;
  f.samplesA.assign(a.begin(), a.end());
  f.samplesB.assign(b.begin(), b.end());
  WorkloadResult w;
  w.name = "gemm";
  w.foms = {f};
  Result r;
  r.mode = mode;
  r.workloads = {w};
  return r;
}

}  // namespace

TEST(Compare, FlagsAContainerRegressionAndKeepsBareMetalApart) {
  auto base = run("runtime-overhead", {100, 101, 99, 100, 100.5, 99.5}, {100, 100.5, 99.5, 101, 99, 100});
  auto now = run("runtime-overhead", {100, 100.5, 99.5, 100, 101, 99}, {80, 81, 79, 80.5, 79.5, 80});
  auto c = compareResults(base, now, {});
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].side, "A");
  EXPECT_NE(c.rows[0].verdict, "REGRESSION");
  EXPECT_EQ(c.rows[1].side, "B");
  EXPECT_EQ(c.rows[1].verdict, "REGRESSION");
  ASSERT_TRUE(c.rows[1].change);
  EXPECT_NEAR(*c.rows[1].change, 0.25, 0.02);  // 100/80 - 1: worse by 25%
  std::ostringstream out;
  EXPECT_EQ(printComparison(c, out), 1);
}

TEST(Compare, SameRunsHaveNoRegression) {
  auto base = run("runtime-overhead", {100, 101, 99, 100, 100.5, 99.5}, {100, 100.5, 99.5, 101, 99, 100});
  auto c = compareResults(base, base, {0.05, 0.90});
  for (const auto& r : c.rows) EXPECT_EQ(r.verdict, "OK") << r.side << ": " << r.note;
  std::ostringstream out;
  EXPECT_EQ(printComparison(c, out), 0);
}

TEST(Compare, RefusesRunsOfDifferentModes) {
  auto a = run("runtime-overhead", {1, 2}, {1, 2});
  auto b = run("image-vs-host", {1, 2}, {1, 2});
  EXPECT_THROW(compareResults(a, b, {}), ctr::Error);
}

TEST(Compare, AMissingOrErroredWorkloadIsARegressionUnlessAllowed) {
  auto base = run("runtime-overhead", {100, 101, 99, 100, 100.5, 99.5}, {100, 100.5, 99.5, 101, 99, 100});
  auto now = base;
  now.workloads.clear();  // the new run lost the workload: "OK 0, REGRESSION 0" before issue 23
  auto c = compareResults(base, now, {});
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].verdict, "MISSING");
  std::ostringstream out;
  EXPECT_EQ(printComparison(c, out), 1) << out.str();
  CompareOptions allow;
  allow.allowMissing = true;
  std::ostringstream quiet;
  EXPECT_EQ(printComparison(compareResults(base, now, allow), quiet), 0) << quiet.str();

  auto errored = base;
  errored.workloads[0].foms[0].errors = {LaunchError{2, "", "", "B", "exit status 3", ""}};
  auto e = compareResults(base, errored, {});
  ASSERT_EQ(e.rows.size(), 1u);
  EXPECT_EQ(e.rows[0].verdict, "ERROR");
  std::ostringstream out2;
  EXPECT_EQ(printComparison(e, out2), 1);
}

TEST(Compare, AnUndecidedComparisonSaysHowManySamplesWouldDecide) {
  // Three noisy samples a side, +10% apart, tolerance 5%: cannot decide.
  auto base = run("runtime-overhead", {100, 90, 110}, {100, 90, 110});
  auto now = run("runtime-overhead", {100, 90, 110}, {91, 82, 100});
  auto c = compareResults(base, now, {});
  const auto& b = c.rows[1];
  ASSERT_EQ(b.verdict, "INCONCLUSIVE") << b.note;
  ASSERT_TRUE(b.samplesNeeded) << b.note;
  EXPECT_GT(*b.samplesNeeded, 3);
  EXPECT_NE(b.note.find("per run would"), std::string::npos) << b.note;
}

TEST(Options, DeltaTakesFractionsAndPercentages) {
  EXPECT_EQ(parseDeltaOption("dgemm=0.03"), (std::pair<std::string, double>{"dgemm", 0.03}));
  auto p = parseDeltaOption("gemm/dgemm=2%");
  EXPECT_EQ(p.first, "gemm/dgemm");
  EXPECT_DOUBLE_EQ(p.second, 0.02);
  EXPECT_THROW(parseDeltaOption("dgemm"), ctr::Error);
  EXPECT_THROW(parseDeltaOption("dgemm=fast"), ctr::Error);
  EXPECT_THROW(parseDeltaOption("dgemm=150%"), ctr::Error);
}

TEST(Launch, CapturesOutputStatusAndStderrTail) {
  auto r = launch({"/bin/sh", "-c", "echo out; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line$i >&2; done; exit 3"},
                  {"PATH=/usr/bin:/bin"}, "/", 10);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.describe(), "exit status 3");
  EXPECT_EQ(r.stderrTail(2), "line11\nline12");
  EXPECT_GT(r.wallS, 0);
}

TEST(Launch, UsesExactlyTheGivenEnvironment) {
  auto r = launch({"sh", "-c", "env | sort"}, {"PATH=/usr/bin:/bin", "ONLY=this"}, "/", 10);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("ONLY=this"), std::string::npos);
  EXPECT_EQ(r.out.find("HOME="), std::string::npos);
}

TEST(Launch, TimeoutKillsTheWholeProcessGroup) {
  // The shell's child (sleep) must go too, or a hung mpirun would leave its ranks behind.
  auto r = launch({"/bin/sh", "-c", "sleep 31.25 & sleep 31.25; wait"}, {"PATH=/usr/bin:/bin"}, "/", 0.5);
  EXPECT_TRUE(r.timedOut);
  ::usleep(100000);
  EXPECT_NE(std::system("pgrep -f 'sleep 31[.]25' >/dev/null"), 0) << "a process of the timed-out group survived";
  EXPECT_LT(r.wallS, 5);
  EXPECT_EQ(r.describe().rfind("timed out after", 0), 0u);
}

TEST(Launch, RefusesAProgramNotInPath) {
  EXPECT_THROW(launch({"no-such-program-here"}, {"PATH=/usr/bin:/bin"}, "/", 1), ctr::Error);
}
