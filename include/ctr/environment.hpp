// The container's environment, computed the way Apptainer does (so job scripts written for
// Apptainer behave the same), plus what ctr adds. Pure: the caller passes the host
// environment (e.g. from `environ`) and the file contents; nothing here reads the process
// state. docs/user-guide-run.md "## Environment" describes the result for users.
//
// Precedence, lowest first (a later layer overwrites an earlier one):
//   1. host environment, filtered (see below; with cleanEnv only TERM and the proxy vars)
//   2. ctr's defaults: PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,
//      LANG=C with cleanEnv
//   3. image environment (SIF env / image config)
//   4. user overrides: SINGULARITYENV_K, then APPTAINERENV_K, then CTRENV_K from the host
//      environment, then --env-file files in order, then --env values in order (HOME
//      cannot be overridden when `home` is set: use --home, as in Apptainer)
//   5. fixed by ctr: HOME (when given), CTR_CONTAINER, CTR_NAME
// Then PREPEND_PATH / APPEND_PATH set in layer 4 are added to PATH, and `libraryDir` (if
// set) is appended to LD_LIBRARY_PATH.
//
// Never passed from the host (layer 1): PATH, LD_LIBRARY_PATH (host libraries would break
// the image's), HOME (replaced by the container home), CTR_* (ctr's own settings),
// CTRENV_*/APPTAINERENV_*/SINGULARITYENV_* (transposed in layer 4). Under cleanEnv the
// MPI/scheduler variables (OMPI_*, PMIX_*, PMI_*, SLURM_*) are still passed, so that
// `mpirun ctr exec --cleanenv` works (Apptainer drops them; that is a deliberate change).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ctr::launch {

using EnvVar = std::pair<std::string, std::string>;  // name, value

// Apptainer's default container PATH.
inline constexpr std::string_view kDefaultContainerPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct EnvironmentInputs {
  std::vector<std::string> host;  // "K=V" strings as in environ; entries without '=' ignored
  bool cleanEnv = false;          // --cleanenv
  std::vector<EnvVar> image;      // from the image, in its order
  std::vector<EnvVar> envFiles;   // parseEnvFile results of every --env-file, in order
  std::vector<EnvVar> cli;        // parseEnvOption results of every --env, in order
  std::string home;               // container HOME; empty = keep the host's HOME
  std::string imagePath;          // CTR_CONTAINER (absolute image path)
  std::string libraryDir;         // appended to LD_LIBRARY_PATH when set (injected host libs)
};

struct Environment {
  std::map<std::string, std::string> vars;  // sorted, so --explain output is stable
  // Names set by layer 4 (CTRENV_ and friends, --env-file, --env), in sorted order. An
  // image's /.singularity.d/env scripts must not overwrite them: pass them to
  // envScriptArgv, which re-exports them after sourcing the scripts.
  std::vector<std::string> userSet;
};

[[nodiscard]] Environment computeEnvironment(const EnvironmentInputs& inputs);

// "K=V" strings for execve, in `vars` order.
[[nodiscard]] std::vector<std::string> toEnvp(const Environment& env);

// One --env value: "K=V" or a comma list "A=1,B=2". As in Apptainer, an item without '='
// continues the previous value, so "LIST=a,b,C=3" gives LIST="a,b" and C="3".
// Throws ctr::Error naming the value for an empty or invalid name ([A-Za-z_][A-Za-z0-9_]*).
[[nodiscard]] std::vector<EnvVar> parseEnvOption(std::string_view value);

// An --env-file: one "KEY=VALUE" per line, optional "export " prefix, blank lines and
// lines starting with '#' ignored, a value wholly in '...' or "..." has its quotes
// removed; no expansion of $VARS. Throws ctr::Error "FILE:LINE: ..." on a bad line.
[[nodiscard]] std::vector<EnvVar> parseEnvFile(std::string_view text, const std::string& fileName);

// The value of `key` in "K=V" strings (the first one), or "" when absent.
[[nodiscard]] std::string envValue(const std::vector<std::string>& env, std::string_view key);

// True for a valid variable name: [A-Za-z_][A-Za-z0-9_]*.
[[nodiscard]] bool isValidEnvName(std::string_view name);

// The directory Apptainer images keep their environment scripts in.
inline constexpr std::string_view kEnvScriptDir = "/.singularity.d/env";

// argv that sources /.singularity.d/env/*.sh (in glob order, skipping unreadable ones),
// re-exports `reexport` (so --env beats the image's %environment), then execs `command`:
//   {"/bin/sh", "-c", "for f in /.singularity.d/env/*.sh; do ...; done; export ...; "
//    "exec \"$@\"", "ctr-env", command...}
// The runtime uses it only when the image has that directory. Values are single-quoted
// for the shell, so any byte except NUL is safe; an invalid name throws ctr::Error.
[[nodiscard]] std::vector<std::string> envScriptArgv(const std::vector<std::string>& command,
                                                     const std::vector<EnvVar>& reexport = {});

// Quotes `s` for a POSIX shell: 'it'\''s'.
[[nodiscard]] std::string shellQuote(std::string_view s);

}  // namespace ctr::launch
