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

using json = nlohmann::json;

namespace {

struct Point {
  std::string label;
  std::vector<std::string> ctrArgs;
  json samples = json::object();  // FOM name -> [values]
  json errors = json::array();
};

json pointJson(const Point& p, const std::string& mainFom) {
  json foms = json::object();
  for (const auto& [name, values] : p.samples.items()) {
    std::vector<double> v = values.get<std::vector<double>>();
    foms[name] = {{"samples", values}, {"median", v.empty() ? json(nullptr) : json(median(v))}};
  }
  json main = foms.contains(mainFom) ? foms[mainFom] : json{{"samples", json::array()}, {"median", nullptr}};
  return {{"limit", p.label}, {"ctr_args", p.ctrArgs}, {"samples", main["samples"]}, {"median", main["median"]},
          {"foms", foms}, {"errors", p.errors}};
}

void recordInto(Point& p, const Descriptor& d, const LaunchResult& r, const std::map<std::string, double>& deltas) {
  auto parsed = parseOutput(d, r.out, r.err, deltas);
  if (!r.ok() || parsed.error) {
    p.errors.push_back({{"message", r.ok() ? *parsed.error : r.describe()}, {"stderr_tail", r.stderrTail()}});
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

json limitSteps(const std::string& name, const ScenarioContext& c, std::vector<Point> points) {
  const Descriptor& d = *c.workload;
  json out = {{"name", name}, {"kind", "limit-steps"}, {"workload", d.name}};
  if (d.mpirun) {
    out["skipped"] = "an MPI workload: limits apply per rank; pick a single-process workload";
    return out;
  }
  if (auto refused = probeLimits(c, points.front().ctrArgs)) {
    out["skipped"] = *refused;
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
      if (mainFom.empty() && !points[i].samples.empty()) mainFom = points[i].samples.begin().key();
    }
  }
  out["fom"] = mainFom;
  out["rounds"] = rounds;
  out["points"] = json::array();
  for (const auto& p : points) out["points"].push_back(pointJson(p, mainFom));
  return out;
}

json concurrent(const ScenarioContext& c) {
  const Descriptor& d = *c.workload;
  json out = {{"name", "concurrent"}, {"kind", "concurrent-copies"}, {"workload", d.name}};
  if (d.mpirun) {
    out["skipped"] = "an MPI workload already fills the node with its ranks";
    return out;
  }
  const int rounds = c.profile == Profile::Quick ? 2 : 5;
  std::vector<int> copies{1, 2, 4};
  std::string mainFom;
  out["points"] = json::array();
  std::vector<json> points;
  for (int n : copies) {
    Point p;
    p.label = std::to_string(n) + " concurrent";
    json walls = json::array();
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
      if (mainFom.empty() && !p.samples.empty()) mainFom = p.samples.begin().key();
    }
    json pj = pointJson(p, mainFom);
    pj["copies"] = n;
    pj["wall_s"] = walls;
    points.push_back(pj);
  }
  // Per-copy FOM medians above; for rates, the node's aggregate is copies x median.
  for (auto& pj : points) {
    if (pj["median"].is_number()) pj["aggregate"] = pj["median"].get<double>() * pj["copies"].get<int>();
    out["points"].push_back(pj);
  }
  out["fom"] = mainFom;
  out["rounds"] = rounds;
  return out;
}

std::string cpusText(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

json runScenario(const std::string& name, const ScenarioContext& c) {
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
  return {{"name", name}, {"skipped", "unknown scenario"}};
}

}  // namespace ctr::bench
