#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "ctr/error.hpp"
#include "ctr/launch.hpp"
#include "ctr/standard_streams.hpp"
#include "launch_memo.hpp"

namespace {

using Register = void (*)(CLI::App&, ctr::cli::Context&);

// Building CLI11's whole command tree costs more than the rest of a warm `ctr exec`
// together (callgrind: 1.25M of 1.6M instructions of `ctr version`), and one ctr starts per
// MPI rank: so only the command named on the line is registered. Help, typos and anything
// unexpected get the whole tree, so CLI11's messages stay complete.
std::string_view requestedCommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-v" || arg == "--verbose" || arg == "-d" || arg == "--debug" || arg == "-q" ||
        arg == "--quiet" || arg == "-s" || arg == "--silent" || arg == "--nocolor")
      continue;
    return arg.empty() || arg[0] == '-' ? std::string_view{} : arg;
  }
  return {};
}

void registerCommands(CLI::App& app, ctr::cli::Context& ctx, std::string_view command) {
  using namespace ctr::cli;
  static const std::pair<std::string_view, Register> single[] = {
      {"version", registerVersion}, {"sif", registerSif},         {"build", registerBuild},
      {"inspect", registerInspect}, {"check", registerCheck},     {"pull", registerPull},
      {"instance", registerInstance}, {"cache", registerCache},   {"run-help", registerRunHelp},
      {"overlay", registerOverlay}, {"registry", registerRegistry}, {"push", registerPush},
      {"store", registerStore},     {"verify", registerVerify},   {"sign", registerSign},
      {"__verify-fd", registerVerify}, {"key", registerKey},
  };
  if (command == "exec" || command == "run" || command == "shell" || command == "test" || command == "__holder") {
    registerExec(app, ctx, command);
    return;
  }
  for (const auto& [name, reg] : single) {
    if (command == name) {
      reg(app, ctx);
      return;
    }
  }
  registerVersion(app, ctx);
  registerExec(app, ctx);
  registerSif(app, ctx);
  registerBuild(app, ctx);
  registerPull(app, ctx);
  registerPush(app, ctx);
  registerInspect(app, ctx);
  registerCheck(app, ctx);
  registerInstance(app, ctx);
  registerCache(app, ctx);
  registerRunHelp(app, ctx);
  registerOverlay(app, ctx);
  registerRegistry(app, ctx);
  registerStore(app, ctx);
  registerVerify(app, ctx);
  registerSign(app, ctx);
  registerKey(app, ctx);
}

// Shows an option group (CLI::App::add_option_group, used for speed: exec_cmd.cpp) as a
// plain help section, "Name:" and its options, as an option's ->group() would.
class SectionFormatter : public CLI::Formatter {
 public:
  std::string make_expanded(const CLI::App* sub) const override {
    if (!sub->get_name().empty()) return CLI::Formatter::make_expanded(sub);
    return "\n" + make_group(sub->get_group(), false, sub->get_options());
  }
};

// Invoked through the `apptainer` or `singularity` link (argv[0]'s last component), ctr
// answers the version questions of tools that drive Apptainer in Apptainer's form.
bool invokedAsApptainer(const char* argv0) {
  std::string_view name = argv0 ? argv0 : "";
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  return name == "apptainer" || name == "singularity";
}

// A command line ctr does not understand: one line that names what was wrong, exit 1.
// Through the apptainer/singularity names in Apptainer's shape (`Error for command "exec":
// unknown flag: --x`), which wrappers written for Apptainer look for.
int usageError(const CLI::ParseError& e, std::string_view command, bool asApptainer) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // CLI11: "The following argument was not expected: --x" (or "arguments were ...: a b").
    const auto colon = what.find(": ");
    const std::string extras = colon == std::string::npos ? what : what.substr(colon + 2);
    what = (extras.starts_with("-") ? "unknown flag: " : "unexpected argument: ") + extras;
  }
  if (asApptainer) {
    std::cerr << "Error for command \"" << (command.empty() ? std::string_view("apptainer") : command)
              << "\": " << what << '\n';
  } else {
    const std::string name = command.empty() ? std::string() : std::string(command);
    std::cerr << "ctr: error: " << (name.empty() ? "" : name + ": ") << what << " (ctr "
              << (name.empty() ? "" : name + " ") << "--help lists the options)\n";
  }
  return 1;
}

// `ctr help [COMMAND [SUBCOMMAND]]`: the help of ctr or of one command, exit 0 (as
// `apptainer help`, which also takes `help instance start`).
int printHelp(const CLI::App& app, const std::vector<std::string>& helpFor) {
  const CLI::App* at = &app;
  std::string path = "ctr";
  for (const auto& name : helpFor) {
    const CLI::App* found = nullptr;
    for (const auto* sub : at->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == name) found = sub;
    if (found == nullptr) {
      std::cerr << "ctr: error: unknown command '" << (path == "ctr" ? "" : path.substr(4) + " ") << name
                << "' (ctr help" << (path == "ctr" ? "" : " " + path.substr(4)) << " lists the commands)\n";
      return 1;
    }
    at = found;
    path += " " + name;
  }
  if (at == &app) {
    std::cout << app.get_formatter()->make_help(&app, "ctr", CLI::AppFormatMode::Normal);
    return 0;
  }
  std::cout << at->help(path.substr(0, path.rfind(' ')));
  return 0;
}

