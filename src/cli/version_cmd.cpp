#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "build_info.hpp"
#include "commands.hpp"
#include "ctr/build_config.hpp"
#include "ctr/host_facts.hpp"

namespace ctr::cli {
namespace {

// Invoked as `apptainer` or `singularity`, ctr answers as Apptainer does (`version`: the
// bare version; `--version`: "apptainer version V"), with V the Apptainer release whose
// behaviour it follows plus its own version: tools that drive Apptainer (snakemake, nextflow)
// compare the last word with a minimum release.
std::string apptainerVersion() { return std::string(build::kApptainerVersion) + "+ctr." + build::kVersion; }

// Whether the configured helper is installed setuid root now (what kernel squashfs mode
// needs); a bug report then says which path its launches could take.
bool helperSetuidRoot() {
  const auto state = host::inspectSetuidHelper(build::kHelperPath);
  return state == host::HelperState::Usable || state == host::HelperState::Writable;
}

nlohmann::json versionJson() {
  return {{"version", build::kVersion},
          {"revision", build_info::kRevision},
          {"apptainer_compat", build::kApptainerVersion},
          {"build",
           {{"type", build_info::kBuildType},
            {"compiler", build_info::kCompiler},
            {"sanitize", build_info::kSanitize},
            {"install_prefix", build::kInstallPrefix}}},
          {"components",
           {{"setuid_helper",
             {{"built", true},
              {"setuid_install", build_info::kHelperSetuidInstall},
              {"path", build::kHelperPath},
              {"setuid_root_now", helperSetuidRoot()}}},
            {"slurm_plugin", {{"built", build_info::kSlurmPlugin}}},
            {"apptainer_links", build_info::kApptainerLinks},
            {"bench", build_info::kBench}}}};
}

}  // namespace

std::string versionFlagText(const Context& ctx) {
  if (ctx.asApptainer) return "apptainer version " + apptainerVersion();
  return std::string("ctr version ") + build::kVersion + " (git " + build_info::kRevision + "; " +
         build_info::kBuildType + "; setuid helper install " + (build_info::kHelperSetuidInstall ? "on" : "off") +
         "; Slurm plugin " + (build_info::kSlurmPlugin ? "built" : "not built") + ")";
}

void registerVersion(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("version", "Print the ctr version");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "The version, git revision and build options as JSON");
  cmd->callback([&ctx, json] {
    ctx.action = [&ctx, json] {
      if (*json)
        std::cout << versionJson().dump(2) << '\n';
      else
        std::cout << (ctx.asApptainer ? apptainerVersion() : versionFlagText(ctx)) << '\n';
      return 0;
    };
  });
}

}  // namespace ctr::cli
