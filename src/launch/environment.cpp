#include "ctr/environment.hpp"

#include <algorithm>
#include <array>

#include "ctr/error.hpp"
#include "ctr/strings.hpp"

namespace ctr::launch {
namespace {

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}


// Apptainer's alwaysPassKeys: the only host variables kept with --cleanenv.
constexpr std::array<std::string_view, 11> kAlwaysPassed{
    "TERM",        "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy",
    "NO_PROXY",    "all_proxy",  "ALL_PROXY",  "ftp_proxy",   "FTP_PROXY"};

// Apptainer's alwaysOmitKeys (HOME is set by ctr afterwards).
constexpr std::array<std::string_view, 3> kNeverPassed{"PATH", "LD_LIBRARY_PATH", "HOME"};

// MPI and scheduler variables: the launcher's wiring to this rank, kept even with
// --cleanenv (see host-notes: PMIx finds its server through PMIX_SERVER_URI*).
constexpr std::array<std::string_view, 4> kMpiPrefixes{"OMPI_", "PMIX_", "PMI_", "SLURM_"};

// Lowest precedence first: CTRENV_ wins over the Apptainer spellings.
constexpr std::array<std::string_view, 3> kInjectPrefixes{"SINGULARITYENV_", "APPTAINERENV_",
                                                          "CTRENV_"};

bool contains(const auto& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Settings the user may not make through APPTAINERENV_/--env (Apptainer refuses them too).
constexpr std::array<std::string_view, 4> kNotSettable{"APPTAINER_SHELL", "APPTAINER_APPNAME",
                                                       "SINGULARITY_SHELL", "SINGULARITY_APPNAME"};

bool passesFromHost(std::string_view name, bool cleanEnv) {
  if (startsWith(name, "CTR_") || startsWith(name, "APPTAINER_") || startsWith(name, "SINGULARITY_"))
    return false;
  for (auto prefix : kInjectPrefixes) {
    if (startsWith(name, prefix)) return false;
  }
  if (contains(kNeverPassed, name)) return false;
  if (contains(kAlwaysPassed, name)) return true;
  if (isLauncherWiring(name)) return true;
  return !cleanEnv;
}

void appendPathList(std::string& list, std::string_view item) {
  if (item.empty()) return;
  if (!list.empty()) list += ':';
  list += item;
}

std::string baseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

bool isLauncherWiring(std::string_view name) {
  return std::any_of(kMpiPrefixes.begin(), kMpiPrefixes.end(),
                     [&](std::string_view prefix) { return startsWith(name, prefix); });
}

bool isValidEnvName(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

namespace {

// The host's CTRENV_/APPTAINERENV_/SINGULARITYENV_ variables, by the name they set (the
// prefix of highest precedence wins), each with the prefix it came by.
struct Injected {
  std::map<std::string, std::string> values;
  std::map<std::string, int> rank;  // prefix precedence of what is in `values`
};

// 1. The host's variables that pass into the container, and those it injects.
Injected takeHostEnvironment(const EnvironmentInputs& in, std::map<std::string, std::string>& vars) {
  Injected injected;
  for (const auto& entry : in.host) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    std::string value = entry.substr(eq + 1);
    for (int rank = 0; rank < static_cast<int>(kInjectPrefixes.size()); ++rank) {
      auto prefix = kInjectPrefixes[static_cast<size_t>(rank)];
      if (startsWith(name, prefix) && isValidEnvName(name.substr(prefix.size()))) {
        std::string target = name.substr(prefix.size());
        auto it = injected.rank.find(target);
        if (it == injected.rank.end() || it->second <= rank) {
          injected.values[target] = value;
          injected.rank[target] = rank;
        }
      }
    }
    // A name no shell can hold (BASH_FUNC_ml%%) is not passed: the env scripts' shell
    // would drop it or choke on it.
    if (isValidEnvName(name) && passesFromHost(name, in.cleanEnv) && !contains(in.noEnv, name))
      vars[name] = value;
  }
  return injected;
}

// imageFirst: the host's variables out of `vars` into `fallback`, but the launcher's wiring
// to this rank (OMPI_, PMIX_, PMI_, SLURM_), which the image must not change.
void keepHostFromImageScripts(std::map<std::string, std::string>& vars, std::vector<EnvVar>& fallback) {
  for (auto it = vars.begin(); it != vars.end();) {
    if (isLauncherWiring(it->first)) {
      ++it;
      continue;
    }
    fallback.emplace_back(it->first, it->second);
    it = vars.erase(it);
  }
}

// 4. One user setting (`how` names where it came from for a warning), applied in the
// container after the image's scripts.
void setUserVariable(Environment& env, const std::string& name, const std::string& value, const std::string& how) {
  UserEnvironment& user = env.user;
  if (name == "PREPEND_PATH") {
    user.prependPath = value;
  } else if (name == "APPEND_PATH") {
    user.appendPath = value;
  } else if (name == "PATH") {
    user.path = value;
  } else if (name == "HOME") {
    env.warnings.push_back("HOME cannot be set with " + how + ": use --home (ignored)");
  } else if (contains(kNotSettable, name)) {
    env.warnings.push_back(name + " cannot be set with " + how + " (ignored)");
  } else {
    std::erase_if(user.vars, [&](const EnvVar& v) { return v.first == name; });
    user.vars.emplace_back(name, name == "LD_LIBRARY_PATH" && !value.empty()
                                     ? value + ":" + std::string(kContainerLibDir)
                                     : value);
  }
}

// 5. What ctr fixes: HOME, the variables that say which container this is and how it was
// started, and the library directories of injected host libraries.
void fixVariables(const EnvironmentInputs& in, Environment& env) {
  auto& vars = env.vars;
  if (!in.home.empty()) {
    vars["HOME"] = in.home;
  } else {
    for (const auto& entry : in.host) {
      if (startsWith(entry, "HOME=") && !vars.contains("HOME")) vars["HOME"] = entry.substr(5);
    }
  }
  if (!in.imagePath.empty()) {
    // Scripts test these to know they run in a container, and which one.
    const std::string name = baseName(in.imagePath);
    for (const char* key : {"CTR_CONTAINER", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"})
      env.fixed.emplace_back(key, in.imagePath);
    for (const char* key : {"CTR_NAME", "APPTAINER_NAME", "SINGULARITY_NAME"}) env.fixed.emplace_back(key, name);
  }
  if (!in.action.empty())
    for (const char* key : {"APPTAINER_COMMAND", "SINGULARITY_COMMAND"}) env.fixed.emplace_back(key, in.action);
  if (!in.instance.empty())  // in the instance's processes and those that join it, as Apptainer sets it
    for (const char* key : {"APPTAINER_INSTANCE", "SINGULARITY_INSTANCE"}) env.fixed.emplace_back(key, in.instance);
  if (!in.bindDestinations.empty()) {
    std::string list;
    for (const auto& d : in.bindDestinations) list += (list.empty() ? "" : ",") + d;
    for (const char* key : {"APPTAINER_BIND", "SINGULARITY_BIND"}) env.fixed.emplace_back(key, list);
  }
  for (const auto& [name, value] : env.fixed) vars[name] = value;

  if (!in.libraryDirs.empty() || !in.libraryDirsFirst.empty()) {
    std::string list = vars.contains("LD_LIBRARY_PATH") ? vars["LD_LIBRARY_PATH"] : "";
    for (const auto& dir : in.libraryDirs) appendPathList(list, dir);
    for (auto dir = in.libraryDirsFirst.rbegin(); dir != in.libraryDirsFirst.rend(); ++dir)
      list = list.empty() ? *dir : *dir + ":" + list;
    vars["LD_LIBRARY_PATH"] = list;
  }
}

}  // namespace

Environment computeEnvironment(const EnvironmentInputs& in) {
  Environment env;
  auto& vars = env.vars;
  // 1. host
  Injected injected = takeHostEnvironment(in, vars);
  if (in.imageFirst) keepHostFromImageScripts(vars, env.hostFallback);
  // 2. defaults
  vars["PATH"] = std::string(kDefaultContainerPath);
  if (in.cleanEnv) vars["LANG"] = "C";
  // 3. image
  for (const auto& [name, value] : in.image) vars[name] = value;
  for (const auto& [name, value] : in.devices) vars[name] = value;
  // 4. user settings, applied in the container after the image's scripts
  env.user.evaluate = in.evaluate;
  for (const auto& [name, value] : injected.values)
    setUserVariable(env, name, value, std::string(kInjectPrefixes[static_cast<size_t>(injected.rank[name])]) + name);
  for (const auto& [name, value] : in.envFiles) setUserVariable(env, name, value, "--env-file");
  for (const auto& [name, value] : in.cli) setUserVariable(env, name, value, "--env");
  // 5. fixed by ctr
  fixVariables(in, env);
  auto wiringName = [](const auto& item) { return isLauncherWiring(item.first); };
  env.wiringPassesThrough =
      std::none_of(in.noEnv.begin(), in.noEnv.end(), [](const std::string& n) { return isLauncherWiring(n); }) &&
      std::none_of(in.image.begin(), in.image.end(), wiringName) &&
      std::none_of(in.devices.begin(), in.devices.end(), wiringName) &&
      std::none_of(env.fixed.begin(), env.fixed.end(), wiringName);
  return env;
}

namespace {

// The name of a "K=V" string; "" where it has no '=' or starts with one.
std::string_view nameOfEntry(std::string_view entry) {
  const auto eq = entry.find('=');
  return eq == std::string_view::npos ? std::string_view{} : entry.substr(0, eq);
}

// Each string "K=V" with a name, the names strictly increasing.
bool inNameOrder(const std::vector<std::string>& entries) {
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (nameOfEntry(entries[i]).empty() || (i > 0 && nameOfEntry(entries[i - 1]) >= nameOfEntry(entries[i])))
      return false;
  return true;
}

}  // namespace

std::vector<std::string> rewiredEnvironment(const std::vector<std::string>& environment,
                                            const std::vector<std::string>& host) {
  // Nothing to swap (a launch outside MPI and Slurm): the strings as they are, which is what
  // the map below gives back for toEnvp's strings ("K=V", names in increasing order).
  auto isWiring = [](const std::string& entry) { return isLauncherWiring(nameOfEntry(entry)); };
  if (std::none_of(host.begin(), host.end(), isWiring) && std::none_of(environment.begin(), environment.end(), isWiring) &&
      inNameOrder(environment))
    return environment;
  std::map<std::string, std::string> vars;
  auto take = [&](const std::string& entry, bool wiring) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) return;
    std::string name = entry.substr(0, eq);
    if (isLauncherWiring(name) != wiring || (wiring && !isValidEnvName(name))) return;
    vars[std::move(name)] = entry.substr(eq + 1);
  };
  for (const auto& entry : environment) take(entry, false);
  for (const auto& entry : host) take(entry, true);
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

std::vector<std::string> toEnvp(const Environment& env) {
  std::vector<std::string> out;
  out.reserve(env.vars.size());
  for (const auto& [name, value] : env.vars) out.push_back(name + "=" + value);
  return out;
}

std::vector<EnvVar> parseEnvOption(std::string_view value) {
  std::vector<EnvVar> out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view item = value.substr(pos, comma - pos);
    pos = comma + 1;
    auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      if (out.empty()) {
        if (item.empty()) continue;
        throw Error("bad --env value '" + std::string(value) + "': '" + std::string(item) +
                    "' is not NAME=VALUE");
      }
      out.back().second += "," + std::string(item);
      continue;
    }
    std::string_view name = item.substr(0, eq);
    if (!isValidEnvName(name)) {
      throw Error("bad --env value '" + std::string(value) + "': '" + std::string(name) +
                  "' is not a valid variable name");
    }
    out.emplace_back(std::string(name), std::string(item.substr(eq + 1)));
  }
  return out;
}

namespace {

// A value's backslashes as the shell reads them (EnvFileQuoting::Shell); `quote` is the
// quote character that enclosed it, or 0.
std::string shellUnescaped(std::string_view value, char quote) {
  if (quote == '\'') return std::string(value);
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const bool escapes = value[i] == '\\' && i + 1 < value.size() &&
                         (quote == 0 || std::string_view("$`\"\\").find(value[i + 1]) != std::string_view::npos);
    if (escapes) ++i;
    out += value[i];
  }
  return out;
}

}  // namespace