void registerHelp(CLI::App& app, ctr::cli::Context& ctx, std::vector<std::string>& helpFor) {
  auto* help = app.add_subcommand("help", "Print the help of ctr or of a command");
  help->add_option("command", helpFor, "The command (and its subcommand)");
  help->callback([&app, &ctx, &helpFor] {
    ctx.action = [&app, &helpFor]() -> int { return printHelp(app, helpFor); };
  });
}

bool isRegistered(CLI::App& app, std::string_view command) {
  bool known = false;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    known = known || sub->get_name() == command;
  return known;
}

struct GlobalFlags {
  bool verbose = false;
  bool debug = false;
  bool quiet = false;
  bool noColor = false;
};

void addGlobalFlags(CLI::App& app, GlobalFlags& flags) {
  app.add_flag("-v,--verbose", flags.verbose, "Print what ctr does");
  app.add_flag("-d,--debug", flags.debug, "Print every step and its duration");
  app.add_flag("-q,--quiet", flags.quiet, "Print errors only");
  // Apptainer's global flags, so scripts written for it run unchanged: --silent is --quiet
  // (ctr's warnings are its only other output), and ctr never colours its output.
  app.add_flag("-s,--silent", flags.quiet, "Same as --quiet");
  app.add_flag("--nocolor", flags.noColor, "Accepted for Apptainer's scripts (ctr prints no colour)");
}

// Apptainer's APPTAINER_DEBUG / APPTAINER_VERBOSE and SINGULARITY_ ones (flag variables:
// a flag on the line wins).
ctr::log::Verbosity verbosity(GlobalFlags flags) {
  auto flagVariable = [](const char* name) {
    const char* value = std::getenv(name);
    const std::string v = value ? value : "";
    return v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True";
  };
  for (const char* name : {"APPTAINER_DEBUG", "SINGULARITY_DEBUG"})
    if (!flags.debug && flagVariable(name)) flags.debug = true;
  for (const char* name : {"APPTAINER_VERBOSE", "SINGULARITY_VERBOSE"})
    if (!flags.verbose && !flags.quiet && flagVariable(name)) flags.verbose = true;
  return flags.debug     ? ctr::log::Verbosity::Debug
         : flags.verbose ? ctr::log::Verbosity::Verbose
         : flags.quiet   ? ctr::log::Verbosity::Quiet
                         : ctr::log::Verbosity::Normal;
}

// The command's action; an error is one line on stderr and its exit status.
int runAction(const ctr::cli::Context& ctx) {
  using namespace ctr;
  try {
    return ctx.action ? ctx.action() : 0;
  } catch (const Error& e) {
    std::fflush(stdout);
    initStandardStreams();  // a kept plan's launch has not made them
    std::cerr << (e.status() == 0 ? "ctr: " : "ctr: error: ") << e.oneLine() << '\n';
    return e.status();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    initStandardStreams();
    std::cerr << "ctr: error: " << e.what() << '\n';
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ctr;
  // A launch whose plan is kept (launch_memo.hpp) runs it without parsing or planning.
  const std::string_view command = requestedCommand(argc, argv);
  std::optional<cli::LaunchMemo> memo;
  std::optional<cli::LaunchMemo::Kept> kept;
  if (command == "exec" || command == "run" || command == "shell" || command == "test") {
    memo = cli::LaunchMemo::of(argc, argv);
    if (memo) kept = memo->find();
    if (kept && !memo->checking()) {
      log::init(kept->verbosity);
      spdlog::debug("launch memo: the plan kept in {}", memo->file());
      cli::Context ctx;
      ctx.action = [&kept] { return cli::runPlan(kept->plan); };
      return runAction(ctx);
    }
  }
  // Everything but a kept plan's launch may print through the standard streams (CLI11 does).
  initStandardStreams();
  CLI::App app{"ctr: a container runtime for HPC clusters", "ctr"};
  app.formatter(std::make_shared<SectionFormatter>());  // before the commands: they inherit it
  app.require_subcommand(1);
  app.fallthrough();
  GlobalFlags flags;
  addGlobalFlags(app, flags);

  cli::Context ctx;
  ctx.rawArgs.assign(argv + 1, argv + argc);
  ctx.asApptainer = invokedAsApptainer(argv[0]);
  app.set_version_flag("--version", cli::versionFlagText(ctx), "Print the ctr version");

  ctx.memo = memo ? &*memo : nullptr;
  ctx.keptPlan = kept ? &kept->plan : nullptr;
  registerCommands(app, ctx, command);
  std::vector<std::string> helpFor;
  registerHelp(app, ctx, helpFor);
  // A command line ctr does not understand is a usage error: exit 1 and say what was wrong
  // (failures of a container launch keep 255).
  if (!command.empty() && command != "help" && !isRegistered(app, command)) {
    std::cerr << "ctr: error: unknown command '" << command << "' (ctr help lists the commands)\n";
    return 1;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return usageError(e, command, ctx.asApptainer);
  }
  ctx.verbosity = verbosity(flags);
  log::init(ctx.verbosity);
  return runAction(ctx);
}
