// Each CLI command lives in its own file and registers itself on the root App. A
// subcommand's CLI11 callback only stores `action`; main() runs it after parsing and after
// logging is set up, so parsing never mixes with orchestration.
#pragma once

// Before CLI11, which includes <iostream>: ctr/standard_streams.hpp says why.
#include "ctr/standard_streams.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string_view>

#include "ctr/config.hpp"
#include "ctr/image.hpp"
#include "ctr/log.hpp"

namespace ctr::launch {
struct LaunchPlan;
}

namespace ctr::cli {

class LaunchMemo;

struct Context {
  std::function<int()> action;  // returns the process exit status
  std::vector<std::string> rawArgs;  // argv[1..] as given (for what CLI11 cannot tell apart)
  bool asApptainer = false;  // invoked as `apptainer` or `singularity` (the drop-in links)
  log::Verbosity verbosity = log::Verbosity::Normal;
  // A launch's memo (launch_memo.hpp), and with CTR_LAUNCH_MEMO=check the plan it kept.
  LaunchMemo* memo = nullptr;
  const launch::LaunchPlan* keptPlan = nullptr;
};

// Runs a decided plan that is neither explained nor an instance: as the app (never returns),
// or supervised. The plan's warnings first.
int runPlan(const launch::LaunchPlan& plan);

void registerVersion(CLI::App& app, Context& ctx);
// What `--version` prints: "ctr version X", or as Apptainer "apptainer version A+ctr.X".
std::string versionFlagText(const Context& ctx);
// exec, run, shell, __holder; with `only`, just that one (the launch path builds no more
// of the command tree than it parses: see main.cpp).
void registerExec(CLI::App& app, Context& ctx, std::string_view only = {});
// instance start|run|list|stop|stats; `start` and `run` take exec's options (registerInstanceStart).
void registerInstance(CLI::App& app, Context& ctx);
void registerInstanceStart(CLI::App& instance, Context& ctx, bool parsed, bool runParsed);
void registerSif(CLI::App& app, Context& ctx);
void registerBuild(CLI::App& app, Context& ctx);
void registerPull(CLI::App& app, Context& ctx);     // pull: Docker/OCI image -> SIF
// What unpacking an image into a sandbox left out (build --sandbox, pull --sandbox), in a warning.
void warnDroppedFromSandbox(const image::PrivilegedFiles& dropped);
void registerPush(CLI::App& app, Context& ctx);     // push: SIF -> oras://
void registerInspect(CLI::App& app, Context& ctx);
void registerRunHelp(CLI::App& app, Context& ctx);  // run-help: an image's %help
void registerCheck(CLI::App& app, Context& ctx);    // check: which image mode, and why
void registerCache(CLI::App& app, Context& ctx);    // cache list|clean: the docker:// image cache
void registerOverlay(CLI::App& app, Context& ctx);  // overlay create: a writable ext3 overlay image
void registerRegistry(CLI::App& app, Context& ctx);  // registry login|logout|list: credentials
void registerStore(CLI::App& app, Context& ctx);     // store list|size|clean|pull: the site image store
void registerVerify(CLI::App& app, Context& ctx);    // verify: a SIF's signatures
void registerSign(CLI::App& app, Context& ctx);      // sign: a SIF with a PEM key (DSSE)
void registerKey(CLI::App& app, Context& ctx);       // key: the local OpenPGP keyring
// An IMAGE argument of a launch or of inspect: a docker:// reference through the image
// cache (pulled there when missing), else a SIF, squashfs or directory path.
// With `lazy` (--lazy), an oras:// image whose chunk table its config carries is read lazily
// (image::oci::orasLazy) instead of pulled whole; any other image is resolved as without it,
// with a warning.
image::ImageSource resolveImageArgument(const std::string& argument, const config::PullPolicy& pull,
                                        bool lazy = false);
// The path of an IMAGE argument read without launching (inspect, run-help): a docker://
// reference's cached SIF (pulled there when missing), else the argument as given.
std::string imagePathArgument(const std::string& argument);

}  // namespace ctr::cli