std::vector<EnvVar> parseEnvFile(std::string_view text, const std::string& fileName, EnvFileQuoting quoting) {
  std::vector<EnvVar> out;
  int lineNo = 0;
  for (std::string_view raw : splitLines(text)) {
    std::string_view line = trim(raw);
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    if (startsWith(line, "export ")) line = trim(line.substr(7));
    auto where = fileName + ":" + std::to_string(lineNo) + ": ";
    auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      throw Error(where + "expected NAME=VALUE, got '" + std::string(line) + "'");
    }
    std::string_view name = trim(line.substr(0, eq));
    if (!isValidEnvName(name)) {
      throw Error(where + "'" + std::string(name) + "' is not a valid variable name");
    }
    std::string_view val = trim(line.substr(eq + 1));
    char quote = 0;
    if (!val.empty() && (val[0] == '"' || val[0] == '\'')) {
      if (val.size() < 2 || val.back() != val[0]) {
        throw Error(where + "unterminated quote in the value of " + std::string(name));
      }
      quote = val[0];
      val = val.substr(1, val.size() - 2);
    }
    out.emplace_back(std::string(name), quoting == EnvFileQuoting::Shell ? shellUnescaped(val, quote) : std::string(val));
  }
  return out;
}

std::string shellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

namespace {

std::string doubleQuoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '\\';
    out += c;
  }
  return out + '"';
}

