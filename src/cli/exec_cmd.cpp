// ctr exec | run | shell, and the hidden `__holder` entry of the shared image mount.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
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
#include "ctr/instance.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/launch.hpp"
#include "ctr/limits.hpp"
#include "ctr/log.hpp"
#include "ctr/option_filter.hpp"
#include "ctr/runtime.hpp"
#include "ctr/standard_streams.hpp"
#include "ctr/strings.hpp"
#include "launch_memo.hpp"

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
  bool joinInfo = false;  // instance start --join-info
  // -u/--userns (APPTAINER_USERNS): Apptainer's request for a user namespace, which every
  // ctr container has; accepted so that scripts and cwltool's probe of it run unchanged.
  bool userns = false;
  std::vector<std::string> noEnv;  // --no-env NAME[,NAME...]
  std::vector<std::string> overlays;  // --overlay PATH[:ro] (repeatable, comma lists)
  bool stage = false, noStage = false;  // --stage, --no-stage (options.stage)
  bool compat = false;       // --compat: Apptainer's OCI-compatibility set of options
  bool underlay = false;     // --underlay: accepted (ctr makes missing mount targets in an underlay already)
  bool sharens = false;      // --sharens: accepted (one image's launches share its holder's namespaces)
  std::string pidFile;       // instance start --pid-file FILE
};

// Apptainer's flag variables in the environment, collected in one pass: a launch asks for
// some 30 keys, and a getenv per spelling scanned the whole environment 60 times.
struct FlagVariable {
  std::string name, value;
};
class FlagVariables {
 public:
  FlagVariables() {
    for (char** e = environ; e && *e; ++e) {
      std::string_view kv = *e;
      const size_t eq = kv.find('=');
      if (eq != std::string_view::npos && (kv.starts_with("APPTAINER_") || kv.starts_with("SINGULARITY_")))
        vars_.push_back({std::string(kv.substr(0, eq)), std::string(trim(kv.substr(eq + 1)))});
    }
  }
  // APPTAINER_<KEY>, then SINGULARITY_<KEY>, for each key in order: the first non-blank one.
  std::optional<FlagVariable> find(std::initializer_list<const char*> keys) const {
    for (const char* key : keys) {
      for (std::string_view prefix : {"APPTAINER_", "SINGULARITY_"}) {
        for (const auto& v : vars_)
          if (!v.value.empty() && v.name.size() == prefix.size() + std::strlen(key) &&
              v.name.starts_with(prefix) && v.name.ends_with(key))
            return v;
      }
    }
    return std::nullopt;
  }

