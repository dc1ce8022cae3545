#include "hoststack.hpp"

#include <sys/stat.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/run_process.hpp"

namespace ctr::bench {

namespace fs = std::filesystem;

namespace {

// The mount targets of `ctr exec EXEC_ARGS IMAGE true` (from --explain --json) that the
// skeleton at `root` lacks, created there: a directory, or an empty file where the source
// is a file (an identity file, /etc/hosts, ...). Returns how many it created.
int addMissingTargets(const std::string& ctr, const fs::path& image, const fs::path& root,
                      const std::vector<std::string>& execArgs, const std::vector<std::string>& env) {
  std::vector<std::string> argv{ctr, "exec", "--explain", "--json"};
  argv.insert(argv.end(), execArgs.begin(), execArgs.end());
  argv.insert(argv.end(), {image.string(), "true"});
  ProcessOptions o;
  o.captureStdout = true;
  o.captureStderr = true;
  o.captureLimit = 4 << 20;
  o.env = env;
  o.replaceEnv = !env.empty();
  auto r = runProcessChecked(argv, o);
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(r.capturedStdout);
  } catch (const nlohmann::json::exception& e) {
    throw Error("ctr exec --explain --json printed no plan for the host-stack image (" + std::string(e.what()) + ")");
  }
  int created = 0;
  for (const auto& m : plan.value("mounts", nlohmann::json::array())) {
    const std::string kind = m.value("kind", ""), destination = m.value("destination", "");
    if (kind == "symlink" || destination.empty() || destination[0] != '/') continue;
    fs::path target = root / fs::path(destination).relative_path();
    std::error_code ec;
    if (fs::exists(fs::symlink_status(target, ec))) continue;
    bool file = kind == "identity" || kind == "file";
    if (kind == "bind") {
      struct stat st {};
      if (::stat(m.value("source", "").c_str(), &st) != 0) continue;  // skipped by ctr too
      file = !S_ISDIR(st.st_mode);
    }
    fs::create_directories(file ? target.parent_path() : target, ec);
    if (ec) throw Error("host-stack image: cannot create the mount target " + destination + ": " + ec.message());
    if (file && !std::ofstream(target)) throw Error("host-stack image: cannot create the mount target " + destination);
    ++created;
  }
  return created;
}

}  // namespace

fs::path buildHostStackImage(const std::string& ctr, const fs::path& workdir, const std::vector<std::string>& execArgs,
                             const std::vector<std::string>& env) {
  fs::path root = workdir / "host-stack-root";
  fs::path image = workdir / "host-stack.sif";
  fs::create_directories(root);
  // Mount points for the host's trees and for what ctr binds by default; the rest of a
  // Debian-style merged-/usr root is links into /usr.
  for (const char* d : {"usr", "etc", "opt", "tmp", "var/tmp", "proc", "sys", "dev", "home", "root", "run", "mnt", "srv", "work"})
    fs::create_directories(root / d);
  for (const char* l : {"bin", "sbin", "lib", "lib64", "lib32", "libx32"}) {
    std::error_code ec;
    if (fs::exists(fs::path("/usr") / l) || std::string(l) == "bin" || std::string(l) == "lib")
      fs::create_symlink(fs::path("usr") / l, root / l, ec);
  }
  ::chmod((root / "tmp").c_str(), 01777);
  ::chmod((root / "var/tmp").c_str(), 01777);
  runProcessChecked({ctr, "-q", "build", "--force", image.string(), root.string()});
  // Every mount target of the B launches in the image itself: a target the image lacks
  // makes ctr lay an overlay over the image to create it, and every absolute path the
  // workload opens then walks through the overlay's root (the smallfiles-dir finding in
  // docs/benchmark-guide.md). A real image has /etc/hosts and the like; this one must too.
  if (addMissingTargets(ctr, image, root, execArgs, env) > 0)
    runProcessChecked({ctr, "-q", "build", "--force", image.string(), root.string()});
  fs::remove_all(root);
  return image;
}

std::vector<std::string> hostStackBindArgs() {
  std::vector<std::string> args{"--bind", "/usr:/usr:ro", "--bind", "/etc:/etc:ro"};
  if (fs::is_directory("/opt")) args.insert(args.end(), {"--bind", "/opt:/opt:ro"});
  return args;
}

void addBindFor(std::vector<std::string>& args, const fs::path& dir) {
  std::string d = dir.lexically_normal().string();
  for (const char* visible : {"/usr/", "/etc/", "/opt/", "/tmp/"})
    if ((d + "/").starts_with(visible)) return;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--bind") continue;
    std::string src = args[i + 1].substr(0, args[i + 1].find(':'));
    if ((d + "/").starts_with(src + "/")) return;
  }
  args.insert(args.end(), {"--bind", d});
}

}  // namespace ctr::bench
