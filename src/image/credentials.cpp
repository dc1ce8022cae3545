// Registry credentials from the files users already have (ctr/credentials.hpp).
#include "ctr/credentials.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/run_process.hpp"
#include "ctr/user_dir.hpp"
#include "oci_libs.hpp"

namespace ctr::image::credentials {

namespace fs = std::filesystem;

namespace {

constexpr auto kHelperTimeout = std::chrono::seconds(10);
constexpr std::size_t kHelperOutputLimit = 64u << 10;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string firstEnv(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto value = env(name); !value.empty()) return value;
  return {};
}

// A credential file's JSON, or nullopt when there is no such file.
std::optional<nlohmann::json> readJson(const fs::path& file) {
  if (file.empty()) return std::nullopt;
  const std::string text = readFileIfPresent(file.string());
  if (text.empty()) return std::nullopt;
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object()) throw Error(file.string() + ": not a JSON object (a credential file: {\"auths\": {...}})");
  return json;
}

// The value of the key of `object` that names `registry` (whatever its spelling), or nullptr.
const nlohmann::json* entryFor(const nlohmann::json& object, std::string_view registry) {
  if (!object.is_object()) return nullptr;
  const std::string key = registryKey(registry);
  for (const auto& [name, value] : object.items())
    if (registryKey(name) == key) return &value;
  return nullptr;
}

std::optional<Credential> fromAuthFile(const fs::path& file, std::string_view registry) {
  const auto json = readJson(file);
  if (!json || !json->contains("auths")) return std::nullopt;
  const nlohmann::json* entry = entryFor((*json)["auths"], registry);
  if (entry == nullptr) return std::nullopt;
  auto pair = fromAuthEntry(entry->dump(), registry);
  if (!pair) return std::nullopt;
  return Credential{pair->first, pair->second, file.string()};
}

// What Docker hands a credential helper for a registry: Docker Hub's historical URL, else
// the registry's host[:port].
std::string helperServer(std::string_view registry) {
  const std::string key = registryKey(registry);
  return key == "docker.io" ? "https://index.docker.io/v1/" : key;
}

std::optional<Credential> fromHelper(const std::string& helper, std::string_view registry, const fs::path& config) {
  const std::string program = "docker-credential-" + helper;
  ProcessOptions options;
  options.captureStdout = true;
  options.captureStderr = true;
  options.captureLimit = kHelperOutputLimit;
  options.input = helperServer(registry) + "\n";
  options.timeout = kHelperTimeout;
  ProcessResult result;
  try {
    result = runProcess({program, "get"}, options);
  } catch (const Error& e) {
    spdlog::warn("{} names the credential helper {}, which cannot be run: {}", config.string(), program, e.oneLine());
    return std::nullopt;
  }
  if (result.timedOut)
    throw Error(program + " get (named by " + config.string() + ") did not answer within " +
                std::to_string(kHelperTimeout.count()) + " s for " + registryKey(registry));
  if (!result.ok()) {
    spdlog::debug("{} get: no credentials for {} ({})", program, registryKey(registry), result.describe());
    return std::nullopt;
  }
  const auto json = nlohmann::json::parse(result.capturedStdout, nullptr, false);
  if (!json.is_object() || !json.contains("Username") || !json.contains("Secret") || !json["Username"].is_string() ||
      !json["Secret"].is_string())
    throw Error(program + " get answered for " + registryKey(registry) + " without a Username and a Secret");
  return Credential{json["Username"], json["Secret"], program + " (named by " + config.string() + ")"};
}

std::optional<Credential> fromDocker(const fs::path& config, std::string_view registry) {
  const auto json = readJson(config);
  if (!json) return std::nullopt;
  if (json->contains("auths"))
    if (const nlohmann::json* entry = entryFor((*json)["auths"], registry))
      if (auto pair = fromAuthEntry(entry->dump(), registry)) return Credential{pair->first, pair->second, config.string()};
  if (json->contains("credHelpers"))
    if (const nlohmann::json* helper = entryFor((*json)["credHelpers"], registry); helper && helper->is_string())
      return fromHelper(*helper, registry, config);
  if (json->contains("credsStore") && (*json)["credsStore"].is_string() && !(*json)["credsStore"].get<std::string>().empty())
    return fromHelper((*json)["credsStore"], registry, config);
  return std::nullopt;
}

