#include "ctr/strings.hpp"
#include "ctr/environment.hpp"

#include <algorithm>
#include <array>

#include "ctr/error.hpp"

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

bool passesFromHost(std::string_view name, bool cleanEnv) {
  if (startsWith(name, "CTR_")) return false;
  for (auto prefix : kInjectPrefixes) {
    if (startsWith(name, prefix)) return false;
  }
  if (contains(kNeverPassed, name)) return false;
  if (contains(kAlwaysPassed, name)) return true;
  for (auto prefix : kMpiPrefixes) {
    if (startsWith(name, prefix)) return true;
  }
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

bool isValidEnvName(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

Environment computeEnvironment(const EnvironmentInputs& in) {
  Environment env;
  auto& vars = env.vars;

  // 1. host
  std::map<std::string, std::string> injected;  // layer 4a, keyed by final name
  std::map<std::string, int> injectedRank;      // prefix precedence of what is in `injected`
  for (const auto& entry : in.host) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    std::string value = entry.substr(eq + 1);
    for (int rank = 0; rank < static_cast<int>(kInjectPrefixes.size()); ++rank) {
      auto prefix = kInjectPrefixes[static_cast<size_t>(rank)];
      if (startsWith(name, prefix) && isValidEnvName(name.substr(prefix.size()))) {
        std::string target = name.substr(prefix.size());
        auto it = injectedRank.find(target);
        if (it == injectedRank.end() || it->second <= rank) {
          injected[target] = value;
          injectedRank[target] = rank;
        }
      }
    }
    if (passesFromHost(name, in.cleanEnv)) vars[name] = value;
  }

  // 2. defaults
  vars["PATH"] = std::string(kDefaultContainerPath);
  if (in.cleanEnv) vars["LANG"] = "C";

  // 3. image
  for (const auto& [name, value] : in.image) vars[name] = value;

  // 4. user overrides
  std::map<std::string, std::string> user = injected;
  for (const auto& [name, value] : in.envFiles) user[name] = value;
  for (const auto& [name, value] : in.cli) user[name] = value;
  std::string prependPath, appendPath;
  for (const auto& [name, value] : user) {
    if (name == "PREPEND_PATH") {
      prependPath = value;
    } else if (name == "APPEND_PATH") {
      appendPath = value;
    } else if (name == "HOME" && !in.home.empty()) {
      continue;  // as Apptainer: HOME is the container home, --home changes it
    } else {
      vars[name] = value;
      env.userSet.push_back(name);
    }
  }

  // 5. fixed by ctr
  if (!in.home.empty()) {
    vars["HOME"] = in.home;
  } else {
    for (const auto& entry : in.host) {
      if (startsWith(entry, "HOME=") && !vars.contains("HOME")) vars["HOME"] = entry.substr(5);
    }
  }
  if (!in.imagePath.empty()) {
    vars["CTR_CONTAINER"] = in.imagePath;
    vars["CTR_NAME"] = baseName(in.imagePath);
  }

  if (!prependPath.empty() || !appendPath.empty()) {
    std::string path = prependPath;
    appendPathList(path, vars["PATH"]);
    appendPathList(path, appendPath);
    vars["PATH"] = path;
    if (std::find(env.userSet.begin(), env.userSet.end(), "PATH") == env.userSet.end()) {
      env.userSet.push_back("PATH");
    }
  }
  if (!in.libraryDir.empty()) {
    std::string list = vars.contains("LD_LIBRARY_PATH") ? vars["LD_LIBRARY_PATH"] : "";
    appendPathList(list, in.libraryDir);
    vars["LD_LIBRARY_PATH"] = list;
  }
  std::sort(env.userSet.begin(), env.userSet.end());
  return env;
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

std::vector<EnvVar> parseEnvFile(std::string_view text, const std::string& fileName) {
  std::vector<EnvVar> out;
  int lineNo = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = trim(text.substr(pos, nl - pos));
    pos = nl + 1;
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
    if (!val.empty() && (val[0] == '"' || val[0] == '\'')) {
      if (val.size() < 2 || val.back() != val[0]) {
        throw Error(where + "unterminated quote in the value of " + std::string(name));
      }
      val = val.substr(1, val.size() - 2);
    }
    out.emplace_back(std::string(name), std::string(val));
  }
  return out;
}

std::string envValue(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  }
  return {};
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

std::vector<std::string> envScriptArgv(const std::vector<std::string>& command,
                                       const std::vector<EnvVar>& reexport) {
  std::string script = "for f in " + std::string(kEnvScriptDir) +
                       "/*.sh; do [ -r \"$f\" ] && . \"$f\"; done; unset f; ";
  for (const auto& [name, value] : reexport) {
    // The name goes into the script unquoted: only a valid name may.
    if (!isValidEnvName(name)) throw Error("cannot export '" + name + "': not a valid variable name");
    script += "export " + name + "=" + shellQuote(value) + "; ";
  }
  script += "exec \"$@\"";
  std::vector<std::string> argv{"/bin/sh", "-c", script, "ctr-env"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace ctr::launch
