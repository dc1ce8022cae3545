#include "host.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "ctr/run_process.hpp"
#include "launch.hpp"

namespace ctr::bench {

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string firstLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (auto nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

// The stdout of a program found in PATH, or nullopt when it is absent or fails.
std::optional<std::string> output(const std::vector<std::string>& argv) {
  const char* path = std::getenv("PATH");
  if (findInPath(argv[0], path ? path : "/usr/bin:/bin").empty()) return std::nullopt;
  try {
    ProcessOptions o;
    o.captureStdout = true;
    o.captureStderr = true;
    o.captureLimit = 1 << 20;
    auto r = runProcess(argv, o);
    if (!r.ok()) return std::nullopt;
    return r.capturedStdout.empty() ? r.capturedStderr : r.capturedStdout;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

nlohmann::json orNull(const std::optional<std::string>& s) {
  return s ? nlohmann::json(firstLine(*s)) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json collectHostFingerprint(const std::string& ctr) {
  nlohmann::json h = nlohmann::json::object();
  struct utsname u {};
  ::uname(&u);
  h["hostname"] = u.nodename;
  h["kernel"] = std::string(u.release) + " " + u.version;
  h["machine"] = u.machine;
  std::string cpuinfo = readFile("/proc/cpuinfo");
  std::smatch m;
  if (std::regex_search(cpuinfo, m, std::regex("model name\\s*:\\s*([^\\n]*)"))) h["cpu_model"] = m[1].str();
  h["online_cpus"] = ::sysconf(_SC_NPROCESSORS_ONLN);
  auto cores = output({"hwloc-calc", "--number-of", "core", "machine:0"});
  auto numa = output({"hwloc-calc", "--number-of", "numa", "machine:0"});
  h["cores"] = cores ? nlohmann::json(std::stoi(*cores)) : nlohmann::json(::sysconf(_SC_NPROCESSORS_ONLN));
  h["numa_nodes"] = numa ? nlohmann::json(std::stoi(*numa)) : nlohmann::json(nullptr);
  if (auto topo = output({"lstopo-no-graphics", "--of", "console", "--no-io"})) h["hwloc_topology"] = *topo;
  std::string meminfo = readFile("/proc/meminfo");
  if (std::regex_search(meminfo, m, std::regex("MemTotal:\\s*([0-9]+) kB")))
    h["memory_bytes"] = std::stoll(m[1].str()) * 1024;
  std::string governor = firstLine(readFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"));
  h["governor"] = governor.empty() ? nlohmann::json(nullptr) : nlohmann::json(governor);
  h["mpi"] = orNull(output({"mpirun", "--version"}));
  // OpenBLAS names itself in its config string; the package version is what admins track.
  h["blas"] = orNull(output({"dpkg-query", "-W", "-f", "${Package} ${Version}", "libopenblas0-pthread"}));
  if (auto smi = output({"nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm",
                         "--format=csv,noheader"})) {
    h["gpu"] = *smi;
  } else {
    h["gpu"] = nullptr;
  }
  h["ctr"] = ctr;
  h["ctr_version"] = orNull(output({ctr, "--version"}));
  if (auto j = output({ctr, "check", "--host", "--json"})) {
    auto parsed = nlohmann::json::parse(*j, nullptr, false);
    if (!parsed.is_discarded()) h["ctr_check_host"] = parsed;
  }
  if (auto j = output({ctr, "check", "--json"})) {
    auto parsed = nlohmann::json::parse(*j, nullptr, false);
    h["ctr_check"] = parsed.is_discarded() ? nlohmann::json(nullptr) : parsed;
  }
  h["uid"] = ::getuid();
  h["is_root"] = ::geteuid() == 0;
  if (const char* user = std::getenv("USER")) h["user"] = user;
  return h;
}

}  // namespace ctr::bench
