// What this ctr was built from and with: generated at every build (build_info.cpp.in), so
// that `ctr --version` names the git revision even when CMake did not run again.
#pragma once

namespace ctr::cli::build_info {
extern const char* const kRevision;   // `git describe --always --dirty`, or "unknown" outside a git checkout
extern const char* const kBuildType;  // CMAKE_BUILD_TYPE
extern const char* const kCompiler;   // "GNU 12.2.0"
extern const bool kHelperSetuidInstall;  // CTR_INSTALL_SUID_HELPER or CTR_DEB_PACKAGE: the helper is installed 4755 root
extern const bool kApptainerLinks;       // CTR_INSTALL_APPTAINER_LINKS
extern const bool kSanitize;             // CTR_SANITIZE
extern const bool kBench;                // CTR_BUILD_BENCH: ctr-bench and its workloads
extern const bool kSlurmPlugin;          // the Slurm SPANK plugin (ctr_spank.so, where libslurm-dev is)
}  // namespace ctr::cli::build_info
