// ctr exec | run | shell, and the hidden `__holder` entry of the shared image mount.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/launch.hpp"
#include "ctr/limits.hpp"
#include "ctr/log.hpp"
#include "ctr/runtime.hpp"
#include "ctr/strings.hpp"

namespace ctr::cli {

namespace {

struct RunCommandState {
  launch::LaunchOptions options;
  std::vector<std::string> envFiles;
  // Limits as typed (units parsed in runLaunch, so a bad one gets ctr's one-line error).
  std::string cpus, memory, memorySwap, pidsLimit, blkioWeight;
  std::string applyCgroups;  // --apply-cgroups FILE (Apptainer's TOML)
  bool explain = false;
  bool json = false;
  std::vector<std::string> noEnv;  // --no-env NAME[,NAME...]
};

// Apptainer's flag variables: APPTAINER_<KEY>, then SINGULARITY_<KEY>, for each key in
// order; the first non-blank one.
struct FlagVariable {
  std::string name, value;
};
std::optional<FlagVariable> flagVariable(std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    for (const char* prefix : {"APPTAINER_", "SINGULARITY_"}) {
      const std::string name = std::string(prefix) + key;
      const char* value = std::getenv(name.c_str());
      if (value && !trim(value).empty()) return FlagVariable{name, std::string(trim(value))};
    }
  }
  return std::nullopt;
}

// A boolean as Apptainer reads its flag variables (Go's strconv.ParseBool).
bool parseFlagBool(const FlagVariable& v) {
  static const char* yes[] = {"1", "t", "T", "TRUE", "true", "True"};
  static const char* no[] = {"0", "f", "F", "FALSE", "false", "False"};
  for (const char* y : yes) if (v.value == y) return true;
  for (const char* n : no) if (v.value == n) return false;
  throw Error(v.name + "='" + v.value + "' is not a boolean (true/false, 1/0)").withStatus(1);
}

// The flag variables of the launch flags not given on the command line (a flag wins over
// its variable; the bind variables are read by the planner, with CTR_BIND).
void applyFlagVariables(CLI::App* cmd, RunCommandState& s) {
  auto& o = s.options;
  // One pass over the options (CLI11's lookup by name compares against every option: a
  // few dozen lookups were a tenth of a launch's instructions).
  std::set<std::string, std::less<>> known, givenNames;
  auto collect = [&](const CLI::App* app) {
    for (const CLI::Option* opt : app->get_options()) {
      for (const auto& name : opt->get_lnames()) {
        known.insert("--" + name);
        if (opt->count() > 0) givenNames.insert("--" + name);
      }
    }
  };
  collect(cmd);
  // The option groups (addLaunchOptions) are nameless subcommands of the command.
  for (const CLI::App* group : cmd->get_subcommands([](const CLI::App* sub) { return sub->get_name().empty(); }))
    collect(group);
  auto given = [&givenNames](const char* option) { return givenNames.count(std::string_view(option)) > 0; };
  struct BoolFlag { const char* option; bool* target; std::initializer_list<const char*> keys; };
  for (const auto& f : {BoolFlag{"--contain", &o.contain, {"CONTAIN"}}, BoolFlag{"--containall", &o.containAll, {"CONTAINALL"}},
                        BoolFlag{"--cleanenv", &o.cleanEnv, {"CLEANENV"}}, BoolFlag{"--no-home", &o.noHome, {"NO_HOME"}},
                        BoolFlag{"--writable-tmpfs", &o.writableTmpfs, {"WRITABLE_TMPFS"}},
                        BoolFlag{"--no-eval", &o.noEval, {"NO_EVAL"}}, BoolFlag{"--pid", &o.pid, {"PID", "UNSHARE_PID"}},
                        BoolFlag{"--ipc", &o.ipc, {"IPC", "UNSHARE_IPC"}}, BoolFlag{"--uts", &o.uts, {"UTS", "UNSHARE_UTS"}},
                        BoolFlag{"--net", &o.net, {"NET", "UNSHARE_NET"}}, BoolFlag{"--nv", &o.nv, {"NV"}},
                        BoolFlag{"--rocm", &o.rocm, {"ROCM"}}}) {
    if (given(f.option)) continue;
    if (auto v = flagVariable(f.keys)) *f.target = parseFlagBool(*v);
  }
  struct StringFlag { const char* option; std::string* target; std::initializer_list<const char*> keys; };
  for (const auto& f : {StringFlag{"--home", &o.home, {"HOME"}}, StringFlag{"--pwd", &o.pwd, {"PWD", "TARGET_PWD", "CWD", "TARGET_CWD"}},
                        StringFlag{"--workdir", &o.workdir, {"WORKDIR"}}, StringFlag{"--app", &o.app, {"APP", "APPNAME"}},
                        StringFlag{"--shell", &o.shell, {"SHELL"}}, StringFlag{"--hostname", &o.hostname, {"HOSTNAME"}},
                        StringFlag{"--network", &o.network, {"NETWORK"}}}) {
    if (given(f.option) || (f.target == &o.pwd && given("--cwd")) || !known.count(std::string_view(f.option))) continue;
    if (auto v = flagVariable(f.keys)) *f.target = v->value;
  }
  if (!given("--no-env"))
    if (auto v = flagVariable({"NOENV"})) s.noEnv.push_back(v->value);
  if (!given("--scratch"))
    if (auto v = flagVariable({"SCRATCH", "SCRATCHDIR"})) o.scratch.push_back(v->value);
  if (!given("--env-file"))
    if (auto v = flagVariable({"ENV_FILE"})) s.envFiles.push_back(v->value);
  if (auto v = flagVariable({"MOUNT"})) o.mounts.insert(o.mounts.begin(), v->value);
  for (const auto& list : s.noEnv)
    for (auto name : splitList(list))
      if (!name.empty()) o.noEnv.emplace_back(trim(name));
}

// An --env-file: a regular file or a pipe (`--env-file <(...)`), at most 1 MiB (more could
// not be passed to execve anyway); /dev/zero or a directory is refused by name.
std::string readEnvFile(const std::string& path) {
  return readCheckedFile(path, 1u << 20, "--env-file " + path, PipesAllowed::Yes);
}

// The limit flags into options.limits: numbers and sizes checked, named when wrong.
void parseLimitFlags(RunCommandState& state) {
  auto& r = state.options.limits;
  auto number = [](const std::string& flag, const std::string& text) {
    try {
      std::size_t used = 0;
      const long long value = std::stoll(text, &used);
      if (used == text.size()) return value;
    } catch (const std::logic_error&) {
    }
    throw Error(flag + " '" + text + "' is not a whole number");
  };
  if (!state.cpus.empty()) r.cpus = limits::parseCpus(state.cpus, "--cpus");
  if (!state.memory.empty()) r.memory = limits::parseSize(state.memory, "--memory");
  if (!state.memorySwap.empty())
    r.memorySwap = state.memorySwap == "-1" ? -1 : static_cast<std::int64_t>(limits::parseSize(state.memorySwap, "--memory-swap"));
  if (!state.pidsLimit.empty()) r.pids = number("--pids-limit", state.pidsLimit);
  if (!state.blkioWeight.empty()) {
    const auto weight = number("--blkio-weight", state.blkioWeight);
    if (weight < 10 || weight > 1000) throw Error("--blkio-weight " + state.blkioWeight + ": must be from 10 to 1000");
    r.blkioWeight = static_cast<std::uint32_t>(weight);
  }
  if (!state.applyCgroups.empty()) {
    if (!r.empty())
      throw Error("--apply-cgroups " + state.applyCgroups +
                  " cannot be combined with --cpus, --memory and the other limit flags: put them in the file");
    r = limits::parseCgroupsToml(readCheckedFile(state.applyCgroups, 1u << 20, "--apply-cgroups " + state.applyCgroups),
                                 state.applyCgroups);
  }
  if (!r.cpusetCpus.empty()) r.cpusetCpus = limits::formatIdList(limits::parseIdList(r.cpusetCpus, "--cpuset-cpus"));
  if (!r.cpusetMems.empty()) r.cpusetMems = limits::formatIdList(limits::parseIdList(r.cpusetMems, "--cpuset-mems"));
}

int runLaunch(RunCommandState& state) {
  auto& options = state.options;
  parseLimitFlags(state);
  if (!options.statsFile.empty()) {
    // Refused now, not after the run: the record is written beside the file and renamed.
    const auto dir = std::filesystem::absolute(options.statsFile).parent_path();
    if (::access(dir.c_str(), W_OK) != 0)
      throw Error("--stats " + options.statsFile + ": cannot write in " + dir.string() + " (" +
                  std::strerror(errno) + ")");
  }
  for (const auto& file : state.envFiles) {
    auto vars = launch::parseEnvFile(readEnvFile(file), file);
    options.envFileVars.insert(options.envFileVars.end(), vars.begin(), vars.end());
  }
  launch::LaunchPlan plan;
  {
    log::StepTimer timer("planning the launch");
    const auto policy = config::loadDefaultPolicy();
    const auto image = image::resolveImage(options.image);
    auto host = launch::discoverHost();
    if (!options.limits.empty() || !options.statsFile.empty() || !options.gpus.empty())
      host.limits = launch::discoverLimitsHost(host.user.uid, policy.cgroupDelegate);
    launch::discoverDevicesHost(host, options, policy);
    launch::discoverMpiHost(host, options, policy);
    plan = launch::planLaunch(options, policy, image, host);
  }
  for (const auto& warning : plan.warnings) spdlog::warn("{}", warning);
  if (state.explain) {
    if (state.json)
      std::cout << launch::toJson(plan).dump(2) << '\n';
    else
      std::cout << launch::toText(plan);
    return 0;
  }
  if (plan.supervised()) return runtime::run(plan);
  runtime::execute(plan);
}

// The launch options in CLI11 option groups (help sections). Grouped for speed too: CLI11
// checks every new option's names against each option of its App, so 51 options in one
// App cost 1275 comparisons, 0.8M instructions, 40% of a warm launch's user time
// (callgrind); in groups of at most 14 it is a fifth of that.
void addLaunchOptions(CLI::App* cmd, RunCommandState& s, launch::Command command) {
  auto& o = s.options;
  auto group = [cmd](const char* name) {
    auto* g = cmd->add_option_group(name);
    g->set_help_flag();  // a group inherits -h,--help: the command's own is the one
    return g;
  };
  auto* mounts = group("Mounts and working directory");
  auto* env = group("Environment");
  auto* dev = group("Host devices");
  auto* ns = group("Namespaces (the host's unless asked for)");
  auto* limits = group("Resource limits (a cgroup; cgroup v1 needs root)");
  if (command == launch::Command::Shell)
    cmd->add_option("-s,--shell", o.shell, "The shell to start (default /bin/bash --norc, else /bin/sh)");
  cmd->add_option("--app", o.app, "Run a SCIF app of the image (/scif/apps/NAME)");
  cmd->add_option("--stats", o.statsFile, "Write wall/CPU time, peak memory, I/O and exit status as JSON to FILE");
  cmd->add_flag("--explain", s.explain, "Print the launch plan and exit");
  cmd->add_flag("--json", s.json, "With --explain: print the plan as JSON");

  mounts->add_option("-B,--bind", o.binds, "Bind mount src[:dst[:ro|rw]] (repeatable, comma lists)")
      ->allow_extra_args(false);
  mounts->add_option("--mount", o.mounts, "Bind mount type=bind,source=SRC,destination=DST[,readonly] (repeatable)")
      ->allow_extra_args(false);
  mounts->add_option("-H,--home", o.home, "Home directory SRC[:DST] instead of $HOME");
  mounts->add_option("--pwd,--cwd", o.pwd, "Working directory inside the container (must exist)");
  mounts->add_option("-W,--workdir", o.workdir, "Host directory for /tmp and /var/tmp (with --contain) and --scratch");
  mounts->add_option("--scratch", o.scratch, "An empty writable directory at DIR (repeatable, comma lists)")
      ->allow_extra_args(false);
  mounts->add_flag("-c,--contain", o.contain, "No home, cwd or /tmp from the host");
  mounts->add_flag("-C,--containall", o.containAll, "--contain and --cleanenv");
  mounts->add_flag("--no-home", o.noHome, "Do not mount the home directory");
  mounts->add_flag("--writable-tmpfs", o.writableTmpfs, "Writable root (changes kept in memory)");

  env->add_option("--env", o.envs, "Set K=V in the container (repeatable)")->allow_extra_args(false);
  env->add_option("--env-file", s.envFiles, "Read K=V lines from a file (repeatable)")->allow_extra_args(false);
  env->add_option("--no-env", s.noEnv, "Do not pass these host variables (NAME[,NAME...])")->allow_extra_args(false);
  env->add_flag("--no-eval", o.noEval, "Do not shell-evaluate --env, --env-file and APPTAINERENV_ values");
  env->add_flag("-e,--cleanenv", o.cleanEnv, "Do not pass the host environment");

  dev->add_flag("--nv", o.nv, "The host's NVIDIA driver and GPUs (CDI spec for nvidia.com/gpu, else the ld.so cache)");
  dev->add_flag("--rocm", o.rocm, "The host's AMD GPU driver (CDI spec for amd.com/gpu, else the ld.so cache)");
  dev->add_option("--gpus", o.gpus, "Only these NVIDIA GPUs: all or a list of indices, e.g. 0,2 (implies --nv)");
  dev->add_flag("--rdma", o.rdma, "With --contain, bind /dev/infiniband too (InfiniBand/RoCE verbs, RDMA CM)");
  dev->add_option("--mpi", o.mpi, "bind: the site's MPI (ctr.conf 'mpi library') replaces the image's after an ABI "
                  "check; hybrid (default): the image's own MPI");
  dev->add_option("--device", o.devices, "A CDI device vendor.com/class=NAME, e.g. nvidia.com/gpu=all (repeatable)")
      ->allow_extra_args(false);

  ns->add_flag("-p,--pid", o.pid, "Own PID namespace (ctr's init is PID 1, the app PID 2)");
  ns->add_flag("-i,--ipc", o.ipc, "Own IPC namespace");
  ns->add_flag("--uts", o.uts, "Own UTS namespace");
  ns->add_option("--hostname", o.hostname, "Hostname in the container (own UTS namespace)");
  ns->add_flag("-n,--net", o.net, "Own network namespace: loopback only");
  ns->add_option("--network", o.network, "Network type: none (loopback only; implies --net)");

  limits->add_option("--cpus", s.cpus, "CPU time as a number of CPUs (CFS quota), e.g. 0.5");
  limits->add_option("--cpuset-cpus", o.limits.cpusetCpus, "CPUs the container may use, e.g. 0-3,8");
  limits->add_option("--cpuset-mems", o.limits.cpusetMems, "Memory nodes the container may use");
  limits->add_option("--memory", s.memory, "Memory limit, e.g. 512M or 4G");
  limits->add_option("--memory-swap", s.memorySwap, "Memory plus swap limit (-1: unlimited swap)");
  limits->add_option("--pids-limit", s.pidsLimit, "Most processes and threads at once");
  limits->add_option("--blkio-weight", s.blkioWeight, "Block I/O weight, 10 to 1000");
  limits->add_option("--apply-cgroups", s.applyCgroups, "Limits from an Apptainer cgroups TOML file");

  cmd->add_option("image", o.image, "SIF, squashfs image or directory")->required();
  cmd->add_option("args", o.args, "Command and arguments");
  // Everything after IMAGE belongs to the container command, dashes included.
  cmd->positionals_at_end();
  cmd->prefix_command();
}

void registerLaunchCommand(CLI::App& app, Context& ctx, const char* name, const char* help,
                           launch::Command command) {
  auto state = std::make_shared<RunCommandState>();
  state->options.command = command;
  auto* cmd = app.add_subcommand(name, help);
  addLaunchOptions(cmd, *state, command);
  cmd->callback([&ctx, state, cmd, name] {
    auto rest = cmd->remaining();
    auto& args = state->options.args;
    args.insert(args.end(), rest.begin(), rest.end());
    // Apptainer's rule: a `--` before IMAGE ends ctr's options; everything after IMAGE,
    // every `--` included, belongs to the command. CLI11 moves that first `--` to the end
    // of the command's arguments: take back as many trailing `--` as it added.
    const auto& raw = ctx.rawArgs;
    auto sub = std::find(raw.begin(), raw.end(), name);
    auto image = sub == raw.end() ? raw.end() : std::find(sub + 1, raw.end(), state->options.image);
    if (image != raw.end()) {
      const auto given = std::count(image + 1, raw.end(), std::string("--"));
      auto added = std::count(args.begin(), args.end(), std::string("--")) - given;
      while (added-- > 0 && !args.empty() && args.back() == "--") args.pop_back();
    }
    ctx.action = [state, cmd] {
      applyFlagVariables(cmd, *state);
      return runLaunch(*state);
    };
  });
}

}  // namespace