 private:
  std::vector<FlagVariable> vars_;
};

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
  const FlagVariables variables;
  auto flagVariable = [&variables](std::initializer_list<const char*> keys) { return variables.find(keys); };
  // One pass over the options (CLI11's lookup by name compares against every option: a
  // few dozen lookups were a tenth of a launch's instructions). Only the options the line
  // names are registered (OptionFilter): the others were not given.
  std::set<std::string, std::less<>> givenNames;
  auto collect = [&](const CLI::App* app) {
    for (const CLI::Option* opt : app->get_options()) {
      if (opt->count() == 0) continue;
      for (const auto& name : opt->get_lnames()) givenNames.insert("--" + name);
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
                        BoolFlag{"--writable", &o.writable, {"WRITABLE"}},
                        BoolFlag{"--no-eval", &o.noEval, {"NO_EVAL"}}, BoolFlag{"--pid", &o.pid, {"PID", "UNSHARE_PID"}},
                        BoolFlag{"--ipc", &o.ipc, {"IPC", "UNSHARE_IPC"}}, BoolFlag{"--uts", &o.uts, {"UTS", "UNSHARE_UTS"}},
                        BoolFlag{"--net", &o.net, {"NET", "UNSHARE_NET"}}, BoolFlag{"--nv", &o.nv, {"NV"}},
                        BoolFlag{"--no-pid", &o.noPid, {"NO_PID"}}, BoolFlag{"--no-init", &o.noInit, {"NO_INIT"}},
                        BoolFlag{"--rocm", &o.rocm, {"ROCM"}}, BoolFlag{"--fakeroot", &o.fakeroot, {"FAKEROOT"}}, BoolFlag{"--userns", &s.userns, {"USERNS", "UNSHARE_USERNS"}}}) {
    if (given(f.option)) continue;
    if (auto v = flagVariable(f.keys)) *f.target = parseFlagBool(*v);
  }
  struct StringFlag { const char* option; std::string* target; std::initializer_list<const char*> keys; };
  for (const auto& f : {StringFlag{"--home", &o.home, {"HOME"}}, StringFlag{"--pwd", &o.pwd, {"PWD", "TARGET_PWD", "CWD", "TARGET_CWD"}},
                        StringFlag{"--workdir", &o.workdir, {"WORKDIR"}}, StringFlag{"--app", &o.app, {"APP", "APPNAME"}},
                        StringFlag{"--shell", &o.shell, {"SHELL"}}, StringFlag{"--hostname", &o.hostname, {"HOSTNAME"}},
                        StringFlag{"--network", &o.network, {"NETWORK"}}}) {
    if (given(f.option) || (f.target == &o.pwd && given("--cwd"))) continue;
    if (f.target == &o.shell && o.command != launch::Command::Shell) continue;  // only `shell` has --shell
    if (auto v = flagVariable(f.keys)) *f.target = v->value;
  }
  if (!given("--no-env"))
    if (auto v = flagVariable({"NOENV"})) s.noEnv.push_back(v->value);
  if (!given("--no-mount"))
    if (auto v = flagVariable({"NO_MOUNT"})) o.noMount.push_back(v->value);
  if (!given("--scratch"))
    if (auto v = flagVariable({"SCRATCH", "SCRATCHDIR"})) o.scratch.push_back(v->value);
  if (!given("--env-file"))
    if (auto v = flagVariable({"ENV_FILE"})) s.envFiles.push_back(v->value);
  if (!given("--overlay"))
    if (auto v = flagVariable({"OVERLAY", "OVERLAYIMAGE"})) s.overlays.push_back(v->value);
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

// instance start --join-info: how to join it, against this process's environment.
void printJoinInfo(const launch::InstanceRecord& record) {
  std::vector<std::string> caller;
  for (char** e = environ; e && *e; ++e) caller.emplace_back(*e);
  std::cout << launch::instanceJoinInfo(record, caller) << std::flush;
}

// What instance start reports of the instance it started, or (--reuse) took running:
// --pid-file's keeper pid, --join-info's lines.
void reportInstance(const RunCommandState& state, const launch::InstanceRecord& record) {
  if (!state.pidFile.empty()) writeFile(state.pidFile, std::to_string(record.keeper) + "\n");
  if (state.joinInfo) printJoinInfo(record);
}

// The plan explained, or run: as the app (execute), supervised (run), or as an instance.
int finishLaunch(const RunCommandState& state, const launch::LaunchPlan& plan) {
  if (!state.explain && !plan.instance) return runPlan(plan);
  for (const auto& warning : plan.warnings) spdlog::warn("{}", warning);
  if (state.explain) {
    if (state.json)
      std::cout << launch::toJson(plan).dump(2) << '\n';
    else
      std::cout << launch::toText(plan);
    return 0;
  }
  // Once the record is written; with --stay, by this process as it becomes the keeper
  // (in the container: --pid-file is refused with it), which then closes its output.
  runtime::startInstance(plan, [&state](const launch::InstanceRecord& record) { reportInstance(state, record); });
  return 0;
}

// exec|run|shell instance://NAME: the plan of a launch into the running instance NAME.
launch::LaunchPlan planIntoInstance(const launch::LaunchOptions& options, const config::Policy& policy,
                                    const std::string& name) {
  log::StepTimer looking("looking at the host");
  const auto host = host::discoverHost();
  const auto record = runtime::findInstance(host.stateDir, name);
  if (!record)
    throw Error("no instance " + name + " is running (`ctr instance list` shows those that are)");  // 255, as Apptainer
  looking.stop();
  image::ImageSource image;
  image.path = record->image;
  try {
    image = image::resolveImage(record->image);  // its SIF environment object, its kind
  } catch (const Error& e) {
    spdlog::debug("the image of instance {}: {}", name, e.oneLine());
  }
  log::StepTimer deciding("deciding the plan");
  return launch::planJoin(options, policy, *record, image, host);
}

