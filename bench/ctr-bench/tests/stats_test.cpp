#include "stats.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace ctr::bench;

namespace {

std::vector<std::optional<double>> opt(std::vector<double> v) { return {v.begin(), v.end()}; }

AnalysisOptions seeded(CiMethod m = CiMethod::BootstrapMedian) {
  AnalysisOptions o;
  o.seed = 42;
  o.method = m;
  return o;
}

}  // namespace

TEST(Stats, IdenticalSamplesGiveAZeroIntervalAndPass) {
  auto a = opt({100, 101, 99, 100.5, 98, 102, 100, 99.5, 101, 100});
  auto r = analysePairs(a, a, Direction::Higher, seeded());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->nPairs, 10);
  EXPECT_DOUBLE_EQ(r->overhead, 0);
  EXPECT_DOUBLE_EQ(r->ci.lo, 0);
  EXPECT_DOUBLE_EQ(r->ci.hi, 0);
  EXPECT_EQ(decide(r->ci, 0.02), Verdict::Pass);
}

TEST(Stats, ClearTenPercentSlowdownOfATimeFails) {
  std::vector<std::optional<double>> a, b;
  for (int i = 0; i < 10; ++i) {
    double base = 1.0 + 0.01 * (i % 3);
    a.push_back(base);
    b.push_back(base * (1.10 + 0.005 * (i % 2)));
  }
  auto r = analysePairs(a, b, Direction::Lower, seeded());
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->overhead, 0.10, 0.01);
  EXPECT_GT(r->ci.lo, 0.05);
  EXPECT_EQ(decide(r->ci, 0.05), Verdict::Fail);
}

TEST(Stats, RateDropCountsAsOverheadAOverBMinusOne) {
  // Container 20% lower rate: overhead = A/B - 1 = 0.25.
  auto a = opt({100, 100, 100, 100, 100});
  auto b = opt({80, 80, 80, 80, 80});
  auto r = analysePairs(a, b, Direction::Higher, seeded());
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->overhead, 0.25, 1e-12);
}

TEST(Stats, HeavyNoiseIsInconclusive) {
  // Ratios swinging +-30% around no difference: the CI straddles +delta.
  auto a = opt({100, 100, 100, 100, 100, 100, 100, 100});
  auto b = opt({70, 130, 75, 128, 90, 112, 72, 135});
  auto r = analysePairs(a, b, Direction::Lower, seeded());
  ASSERT_TRUE(r);
  EXPECT_LT(r->ci.lo, 0.02);
  EXPECT_GT(r->ci.hi, 0.02);
  EXPECT_EQ(decide(r->ci, 0.02), Verdict::Inconclusive);
}

TEST(Stats, ImprovementBeyondDeltaPassesOneSided) {
  EXPECT_EQ(decide({-0.20, -0.10}, 0.02), Verdict::Pass);
  EXPECT_EQ(decide({-0.01, 0.019}, 0.02), Verdict::Pass);
  EXPECT_EQ(decide({0.021, 0.05}, 0.02), Verdict::Fail);
  EXPECT_EQ(decide({0.0, 0.03}, 0.02), Verdict::Inconclusive);
}

TEST(Stats, BootstrapIsReproducibleForASeed) {
  std::vector<double> v{0.01, -0.02, 0.03, 0.0, 0.015, -0.005, 0.02};
  auto x = bootstrapMedianCI(v, 0.9, 10000, 7);
  auto y = bootstrapMedianCI(v, 0.9, 10000, 7);
  EXPECT_EQ(x.lo, y.lo);
  EXPECT_EQ(x.hi, y.hi);
  EXPECT_LE(x.lo, median(v));
  EXPECT_GE(x.hi, median(v));
}

TEST(Stats, MissingSamplesAreLeftOutOfThePairs) {
  std::vector<std::optional<double>> a{1.0, std::nullopt, 1.0, 1.0};
  std::vector<std::optional<double>> b{1.0, 1.0, std::nullopt, 1.0};
  EXPECT_EQ(pairedLogRatios(a, b, Direction::Lower).size(), 2u);
  std::vector<std::optional<double>> none{std::nullopt};
  EXPECT_FALSE(analysePairs(none, none, Direction::Lower, seeded()));
}

