#include <cstdio>
#include <iostream>
#include <string_view>
#include <utility>

#include "commands.hpp"
#include "ctr/error.hpp"

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
        arg == "--quiet")
      continue;
    return arg.empty() || arg[0] == '-' ? std::string_view{} : arg;
  }
  return {};
}

void registerCommands(CLI::App& app, ctr::cli::Context& ctx, std::string_view command) {
  using namespace ctr::cli;
  static const std::pair<std::string_view, Register> single[] = {
      {"version", registerVersion}, {"sif", registerSif},         {"build", registerBuild},
      {"inspect", registerInspect}, {"check", registerCheck},
  };
  if (command == "exec" || command == "run" || command == "shell" || command == "__holder") {
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
  registerInspect(app, ctx);
  registerCheck(app, ctx);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ctr;
  CLI::App app{"ctr: a container runtime for HPC clusters", "ctr"};
  app.require_subcommand(1);
  app.fallthrough();
  bool verbose = false, debug = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Print what ctr does");
  app.add_flag("-d,--debug", debug, "Print every step and its duration");
  app.add_flag("-q,--quiet", quiet, "Print errors only");

  cli::Context ctx;
  registerCommands(app, ctx, requestedCommand(argc, argv));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitFailure;
  }

  log::init(debug     ? log::Verbosity::Debug
            : verbose ? log::Verbosity::Verbose
            : quiet   ? log::Verbosity::Quiet
                      : log::Verbosity::Normal);
  try {
    return ctx.action ? ctx.action() : 0;
  } catch (const Error& e) {
    std::fflush(stdout);
    std::cerr << "ctr: error: " << e.oneLine() << '\n';
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "ctr: error: " << e.what() << '\n';
    return kExitFailure;
  }
}