// instance start: NAME from the arguments, and what it refuses. With --reuse, a running NAME
// of this image (a Slurm job's named container, joined by its next step) is taken before
// any planning, which it does not need: returns true then. Else the start looks again under
// the instance's lock.
bool takeInstanceName(RunCommandState& state) {
  auto& options = state.options;
  if (options.args.empty())
    throw Error("instance start: no instance name (usage: ctr instance start [options] IMAGE NAME [ARGS...])")
        .withStatus(1);
  options.instance = options.args.front();
  options.args.erase(options.args.begin());
  if (options.reuseInstance && !state.explain) {
    if (!launch::isValidInstanceName(options.instance)) (void)launch::planInstanceFiles(options.instance, "");
    const auto host = host::discoverHost();
    const auto running = runtime::findInstance(host.stateDir, options.instance);
    if (running && running->image == std::filesystem::absolute(options.image).string()) {
      reportInstance(state, *running);  // as a start would
      return true;
    }
  }
  if (options.stayAsKeeper && !state.pidFile.empty())
    throw Error("instance start: --pid-file with --stay: the keeper is this ctr process, whose pid its caller has")
        .withStatus(1);
  if (!options.statsFile.empty())
    throw Error("instance start: --stats records one run; an instance's figures are `ctr instance stats NAME`")
        .withStatus(1);
  return false;
}

// The options the flags imply (--compat, --stage), and the files the flags name read:
// --env-file's; --stats' directory checked now, not after the run (the record is written
// beside the file and renamed).
void completeOptions(RunCommandState& state) {
  auto& options = state.options;
  parseLimitFlags(state);
  if (state.stage && state.noStage) throw Error("--stage and --no-stage contradict each other: give one").withStatus(1);
  if (state.compat) {
    // Apptainer's --compat: a container that behaves like Docker's/OCI runtimes'.
    options.containAll = true;
    options.noInit = true;
    options.noUmask = true;
    options.noEval = true;
    options.writableTmpfs = !options.writable && options.overlays.empty() && state.overlays.empty();
  }
  if (state.stage || state.noStage) options.stage = state.stage;
  if (!options.statsFile.empty()) {
    const auto dir = std::filesystem::absolute(options.statsFile).parent_path();
    if (::access(dir.c_str(), W_OK) != 0)
      throw Error("--stats " + options.statsFile + ": cannot write in " + dir.string() + " (" +
                  std::strerror(errno) + ")");
  }
  if (!state.overlays.empty()) {
    const std::string cwd = std::filesystem::current_path().string();
    for (const auto& list : state.overlays)
      for (auto item : splitList(list))
        if (!item.empty()) options.overlays.push_back(launch::parseOverlaySpec(std::string(item), cwd));
  }
  for (const auto& list : state.envFiles)
    for (auto item : splitList(list)) {  // a comma list, as Apptainer's
      if (item.empty()) continue;
      const std::string file(item);
      auto vars = launch::parseEnvFile(readEnvFile(file), file, launch::EnvFileQuoting::Shell);
      options.envFileVars.insert(options.envFileVars.end(), vars.begin(), vars.end());
    }
}

// The plan of a launch of an image: the caller's facts, the planner's needs of the node
// (launch::needsOf) probed by the host module, then the planner; kept in the launch memo
// where it allows.
launch::LaunchPlan planImageLaunch(const RunCommandState& state, const config::Policy& policy,
                                   log::StepTimer& reading, const Context& ctx) {
  const auto& options = state.options;
  const auto image = resolveImageArgument(options.image, policy.pull, options.lazy);
  reading.stop();
  log::StepTimer looking("looking at the host");
  auto host = host::discoverHost();
  const auto needs = launch::needsOf(options, image, policy, host);
  if (ctx.memo) ctx.memo->beforeLooking(host::deviceInputFiles(needs.devices, policy, host));
  host::discoverNeeds(host, needs, policy);
  looking.stop();
  log::StepTimer deciding("deciding the plan");
  auto plan = launch::planLaunch(options, policy, image, host);
  if (ctx.memo && !state.explain) {
    const bool outside =
        !state.envFiles.empty() || !state.overlays.empty() || !options.statsFile.empty() || options.lazy;
    ctx.memo->afterPlanning(plan, {policy, image, host, needs, outside}, ctx.verbosity, ctx.keptPlan);
  }
  return plan;
}

