// ctr exec | run | shell, and the hidden `__holder` entry of the shared image mount.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/launch.hpp"
#include "ctr/runtime.hpp"

namespace ctr::cli {

namespace {

struct RunCommandState {
  launch::LaunchOptions options;
  std::vector<std::string> envFiles;
  bool explain = false;
  bool json = false;
};

// An --env-file: a regular file or a pipe (`--env-file <(...)`), at most 1 MiB (more could
// not be passed to execve anyway); /dev/zero or a directory is refused by name.
std::string readEnvFile(const std::string& path) {
  return readCheckedFile(path, 1u << 20, "--env-file " + path, PipesAllowed::Yes);
}

int runLaunch(RunCommandState& state) {
  auto& options = state.options;
  for (const auto& file : state.envFiles) {
    auto vars = launch::parseEnvFile(readEnvFile(file), file);
    options.envFileVars.insert(options.envFileVars.end(), vars.begin(), vars.end());
  }
  launch::LaunchPlan plan;
  {
    log::StepTimer timer("planning the launch");
    const auto policy = config::loadDefaultPolicy();
    const auto image = image::resolveImage(options.image);
    plan = launch::planLaunch(options, policy, image, launch::discoverHost());
  }
  if (state.explain) {
    if (state.json)
      std::cout << launch::toJson(plan).dump(2) << '\n';
    else
      std::cout << launch::toText(plan);
    return 0;
  }
  runtime::execute(plan);
}

void addLaunchOptions(CLI::App* cmd, RunCommandState& s) {
  auto& o = s.options;
  cmd->add_option("-B,--bind", o.binds, "Bind mount src[:dst[:ro|rw]] (repeatable, comma lists)")
      ->allow_extra_args(false);
  cmd->add_option("--env", o.envs, "Set K=V in the container (repeatable)")->allow_extra_args(false);
  cmd->add_option("--env-file", s.envFiles, "Read K=V lines from a file (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("-H,--home", o.home, "Home directory SRC[:DST] instead of $HOME");
  cmd->add_option("--pwd", o.pwd, "Working directory inside the container");
  cmd->add_flag("-c,--contain", o.contain, "No home, cwd or /tmp from the host");
  cmd->add_flag("-C,--containall", o.containAll, "--contain and --cleanenv");
  cmd->add_flag("-e,--cleanenv", o.cleanEnv, "Do not pass the host environment");
  cmd->add_flag("--no-home", o.noHome, "Do not mount the home directory");
  cmd->add_flag("--writable-tmpfs", o.writableTmpfs, "Writable root (changes kept in memory)");
  cmd->add_flag("--explain", s.explain, "Print the launch plan and exit");
  cmd->add_flag("--json", s.json, "With --explain: print the plan as JSON");
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
  addLaunchOptions(cmd, *state);
  cmd->callback([&ctx, state, cmd] {
    auto rest = cmd->remaining();
    state->options.args.insert(state->options.args.end(), rest.begin(), rest.end());
    ctx.action = [state] { return runLaunch(*state); };
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
    registerLaunchCommand(app, ctx, "shell", "Start /bin/sh in a container", launch::Command::Shell);
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
