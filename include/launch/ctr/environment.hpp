// The container's environment, computed the way Apptainer does (so job scripts written for
// Apptainer behave the same), plus what ctr adds. Pure: the caller passes the host
// environment (e.g. from `environ`) and the file contents; nothing here reads the process
// state. docs/user-guide-run.md "## Environment" describes the result for users.
//
// Before the image's env scripts run (computeEnvironment, lowest first):
//   1. host environment, filtered (see below; with cleanEnv only TERM and the proxy vars;
//      names given to --no-env / APPTAINER_NOENV dropped)
//   2. ctr's defaults: PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,
//      LANG=C with cleanEnv
//   3. image environment (SIF env / image config)
//   5. fixed by ctr: HOME (when given), CTR_CONTAINER, CTR_NAME, APPTAINER_CONTAINER,
//      SINGULARITY_CONTAINER, APPTAINER_NAME, SINGULARITY_NAME
// Layer 4, what the user sets (SINGULARITYENV_K, then APPTAINERENV_K, then CTRENV_K from
// the host environment, then --env-file files in order, then --env values in order), is
// not in that environment: as in Apptainer, it is applied in the container after the
// image's scripts up to 99-base.sh, each value evaluated as the shell evaluates
// "VALUE" (`$VAR`, `${VAR}`, `$(cmd)`, `\$`), or taken literally with --no-eval
// (envProgramScript below). PATH, PREPEND_PATH and APPEND_PATH apply after all scripts; a
// user LD_LIBRARY_PATH gets /.singularity.d/libs appended; PREPEND_ and
// APPEND_LD_LIBRARY_PATH extend a non-empty LD_LIBRARY_PATH last.
//
// Never passed from the host (layer 1): PATH, LD_LIBRARY_PATH (host libraries would break
// the image's), HOME (replaced by the container home), CTR_* (ctr's own settings),
// APPTAINER_* and SINGULARITY_* (Apptainer's settings, as Apptainer drops them),
// CTRENV_*/APPTAINERENV_*/SINGULARITYENV_* (transposed in layer 4). Under cleanEnv the
// MPI/scheduler variables (OMPI_*, PMIX_*, PMI_*, SLURM_*) are still passed, so that
// `mpirun ctr exec --cleanenv` works (Apptainer drops them; that is a deliberate change).
//
// imageFirst (--image-env-first, pyxis's and enroot's rule, which the Slurm plugin asks
// for): the image's environment wins over the host's. The host variables of layer 1 (but
// the MPI and scheduler wiring, which stays) are taken out before the image's scripts run,
// so that `export V="${V:-default}"` (Docker ENV as Apptainer writes it) gives the image's
// value, and each comes back after all scripts only where nothing set it
// (Environment::hostFallback).
#pragma once

#include <map>
#include <optional>
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
  bool imageFirst = false;        // --image-env-first (see above)
  std::vector<std::string> noEnv; // --no-env / APPTAINER_NOENV: host variables not passed
  bool evaluate = true;           // false: --no-eval
  std::vector<EnvVar> image;      // from the image, in its order
  std::vector<EnvVar> envFiles;   // parseEnvFile results of every --env-file, in order
  std::vector<EnvVar> cli;        // parseEnvOption results of every --env, in order
  std::string home;               // container HOME; empty = keep the host's HOME
  std::string imagePath;          // CTR_CONTAINER (absolute image path)
  std::string action;             // APPTAINER_COMMAND: exec, run, shell, test or start (Apptainer's names)
  std::string instance;           // APPTAINER_INSTANCE: the instance started or joined, else empty
  // The user's bind destinations, --bind's then the environment's: APPTAINER_BIND and
  // SINGULARITY_BIND in the container, as Apptainer passes them to nested containers.
  std::vector<std::string> bindDestinations;
  std::vector<std::string> libraryDirs;  // appended to LD_LIBRARY_PATH (injected host libraries)
  std::vector<std::string> libraryDirsFirst;  // put first on LD_LIBRARY_PATH (--mpi=bind's dependencies)
  std::vector<EnvVar> devices;    // from --nv/--device (CDI): after the image's, before the user's
};

// Layer 4: what the user set, applied in the container (see above).
struct UserEnvironment {
  std::vector<EnvVar> vars;          // in order; a later setting of a name replaced an earlier
  std::optional<std::string> path;   // PATH: replaces the container's PATH after its scripts
  std::string prependPath;           // PREPEND_PATH
  std::string appendPath;            // APPEND_PATH
  bool evaluate = true;              // false: --no-eval, values are taken literally

  [[nodiscard]] bool empty() const { return vars.empty() && !path && prependPath.empty() && appendPath.empty(); }
};

// The launcher's wiring to this rank: OMPI_*, PMIX_*, PMI_* and SLURM_* (passed from the host
// even with cleanEnv, and kept from the image's scripts with imageFirst).
[[nodiscard]] bool isLauncherWiring(std::string_view name);

struct Environment {
  std::map<std::string, std::string> vars;  // layers 1-3 and 5; sorted, so --explain is stable
  UserEnvironment user;                     // layer 4
  std::vector<EnvVar> fixed;                // layer 5: set again after the image's scripts
  // imageFirst: the host's variables kept from the image's scripts, in name order; each is
  // set after them where they left it unset.
  std::vector<EnvVar> hostFallback;
  std::vector<std::string> warnings;        // settings ignored, with why (shown to the user)
  // The host's launcher wiring is in `vars` exactly as the host has it: no name of it is set
  // by the image, the devices or ctr, or dropped by noEnv. An environment computed for one
  // rank is then every rank's with its wiring swapped (rewiredEnvironment).
  bool wiringPassesThrough = true;
};