void requireName(const std::string& name) {
  // Names go into the script unquoted: only valid ones may.
  if (!isValidEnvName(name)) throw Error("cannot set '" + name + "': not a valid variable name");
}

}  // namespace

std::string envProgramScript(const EnvProgram& p) {
  const UserEnvironment& user = p.user;
  auto quote = [&](std::string_view value) { return user.evaluate ? doubleQuoted(value) : shellQuote(value); };
  std::string s = p.ps1 ? "PS1=" + shellQuote(*p.ps1) + "\n" : "unset PS1\n";
  s += "if [ -z \"${UID:-}\" ]; then UID=" + std::to_string(p.uid) + "; fi\n";
  s += "if [ -z \"${GID:-}\" ]; then GID=" + std::to_string(p.gid) + "; fi\n";
  auto source = [&](const std::string& script) {
    s += "if [ -r " + shellQuote(script) + " ]; then . " + shellQuote(script) + "; fi\n";
  };
  // Apptainer applies the user's settings right after 99-base.sh, the last script images
  // built since Singularity 2.3 share; later ones (99-runtimevars.sh) come after them.
  auto beforeUser = [](const std::string& script) {
    return script == "/environment" || baseName(script) <= "99-base.sh";
  };
  size_t i = 0;
  for (; i < p.scripts.size() && beforeUser(p.scripts[i]); ++i) source(p.scripts[i]);
  for (const auto& [name, value] : user.vars) {
    requireName(name);
    s += "export " + name + "=" + quote(value) + "\n";
  }
  // Evaluated here, applied after the remaining scripts.
  if (!user.prependPath.empty()) s += "__ctr_prepend_path=" + quote(user.prependPath) + "\n";
  if (!user.appendPath.empty()) s += "__ctr_append_path=" + quote(user.appendPath) + "\n";
  if (user.path) s += "__ctr_path=" + quote(*user.path) + "\n";
  for (; i < p.scripts.size(); ++i) source(p.scripts[i]);
  for (const auto& [name, value] : p.hostFallback) {
    requireName(name);
    s += "if [ -z \"${" + name + "+x}\" ]; then export " + name + "=" + shellQuote(value) + "; fi\n";
  }
  if (!user.prependPath.empty()) s += "PATH=\"$__ctr_prepend_path:$PATH\"\n";
  if (!user.appendPath.empty()) s += "PATH=\"$PATH:$__ctr_append_path\"\n";
  if (user.path) s += "PATH=\"$__ctr_path\"\n";
  if (!user.prependPath.empty() || !user.appendPath.empty() || user.path)
    s += "unset __ctr_prepend_path __ctr_append_path __ctr_path\nexport PATH\n";
  s += "if [ -n \"${LD_LIBRARY_PATH:-}\" ]; then\n"
       "  if [ -n \"${PREPEND_LD_LIBRARY_PATH:-}\" ]; then LD_LIBRARY_PATH=\"$PREPEND_LD_LIBRARY_PATH:$LD_LIBRARY_PATH\"; fi\n"
       "  if [ -n \"${APPEND_LD_LIBRARY_PATH:-}\" ]; then LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH:$APPEND_LD_LIBRARY_PATH\"; fi\n"
       "fi\n";
  for (const auto& [name, value] : p.fixed) {
    requireName(name);
    s += "export " + name + "=" + shellQuote(value) + "\n";
  }
  // A prompt that says where one is, also for bash started as the command (its PS1 comes
  // from PROMPT_COMMAND then), and the file %post may append environment to.
  s += "if [ -z \"${PS1:-}\" ]; then PS1='Apptainer> '; fi\nexport PS1\n"
       "if [ -z \"${PROMPT_COMMAND:-}\" ]; then\n"
       "  export PROMPT_COMMAND=\"PS1=\\\"$PS1\\\"; unset PROMPT_COMMAND\"\n"
       "else\n"
       "  export PROMPT_COMMAND=\"$PROMPT_COMMAND; PROMPT_COMMAND=\\\"\\${PROMPT_COMMAND%%; PROMPT_COMMAND=*}\\\"; PS1=\\\"$PS1\\\"\"\n"
       "fi\n"
       "export APPTAINER_ENVIRONMENT=\"${APPTAINER_ENVIRONMENT:-/.singularity.d/env/91-environment.sh}\"\n"
       "export SINGULARITY_ENVIRONMENT=\"$APPTAINER_ENVIRONMENT\"\n";
  return s;
}

std::vector<std::string> envProgramArgv(const std::string& script, const std::vector<std::string>& command) {
  std::vector<std::string> argv{"/bin/sh", "-c", script + "exec \"$@\"\n", "ctr-env"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::vector<std::string> envProgramArgvLookingUp(const std::string& script, const std::vector<std::string>& command) {
  std::vector<std::string> checked = {
      "/bin/sh", "-c",
      "command -v \"$1\" >/dev/null 2>&1 || { echo \"ctr: error: command '$1' not found "
      "in the container\" >&2; exit 255; }; exec \"$@\"",
      "ctr-check"};
  checked.insert(checked.end(), command.begin(), command.end());
  return envProgramArgv(script, checked);
}

}  // namespace ctr::launch