int runLaunch(RunCommandState& state, const Context& ctx) {
  auto& options = state.options;
  if (options.command == launch::Command::Instance && takeInstanceName(state)) return 0;
  completeOptions(state);
  launch::LaunchPlan plan;
  {
    log::StepTimer timer("planning the launch");
    if (ctx.memo) ctx.memo->beforePlanning(options.image);
    log::StepTimer reading("reading ctr.conf and the image");
    const auto policy = config::loadDefaultPolicy();
    if (auto instance = launch::instanceReference(options.image)) {
      reading.stop();
      plan = planIntoInstance(options, policy, *instance);
    } else {
      plan = planImageLaunch(state, policy, reading, ctx);
    }
  }
  return finishLaunch(state, plan);
}

// Adds the options that an OptionFilter wants to a command, in CLI11 option groups (help
// sections) made when their first option comes. Grouped for speed too: CLI11 checks every
// new option's names against each option of its App, so 51 options in one App cost 1275
// comparisons, 0.8M instructions (callgrind); in groups of at most 14 it is a fifth of that.
class OptionAdder {
 public:
  OptionAdder(CLI::App* cmd, const OptionFilter& filter) : cmd_(cmd), filter_(filter) {}

  // The options added next go into the group `name` (nullptr: the command itself).
  void section(const char* name) {
    name_ = name;
    group_ = nullptr;
  }
  template <typename T>
  void option(const char* names, T& target, const char* help) {
    if (filter_.wants(names)) where()->add_option(names, target, help);
  }
  // A repeatable option: each occurrence takes one value (`-B a -B b`, not `-B a b`).
  void list(const char* names, std::vector<std::string>& target, const char* help) {
    if (filter_.wants(names)) where()->add_option(names, target, help)->allow_extra_args(false);
  }
  void flag(const char* names, bool& target, const char* help) {
    if (filter_.wants(names)) where()->add_flag(names, target, help);
  }

 private:
  CLI::App* where() {
    if (!name_) return cmd_;
    if (!group_) {
      group_ = cmd_->add_option_group(name_);
      group_->set_help_flag();  // a group inherits -h,--help: the command's own is the one
    }
    return group_;
  }

  CLI::App* cmd_;
  const OptionFilter& filter_;
  const char* name_ = nullptr;
  CLI::Option_group* group_ = nullptr;
};

// The command's own options: what it runs and reports, instance start's.
void addCommandOptions(OptionAdder& add, RunCommandState& s, launch::Command command) {
  auto& o = s.options;
  if (command == launch::Command::Shell)
    add.option("-s,--shell", o.shell, "The shell to start (default /bin/bash --norc, else /bin/sh)");
  add.option("--app", o.app, "Run a SCIF app of the image (/scif/apps/NAME)");
  add.option("--stats", o.statsFile, "Write wall/CPU time, peak memory, I/O and exit status as JSON to FILE (not for "
             "instance start/run: ctr instance stats NAME)");
  add.flag("--explain", s.explain, "Print the launch plan and exit");
  add.flag("--json", s.json, "With --explain: print the plan as JSON");
  if (command == launch::Command::Instance) {
    add.flag("--join-info", s.joinInfo, "Print how to join the started instance from outside ctr (key=value lines, "
             "for the Slurm plugin)");
    add.flag("--reuse", o.reuseInstance, "If NAME already runs with this image, take it as it is (no error)");
    add.option("--pid-file", s.pidFile, "Write the instance's process id (its init, as the host sees it) to FILE "
               "(with --reuse, the running instance's)");
    add.flag("--no-startscript", o.noStartscript,
             "Run nothing in the instance until a launch joins it (not the image's startscript, nor, for "
             "instance run, its runscript)");
    add.flag("--stay", o.stayAsKeeper,
             "With --no-pid: this ctr keeps the instance itself (no forked keeper): once it is ready, ctr prints "
             "the join information (with --join-info), closes its output and stays, for a caller that reaps it (the "
             "Slurm plugin)");
  }
}

