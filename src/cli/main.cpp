#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "ctr/error.hpp"

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
  cli::registerVersion(app, ctx);
  cli::registerExec(app, ctx);
  cli::registerSif(app, ctx);
  cli::registerBuild(app, ctx);
  cli::registerInspect(app, ctx);
  cli::registerCheck(app, ctx);

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
