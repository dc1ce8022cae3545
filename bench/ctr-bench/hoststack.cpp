#include "hoststack.hpp"

#include <sys/stat.h>

#include "ctr/error.hpp"
#include "ctr/process.hpp"

namespace ctr::bench {

namespace fs = std::filesystem;

fs::path buildHostStackImage(const std::string& ctr, const fs::path& workdir) {
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