void addMountOptions(OptionAdder& add, RunCommandState& s) {
  auto& o = s.options;
  add.section("Mounts and working directory");
  add.list("-B,--bind", o.binds, "Bind mount src[:dst[:ro|rw]] (repeatable, comma lists)");
  add.list("--mount", o.mounts, "Bind mount type=bind,source=SRC,destination=DST[,readonly] (repeatable)");
  add.option("-H,--home", o.home, "Home directory SRC[:DST] instead of $HOME");
  add.option("--pwd,--cwd", o.pwd, "Working directory inside the container (must exist)");
  add.flag("--image-workdir", o.imageWorkdir, "Start in the image's WORKDIR where it records one (ctr pull and build "
           "record an OCI image's), as Docker and pyxis do; else in --pwd or the usual directory");
  add.flag("--lazy", o.lazy, "An oras:// image pushed by ctr push: fetch its chunks as they are read, each checked "
           "against the image's chunk table, into this node's cache (/var/tmp/ctr-lazy-UID), instead of pulling it whole");
  add.option("-W,--workdir", o.workdir, "Host directory for /tmp, /var/tmp and the home (WORKDIR/home) with "
             "--contain, and for --scratch");
  add.list("--scratch", o.scratch, "An empty writable directory at DIR (repeatable, comma lists)");
  add.flag("-c,--contain", o.contain, "A minimal /dev, and no home, cwd, /tmp or /var/tmp from the host");
  add.flag("-C,--containall", o.containAll, "--contain and --cleanenv, with own PID and IPC namespaces");
  add.flag("--no-home", o.noHome, "Do not mount the home directory");
  add.list("--no-mount", o.noMount,
           "Leave out default mounts: proc, sys, dev (a minimal /dev instead of the host's), devpts (of a "
           "minimal /dev), home, tmp, hostfs, cwd, bind-paths, or a default or site bind's destination (comma lists)");
  add.flag("--writable-tmpfs", o.writableTmpfs, "Writable root (changes kept in memory)");
  add.flag("-w,--writable", o.writable, "A sandbox directory image read-write, or a SIF's overlay partition (changes kept in it)");
  add.list("--overlay", s.overlays,
           "Stacked over the image: a directory DIR (changes kept in DIR/upper) or an ext3 image, writable (at "
           "most one) or with :ro, or a squashfs or SIF image, read-only (repeatable, comma lists; the first given is "
           "on top)");
  add.flag("--stage", s.stage, "Copy the image and dataset images to this node's stage directory first (ctr.conf "
           "'stage dir'), once per node, and mount the copies");
  add.flag("--no-stage", s.noStage, "Mount the images where they are, whatever ctr.conf's 'stage images' says");
  add.flag("--underlay", s.underlay, "Accepted for Apptainer's scripts: ctr makes a mount target the image lacks in "
           "an underlay already (an overlay of that one directory when it has over 64 entries)");
}

