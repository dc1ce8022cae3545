// `ctr registry login|logout|list` (Apptainer's `registry` command): credentials for a
// registry, checked against it and kept in ctr's own auth file (ctr/credentials.hpp says
// where every launch and pull looks for them).
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "ctr/credentials.hpp"
#include "ctr/error.hpp"
#include "ctr/oci.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

namespace credentials = image::credentials;

struct RegistryArgs {
  std::string registry;
  std::string username;
  bool passwordStdin = false;
  std::string authFile;
};

std::filesystem::path authFileOf(const RegistryArgs& args) {
  if (!args.authFile.empty()) return args.authFile;
  auto file = credentials::defaultPlaces().ctrFile;
  if (file.empty()) throw Error("no home directory to keep credentials in: give --authfile FILE").withStatus(1);
  return file;
}

// A line from stdin; at a terminal after `prompt`, without echo when `secret`.
std::string readLine(const char* prompt, bool secret) {
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  termios saved{};
  if (terminal) {
    std::fputs(prompt, stderr);
    if (secret && ::tcgetattr(STDIN_FILENO, &saved) == 0) {
      termios quiet = saved;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
  }
  std::string line;
  std::getline(std::cin, line);
  if (terminal && secret) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    std::fputs("\n", stderr);
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

int login(const RegistryArgs& args) {
  const std::string key = credentials::registryKey(args.registry);
  if (key.empty()) throw Error("registry login: name the registry (host[:port])").withStatus(1);
  if (!args.passwordStdin && ::isatty(STDIN_FILENO) == 0)
    throw Error("registry login " + key + ": no terminal to ask the password at: give --password-stdin").withStatus(1);
  std::string username = args.username;
  if (username.empty()) {
    if (args.passwordStdin || ::isatty(STDIN_FILENO) == 0)
      throw Error("registry login " + key + ": give --username with --password-stdin").withStatus(1);
    username = readLine("Username: ", false);
  }
  const std::string password = readLine("Password: ", true);
  if (username.empty() || password.empty())
    throw Error("registry login " + key + ": an empty " + (username.empty() ? "username" : "password")).withStatus(1);
  image::oci::PullOptions options;
  options.username = username;
  options.password = password;
  options.limits = config::loadDefaultPolicy().pull;
  image::oci::checkLogin(key == "docker.io" ? "registry-1.docker.io" : key, options);
  const auto file = authFileOf(args);
  credentials::store(file, key, username, password);
  std::fprintf(stderr, "Login to %s as %s succeeded; credentials in %s\n", key.c_str(), username.c_str(),
               file.c_str());
  return 0;
}

int logout(const RegistryArgs& args) {
  const std::string key = credentials::registryKey(args.registry);
  const auto file = authFileOf(args);
  if (!credentials::remove(file, key))
    throw Error("registry logout: no credentials for " + key + " in " + file.string());
  std::fprintf(stderr, "Logged out of %s (%s)\n", key.c_str(), file.c_str());
  return 0;
}

int listLogins(const RegistryArgs& args) {
  const auto file = authFileOf(args);
  std::printf("%-40s %s\n", "REGISTRY", "USERNAME");
  for (const auto& entry : credentials::list(file)) std::printf("%-40s %s\n", entry.registry.c_str(), entry.username.c_str());
  return 0;
}

}  // namespace

void registerRegistry(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("registry", "Credentials for registries: login, logout, list (ctr's own auth file; "
                                             "Docker's, podman's and enroot's are read too)");
  cmd->require_subcommand(1);
  auto args = std::make_shared<RegistryArgs>();
  auto* in = cmd->add_subcommand("login", "Check credentials with a registry and keep them (0600, in "
                                          "$XDG_CONFIG_HOME/ctr/auth.json or ~/.config/ctr/auth.json)");
  in->add_option("-u,--username", args->username, "The user name (asked for at a terminal when not given)");
  in->add_flag("--password-stdin", args->passwordStdin, "Read the password from stdin (else asked for, unechoed)");
  in->add_option("--authfile", args->authFile, "Keep the credentials in FILE instead");
  in->add_option("registry", args->registry, "The registry: host[:port] (docker://, oras:// prefixes accepted)")
      ->required();
  in->callback([&ctx, args] { ctx.action = [args] { return login(*args); }; });
  auto* out = cmd->add_subcommand("logout", "Forget the credentials kept for a registry");
  out->add_option("--authfile", args->authFile, "The auth file (default: ctr's)");
  out->add_option("registry", args->registry, "The registry: host[:port]")->required();
  out->callback([&ctx, args] { ctx.action = [args] { return logout(*args); }; });
  auto* ls = cmd->add_subcommand("list", "The registries with credentials kept, and their user names");
  ls->add_option("--authfile", args->authFile, "The auth file (default: ctr's)");
  ls->callback([&ctx, args] { ctx.action = [args] { return listLogins(*args); }; });
}

}  // namespace ctr::cli
