// Instances (`ctr instance start|list|stop|stats`, `exec instance://NAME`): a container kept
// running by ctr's init as PID 1 of its own PID namespace, and its join record in the
// user's state directory (docs/design-slurm.md, section 2). The keeper's own launch is
// execute.cpp's path (executeInstance); this file starts it, records it, finds it, joins
// it and stops it.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/handover.hpp"
#include "ctr/instance.hpp"
#include "ctr/log.hpp"
#include "ctr/runtime.hpp"
#include "ctr/strings.hpp"
#include "cgroup.hpp"
#include "holder_protocol.hpp"
#include "instance_state.hpp"

namespace ctr::runtime {

namespace {

UniqueFd pidfdOpen(pid_t pid) { return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))); }

bool hasEnded(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

std::uint64_t namespaceInode(pid_t pid, const std::string& type) {
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid) + "/ns/" + type).c_str(), &st) != 0) return 0;
  return st.st_ino;
}

// The instance's keeper still runs: same pid, same start time, same namespaces.
bool isRunning(const launch::InstanceRecord& r) {
  if (processStartTime(r.keeper) != r.keeperStart) return false;
  return std::all_of(r.namespaces.begin(), r.namespaces.end(),
                     [&](const launch::JoinNamespace& ns) { return namespaceInode(r.keeper, ns.type) == ns.inode; });
}

// <state>/instances, created private; refused when it is not the user's own.
void ensureInstanceDir(const launch::InstancePlan& files, const std::string& stateDir) {
  for (const auto& dir : {stateDir, files.dir}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw sysError("cannot create " + dir);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) throw sysError("stat " + dir);
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022) != 0)
      throw Error(dir + " is not a private directory of yours: refusing to keep instances there");
  }
}