void addEnvironmentAndDeviceOptions(OptionAdder& add, RunCommandState& s) {
  auto& o = s.options;
  add.section("Environment");
  add.list("--env", o.envs, "Set K=V in the container (repeatable)");
  add.list("--env-file", s.envFiles, "Read K=V lines from a file (repeatable, comma lists)");
  add.list("--no-env", s.noEnv, "Do not pass these host variables (NAME[,NAME...])");
  add.flag("--no-eval", o.noEval, "Do not shell-evaluate --env, --env-file and APPTAINERENV_ values");
  add.flag("-e,--cleanenv", o.cleanEnv, "Do not pass the host environment, but TERM, the proxy variables and the "
           "MPI and Slurm wiring (OMPI_, PMIX_, PMI_, SLURM_); LANG=C");
  add.flag("--image-env-first", o.imageEnvFirst, "The image's variables win over the host's (pyxis's rule): its scripts "
           "run without the host's, which come back where they set nothing (MPI and Slurm variables stay)");
  add.flag("--no-umask", o.noUmask, "Start the app with umask 0022, not yours");
  add.flag("--compat", s.compat, "As Docker/OCI runtimes do: --containall, --no-init, --no-umask, --no-eval, "
           "--writable-tmpfs (not for instances, whose PID 1 is ctr's keeper)");

  add.section("Host devices");
  add.flag("--nv", o.nv, "The host's NVIDIA driver and GPUs (CDI spec for nvidia.com/gpu, else the ld.so cache)");
  add.flag("--rocm", o.rocm, "The host's AMD GPU driver (CDI spec for amd.com/gpu, else the ld.so cache)");
  add.option("--gpus", o.gpus, "Only these NVIDIA GPUs: all or a list of indices, e.g. 0,2 (implies --nv)");
  add.flag("--rdma", o.rdma, "With --contain, bind /dev/infiniband too (InfiniBand/RoCE verbs, RDMA CM)");
  add.option("--mpi", o.mpi, "bind: the site's MPI (ctr.conf 'mpi library') replaces the image's after an ABI "
             "check; hybrid (default): the image's own MPI");
  add.list("--device", o.devices, "A CDI device vendor.com/class=NAME, e.g. nvidia.com/gpu=all (repeatable)");
}

void addNamespaceAndLimitOptions(OptionAdder& add, RunCommandState& s) {
  auto& o = s.options;
  add.section("Namespaces (the host's unless asked for)");
  add.flag("--sharens", s.sharens, "Accepted for Apptainer's scripts: your launches of one image on a node share "
           "its holder's user and mount namespaces, and the host's others, either way");
  add.flag("-u,--userns", s.userns, "Accepted for Apptainer's scripts: every ctr container has its own user namespace");
  add.flag("-f,--fakeroot", o.fakeroot, "Be root in the container (your uid, and your /etc/subuid range if you have "
           "one, mapped to root and up); the image's files are root's, so an --overlay can take changes to them");
  add.flag("--ignore-subuid", o.ignoreSubuid, "With --fakeroot: map only your own id to root, not your /etc/subuid "
           "range");
  add.flag("-p,--pid", o.pid, "Own PID namespace (ctr's init is PID 1, the app PID 2)");
  add.flag("--no-pid", o.noPid, "No own PID namespace, whatever --pid, --containall or instance start ask");
  add.flag("--no-init", o.noInit, "In an own PID namespace, the app is PID 1 (no ctr init: it gets only the "
           "signals it handles and reaps what it leaves; not for instances)");
  add.flag("-i,--ipc", o.ipc, "Own IPC namespace");
  add.flag("--uts", o.uts, "Own UTS namespace");
  add.option("--hostname", o.hostname, "Hostname in the container (own UTS namespace)");
  add.flag("-n,--net", o.net, "Own network namespace: loopback only");
  add.option("--network", o.network, "Network type: none (loopback only; implies --net)");

  add.section("Resource limits (a cgroup; cgroup v1 needs root)");
  add.option("--cpus", s.cpus, "CPU time as a number of CPUs (CFS quota), e.g. 0.5");
  add.option("--cpuset-cpus", o.limits.cpusetCpus, "CPUs the container may use, e.g. 0-3,8");
  add.option("--cpuset-mems", o.limits.cpusetMems, "Memory nodes the container may use");
  add.option("--memory", s.memory, "Memory limit, e.g. 512M or 4G");
  add.option("--memory-swap", s.memorySwap, "Memory plus swap limit (-1: unlimited swap)");
  add.option("--pids-limit", s.pidsLimit, "Most processes and threads at once");
  add.option("--blkio-weight", s.blkioWeight, "Block I/O weight, 10 to 1000");
  add.option("--apply-cgroups", s.applyCgroups, "Limits from an Apptainer cgroups TOML file");
}

