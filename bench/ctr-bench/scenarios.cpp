#include "scenarios.hpp"

#include <gsl/gsl_randist.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "fom.hpp"
#include "launch.hpp"
#include "stats.hpp"

namespace ctr::bench {

namespace {

struct Point {
  std::string label;
  std::vector<std::string> ctrArgs;
  std::map<std::string, std::vector<double>> samples{};  // FOM name -> values
  std::vector<LaunchError> errors{};
};

PointFom pointFom(const std::vector<double>& values) {
  return {SampleList(values.begin(), values.end()), values.empty() ? std::nullopt : std::optional<double>(median(values))};
}

ScenarioPoint pointResult(const Point& p, const std::string& mainFom) {
  ScenarioPoint out;
  out.limit = p.label;
  out.ctrArgs = p.ctrArgs;
  out.foms.emplace();
  for (const auto& [name, values] : p.samples) (*out.foms)[name] = pointFom(values);
  if (auto it = out.foms->find(mainFom); it != out.foms->end()) {
    out.samples = it->second.samples;
    out.median = it->second.median;
  }
  out.errors = p.errors;
  return out;
}

void recordInto(Point& p, const Descriptor& d, const LaunchResult& r, const std::map<std::string, double>& deltas) {
  auto parsed = parseOutput(d, r.out, r.err, deltas);
  if (!r.ok() || parsed.error) {
    p.errors.push_back(LaunchError{std::nullopt, "", "", "", r.ok() ? *parsed.error : r.describe(), r.stderrTail()});
    return;
  }
  for (const auto& f : parsed.foms)
    if (f.value) p.samples[f.name].push_back(*f.value);
}

// A probe launch with these options, to skip with ctr's own reason when limits are refused.
std::optional<std::string> probeLimits(const ScenarioContext& c, const std::vector<std::string>& args) {
  auto cmd = c.containerCommand(args);
  auto r = launch(cmd, c.env, c.cwd, c.workload->timeoutS);
  if (r.ok()) return std::nullopt;
  std::string tail = r.stderrTail(1);
  return "ctr refused the limit (" + r.describe() + (tail.empty() ? "" : ": " + tail) + ")";
}

ScenarioResult started(const std::string& name, const std::string& kind, const Descriptor& d) {
  ScenarioResult out;
  out.name = name;
  out.kind = kind;
  out.workload = d.name;
  return out;
}

ScenarioResult limitSteps(const std::string& name, const ScenarioContext& c, std::vector<Point> points) {
  const Descriptor& d = *c.workload;
  ScenarioResult out = started(name, "limit-steps", d);
  if (d.mpirun) {
    out.skipped = "an MPI workload: limits apply per rank; pick a single-process workload";
    return out;
  }
  if (auto refused = probeLimits(c, points.front().ctrArgs)) {
    out.skipped = *refused;
    return out;
  }
  const int rounds = c.profile == Profile::Quick ? 3 : 5;
  std::string mainFom;
  for (int round = 0; round < rounds && !interruptRequested(); ++round) {
    std::vector<size_t> idx(points.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    gsl_ran_shuffle(c.rng, idx.data(), idx.size(), sizeof(size_t));
    for (size_t i : idx) {
      if (c.progress) c.progress->status(name + ": round " + std::to_string(round + 1) + "/" + std::to_string(rounds) + ", " + points[i].label);
      auto r = launch(c.containerCommand(points[i].ctrArgs), c.env, c.cwd, d.timeoutS);
      if (r.interrupted) break;
      recordInto(points[i], d, r, c.deltas);
      if (mainFom.empty() && !points[i].samples.empty()) mainFom = points[i].samples.begin()->first;
    }
  }
  out.fom = mainFom;
  out.rounds = rounds;
  for (const auto& p : points) out.points.push_back(pointResult(p, mainFom));
  return out;
}

ScenarioResult concurrent(const ScenarioContext& c) {
  const Descriptor& d = *c.workload;
  ScenarioResult out = started("concurrent", "concurrent-copies", d);
  if (d.mpirun) {
    out.skipped = "an MPI workload already fills the node with its ranks";
    return out;
  }
  const int rounds = c.profile == Profile::Quick ? 2 : 5;
  std::vector<int> copies{1, 2, 4};
  std::string mainFom;
  for (int n : copies) {
    Point p;
    p.label = std::to_string(n) + " concurrent";
    std::vector<double> walls;
    for (int round = 0; round < rounds && !interruptRequested(); ++round) {
      if (c.progress) c.progress->status("concurrent: " + std::to_string(n) + " copies, round " + std::to_string(round + 1) + "/" + std::to_string(rounds));
      std::vector<LaunchResult> results(static_cast<size_t>(n));
      std::vector<std::thread> threads;
      auto cmd = c.containerCommand({});
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
          try {
            results[static_cast<size_t>(i)] = launch(cmd, c.env, c.cwd, d.timeoutS);
          } catch (const std::exception& e) {
            results[static_cast<size_t>(i)].err = e.what();
          }
        });
      for (auto& t : threads) t.join();
      walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      for (const auto& r : results) recordInto(p, d, r, c.deltas);
      if (mainFom.empty() && !p.samples.empty()) mainFom = p.samples.begin()->first;
    }
    ScenarioPoint point = pointResult(p, mainFom);
    point.copies = n;
    point.wallS = walls;
    // Per-copy FOM medians; for rates, the node's aggregate is copies x median.
    if (point.median) point.aggregate = *point.median * n;
    out.points.push_back(std::move(point));
  }
  out.fom = mainFom;
  out.rounds = rounds;
  return out;
}

std::string cpusText(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

ScenarioResult runScenario(const std::string& name, const ScenarioContext& c) {
  if (name == "cpu-steps") {
    std::vector<Point> points;
    long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    for (double cpus : {0.5, 1.0, 2.0, 4.0})
      if (cpus <= static_cast<double>(cores)) points.push_back({"--cpus " + cpusText(cpus), {"--cpus", cpusText(cpus)}});
    points.push_back({"unlimited", {}});
    // Probe with a real limit, not with the unlimited point.
    return limitSteps(name, c, points);
  }
  if (name == "memory-steps") {
    std::vector<Point> points;
    for (const char* m : {"256M", "1G", "4G"}) points.push_back({std::string("--memory ") + m, {"--memory", m}});
    points.push_back({"unlimited", {}});
    return limitSteps(name, c, points);
  }
  if (name == "concurrent") return concurrent(c);
  ScenarioResult unknown;
  unknown.name = name;
  unknown.skipped = "unknown scenario";
  return unknown;
}

}  // namespace ctr::bench
