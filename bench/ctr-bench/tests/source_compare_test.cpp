// The data-source comparison (source_compare.hpp): one workload's samples against another's
// of the same run, side by side, with the verdicts of a data source (not of the runtime).
#include "source_compare.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace ctr::bench {
namespace {

// A directory's files/s and epoch time per block, bare (A) and in the container (B).
const std::vector<double> kDirRate{5000, 5050, 4950, 5025, 4975, 5010, 4990, 5005, 4995, 5015, 4985, 5000};

SampleList scaled(const std::vector<double>& values, double factor, size_t n) {
  SampleList out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(values[i % values.size()] * factor);
  return out;
}

// A workload with files_per_s (higher) and epoch_s (lower) whose values are the directory's
// times `factor` (files/s; the epoch time divided by it), n blocks.
WorkloadResult workload(const std::string& name, double factorA, double factorB, size_t n) {
  WorkloadResult w;
  w.name = name;
  w.labels = SideLabels{"bare", "ctr"};
  FomResult rate;
  rate.name = "files_per_s";
  rate.unit = "files/s";
  rate.direction = "higher";
  rate.delta = 0.05;
  rate.samplesA = scaled(kDirRate, factorA, n);
  rate.samplesB = scaled(kDirRate, factorB, n);
  FomResult time = rate;
  time.name = "epoch_s";
  time.unit = "s";
  time.direction = "lower";
  for (auto* s : {&time.samplesA, &time.samplesB})
    for (auto& v : *s) v = 2000 / *v;
  w.foms = {rate, time};
  return w;
}

const SourceRow& row(const SourceComparison& c, const std::string& fom, const std::string& side) {
  for (const auto& r : c.rows)
    if (r.fom == fom && r.side == side) return r;
  throw std::runtime_error("no row " + fom + " " + side);
}

TEST(SourceComparison, AnImageThatDeliversFourFifthsOfTheDirectoryIsSlowerOnEitherFom) {
  const auto dir = workload("dl-io-dir", 1.0, 1.0, 12);
  const auto image = workload("dl-io-image", 1.0, 0.8, 12);  // the container side only
  const auto c = compareSources(image, &dir, "dl-io-dir", 0.05);
  EXPECT_EQ(c.against, "dl-io-dir");
  ASSERT_EQ(c.rows.size(), 4u);  // two FOMs, two sides
  const auto& rateB = row(c, "files_per_s", "B");
  // Every sample is the directory's times 0.8: the Hodges-Lehmann ratio is exactly that.
  EXPECT_NEAR(*rateB.ratio, 0.8, 1e-12);
  EXPECT_LT(*rateB.ciHigh, 0.95);
  EXPECT_GT(*rateB.ciLow, 0.75);
  EXPECT_NEAR(*rateB.ciLevel, 0.90, 1e-12);
  EXPECT_EQ(rateB.n, 12);
  EXPECT_EQ(rateB.nAgainst, 12);
  EXPECT_NEAR(*rateB.median, 0.8 * *rateB.medianAgainst, 1e-9);
  EXPECT_EQ(rateB.verdict, "SLOWER");
  // The epoch time is 1.25 times the directory's: slower too (the worse direction of a time).
  const auto& timeB = row(c, "epoch_s", "B");
  EXPECT_NEAR(*timeB.ratio, 1.25, 1e-12);
  EXPECT_EQ(timeB.verdict, "SLOWER");
  // Bare, the same source read the same way: no difference.
  EXPECT_NEAR(*row(c, "files_per_s", "A").ratio, 1.0, 1e-12);
  EXPECT_EQ(row(c, "files_per_s", "A").verdict, "NO-DIFFERENCE");
  EXPECT_EQ(row(c, "epoch_s", "A").verdict, "NO-DIFFERENCE");
}

TEST(SourceComparison, AFasterSourceIsFaster) {
  const auto dir = workload("dl-io-dir", 1.0, 1.0, 12);
  const auto staged = workload("dl-io-staged", 1.3, 1.3, 12);
  const auto c = compareSources(staged, &dir, "dl-io-dir", 0.05);
  EXPECT_EQ(row(c, "files_per_s", "B").verdict, "FASTER");
  EXPECT_EQ(row(c, "epoch_s", "A").verdict, "FASTER");
}

TEST(SourceComparison, ThreeBlocksGiveARatioButNoVerdict) {
  const auto dir = workload("dl-io-dir", 1.0, 1.0, 3);
  const auto image = workload("dl-io-image", 1.0, 0.5, 3);
  const auto c = compareSources(image, &dir, "dl-io-dir", 0.05);
  const auto& r = row(c, "files_per_s", "B");
  EXPECT_NEAR(*r.ratio, 0.5, 1e-12);
  EXPECT_EQ(r.verdict, "INCONCLUSIVE");
  EXPECT_EQ(r.note, "3/3 samples: a verdict needs at least 10 on each side");
}

TEST(SourceComparison, ANoisySourceIsTooNoisyToSayNoDifference) {
  auto dir = workload("dl-io-dir", 1.0, 1.0, 12);
  auto image = workload("dl-io-image", 1.0, 1.0, 12);
  // +-30% from launch to launch on the image's side, no shift of its median.
  const std::vector<double> noise{0.7, 1.3, 0.75, 1.25, 0.8, 1.2, 1.0, 1.0, 0.85, 1.15, 0.9, 1.1};
  for (size_t i = 0; i < 12; ++i) image.foms[0].samplesB[i] = kDirRate[i] * noise[i];
  const auto c = compareSources(image, &dir, "dl-io-dir", 0.05);
  const auto& r = row(c, "files_per_s", "B");
  EXPECT_EQ(r.verdict, "INCONCLUSIVE");
  EXPECT_NE(r.note.find("too noisy to say"), std::string::npos) << r.note;
  EXPECT_GT(*r.spread, 0.05);
}

TEST(SourceComparison, FailedLaunchesAreLeftOutAndCounted) {
  const auto dir = workload("dl-io-dir", 1.0, 1.0, 12);
  auto image = workload("dl-io-image", 1.0, 1.0, 12);
  image.foms[0].samplesB[4] = std::nullopt;
  const auto c = compareSources(image, &dir, "dl-io-dir", 0.05);
  EXPECT_EQ(row(c, "files_per_s", "B").n, 11);
  EXPECT_EQ(row(c, "files_per_s", "B").nAgainst, 12);
}

TEST(SourceComparison, SaysWhyWhenTheOtherWorkloadDidNotRun) {
  const auto image = workload("dl-io-image", 1.0, 1.0, 12);
  auto c = compareSources(image, nullptr, "dl-io-dir", 0.05);
  EXPECT_TRUE(c.rows.empty());
  EXPECT_EQ(c.note, "dl-io-dir is not in this run (give it to --workloads as well)");
  auto dir = workload("dl-io-dir", 1.0, 1.0, 12);
  dir.status = "skipped";
  dir.reason = "setup: mksquashfs not found";
  c = compareSources(image, &dir, "dl-io-dir", 0.05);
  EXPECT_TRUE(c.rows.empty());
  EXPECT_EQ(c.note, "dl-io-dir did not run ok in this run (skipped: setup: mksquashfs not found)");
}

TEST(SourceComparison, IsWrittenToTheResultAndReadBack) {
  const auto dir = workload("dl-io-dir", 1.0, 1.0, 3);
  auto image = workload("dl-io-image", 1.0, 0.9, 3);
  image.sourceComparison = compareSources(image, &dir, "dl-io-dir", 0.05);
  Result r;
  r.mode = "runtime-overhead";
  r.workloads = {dir, image};
  const auto j = resultToJson(r);
  const auto& written = j["workloads"][1]["source_comparison"];
  EXPECT_EQ(written["against"], "dl-io-dir");
  EXPECT_EQ(written["rows"][0]["fom"], "files_per_s");
  EXPECT_EQ(written["rows"][0]["side"], "A");
  EXPECT_EQ(written["rows"][1]["verdict"], "INCONCLUSIVE");
  EXPECT_TRUE(written["rows"][1]["ratio"].is_number());
  EXPECT_TRUE(written["rows"][1]["ci"].is_null()) << "3 against 3 samples have no 90% interval";
  EXPECT_FALSE(j["workloads"][0].contains("source_comparison"));
  EXPECT_EQ(resultFromJson(j), r);
}

}  // namespace
}  // namespace ctr::bench
