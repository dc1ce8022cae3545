// execute(): join the shared image, assemble the root, hand over, execve. No supervisor:
// the process that mpirun or the scheduler started becomes the app.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "ctr/error.hpp"
#include "ctr/handover.hpp"
#include "ctr/log.hpp"
#include "ctr/runtime.hpp"
#include "rootfs.hpp"
#include "shared_mount.hpp"

namespace ctr::runtime {

namespace {

std::string envGet(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& kv : env)
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  return {};
}

bool isExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// execvpe(3) semantics with the container's PATH (glibc's execvpe reads the caller's).
std::string findCommand(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return isExecutableFile(name) ? name : "";
  size_t start = 0;
  for (;;) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (isExecutableFile(candidate)) return candidate;
    if (end == std::string::npos) return {};
    start = end + 1;
  }
}

bool hasEnvScripts() {
  DIR* dir = ::opendir(std::string(launch::kEnvScriptDir).c_str());
  if (!dir) return false;
  bool found = false;
  while (dirent* e = ::readdir(dir)) {
    size_t n = std::strlen(e->d_name);
    if (n > 3 && std::strcmp(e->d_name + n - 3, ".sh") == 0) {
      found = true;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

std::vector<launch::EnvVar> toEnvVars(const std::vector<std::string>& kvs) {
  std::vector<launch::EnvVar> vars;
  for (const auto& kv : kvs) {
    auto eq = kv.find('=');
    vars.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return vars;
}

[[noreturn]] void execCommand(const std::vector<std::string>& argv,
                              const std::vector<std::string>& env, const std::string& resolved) {
  auto toC = [](const std::vector<std::string>& v) {
    std::vector<char*> c;
    for (const auto& s : v) c.push_back(const_cast<char*>(s.c_str()));
    c.push_back(nullptr);
    return c;
  };
  auto cargv = toC(argv);
  auto cenv = toC(env);
  ::execve(resolved.c_str(), cargv.data(), cenv.data());
  if (errno == ENOEXEC) {  // a script without "#!": run it with /bin/sh, as execvp does
    std::vector<std::string> shArgv = {"/bin/sh", resolved};
    shArgv.insert(shArgv.end(), argv.begin() + 1, argv.end());
    auto cshArgv = toC(shArgv);
    ::execve("/bin/sh", cshArgv.data(), cenv.data());
  }
  throw sysError("cannot execute " + resolved + " in the container");
}

}  // namespace

void execute(const launch::LaunchPlan& plan) {
  // Read on the host, before any namespace change.
  SeccompProgram seccomp = withContext(
      "seccomp profile", [&] { return loadSeccompProgram(plan.seccompProfile, plan.stateDir); });

  SharedImage image = joinSharedImage(plan);
  assembleRoot(plan, image);

  if (::chdir(plan.workdir.c_str()) != 0) {
    spdlog::warn("working directory {} is not available in the container ({}): using /",
                 plan.workdir, std::strerror(errno));
    if (::chdir("/") != 0) throw sysError("chdir /");
  }

  std::vector<std::string> argv = plan.argv;
  if (plan.command == launch::Command::Run && !isExecutableFile(argv[0])) {
    if (!isExecutableFile("/singularity"))
      throw Error("the image has no runscript (/.singularity.d/runscript or /singularity)");
    argv[0] = "/singularity";
  }

  log::StepTimer handover("hand-over");
  const std::string path = envGet(plan.environment, "PATH");
  std::string resolved = findCommand(argv[0], path);
  const bool envScripts = plan.sourceEnvScripts && hasEnvScripts();
  if (envScripts) {
    if (resolved.empty()) {
      // The image's env scripts may extend PATH (conda images do): let the shell look the
      // command up after sourcing them, and keep ctr's one-line error and status.
      std::vector<std::string> checked = {
          "/bin/sh", "-c",
          "command -v \"$1\" >/dev/null 2>&1 || { echo \"ctr: error: command '$1' not found "
          "in the container\" >&2; exit 255; }; exec \"$@\"",
          "ctr-check"};
      checked.insert(checked.end(), argv.begin(), argv.end());
      argv = std::move(checked);
    }
    argv = launch::envScriptArgv(argv, toEnvVars(plan.userEnvironment));
    resolved = "/bin/sh";
    if (!isExecutableFile(resolved))
      throw Error("the image has environment scripts but no /bin/sh to source them");
  } else if (resolved.empty()) {
    throw Error("command '" + argv[0] + "' not found in the container");
  }

  setNoNewPrivs();
  dropAllCapabilities();
  installSeccomp(seccomp);
  // The users lock stays open across execve: the app and its children keep the image alive.
  (void)image.usersLock.release();
  execCommand(argv, plan.environment, resolved);
}

}  // namespace ctr::runtime