// $XDG_CONFIG_HOME, else ~/.config.
fs::path configHome() {
  if (auto x = env("XDG_CONFIG_HOME"); !x.empty()) return x;
  const fs::path h = homeDirectory();
  return h.empty() ? fs::path() : h / ".config";
}

}  // namespace

std::string registryKey(std::string_view registry) {
  std::string_view text = registry;
  if (auto scheme = text.find("://"); scheme != std::string_view::npos) text.remove_prefix(scheme + 3);
  text = text.substr(0, text.find('/'));
  std::string key(text);
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* hub : {"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com", "docker.io"})
    if (key == hub) return "docker.io";
  return key;
}

std::optional<std::pair<std::string, std::string>> fromAuthEntry(std::string_view json, std::string_view registry) {
  const auto entry = nlohmann::json::parse(json, nullptr, false);
  if (!entry.is_object()) return std::nullopt;
  if (entry.contains("auth") && entry["auth"].is_string() && !entry["auth"].get<std::string>().empty()) {
    const auto decoded = oci::base64Decode(entry["auth"].get<std::string>());
    const auto colon = decoded ? decoded->find(':') : std::string::npos;
    if (colon == std::string::npos)
      throw Error("the credentials for " + registryKey(registry) + " are not base64 of USER:PASSWORD");
    return std::make_pair(decoded->substr(0, colon), decoded->substr(colon + 1));
  }
  if (entry.contains("username") && entry.contains("password") && entry["username"].is_string() &&
      entry["password"].is_string())
    return std::make_pair(entry["username"].get<std::string>(), entry["password"].get<std::string>());
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> fromNetrc(std::string_view text, std::string_view registry) {
  // Tokens separated by blanks: machine NAME | default, then login L, password P (account
  // and macdef are other netrc keywords; a macdef's body runs to a blank line).
  std::istringstream in{std::string(text)};
  std::vector<std::string> tokens;
  for (std::string token; in >> token;) tokens.push_back(token);
  const std::string key = registryKey(registry);
  std::optional<std::pair<std::string, std::string>> fallback;
  for (std::size_t i = 0; i < tokens.size();) {
    bool matches = false, isDefault = false;
    if (tokens[i] == "machine" && i + 1 < tokens.size()) {
      matches = registryKey(tokens[i + 1]) == key;
      i += 2;
    } else if (tokens[i] == "default") {
      isDefault = true;
      ++i;
    } else {
      ++i;
      continue;
    }
    std::string login, password;
    while (i < tokens.size() && tokens[i] != "machine" && tokens[i] != "default") {
      if ((tokens[i] == "login" || tokens[i] == "password" || tokens[i] == "account") && i + 1 < tokens.size()) {
        if (tokens[i] == "login") login = tokens[i + 1];
        if (tokens[i] == "password") password = tokens[i + 1];
        i += 2;
      } else {
        ++i;
      }
    }
    if (matches && !login.empty()) return std::make_pair(login, password);
    if (isDefault && !login.empty() && !fallback) fallback = std::make_pair(login, password);
  }
  return fallback;
}

Places defaultPlaces() {
  Places places;
  const fs::path config = configHome();
  if (!config.empty()) places.ctrFile = config / "ctr" / "auth.json";
  if (auto docker = env("DOCKER_CONFIG"); !docker.empty()) places.dockerConfig = fs::path(docker) / "config.json";
  else if (auto h = homeDirectory(); !h.empty()) places.dockerConfig = h / ".docker" / "config.json";
  if (auto file = env("REGISTRY_AUTH_FILE"); !file.empty()) places.containersAuth.emplace_back(file);
  if (auto runtime = env("XDG_RUNTIME_DIR"); !runtime.empty())
    places.containersAuth.push_back(fs::path(runtime) / "containers" / "auth.json");
  if (!config.empty()) places.containersAuth.push_back(config / "containers" / "auth.json");
  if (auto enroot = env("ENROOT_CONFIG_PATH"); !enroot.empty()) places.enrootCredentials = fs::path(enroot) / ".credentials";
  else if (!config.empty()) places.enrootCredentials = config / "enroot" / ".credentials";
  places.envUsername = firstEnv({"CTR_DOCKER_USERNAME", "APPTAINER_DOCKER_USERNAME", "SINGULARITY_DOCKER_USERNAME"});
  places.envPassword = firstEnv({"CTR_DOCKER_PASSWORD", "APPTAINER_DOCKER_PASSWORD", "SINGULARITY_DOCKER_PASSWORD"});
  return places;
}

std::optional<Credential> lookup(std::string_view registry, const Places& places) {
  std::optional<Credential> found = fromAuthFile(places.ctrFile, registry);
  if (!found) found = fromDocker(places.dockerConfig, registry);
  for (const auto& file : places.containersAuth)
    if (!found) found = fromAuthFile(file, registry);
  if (!found && !places.enrootCredentials.empty()) {
    const std::string text = readFileIfPresent(places.enrootCredentials.string());
    if (auto pair = fromNetrc(text, registry))
      found = Credential{pair->first, pair->second, places.enrootCredentials.string()};
  }
  if (!found && !places.envUsername.empty())
    found = Credential{places.envUsername, places.envPassword, "CTR_DOCKER_USERNAME/PASSWORD (or Apptainer's)"};
  if (found) spdlog::debug("credentials for {}: user {} from {}", registryKey(registry), found->username, found->source);
  return found;
}

namespace {

// Writes `json` to `file` whole: a 0600 temporary file beside it, renamed over it.
void replaceFile(const fs::path& file, const nlohmann::json& json) {
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot make " + dir.string() + ": " + ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  std::string temp = (dir / ("." + file.filename().string() + ".XXXXXX")).string();
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd) throw sysError("cannot write in " + dir.string());
  const std::string text = json.dump(1, '\t') + "\n";
  const bool written = ::fchmod(fd.get(), 0600) == 0 &&
                       ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd.get()) == 0;
  if (!written || ::rename(temp.c_str(), file.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw sysError("cannot write " + file.string(), error);
  }
}

nlohmann::json readForUpdate(const fs::path& file) {
  auto json = readJson(file).value_or(nlohmann::json::object());
  if (!json.contains("auths") || !json["auths"].is_object()) json["auths"] = nlohmann::json::object();
  return json;
}

}  // namespace