// NAME.lock, held while the instance is started, stopped or found stale and removed. The
// one who removes it holds it: a process that locked a file no longer at the path opens
// the new one and locks again.
UniqueFd lockInstance(const launch::InstancePlan& files, int operation = LOCK_EX) {
  for (;;) {
    UniqueFd fd(::open(files.lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd && errno == ENOENT) {  // the directory was removed as it emptied
      if (::mkdir(files.dir.c_str(), 0700) == 0 || errno == EEXIST) continue;
      throw sysError("create " + files.dir);
    }
    if (!fd) throw sysError("open " + files.lock);
    if (!lockFile(fd.get(), operation, "instance lock")) return {};
    struct stat held {}, named {};
    if (::fstat(fd.get(), &held) == 0 && ::stat(files.lock.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      return fd;
  }
}

// Under the instance's lock: its files gone (the lock file last), and the instances
// directory once it is empty (a start that finds it gone makes it again: lockInstance).
void removeInstanceFiles(const launch::InstancePlan& files) {
  for (const auto* path : {&files.record, &files.join, &files.logOut, &files.logErr, &files.seccomp, &files.lock})
    ::unlink(path->c_str());
  ::rmdir(files.dir.c_str());
}

std::optional<launch::InstanceRecord> readRecord(const launch::InstancePlan& files) {
  const std::string text = readFileIfPresent(files.record);
  if (text.empty()) return std::nullopt;
  return launch::instanceRecordFromJson(text, files.record);
}

// Under the lock: the record of a running instance, or nullopt (a stale one's files removed).
std::optional<launch::InstanceRecord> liveRecord(const launch::InstancePlan& files) {
  std::optional<launch::InstanceRecord> record;
  try {
    record = readRecord(files);
  } catch (const Error& e) {
    spdlog::warn("{}: removed", e.oneLine());
  }
  if (record && isRunning(*record)) return record;
  if (record) {
    spdlog::debug("instance {} has ended (keeper pid {}): its files removed", files.name, record->keeper);
    removeCgroupDirs(record->cgroups);
  }
  for (const auto* path : {&files.record, &files.logOut, &files.logErr, &files.seccomp}) ::unlink(path->c_str());
  return std::nullopt;
}

std::string utcNow() {
  std::array<char, 32> text{};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

// `path` with `text`, whole or not at all (written beside it, then renamed), mode 0600;
// relative to the directory `dir` (AT_FDCWD: an absolute path).
void writeInstanceFile(int dir, const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw sysError("write " + tmp);
  fd.reset();
  if (::renameat(dir, tmp.c_str(), dir, path.c_str()) != 0) throw sysError("rename " + tmp);
}

std::string baseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The record of the instance kept by `keeper`, once it is ready: `environment` is what its
// keeper evaluated, the rest this process's (the start environment, for the join
// information's differences).
launch::InstanceRecord newRecord(const launch::LaunchPlan& plan, pid_t keeper, pid_t standIn, std::uint64_t keeperStart,
                                 std::vector<std::string> environment, std::string workdir, const LaunchCgroup& cgroup) {
  const auto& files = *plan.instance;
  launch::InstanceRecord record;
  record.name = files.name;
  record.image = plan.image.path.string();
  record.started = utcNow();
  record.keeper = keeper;
  record.keeperStart = keeperStart;
  record.standIn = standIn;
  record.home = plan.user.home;
  record.logOut = files.logOut;
  record.logErr = files.logErr;
  record.fakeroot = plan.fakeroot.has_value();
  record.cgroups = cgroup.dirs();
  for (const auto& [type, own] : {std::pair{"user", true}, {"mnt", true}, {"ipc", plan.namespaces.ipc},
                                  {"uts", plan.namespaces.uts}, {"net", plan.namespaces.net},
                                  {"pid", plan.namespaces.pid}}) {
    if (!own) continue;
    record.namespaces.push_back({type, namespaceInode(keeper, type)});
    if (record.namespaces.back().inode == 0) throw Error(std::string("cannot read its ") + type + " namespace");
  }
  record.environment = std::move(environment);
  for (char** e = environ; e && *e; ++e) record.startEnvironment.emplace_back(*e);
  record.workdir = std::move(workdir);
  return record;
}

// The record's files in the instance's directory (`dir`: AT_FDCWD for the plan's absolute
// paths, or the directory's descriptor for their names): the compiled filter the keeper
// runs under, for joins that do not go through ctr (the Slurm plugin's tasks load it as it
// is), and the join file before the record (whoever finds the record finds it too).
void writeRecordFiles(const launch::InstancePlan& files, int dir, launch::InstanceRecord& record,
                      const SeccompProgram* seccomp) {
  const auto name = [dir](const std::string& path) { return dir == AT_FDCWD ? path : baseName(path); };
  if (seccomp) {
    writeInstanceFile(dir, name(files.seccomp), seccomp->bpf);
    record.seccomp = files.seccomp;
  }
  writeInstanceFile(dir, name(files.join), launch::instanceJoinInfo(record, record.startEnvironment));
  writeInstanceFile(dir, name(files.record), launch::instanceRecordToJson(record));
}

// The keeper's process (forked by startInstance): its own session, no terminal, output to
// the instance's log files; then the launch path, which reports on `report`.
[[noreturn]] void becomeKeeper(const launch::LaunchPlan& plan, const LaunchCgroup* cgroup, int report) {
  try {
    if (::setsid() < 0) throw sysError("setsid");
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    UniqueFd out(::open(plan.instance->logOut.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    UniqueFd err(::open(plan.instance->logErr.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!in || !out || !err) throw sysError("open the instance's log files in " + plan.instance->dir);
    if (::dup2(in.get(), 0) < 0 || ::dup2(out.get(), 1) < 0 || ::dup2(err.get(), 2) < 0) throw sysError("dup2");
    executeInstance(plan, cgroup, report);
  } catch (const Error& e) {
    const std::string line = "error: " + e.oneLine() + "\n";
    (void)!::write(report, line.data(), line.size());
    ::_exit(e.status());
  } catch (const std::exception& e) {
    const std::string line = std::string("error: ") + e.what() + "\n";
    (void)!::write(report, line.data(), line.size());
  }
  ::_exit(kExitFailure);
}

}  // namespace

InstanceFiles openInstanceFiles(const launch::InstancePlan& plan) {
  InstanceFiles files;
  files.dir.reset(::open(plan.dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!files.dir) throw sysError("open " + plan.dir);
  files.parent.reset(::open(plan.dir.substr(0, plan.dir.rfind('/')).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  files.plan = plan;
  return files;
}

void removeOwnInstanceFiles(const InstanceFiles& files) {
  if (!files.dir) return;
  const int dir = files.dir.get();
  auto base = [](const std::string& path) { return path.substr(path.rfind('/') + 1); };
  // O_PATH cannot be read through: the directory again, by its /proc/self/fd name.
  const std::string at = "/proc/self/fd/" + std::to_string(dir) + "/";
  UniqueFd lock(::open((at + base(files.plan.lock)).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return;
  const std::string text = readFileIfPresent(at + base(files.plan.record));
  try {
    if (text.empty() || launch::instanceRecordFromJson(text, files.plan.record).keeperStart != processStartTime(::getpid()))
      return;
  } catch (const Error&) {
    return;
  }
  for (const auto* path : {&files.plan.record, &files.plan.join, &files.plan.logOut, &files.plan.logErr,
                           &files.plan.seccomp, &files.plan.lock})
    ::unlinkat(dir, base(*path).c_str(), 0);
  if (files.parent) ::unlinkat(files.parent.get(), base(files.plan.dir).c_str(), AT_REMOVEDIR);  // once empty
}

std::uint64_t processStartTime(pid_t pid) {
  const std::string stat = readFileIfPresent("/proc/" + std::to_string(pid) + "/stat");
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and ')'; the fields follow the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> field)) return 0;
  try {
    return std::stoull(field);
  } catch (const std::logic_error&) {
    return 0;
  }
}

UniqueFd enterInstance(const launch::JoinPlan& join) {
  const auto ended = [&join] {
    return Error("instance " + join.name + " has ended (its keeper, pid " + std::to_string(join.keeper) +
                 ", is gone): `ctr instance list` shows those running")
        .withStatus(1);
  };
  // The pidfd first: if the keeper is still the same process after the namespaces were
  // opened, they are its.
  UniqueFd keeper = pidfdOpen(join.keeper);
  if (!keeper || processStartTime(join.keeper) != join.keeperStart) throw ended();
  std::vector<std::pair<std::string, UniqueFd>> fds;
  for (const auto& ns : join.namespaces) {
    UniqueFd fd(::open(("/proc/" + std::to_string(join.keeper) + "/ns/" + ns.type).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw ended();
    if (nsInode(fd.get()) != ns.inode) throw ended();
    fds.emplace_back(ns.type, std::move(fd));
  }
  if (hasEnded(keeper.get())) throw ended();
  UniqueFd pid;
  for (auto& [type, fd] : fds) {
    if (type == "pid") {
      pid = std::move(fd);
      continue;
    }
    if (::setns(fd.get(), 0) != 0) throw sysError("enter the " + type + " namespace of instance " + join.name + " (setns)");
  }
  return pid;
}

void reportInstanceReady(int& report, const std::vector<std::string>& environment) {
  if (report < 0) return;
  std::array<char, PATH_MAX> cwd{};
  nlohmann::json j = {{"environment", environment}, {"workdir", ::getcwd(cwd.data(), cwd.size()) ? cwd.data() : "/"}};
  const std::string line = "ok " + j.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(report, line.data() + done, line.size() - done);
    if (n <= 0 && errno != EINTR) break;
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  ::close(std::exchange(report, -1));
}

namespace {

// Under the instance's lock, from anywhere (the names relative to the directory opened on
// the host): as removeInstanceFiles.
void removeInstanceFilesAt(const InstanceFiles& at) {
  const auto& f = at.plan;
  for (const auto* path : {&f.record, &f.join, &f.logOut, &f.logErr, &f.seccomp, &f.lock})
    ::unlinkat(at.dir.get(), baseName(*path).c_str(), 0);
  if (at.parent) ::unlinkat(at.parent.get(), baseName(f.dir).c_str(), AT_REMOVEDIR);  // once empty
}

// instance start --stay: this process keeps the instance (see startInstance).
[[noreturn]] void keepHere(const launch::LaunchPlan& plan, LaunchCgroup& cgroup, UniqueFd lock,
                           const InstanceStarted& started) {
  const auto& files = *plan.instance;
  const pid_t self = ::getpid();
  const std::uint64_t start = processStartTime(self);
  const InstanceFiles at = openInstanceFiles(files);  // the files, once this process is in the container
  bool recorded = false;
  try {
    if (::setsid() < 0 && errno != EPERM) throw sysError("setsid");  // EPERM: it leads its group already
    executeInstanceHere(plan, cgroup ? &cgroup : nullptr,
                        [&](const std::vector<std::string>& environment, const SeccompProgram* seccomp) {
      std::array<char, PATH_MAX> cwd{};
      auto record = newRecord(plan, self, self, start, environment,
                              ::getcwd(cwd.data(), cwd.size()) ? cwd.data() : "/", cgroup);
      writeRecordFiles(files, at.dir.get(), record, seccomp);
      recorded = true;
      cgroup.release();  // the record has it now
      lock.reset();      // the keeper's end takes it again (removeOwnInstanceFiles)
      spdlog::info("instance {} started (image {}, keeper pid {}: this process)", files.name, record.image, self);
      if (started) started(record);
      // From now on its output goes where a forked keeper's does: the instance's log files.
      UniqueFd out(::openat(at.dir.get(), baseName(files.logOut).c_str(),
                            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
      UniqueFd err(::openat(at.dir.get(), baseName(files.logErr).c_str(),
                            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!out || !err) throw sysError("open the instance's log files in " + files.dir);
      if (::dup2(out.get(), 1) < 0 || ::dup2(err.get(), 2) < 0) throw sysError("dup2");
    });
  } catch (...) {
    if (recorded)
      removeOwnInstanceFiles(at);
    else
      removeInstanceFilesAt(at);  // still under its lock
    throw;
  }
}

// An instance of that name already runs: with --reuse and the same image, it is taken as it
// is; else the start is refused.
launch::InstanceRecord takeRunningInstance(const launch::LaunchPlan& plan, const launch::InstanceRecord& running,
                                           const InstanceStarted& started) {
  const auto& files = *plan.instance;
  if (files.reuse && running.image == plan.image.path.string()) {
    spdlog::info("instance {} already runs (keeper pid {}): taken as it is", files.name, running.keeper);
    if (started) started(running);
    return running;
  }
  if (files.reuse)
    throw Error("instance " + files.name + " runs " + running.image + ", not " + plan.image.path.string() +
                ": --reuse takes only an instance of the same image")
        .withStatus(1);
  throw Error("instance " + files.name + " already exists (it runs: keeper pid " + std::to_string(running.keeper) +
              ", image " + running.image + "): stop it first with `ctr instance stop " + files.name + "`");
}

// The limits' cgroup, made before the keeper exists, entered by it at its hand-over (the
// image's holder stays outside); removed if the start fails, else kept for the instance.
LaunchCgroup makeInstanceCgroup(const launch::LaunchPlan& plan) {
  LaunchCgroup cgroup;
  if (plan.cgroup.backend != limits::Backend::None) {
    sweepStaleCgroups(plan);
    cgroup = LaunchCgroup::create(plan);
  }
  return cgroup;
}

// The forked process that becomes the keeper (or, with a PID namespace, its parent), and
// the read end of the pipe both report on.
struct StandIn {
  pid_t pid = -1;
  UniqueFd reports;
};

StandIn forkStandIn(const launch::LaunchPlan& plan, LaunchCgroup& cgroup, UniqueFd& lock) {
  std::array<int, 2> pipe{};
  if (::pipe2(pipe.data(), O_CLOEXEC) != 0) throw sysError("pipe");
  UniqueFd readEnd(pipe[0]), writeEnd(pipe[1]);
  const pid_t standIn = ::fork();
  if (standIn < 0) throw sysError("fork the instance");
  if (standIn == 0) {
    readEnd.reset();
    lock.reset();  // the parent's copy keeps it locked
    becomeKeeper(plan, cgroup ? &cgroup : nullptr, writeEnd.release());
  }
  return {standIn, std::move(readEnd)};
}

// "pid N" from the stand-in, then "ok {...}" or "error: ..." from the keeper (or the
// stand-in, if it failed before the PID namespace); EOF once both have closed it.
struct KeeperReport {
  pid_t keeper = 0;
  std::string ready, error;
};

KeeperReport readKeeperReport(int fd) {
  const std::string reply = readAllBounded(fd, 64u << 20, "the instance's report");
  KeeperReport report;
  std::istringstream lines(reply);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("pid ")) report.keeper = static_cast<pid_t>(std::atol(line.c_str() + 4));
    else if (line.starts_with("ok ")) report.ready = line.substr(3);
    else if (line.starts_with("error: ")) report.error = line.substr(7);
  }
  return report;
}

// The record of the instance the stand-in started, written to its files; when the start
// failed, or it cannot be recorded, the stand-in is killed and the files removed.
launch::InstanceRecord recordInstance(const launch::LaunchPlan& plan, const StandIn& standIn,
                                      const LaunchCgroup& cgroup) {
  const auto& files = *plan.instance;
  const KeeperReport report = readKeeperReport(standIn.reports.get());
  auto fail = [&](const std::string& why) -> Error {
    // The stand-in is our child (its pid cannot be recycled before we reap it); the keeper
    // dies with it (PR_SET_PDEATHSIG), and its PID namespace with the keeper.
    ::kill(standIn.pid, SIGKILL);
    int status = 0;
    ::waitpid(standIn.pid, &status, 0);
    removeInstanceFiles(files);
    return Error("instance " + files.name + ": " + why).withStatus(1);
  };
  const pid_t keeper = plan.namespaces.pid ? report.keeper : standIn.pid;  // --no-pid: the forked process keeps it
  if (report.ready.empty() || keeper <= 0)
    throw fail(report.error.empty() ? "the container ended before it was ready (its output: " + files.logErr + ")"
                                    : report.error);
  UniqueFd keeperFd = pidfdOpen(keeper);
  const std::uint64_t keeperStart = processStartTime(keeper);
  std::vector<std::string> environment;
  std::string workdir;
  try {
    const auto j = nlohmann::json::parse(report.ready);
    environment = j.at("environment").get<std::vector<std::string>>();
    workdir = j.at("workdir").get<std::string>();
  } catch (const std::exception& e) {
    throw fail(std::string("cannot record it: ") + e.what());
  }
  launch::InstanceRecord record;
  try {
    record = newRecord(plan, keeper, standIn.pid, keeperStart, std::move(environment), std::move(workdir), cgroup);
  } catch (const Error& e) {
    throw fail(e.oneLine());
  }
  if (!keeperFd || hasEnded(keeperFd.get()) || keeperStart == 0) throw fail("the container ended at once");
  try {
    std::optional<SeccompProgram> program;
    if (plan.handover.seccomp) program = loadSeccompProgram(plan.seccompProfile, plan.stateDir);
    writeRecordFiles(files, AT_FDCWD, record, program ? &*program : nullptr);
  } catch (const std::exception& e) {
    throw fail(std::string("cannot record it: ") + e.what());
  }
  return record;
}

}  // namespace

launch::InstanceRecord startInstance(const launch::LaunchPlan& plan, const InstanceStarted& started) {
  if (!plan.instance) throw Error("internal: instance start without its instance in the plan");
  const auto& files = *plan.instance;
  ensureInstanceDir(files, plan.stateDir);
  UniqueFd lock = lockInstance(files);
  if (auto running = liveRecord(files)) return takeRunningInstance(plan, *running, started);
  LaunchCgroup cgroup = makeInstanceCgroup(plan);
  if (files.stay) keepHere(plan, cgroup, std::move(lock), started);
  const StandIn standIn = forkStandIn(plan, cgroup, lock);
  launch::InstanceRecord record = recordInstance(plan, standIn, cgroup);
  cgroup.release();  // the record has it now
  spdlog::info("instance {} started (image {}, keeper pid {})", files.name, record.image, record.keeper);
  if (started) started(record);
  return record;
}

std::optional<launch::InstanceRecord> findInstance(const std::string& stateDir, const std::string& name) {
  const auto files = launch::planInstanceFiles(name, stateDir);
  if (::access(files.record.c_str(), F_OK) != 0) return std::nullopt;
  auto record = readRecord(files);
  if (record && isRunning(*record)) return record;
  UniqueFd lock = lockInstance(files);  // stale: remove it under the lock
  auto live = liveRecord(files);
  if (!live) removeInstanceFiles(files);
  return live;
}

std::vector<launch::InstanceRecord> listInstances(const std::string& stateDir) {
  std::vector<launch::InstanceRecord> found;
  if (stateDir.empty()) return found;
  DIR* dir = ::opendir((stateDir + "/instances").c_str());
  if (!dir) return found;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string_view file = e->d_name;
    if (file.ends_with(".json") && launch::isValidInstanceName(file.substr(0, file.size() - 5)))
      names.emplace_back(file.substr(0, file.size() - 5));
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    try {
      if (auto record = findInstance(stateDir, name)) found.push_back(std::move(*record));
    } catch (const Error& e) {
      spdlog::warn("{}", e.oneLine());
    }
  }
  return found;
}

bool stopInstance(const std::string& stateDir, const std::string& name, int signal, std::chrono::seconds timeout) {
  const auto files = launch::planInstanceFiles(name, stateDir);
  if (::access(files.record.c_str(), F_OK) != 0) return false;
  UniqueFd lock = lockInstance(files);
  const auto record = liveRecord(files);
  if (!record) {
    removeInstanceFiles(files);
    return false;
  }
  UniqueFd keeper = pidfdOpen(record->keeper);
  UniqueFd standIn = pidfdOpen(record->standIn);
  if (!keeper || processStartTime(record->keeper) != record->keeperStart) {
    removeInstanceFiles(files);
    return false;
  }
  // The keeper passes the signal to every process of the instance and, for SIGTERM and
  // the like, ends once they have; SIGKILL ends the namespace at once.
  if (::syscall(SYS_pidfd_send_signal, keeper.get(), signal, nullptr, 0) != 0 && errno != ESRCH)
    throw sysError("signal instance " + name);
  auto waitEnded = [&](std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const bool gone = hasEnded(keeper.get()) && (!standIn || hasEnded(standIn.get()));
      if (gone) return true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      std::array<pollfd, 2> fds{pollfd{keeper.get(), POLLIN, 0}, pollfd{standIn.get(), POLLIN, 0}};
      ::poll(fds.data(), standIn ? 2 : 1, static_cast<int>(std::min<long long>(left.count(), 100)));
    }
  };
  if (!waitEnded(timeout)) {
    spdlog::warn("instance {} did not end within {} s of {}: killing it", name, timeout.count(), sigabbrev_np(signal));
    ::syscall(SYS_pidfd_send_signal, keeper.get(), SIGKILL, nullptr, 0);
    if (!waitEnded(std::chrono::seconds(10)))
      throw Error("instance " + name + " (keeper pid " + std::to_string(record->keeper) + ") did not end after SIGKILL");
  }
  removeCgroupDirs(record->cgroups);  // its stand-in's work, unless that was killed first
  removeInstanceFiles(files);
  return true;
}

InstanceStats instanceStats(const launch::InstanceRecord& record) {
  InstanceStats stats;
  // Its processes: those in its own PID namespace, or, for a --no-pid instance (in the host's
  // PID namespace), those in its mount namespace, which every launch that joins it enters
  // (and other launches of its image too, where it took the holder's ready namespace).
  const char* type = "mnt";
  std::uint64_t own = 0;
  for (const auto& ns : record.namespaces) {
    if (ns.type == "pid") {
      type = "pid";
      own = ns.inode;
    } else if (ns.type == "mnt" && std::string_view(type) == "mnt") {
      own = ns.inode;
    }
  }
  if (own == 0) throw Error("instance " + record.name + ": its record names neither its PID nor its mount namespace");
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  DIR* proc = ::opendir("/proc");
  if (!proc) throw sysError("open /proc");
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (pid <= 0 || namespaceInode(pid, type) != own) continue;
    const std::string stat = readFileIfPresent("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    if (f.size() < 22) continue;  // fields 3.. : utime is 14, stime 15, rss 24
    ++stats.processes;
    stats.cpuSeconds += static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) / static_cast<double>(ticks);
    stats.residentBytes += std::stoull(f[21]) * static_cast<std::uint64_t>(page);
  }
  ::closedir(proc);
  return stats;
}

}  // namespace ctr::runtime
