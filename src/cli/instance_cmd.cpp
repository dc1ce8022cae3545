// ctr instance start|list|stop|stats (Apptainer's instance commands) and save (pyxis's
// --container-save). `start` is a launch
// with exec's options (exec_cmd.cpp); the others read the user's instance records.
#include <fnmatch.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ctr/error.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/instance.hpp"
#include "ctr/limits.hpp"
#include "ctr/runtime.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

// The running instances whose names match any of `patterns` (shell globs; none: all).
std::vector<launch::InstanceRecord> matching(const std::string& stateDir, const std::vector<std::string>& patterns) {
  std::vector<launch::InstanceRecord> found;
  for (auto& record : runtime::listInstances(stateDir)) {
    bool wanted = patterns.empty();
    for (const auto& p : patterns) wanted = wanted || ::fnmatch(p.c_str(), record.name.c_str(), 0) == 0;
    if (wanted) found.push_back(std::move(record));
  }
  return found;
}

// "TERM", "SIGTERM" or "15".
int parseSignal(const std::string& text) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    const int n = std::atoi(text.c_str());
    if (n > 0 && n < NSIG && std::to_string(n) == text) return n;
  } else {
    const std::string name = text.starts_with("SIG") ? text.substr(3) : text;
    for (int sig = 1; sig < NSIG; ++sig)
      if (const char* abbrev = sigabbrev_np(sig); abbrev && name == abbrev) return sig;
  }
  throw Error("--signal " + text + ": not a signal (a name such as TERM or SIGUSR1, or a number)").withStatus(1);
}

// Rows as Apptainer's lists print them (Go's tabwriter, padding 4): every column but the
// last as wide as its widest cell plus 4 spaces, so that scripts that cut by column or
// split on runs of spaces read ctr's lists as they read Apptainer's.
std::string alignedColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t i = 0; i + 1 < row.size(); ++i) {
      if (widths.size() <= i) widths.resize(i + 1, 0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out.append(widths[i] + 4 - row[i].size(), ' ');
    }
    out += '\n';
  }
  return out;
}

struct ListState {
  bool json = false;
  bool logs = false;
  std::vector<std::string> patterns;
};

int listCommand(const ListState& s) {
  const auto host = host::discoverHost();
  const auto found = matching(host.stateDir, s.patterns);
  if (s.json) {
    nlohmann::json j;
    j["instances"] = nlohmann::json::array();
    for (const auto& r : found)
      j["instances"].push_back({{"instance", r.name}, {"pid", r.keeper}, {"img", r.image}, {"ip", ""},
                                {"started", r.started}, {"logOutPath", r.logOut}, {"logErrPath", r.logErr}});
    std::cout << j.dump(4) << '\n';
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  if (s.logs) {
    rows.push_back({"INSTANCE NAME", "PID", "LOGS"});
    for (const auto& r : found) {
      rows.push_back({r.name, std::to_string(r.keeper), r.logErr});
      rows.push_back({"", "", r.logOut});
    }
  } else {
    rows.push_back({"INSTANCE NAME", "PID", "IP", "IMAGE"});
    for (const auto& r : found) rows.push_back({r.name, std::to_string(r.keeper), "", r.image});
  }
  std::cout << alignedColumns(rows);
  return 0;
}

struct StopState {
  bool all = false;
  bool force = false;
  std::string signal = "TERM";
  unsigned timeout = 10;
  std::vector<std::string> names;
};

int stopCommand(const StopState& s) {
  if (s.all == !s.names.empty())
    throw Error(s.all ? "instance stop: --all or instance names, not both"
                      : "instance stop: name the instances to stop (globs allowed), or --all")
        .withStatus(1);
  const int signal = s.force ? SIGKILL : parseSignal(s.signal);
  const auto host = host::discoverHost();
  const auto found = matching(host.stateDir, s.names);
  if (found.empty()) {
    if (s.all) return 0;
    std::string names;
    for (const auto& n : s.names) names += (names.empty() ? "" : ", ") + n;
    throw Error("no instance found with name " + names + " (`ctr instance list` shows those running)");
  }
  for (const auto& r : found) {
    std::fprintf(stderr, "Stopping %s instance of %s (PID=%d)\n", r.name.c_str(), r.image.c_str(), r.keeper);
    runtime::stopInstance(host.stateDir, r.name, signal, std::chrono::seconds(s.timeout));
  }
  return 0;
}

struct StatsState {
  bool json = false;
  std::string name;
};

int statsCommand(const StatsState& s) {
  const auto host = host::discoverHost();
  if (!launch::isValidInstanceName(s.name)) throw Error("bad instance name '" + s.name + "'").withStatus(1);
  const auto record = runtime::findInstance(host.stateDir, s.name);
  if (!record) throw Error("no instance found with name " + s.name + " (`ctr instance list` shows those running)");
  const auto stats = runtime::instanceStats(*record);
  if (s.json) {
    nlohmann::json j = {{"instance", record->name},         {"pid", record->keeper},
                        {"processes", stats.processes},      {"cpu_seconds", stats.cpuSeconds},
                        {"resident_bytes", stats.residentBytes}};
    std::cout << j.dump(4) << '\n';
    return 0;
  }
  std::printf("%-16s %-8s %-10s %-12s %s\n", "INSTANCE NAME", "PID", "PROCESSES", "CPU SECONDS", "MEMORY (RSS)");
  std::printf("%-16s %-8d %-10u %-12.2f %s\n", record->name.c_str(), record->keeper, stats.processes, stats.cpuSeconds,
              limits::formatSize(stats.residentBytes).c_str());
  return 0;
}

struct SaveState {
  std::string name, file;
};

int saveCommand(const SaveState& s) {
  const auto host = host::discoverHost();
  if (!launch::isValidInstanceName(s.name)) throw Error("bad instance name '" + s.name + "'").withStatus(1);
  const auto record = runtime::findInstance(host.stateDir, s.name);
  if (!record) throw Error("no instance found with name " + s.name + " (`ctr instance list` shows those running)");
  runtime::saveInstance(*record, s.file);
  return 0;
}

}  // namespace

