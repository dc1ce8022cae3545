#include <sys/stat.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "build_info.hpp"
#include "commands.hpp"
#include "ctr/configured.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {
namespace {

// Invoked as `apptainer` or `singularity`, ctr answers as Apptainer does (`version`: the
// bare version; `--version`: "apptainer version V"), with V the Apptainer release whose
// behaviour it follows plus its own version: tools that drive Apptainer (snakemake, nextflow)
// compare the last word with a minimum release.
std::string apptainerVersion() { return std::string(configured::kApptainerVersion) + "+ctr." + configured::kVersion; }

// Whether the configured helper is installed setuid root now (what kernel squashfs mode
// needs); a bug report then says which path its launches could take.
bool helperSetuidRoot() {
  const auto state = host::inspectSetuidHelper(configured::kHelperPath);
  return state == host::HelperState::Usable || state == host::HelperState::Writable;
}

nlohmann::json versionJson() {
  return {{"version", configured::kVersion},
          {"revision", build_info::kRevision},
          {"apptainer_compat", configured::kApptainerVersion},
          {"build",
           {{"type", build_info::kBuildType},
            {"compiler", build_info::kCompiler},
            {"sanitize", build_info::kSanitize},
            {"install_prefix", configured::kInstallPrefix}}},
          {"components",
           {{"setuid_helper",
             {{"built", true},
              {"setuid_install", build_info::kHelperSetuidInstall},
              {"path", configured::kHelperPath},
              {"setuid_root_now", helperSetuidRoot()}}},
            {"slurm_plugin", {{"built", build_info::kSlurmPlugin}}},
            {"apptainer_links", build_info::kApptainerLinks},
            {"bench", build_info::kBench}}}};
}

}  // namespace

std::string versionFlagText(const Context& ctx) {
  if (ctx.asApptainer) return "apptainer version " + apptainerVersion();
  return std::string("ctr version ") + configured::kVersion + " (git " + build_info::kRevision + "; " +
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