[[nodiscard]] Environment computeEnvironment(const EnvironmentInputs& inputs);

// "K=V" strings for execve, in `vars` order.
[[nodiscard]] std::vector<std::string> toEnvp(const Environment& env);

// `environment` (toEnvp's strings) with the launcher wiring of `host` (environ's "K=V"
// strings) in place of its own: every isLauncherWiring name taken out, the host's put in as
// layer 1 takes them (valid names; the last of a name twice), in name order. The same
// strings computeEnvironment gives for `host` where Environment::wiringPassesThrough was
// true for the inputs `environment` was computed from (tests/unit/environment_test.cpp).
[[nodiscard]] std::vector<std::string> rewiredEnvironment(const std::vector<std::string>& environment,
                                                          const std::vector<std::string>& host);

// One --env value: "K=V" or a comma list "A=1,B=2". As in Apptainer, an item without '='
// continues the previous value, so "LIST=a,b,C=3" gives LIST="a,b" and C="3".
// Throws ctr::Error naming the value for an empty or invalid name ([A-Za-z_][A-Za-z0-9_]*).
[[nodiscard]] std::vector<EnvVar> parseEnvOption(std::string_view value);

// How parseEnvFile reads backslashes. Shell (an --env-file, read as Apptainer's shell reads
// it): in "..." a backslash before $ ` " or \ is dropped (so "\$PATH:/" gives $PATH:/, which
// the container's evaluation then expands), outside quotes before any character, in '...'
// never. Plain (the SIF environment object): values as written.
enum class EnvFileQuoting { Plain, Shell };

// An --env-file: one "KEY=VALUE" per line, optional "export " prefix, blank lines and
// lines starting with '#' ignored, a value wholly in '...' or "..." has its quotes
// removed; no expansion of $VARS here (the container's evaluation does it, unless
// --no-eval). Throws ctr::Error "FILE:LINE: ..." on a bad line.
[[nodiscard]] std::vector<EnvVar> parseEnvFile(std::string_view text, const std::string& fileName,
                                               EnvFileQuoting quoting = EnvFileQuoting::Plain);

// True for a valid variable name: [A-Za-z_][A-Za-z0-9_]*.
[[nodiscard]] bool isValidEnvName(std::string_view name);

// The directory Apptainer images keep their environment scripts in.
inline constexpr std::string_view kEnvScriptDir = "/.singularity.d/env";
// The library directory of injected host libraries, appended to a user LD_LIBRARY_PATH.
inline constexpr std::string_view kContainerLibDir = "/.singularity.d/libs";

// What a launch does to the environment inside the container, in Apptainer's order.
struct EnvProgram {
  std::vector<std::string> scripts;  // the image's env scripts, sorted (or /environment)
  UserEnvironment user;
  std::vector<EnvVar> fixed;         // ctr's and Apptainer's identity variables
  std::vector<EnvVar> hostFallback;  // Environment::hostFallback: set after the scripts where unset
  unsigned uid = 0, gid = 0;         // $UID and $GID (shell variables, as bash has them)
  // PS1 of the environment the program starts from (some shells set a default of their own,
  // which must not stop the fallback prompt).
  std::optional<std::string> ps1;
  // Environment::wiringPassesThrough of the plan's environment: the launch memo keeps such a
  // plan for every rank of a job and later jobs (docs/admin-guide.md, "The launch memo").
  bool wiringPassesThrough = false;
};

// The program as POSIX sh text, within the subset of ctr/env_script_interpreter.hpp so that ctr runs it
// without a shell whenever the scripts and values allow, and /bin/sh runs the same text
// otherwise (one evaluator, two engines):
//   UID/GID unless set; the scripts up to 99-base.sh (each if readable); the user's
//   variables (exported, evaluated in "..." or literal in '...'); the remaining scripts;
//   the host's fallback values where nothing set their names;
//   PREPEND_PATH, APPEND_PATH, PATH; PREPEND_/APPEND_LD_LIBRARY_PATH; the fixed
//   variables; PS1 and PROMPT_COMMAND fallbacks and APPTAINER_ENVIRONMENT as Apptainer
//   sets them. Throws ctr::Error for an invalid variable name.
[[nodiscard]] std::string envProgramScript(const EnvProgram& program);

// argv that runs `script` (envProgramScript) in /bin/sh and then execs `command`:
//   {"/bin/sh", "-c", script + "\nexec \"$@\"", "ctr-env", command...}
[[nodiscard]] std::vector<std::string> envProgramArgv(const std::string& script,
                                                      const std::vector<std::string>& command);

// The same, for a command the runtime could not look up itself (the script may change PATH):
// /bin/sh looks it up after the script and, when it is not there, says ctr's one-line error
// ("ctr: error: command 'X' not found in the container") and exits 255, as ctr would.
[[nodiscard]] std::vector<std::string> envProgramArgvLookingUp(const std::string& script,
                                                               const std::vector<std::string>& command);

// Quotes `s` for a POSIX shell: 'it'\''s'.
[[nodiscard]] std::string shellQuote(std::string_view s);

}  // namespace ctr::launch