void registerInstance(CLI::App& app, Context& ctx) {
  auto* instance = app.add_subcommand("instance", "Containers that run in the background (start, run, list, stop, stats, save)");
  instance->require_subcommand(1);
  const auto& raw = ctx.rawArgs;
  auto at = std::find(raw.begin(), raw.end(), "instance");
  const bool startParsed = at != raw.end() && at + 1 != raw.end() && *(at + 1) == "start";
  const bool runParsed = at != raw.end() && at + 1 != raw.end() && *(at + 1) == "run";
  registerInstanceStart(*instance, ctx, startParsed, runParsed);

  auto list = std::make_shared<ListState>();
  auto* listCmd = instance->add_subcommand("list", "List your running instances (NAME globs: only those)");
  listCmd->add_flag("-j,--json", list->json, "Print as JSON");
  listCmd->add_flag("-l,--logs", list->logs, "Show the paths of each instance's output files");
  listCmd->add_option("names", list->patterns, "Instance names (globs)");
  listCmd->callback([&ctx, list] { ctx.action = [list] { return listCommand(*list); }; });

  auto stop = std::make_shared<StopState>();
  auto* stopCmd = instance->add_subcommand("stop", "Stop instances: every process in them ends, nothing is left (a "
                                                   "--no-pid instance: its keeper and startscript; launches that "
                                                   "joined it keep running)");
  stopCmd->add_flag("-a,--all", stop->all, "Stop all your instances");
  stopCmd->add_flag("-F,--force", stop->force, "Kill at once (SIGKILL)");
  stopCmd->add_option("-s,--signal", stop->signal, "Signal sent to every process of the instance (default TERM; a "
                      "--no-pid instance: to its startscript)");
  stopCmd->add_option("-t,--timeout", stop->timeout, "Kill the instance if it has not ended after this many seconds (default 10)");
  stopCmd->add_option("names", stop->names, "Instance names (globs)");
  stopCmd->callback([&ctx, stop] { ctx.action = [stop] { return stopCommand(*stop); }; });

  auto stats = std::make_shared<StatsState>();
  auto* statsCmd = instance->add_subcommand("stats", "What an instance's processes use now (a --no-pid instance: "
                                                     "those in its mount namespace, which other launches of its "
                                                     "image may share)");
  statsCmd->add_flag("-j,--json", stats->json, "Print as JSON");
  statsCmd->add_option("name", stats->name, "Instance name")->required();
  statsCmd->callback([&ctx, stats] { ctx.action = [stats] { return statsCommand(*stats); }; });

  auto save = std::make_shared<SaveState>();
  auto* saveCmd = instance->add_subcommand("save", "Save an instance's root (its image and what was written to it, not "
                                                   "its binds) as a squashfs image FILE");
  saveCmd->add_option("name", save->name, "Instance name")->required();
  saveCmd->add_option("file", save->file, "The image file to write (replaced if it exists)")->required();
  saveCmd->callback([&ctx, save] { ctx.action = [save] { return saveCommand(*save); }; });
}

}  // namespace ctr::cli