void store(const fs::path& file, std::string_view registry, const std::string& username, const std::string& password) {
  auto json = readForUpdate(file);
  const std::string key = registryKey(registry);
  for (auto it = json["auths"].begin(); it != json["auths"].end();)
    it = registryKey(it.key()) == key ? json["auths"].erase(it) : std::next(it);
  json["auths"][key] = {{"auth", oci::base64Encode(username + ":" + password)}};
  replaceFile(file, json);
}

bool remove(const fs::path& file, std::string_view registry) {
  auto json = readForUpdate(file);
  const std::string key = registryKey(registry);
  bool removed = false;
  for (auto it = json["auths"].begin(); it != json["auths"].end();) {
    if (registryKey(it.key()) == key) {
      it = json["auths"].erase(it);
      removed = true;
    } else {
      ++it;
    }
  }
  if (removed) replaceFile(file, json);
  return removed;
}

std::vector<Entry> list(const fs::path& file) {
  std::vector<Entry> entries;
  const auto json = readJson(file);
  if (!json || !json->contains("auths") || !(*json)["auths"].is_object()) return entries;
  for (const auto& [name, value] : (*json)["auths"].items()) {
    auto pair = fromAuthEntry(value.dump(), name);
    entries.push_back({registryKey(name), pair ? pair->first : ""});
  }
  return entries;
}

}  // namespace ctr::image::credentials