void addLaunchOptions(CLI::App* cmd, RunCommandState& s, launch::Command command, const OptionFilter& filter) {
  auto& o = s.options;
  OptionAdder add(cmd, filter);
  addCommandOptions(add, s, command);
  addMountOptions(add, s);
  addEnvironmentAndDeviceOptions(add, s);
  addNamespaceAndLimitOptions(add, s);
  cmd->add_option("image", o.image, "SIF, squashfs image or directory")->required();
  if (command == launch::Command::Instance)
    cmd->add_option("name_and_args", o.args, "The instance's name, then the arguments of its startscript (runscript)");
  else
    cmd->add_option("args", o.args, command == launch::Command::Exec ? "Command and arguments" : "Arguments");
  // Everything after IMAGE belongs to the container command, dashes included.
  cmd->positionals_at_end();
  cmd->prefix_command();
}

// `parsed`: this is the command on the line, so it gets only the options the line names.
void registerLaunchCommand(CLI::App& app, Context& ctx, const char* name, const char* help,
                           launch::Command command, bool parsed) {
  auto state = std::make_shared<RunCommandState>();
  state->options.command = command;
  state->options.instanceRunscript = command == launch::Command::Instance && std::string_view(name) == "run";
  auto* cmd = app.add_subcommand(name, help);
  OptionFilter filter;
  if (parsed) {
    const auto& raw = ctx.rawArgs;
    auto at = std::find(raw.begin(), raw.end(), name);
    filter = OptionFilter(std::vector<std::string>(at == raw.end() ? raw.end() : at + 1, raw.end()));
  }
  addLaunchOptions(cmd, *state, command, filter);
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
    ctx.action = [state, cmd, &ctx] {
      applyFlagVariables(cmd, *state);
      return runLaunch(*state, ctx);
    };
  });
}

}  // namespace

int runPlan(const launch::LaunchPlan& plan) {
  for (const auto& warning : plan.warnings) spdlog::warn("{}", warning);
  if (plan.supervised()) return runtime::run(plan);
  runtime::execute(plan);
}

void registerInstanceStart(CLI::App& instance, Context& ctx, bool parsed, bool runParsed) {
  registerLaunchCommand(instance, ctx, "start",
                        "Start a named instance of an image (IMAGE NAME [ARGS...]): its startscript runs, "
                        "and the container stays until `ctr instance stop`",
                        launch::Command::Instance, parsed);
  registerLaunchCommand(instance, ctx, "run",
                        "Start a named instance of an image (IMAGE NAME [ARGS...]) that runs its runscript, "
                        "and stays until `ctr instance stop`",
                        launch::Command::Instance, runParsed);
}

void registerExec(CLI::App& app, Context& ctx, std::string_view only) {
  auto wanted = [only](std::string_view name) { return only.empty() || only == name; };
  if (wanted("exec"))
    registerLaunchCommand(app, ctx, "exec", "Run a command in a container", launch::Command::Exec, only == "exec");
  if (wanted("run"))
    registerLaunchCommand(app, ctx, "run", "Run the image's runscript", launch::Command::Run, only == "run");
  if (wanted("shell"))
    registerLaunchCommand(app, ctx, "shell", "Start a shell in a container", launch::Command::Shell, only == "shell");
  if (wanted("test"))
    registerLaunchCommand(app, ctx, "test", "Run the image's test script (%test)", launch::Command::Test, only == "test");
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
  holder->add_flag("--linger-unless-overlaid", args->lingerUnlessOverlaid);
  holder->add_option("--premounted", args->premounted);
  holder->add_option("--server", args->server);
  holder->add_option("--lazy-spec", args->lazySpec);
  holder->add_option("--dataset", args->datasets);
  holder->add_option("--premounted-dataset", args->premountedDatasets);
  holder->add_option("--uid-map", args->uidMap);
  holder->add_option("--gid-map", args->gidMap);
  holder->add_option("--newuidmap", args->newuidmap);
  holder->add_option("--newgidmap", args->newgidmap);
  holder->add_option("--ready-fd", args->readyFd)->required();
  holder->callback([&ctx, args] { ctx.action = [args] { return runtime::holderMain(*args); }; });
}

}  // namespace ctr::cli