TEST(Stats, HodgesLehmannOfASmallExampleByHand) {
  // Walsh averages of {1, 2, 4}: 1, 1.5, 2.5, 2, 3, 4 -> sorted 1, 1.5, 2, 2.5, 3, 4; median 2.25.
  std::vector<double> v{1, 2, 4};
  EXPECT_DOUBLE_EQ(hodgesLehmann(v), 2.25);
}

TEST(Stats, WilcoxonIntervalMatchesTheExactTable) {
  // n = 8: P(T+ <= 3) = 5/256 = 0.0195 <= 0.025 < P(T+ <= 4) = 7/256, so k = 4 and the 95%
  // interval is [W_(4), W_(33)] of the 36 sorted Walsh averages.
  std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8};
  auto ci = wilcoxonSignedRankCI(v, 0.95);
  ASSERT_TRUE(ci);
  // Sorted Walsh averages start 1, 1.5, 2, 2, ... and end ..., 7, 7, 7.5, 8.
  EXPECT_DOUBLE_EQ(ci->lo, 2);
  EXPECT_DOUBLE_EQ(ci->hi, 7);
  // Two values cannot reach 90%: P(T+ = 0) = 1/4 > 0.05.
  std::vector<double> two{1, 2};
  EXPECT_FALSE(wilcoxonSignedRankCI(two, 0.90));
}

TEST(Stats, HodgesLehmannMethodDecidesWhenAsked) {
  auto a = opt({1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  auto b = opt({1.10, 1.11, 1.09, 1.10, 1.12, 1.10, 1.08, 1.11, 1.10, 1.09});
  auto r = analysePairs(a, b, Direction::Lower, seeded(CiMethod::HodgesLehmann));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->ciMethod, "hodges-lehmann-wilcoxon");
  EXPECT_NEAR(r->overhead, 0.10, 0.01);
  EXPECT_EQ(decide(r->ci, 0.03), Verdict::Fail);
}

TEST(Stats, MannWhitneyOnSeparatedSamples) {
  std::vector<double> x{1, 2, 3, 4, 5}, y{6, 7, 8, 9, 10};
  auto mw = mannWhitney(x, y, 0.90);
  EXPECT_DOUBLE_EQ(mw.u, 25);  // every y above every x
  EXPECT_DOUBLE_EQ(mw.shift, 5);  // median of the 25 differences (1..9)
  EXPECT_LT(mw.pValue, 0.02);
  ASSERT_TRUE(mw.ci);
  EXPECT_GT(mw.ci->lo, 0);
  // Exact: m = n = 5, P(U <= 4) = 12/252 = 0.048 > 0.05/... so k = 5 at 90%
  // (P(U <= 4) <= 0.05 < P(U <= 5) = 19/252): CI = [D_(5), D_(21)] = [3, 7].
  EXPECT_DOUBLE_EQ(mw.ci->lo, 3);
  EXPECT_DOUBLE_EQ(mw.ci->hi, 7);
}

TEST(Stats, MannWhitneyOnIdenticalSamplesFindsNoShift) {
  std::vector<double> x{1, 2, 3, 4, 5, 6}, y{1, 2, 3, 4, 5, 6};
  auto mw = mannWhitney(x, y, 0.90);
  EXPECT_DOUBLE_EQ(mw.u, 18);
  EXPECT_DOUBLE_EQ(mw.shift, 0);
  EXPECT_GT(mw.pValue, 0.9);
  ASSERT_TRUE(mw.ci);
  EXPECT_LT(mw.ci->lo, 0);
  EXPECT_GT(mw.ci->hi, 0);
}

TEST(Stats, NoisyBaselineIsFlagged) {
  EXPECT_FALSE(noiseNote(0.005, 0.02));
  auto n = noiseNote(0.041, 0.02);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, "too noisy to resolve delta 2.0% (baseline CV 4.1%)");
}

TEST(Stats, CoefficientOfVariation) {
  std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};  // mean 5, sample sd 2.138
  EXPECT_NEAR(coefficientOfVariation(v), 2.13809 / 5, 1e-4);
  EXPECT_DOUBLE_EQ(median(v), 4.5);
}
