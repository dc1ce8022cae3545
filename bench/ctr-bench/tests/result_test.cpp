// The typed result model (result.hpp): the one conversion to and from the file's JSON. A
// file read and written back keeps every value it had (keys a reader does not know
// included), and a wrong field is named by its path.
#include <gtest/gtest.h>

#include <fstream>

#include "ctr/error.hpp"
#include "result.hpp"

namespace ctr::bench {
namespace {

using nlohmann::json;

json fixture() {
  std::ifstream in(CTR_BENCH_SOURCE_DIR "/bench/ctr-bench/tests/report_fixture.json");
  EXPECT_TRUE(in) << "cannot read the report fixture";
  return json::parse(in);
}

// The document's values without what means "not recorded" (null, "", {}, a list of nulls
// such as "ci": [null, null]): a writer may spell an absent part any of these ways.
json recorded(const json& v) {
  if (v.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : v.items()) {
      json inner = recorded(value);
      if (!inner.is_null()) out[key] = inner;
    }
    return out.empty() ? json() : out;
  }
  if (v.is_array()) {
    json out = json::array();
    bool any = false;
    for (const auto& e : v) {
      out.push_back(recorded(e));
      any = any || !out.back().is_null();
    }
    return any ? out : json();
  }
  if (v.is_string() && v.get<std::string>().empty()) return json();
  return v;
}

TEST(ResultModel, TheFixtureSurvivesReadAndWrite) {
  const json original = fixture();
  const Result r = resultFromJson(original);
  const json saved = resultToJson(r);
  EXPECT_EQ(recorded(saved), recorded(original)) << "a value was lost or changed";
  EXPECT_EQ(resultFromJson(saved), r);
  EXPECT_EQ(resultToJson(resultFromJson(saved)), saved) << "writing is not stable";
}

TEST(ResultModel, ReadsTheFixtureIntoTypedFields) {
  const Result r = resultFromJson(fixture());
  EXPECT_EQ(r.mode, "runtime-overhead");
  ASSERT_GE(r.workloads.size(), 3u);
  const FomResult& dgemm = r.workloads[0].foms[0];
  EXPECT_EQ(dgemm.name, "dgemm_n2048");
  EXPECT_EQ(dgemm.samplesA.size(), 10u);
  ASSERT_TRUE(dgemm.analysis);
  EXPECT_EQ(dgemm.analysis->verdict, "PASS");
  const FomResult& latency = r.workloads[2].foms[0];
  ASSERT_EQ(latency.errors.size(), 1u);
  EXPECT_EQ(latency.errors[0].block, 3);
  EXPECT_EQ(latency.errors[0].side, "B");
  EXPECT_FALSE(latency.samplesB[3]) << "the failed launch's sample is null, not zero";
  ASSERT_TRUE(r.coldStart);
  EXPECT_EQ(r.coldStart->samplesS.at("cold").size(), 5u);
  ASSERT_TRUE(r.summary);
  EXPECT_EQ(r.summary->exitStatus, 3);
}

TEST(ResultModel, KeysItDoesNotKnowAreKept) {
  json doc = fixture();
  doc["from_a_newer_writer"] = {{"x", 1}};
  doc["workloads"][0]["foms"][0]["power_w"] = 212.5;
  doc["workloads"][0]["foms"][0]["analysis"]["bayes_factor"] = 3.2;
  doc["config"]["numa_policy"] = "interleave";
  const json saved = resultToJson(resultFromJson(doc));
  EXPECT_EQ(saved["from_a_newer_writer"], doc["from_a_newer_writer"]);
  EXPECT_EQ(saved["workloads"][0]["foms"][0]["power_w"], 212.5);
  EXPECT_EQ(saved["workloads"][0]["foms"][0]["analysis"]["bayes_factor"], 3.2);
  EXPECT_EQ(saved["config"]["numa_policy"], "interleave");
}

TEST(ResultModel, WhatTheRunnerFillsIsWrittenWithEveryKey) {
  Result r;
  r.mode = "runtime-overhead";
  r.seed = 42;
  WorkloadResult w;
  w.name = "gemm";
  w.labels = SideLabels{"bare", "ctr"};
  w.plan.push_back(BlockPlan{0, {"B", "A"}, {{"A", 1.5}, {"B", 1.6}}});
  FomResult f;
  f.name = "dgemm";
  f.direction = "higher";
  f.delta = 0.02;
  f.samplesA = {100.0, std::nullopt};
  f.errors.push_back(LaunchError{-1, "", "warm-up", "B", "exit status 3", "boom"});
  Analysis a;
  a.verdict = "ERROR";
  a.speedup = Speedup{2.0, 1.5, 2.5};
  f.analysis = a;
  w.foms.push_back(f);
  r.workloads.push_back(w);
  const json j = resultToJson(r);
  EXPECT_EQ(j["format"], kResultFormat);
  EXPECT_EQ(j["version"], kResultVersion);
  EXPECT_TRUE(j["finished"].is_null()) << "the runner's keys are written, null until known";
  EXPECT_EQ(j["workloads"][0]["plan"][0]["wall_s"]["B"], 1.6);
  EXPECT_EQ(j["workloads"][0]["foms"][0]["samples"]["A"], json({100.0, nullptr}));
  EXPECT_EQ(j["workloads"][0]["foms"][0]["errors"][0]["phase"], "warm-up");
  EXPECT_EQ(j["workloads"][0]["foms"][0]["analysis"]["speedup"]["ci"], json({1.5, 2.5}));
  EXPECT_EQ(resultFromJson(j), r);
}

TEST(ResultModel, AWrongFieldIsNamedByItsPath) {
  auto message = [](const json& doc) {
    try {
      (void)resultFromJson(doc);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json doc = fixture();
  doc["workloads"][0]["foms"][1].erase("name");
  EXPECT_EQ(message(doc), "result file: field workloads[0].foms[1].name: missing");
  doc = fixture();
  doc["workloads"][1]["plan"][0]["order"][0] = 7;
  EXPECT_EQ(message(doc), "result file: field workloads[1].plan[0].order[0]: expected a string");
  doc = fixture();
  doc["seed"] = "abc";
  EXPECT_EQ(message(doc), "result file: field seed: expected a whole number");
}

}  // namespace
}  // namespace ctr::bench
