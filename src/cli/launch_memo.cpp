#include "launch_memo.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "ctr/configured.hpp"
#include "ctr/environment.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/host_facts.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/plan_codec.hpp"
#include "ctr/strings.hpp"

extern char** environ;

namespace ctr::cli {

namespace {

constexpr std::string_view kMagic = "ctr launch memo 1\n";
constexpr std::size_t kMaxFileBytes = 1u << 20;
constexpr std::size_t kMaxMemos = 64;  // the oldest go first

std::int64_t nanoseconds(const timespec& t) { return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

// A file as stat(2) shows it, as bytes: device, inode, mode, owner, size, mtime and ctime. A
// change of its content or metadata moves its ctime (which no user can set back); a
// directory's moves when an entry is added, removed or renamed in it. "missing" where there is
// none; "denied" where the user may not look (a PATH directory under another user's home: what
// is in it is as hidden from the planner, and a change of that shows as another answer); ""
// where it can be neither looked at nor said to be missing or denied.
std::string identityOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? "missing" : errno == EACCES ? "denied" : "";
  const std::array<std::uint64_t, 7> fields{st.st_dev, st.st_ino, st.st_mode, st.st_uid,
                                            static_cast<std::uint64_t>(st.st_size),
                                            static_cast<std::uint64_t>(nanoseconds(st.st_mtim)),
                                            static_cast<std::uint64_t>(nanoseconds(st.st_ctim))};
  return std::string(reinterpret_cast<const char*>(fields.data()), sizeof fields);
}

// The memo file: length-prefixed fields in the order they are read.
void put(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }
void put(std::string& out, std::string_view text) {
  put(out, std::uint64_t{text.size()});
  out.append(text);
}
struct Cursor {
  std::string_view rest;
  bool ok = true;
  std::uint64_t number() {
    std::uint64_t value = 0;
    if (rest.size() < sizeof value) return ok = false, 0;
    std::memcpy(&value, rest.data(), sizeof value);
    rest.remove_prefix(sizeof value);
    return value;
  }
  std::string_view text() {
    const std::uint64_t size = number();
    if (!ok || size > rest.size()) return ok = false, std::string_view{};
    auto text = rest.substr(0, size);
    rest.remove_prefix(size);
    return text;
  }
};

std::string configPathNow() {
  if (const char* override = std::getenv("CTR_CONFIG"); override && *override) return override;
  return sysconfPath().string();
}

// The files whose identity any launch plan may depend on, besides its image and the
// directories its FUSE servers are looked for in.
std::vector<std::string> fixedInputFiles() {
  return {"/proc/self/exe", configPathNow(), configured::kSysconfPath, "/etc/nsswitch.conf", "/etc/passwd",
          "/etc/group",     configured::kHelperPath, "/dev/loop-control"};
}

// The files whose identity this plan may depend on (the needs say which of the FUSE
// servers' search directories count), and `looked` (what the host probes read).
std::vector<std::string> inputFiles(const PlanInputs& in, const std::vector<std::string>& looked) {
  auto files = fixedInputFiles();
  files.insert(files.end(), looked.begin(), looked.end());
  files.push_back(in.image.path.string());
  auto searched = [&](Program program) {
    for (const auto& dir : programSearchDirs(program)) files.push_back(dir.string());
  };
  if (in.needs.squashfsServers.ctrSquashfs) searched(Program::SquashfsServer);
  if (in.needs.squashfsServers.squashfuse) searched(Program::Squashfuse);
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

bool ownPrivateDir(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() &&
         (st.st_mode & 077) == 0;
}

// Removes the oldest memos beyond kMaxMemos (looked at only when there are more).
void prune(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d))
    if (std::string_view(e->d_name).starts_with("launch-")) names.emplace_back(e->d_name);
  std::vector<std::pair<std::int64_t, std::string>> memos;
  for (auto& name : names) {
    struct stat st {};
    if (names.size() > kMaxMemos && ::fstatat(::dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      memos.emplace_back(nanoseconds(st.st_mtim), std::move(name));
  }
  ::closedir(d);
  if (memos.size() <= kMaxMemos) return;
  std::sort(memos.begin(), memos.end());
  for (std::size_t i = 0; i + kMaxMemos < memos.size(); ++i) ::unlink((dir + "/" + memos[i].second).c_str());
}

// "K=V" of the launcher's wiring to a rank (launch::isLauncherWiring): not in the key, so
// that every rank of a job, and of later jobs, finds the plan one of them kept.
bool launcherWiring(std::string_view entry) {
  const auto eq = entry.find('=');
  return eq != std::string_view::npos && launch::isLauncherWiring(entry.substr(0, eq));
}

// What a kept plan's holder scope came from (launch::planHolderScope): this process's cgroups
// and mount namespace, as they are now.
std::string holderScopeNow() { return readFileIfPresent("/proc/self/cgroup") + host::ownMountNamespace(); }

}  // namespace

void LaunchMemo::beforeLooking(const std::vector<std::string>& paths) {
  for (const auto& path : paths)
    if (!before_.contains(path)) before_.emplace(path, identityOf(path));
  looked_.insert(looked_.end(), paths.begin(), paths.end());
}

void LaunchMemo::beforePlanning(const std::string& imageArgument) {
  // Nothing to look at for a launch whose plan whyNotKept will refuse anyway: a registry or
  // URL image.
  std::error_code ec;
  const auto image = std::filesystem::absolute(imageArgument, ec);
  if (ec || imageArgument.find("://") != std::string::npos) return;
  auto paths = fixedInputFiles();
  paths.push_back(image.string());
  for (auto program : {Program::SquashfsServer, Program::Squashfuse})
    for (const auto& dir : programSearchDirs(program)) paths.push_back(dir.string());
  for (const auto& path : paths)
    if (!before_.contains(path)) before_.emplace(path, identityOf(path));  // which count: inputFiles
  scopeBefore_ = holderScopeNow();
}

std::string whyNotKept(const launch::LaunchPlan& plan, const PlanInputs& in) {
  const auto& needs = in.needs;
  if (plan.command == launch::Command::Instance || plan.instance || plan.join) return "an instance";
  if (plan.build) return "a build step";
  if (plan.supervised() || needs.limits) return "resource limits or --stats (the node's cgroups)";
  if (needs.devices.amd || needs.devices.gpus || needs.devices.cdi) return "--rocm, --gpus or --device (CDI)";
  if (needs.devices.nvidia && (!plan.devices || plan.devices->drivers.empty()))
    return "--nv found no driver to inject (what it said about that is not kept)";
  if (needs.devices.nvidia && !plan.devices->drivers.front().scanFromCache)
    return "--nv scanned the driver in this launch (the next one reads the scan's cache and keeps its plan)";
  if (needs.devices.nvidia && (!in.host.cdi || !in.host.cdi->specs.empty()))
    return "--nv with a CDI spec on the node (the memo does not look inside spec files)";
  if (needs.mpi) return "--mpi=bind (the host MPI's files)";
  if (needs.stageDir || plan.staging) return "the image may be staged (the stage directory)";
  if (needs.subordinateIds || plan.fakeroot) return "--fakeroot (/etc/subuid, /etc/subgid)";
  if (!needs.overlayFiles.empty() || !needs.datasetFiles.empty()) return "overlay or dataset image files";
  if (needs.signatureImage) return "ctr.conf's execution rules (the image's signatures)";
  if (in.optionsOutsideKey) return "the options read files or warn outside the plan (--env-file, --overlay, --stats, --lazy)";
  if (!in.image.reference.empty() || in.image.lazy) return "a registry or lazily read image";
  if (!in.host.userFromFiles) return "the user's passwd or group entries come from an NSS service, not /etc";
  if (!plan.envProgram.wiringPassesThrough)
    return "the image or --no-env changes the launcher's wiring (OMPI_, PMIX_, PMI_, SLURM_ variables), which "
           "another rank's plan would take as it is";
  return {};
}

std::optional<LaunchMemo> LaunchMemo::of(int argc, char** argv) {
  const char* mode = std::getenv("CTR_LAUNCH_MEMO");
  const std::string_view setting = mode ? mode : "";
  if (setting == "off") return std::nullopt;
  const uid_t uid = ::getuid();
  const char* runtimeDir = std::getenv("XDG_RUNTIME_DIR");
  // Not the last resort where others took every name (a private directory beside them,
  // found with a warning that is the launch's to print): such launches keep no plan.
  const std::string stateDir = host::chooseStateDir(uid, runtimeDir ? runtimeDir : "", host::LastResort::No);
  std::array<char, PATH_MAX> cwd{};
  if (stateDir.empty() || !::getcwd(cwd.data(), cwd.size())) return std::nullopt;

  LaunchMemo memo;
  memo.check_ = setting == "check";
  std::string& key = memo.key_;
  key.reserve(4096);
  key += kMagic;
  for (int i = 0; i < argc; ++i) key.append(argv[i]).push_back('\0');
  key.append("\ncwd ").append(cwd.data()).append("\nenv\n");
  for (char** e = environ; e && *e; ++e)
    if (!launcherWiring(*e)) key.append(*e).push_back('\0');
  key.append("\nids ").append(std::to_string(uid)).append(" ").append(std::to_string(::getgid()));
  // Sized by the kernel's answer: an array of NGROUPS_MAX (65536) would zero 256 KiB of stack,
  // 62 page faults, in every launch.
  std::vector<gid_t> groups(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  const int count = ::getgroups(static_cast<int>(groups.size()), groups.data());
  for (int i = 0; i < count; ++i) key.append(" ").append(std::to_string(groups[static_cast<std::size_t>(i)]));
  key.append("\nconfig ").append(configPathNow()).append("\nstate ").append(stateDir);
  memo.dir_ = stateDir + "/memo";
  std::array<std::uint8_t, 8> hash{};
  const std::uint64_t h = fnv1a64(key);
  for (std::size_t i = 0; i < hash.size(); ++i) hash[i] = static_cast<std::uint8_t>(h >> (8 * i));
  memo.file_ = memo.dir_ + "/launch-" + toHex(hash);
  return memo;
}

std::optional<LaunchMemo::Kept> LaunchMemo::find() {
  UniqueFd fd(::open(file_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    missed_ = errno == ENOENT ? "no plan kept for this launch yet" : "cannot open " + file_ + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::getuid() ||
      static_cast<std::size_t>(st.st_size) > kMaxFileBytes) {
    missed_ = file_ + " is not a memo of the user's";
    return std::nullopt;
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  if (readAt(fd.get(), 0, std::span<char>(bytes)) != bytes.size()) {
    missed_ = "cannot read " + file_;
    return std::nullopt;
  }
  Cursor in{bytes};
  if (!bytes.starts_with(kMagic) || (in.rest.remove_prefix(kMagic.size()), in.text()) != key_ || !in.ok) {
    missed_ = file_ + " holds another launch's plan";
    return std::nullopt;
  }
  for (std::uint64_t n = in.number(); in.ok && n > 0; --n) {
    const std::string path(in.text());
    if (const auto was = in.text(); in.ok && identityOf(path) != was) {
      missed_ = path + " changed since the plan was kept";
      return std::nullopt;
    }
  }
  if (in.ok && in.text() != holderScopeNow()) {
    missed_ = "this process's cgroups or mount namespace differ from the kept plan's";
    return std::nullopt;
  }
  Kept kept;
  kept.verbosity = static_cast<log::Verbosity>(in.number());
  const std::string_view plan = in.text();
  try {
    if (!in.ok || !in.rest.empty() || kept.verbosity > log::Verbosity::Debug) throw Error("truncated");
    kept.plan = launch::decodePlan(plan);
    if (!kept.plan.envProgram.wiringPassesThrough) throw Error("a plan whose wiring does not pass through");
    // This rank's wiring in place of the keeping launch's (whyNotKept: it passes through).
    std::vector<std::string> host;  // its wiring: the rest of environ is in the key
    for (char** e = environ; e && *e; ++e)
      if (launcherWiring(*e)) host.emplace_back(*e);
    kept.plan.environment = launch::rewiredEnvironment(kept.plan.environment, host);
  } catch (const Error& e) {
    missed_ = file_ + " is unreadable (" + e.oneLine() + "): removed";
    ::unlink(file_.c_str());
    return std::nullopt;
  }
  return kept;
}

void LaunchMemo::afterPlanning(const launch::LaunchPlan& plan, const PlanInputs& inputs, log::Verbosity verbosity,
                               const launch::LaunchPlan* kept) {
  if (kept) {
    if (launch::encodePlan(plan) != launch::encodePlan(*kept))
      throw Error("launch memo " + file_ + ": the kept plan differs from the one decided now (CTR_LAUNCH_MEMO=check)");
    spdlog::debug("launch memo: the kept plan {} is the one decided now", file_);
    return;
  }
  spdlog::debug("launch memo: {}", missed_);
  if (const auto why = whyNotKept(plan, inputs); !why.empty()) {
    spdlog::debug("launch memo: the plan is not kept: {}", why);
    return;
  }
  const std::string configPath = configPathNow();
  if (inputs.policy.pull.configFile != configPath) return;  // not the ctr.conf the key names
  const std::string stateDir = dir_.substr(0, dir_.rfind('/'));
  if (!ownPrivateDir(stateDir) || (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) || !ownPrivateDir(dir_)) {
    spdlog::debug("launch memo: no private {} (the first launch makes the state directory)", dir_);
    return;
  }
  std::string out(kMagic);
  put(out, key_);
  const auto files = inputFiles(inputs, looked_);
  put(out, std::uint64_t{files.size()});
  for (const auto& path : files) {
    const auto was = before_.find(path);
    if (was == before_.end() || was->second.empty())
      return spdlog::debug("launch memo: the plan is not kept: {} could not be looked at before planning", path);
    put(out, path);
    put(out, was->second);
  }
  put(out, scopeBefore_);
  put(out, static_cast<std::uint64_t>(verbosity));
  put(out, launch::encodePlan(plan));

  const std::string temporary = file_ + ".new-" + std::to_string(::getpid());
  try {
    UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) throw sysError("create " + temporary);
    writeAllTo(fd.get(), out, temporary);
    if (::rename(temporary.c_str(), file_.c_str()) != 0) throw sysError("rename " + temporary);
  } catch (const Error& e) {
    ::unlink(temporary.c_str());
    spdlog::debug("launch memo: the plan is not kept: {}", e.oneLine());
    return;
  }
  spdlog::debug("launch memo: the plan is kept in {}", file_);
  prune(dir_);
}

}  // namespace ctr::cli