void registerExec(CLI::App& app, Context& ctx, std::string_view only) {
  auto wanted = [only](std::string_view name) { return only.empty() || only == name; };
  if (wanted("exec"))
    registerLaunchCommand(app, ctx, "exec", "Run a command in a container", launch::Command::Exec);
  if (wanted("run"))
    registerLaunchCommand(app, ctx, "run", "Run the image's runscript", launch::Command::Run);
  if (wanted("shell"))
    registerLaunchCommand(app, ctx, "shell", "Start a shell in a container", launch::Command::Shell);
  if (wanted("test"))
    registerLaunchCommand(app, ctx, "test", "Run the image's test script (%test)", launch::Command::Test);
  if (!wanted("__holder")) return;

  // Hidden: the shared image mount holder (contract in ctr/runtime.hpp).
  auto args = std::make_shared<runtime::HolderArgs>();
  auto* holder = app.add_subcommand("__holder", "")->group("");
  holder->add_option("--state", args->stateDir)->required();
  holder->add_option("--key", args->key)->required();
  holder->add_option("--driver", args->driver)->required();
  holder->add_option("--image", args->image)->required();
  holder->add_option("--offset", args->offset);
  holder->add_option("--size", args->size);
  holder->add_option("--linger-ms", args->lingerMs);
  holder->add_option("--premounted", args->premounted);
  holder->add_option("--ready-fd", args->readyFd)->required();
  holder->callback([&ctx, args] { ctx.action = [args] { return runtime::holderMain(*args); }; });
}

}  // namespace ctr::cli
