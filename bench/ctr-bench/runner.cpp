#include "runner.hpp"

#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "ctr/error.hpp"
#include "ctr/run_process.hpp"
#include "fom.hpp"
#include "host.hpp"
#include "hoststack.hpp"
#include "launch.hpp"
#include "progress.hpp"
#include "result.hpp"
#include "scenarios.hpp"
#include "source_compare.hpp"

#ifndef CTR_BENCH_VERSION
#define CTR_BENCH_VERSION "0.0.0"
#endif
#ifndef CTR_BENCH_SOURCE_DIR
#define CTR_BENCH_SOURCE_DIR ""
#endif

namespace ctr::bench {

namespace fs = std::filesystem;

std::string modeName(Mode m) {
  switch (m) {
    case Mode::RuntimeOverhead: return "runtime-overhead";
    case Mode::ImageVsHost: return "image-vs-host";
    case Mode::ImageVsImage: return "image-vs-image";
  }
  return "runtime-overhead";
}

namespace {

fs::path exeDir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : p.parent_path();
}

std::string isoNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The container's default PATH (docs/user-guide-run.md): bare launches get the same one.
constexpr const char* kPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The fixed base environment of every launch, A and B alike. Open MPI's settings follow
// host-notes.md section 1: root needs the two ALLOW variables; ranks must not be bound
// (a fake multi-host run would share core 0), and the same placement holds both ways.
std::map<std::string, std::string> baseEnvironment(const Descriptor* d) {
  std::map<std::string, std::string> env;
  struct passwd* pw = ::getpwuid(::getuid());
  env["PATH"] = kPath;
  env["HOME"] = pw ? pw->pw_dir : "/";
  env["USER"] = pw ? pw->pw_name : std::to_string(::getuid());
  env["LOGNAME"] = env["USER"];
  env["LANG"] = "C";
  env["LC_ALL"] = "C";
  env["TMPDIR"] = "/tmp";
  env["OMPI_MCA_rmaps_base_oversubscribe"] = "1";
  env["OMPI_MCA_hwloc_base_binding_policy"] = "none";
  env["OMPI_MCA_btl_base_warn_component_unused"] = "0";
  if (::geteuid() == 0) {
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  }
  // The configuration of the ctr under test (a site's ctr.conf, a fixture node), when set:
  // B's ctr reads them, a bare program ignores them.
  for (const char* name : {"CTR_CONFIG", "CTR_HOST_ROOT"})
    if (const char* v = ::getenv(name); v && *v) env[name] = v;
  if (d)
    for (const auto& [k, v] : d->env) env[k] = v;
  return env;
}

std::vector<std::string> envList(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::string resolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return fs::absolute(program).string();
  for (const auto& dir : programDirs()) {
    fs::path p = dir / program;
    if (::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p.string();
  }
  return findInPath(program, kPath);
}

std::string resolveCtr(const std::string& requested) {
  if (!requested.empty()) {
    std::string p = requested.find('/') != std::string::npos ? fs::absolute(requested).string()
                                                              : findInPath(requested, getenv("PATH") ? getenv("PATH") : kPath);
    if (p.empty() || ::access(p.c_str(), X_OK) != 0) throw Error("--ctr " + requested + ": not an executable");
    return p;
  }
  fs::path beside = exeDir() / "ctr";
  if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  std::string p = findInPath("ctr", getenv("PATH") ? getenv("PATH") : kPath);
  if (p.empty()) throw Error("no ctr found beside ctr-bench or in PATH (give --ctr PATH)");
  return p;
}

// A long-running process in its own group, ended (the whole group) when this goes away.
// It keeps an image mounted so that B's launches find it as the ranks of a job do.
class Keeper {
 public:
  Keeper(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
    int rc = ::posix_spawn(&pid_, argv[0].c_str(), &fa, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw sysError("cannot start " + argv[0], rc);
  }
  ~Keeper() {
    if (reaped_) return;
    ::kill(-pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      pid_t w = ::waitpid(pid_, nullptr, WNOHANG);
      if (w == pid_ || w < 0) return;
      ::usleep(20000);
    }
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;
  [[nodiscard]] bool alive() {
    if (!reaped_ && ::waitpid(pid_, nullptr, WNOHANG) != 0) reaped_ = true;
    return !reaped_;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Waits (up to `limitS`) until no process of ours has one of `images` open: ctr's holder
// keeps an image mounted for `image linger` seconds after its last launch, and ctr-bench
// should leave no mount of its own images behind when it exits.
void waitForImagesReleased(const std::vector<std::string>& images, double limitS) {
  const double end = now() + limitS;
  for (;;) {
    bool inUse = false;
    std::error_code ec;
    for (const auto& proc : fs::directory_iterator("/proc", ec)) {
      const std::string pid = proc.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::error_code fdEc;
      for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fdEc)) {
        std::error_code linkEc;
        auto target = fs::read_symlink(fd.path(), linkEc).string();
        if (target.ends_with(" (deleted)")) target.resize(target.size() - 10);
        if (!linkEc && std::find(images.begin(), images.end(), target) != images.end()) {
          inUse = true;
          break;
        }
      }
      if (inUse) break;
    }
    if (!inUse || now() > end) return;
    ::usleep(100000);
  }
}

// Exit 77 is the suite's "cannot run here" (a missing GPU, fio, squashfuse).
bool isSkip(const LaunchResult& r) { return r.exitCode == 77 && !r.timedOut && !r.interrupted && r.signal == 0; }

// The reason of a skip: the last "skip: REASON" line on stderr.
std::string skipReason(const LaunchResult& r) {
  std::string reason = "exit 77 without a reason";
  for (size_t pos = 0; pos < r.err.size();) {
    size_t nl = r.err.find('\n', pos);
    std::string l = r.err.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (l.starts_with("skip: ")) reason = l.substr(6);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return reason;
}

// The temporary work directory, removed at the end unless the user named it.
class WorkDir {
 public:
  explicit WorkDir(const std::optional<fs::path>& given) {
    if (given) {
      path_ = fs::absolute(*given);
      fs::create_directories(path_);
      return;
    }
    std::string tmpl = "/tmp/ctr-bench.XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw sysError("mkdtemp /tmp/ctr-bench.XXXXXX");
    ::chmod(tmpl.c_str(), 0755);
    path_ = tmpl;
    owned_ = true;
  }
  ~WorkDir() {
    std::error_code ec;
    if (owned_) fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool owned_ = false;
};

struct Sides {
  std::vector<std::string> a;
  std::vector<std::string> b;
  std::string labelA = "bare";
  std::string labelB = "ctr";
};

// Per-FOM record of one workload, kept in the order the FOMs first appeared.
struct FomRecord {
  std::string name;
  std::string unit;
  Direction direction = Direction::Higher;
  double delta = kDefaultDelta;
  SampleList a, b;  // index = block
  std::vector<LaunchError> errors;
  Verdict verdict = Verdict::Inconclusive;
  Analysis analysis;
};

struct Interrupted {};

// One workload while it runs: its entry in the result (rewritten as it goes), its FOM
// records and how each side launches.
struct WorkloadRun {
  Descriptor d;
  WorkloadResult& w;
  double started = 0;
  fs::path wdir{};
  std::vector<std::string> env{};
  Sides sides{};
  std::map<std::string, double> deltas{};
  std::vector<FomRecord> foms{};
  LookSchedule looks{};
  std::vector<std::string> files{};  // the output files of the last launch

  // One launch with its output files: removed before (a stale file must not count as this
  // launch's figures), read after.
  LaunchResult launchOnce(const std::vector<std::string>& argv) {
    for (const auto& f : d.outputFiles) ::unlink(f.c_str());
    auto r = launch(argv, env, wdir, d.timeoutS);
    files.clear();
    for (const auto& f : d.outputFiles) {
      std::ifstream in(f);
      files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return r;
  }
  ParsedOutput parse(const LaunchResult& r) const { return parseOutput(d, r.out, r.err, deltas, files); }

  FomRecord& recordFor(const FomValue& v) {
    for (auto& f : foms)
      if (f.name == v.name) return f;
    FomRecord f;
    f.name = v.name;
    f.unit = v.unit;
    f.direction = v.direction;
    f.delta = v.delta;
    foms.push_back(std::move(f));
    return foms.back();
  }

  // Records one launch's outcome into block `block` for side `side`.
  void record(int block, const std::string& side, const LaunchResult& r) {
    auto parsed = parse(r);
    if (r.ok() && !parsed.error)
      for (const auto& v : parsed.foms) recordFor(v);
    for (auto& f : foms) {
      auto& samples = side == "A" ? f.a : f.b;
      if (samples.size() <= static_cast<size_t>(block)) samples.resize(static_cast<size_t>(block) + 1);
      auto it = std::find_if(parsed.foms.begin(), parsed.foms.end(), [&](const FomValue& v) { return v.name == f.name; });
      std::optional<double> value = it == parsed.foms.end() ? std::nullopt : it->value;
      std::string problem;
      if (!r.ok()) problem = r.describe();
      else if (parsed.error) problem = *parsed.error;
      else if (!value) problem = "printed no value for " + f.name;
      else if (!std::isfinite(*value) || *value <= 0) problem = "value " + std::to_string(*value) + " is not a positive number";
      if (problem.empty()) samples[static_cast<size_t>(block)] = value;
      else f.errors.push_back(LaunchError{block, "", "", side, problem, r.stderrTail()});
    }
  }
};

class Runner {
 public:
  explicit Runner(const RunOptions& o) : opt_(o) {}
  int run();

 private:
  const RunOptions& opt_;
  std::string ctr_;
  fs::path workdirPath_;
  std::string imageA_, imageB_;
  Result result_;
  std::unique_ptr<gsl_rng, RngDeleter> rng_;
  std::uint64_t seed_ = 0;
  Progress progress_;
  double deadline_ = 0;
  std::map<std::string, std::string> baseEnv_;
  std::vector<std::unique_ptr<Keeper>> keepers_;

  // Keeps the run's images mounted (what the ranks of a job find), or lets them go and
  // waits until ctr has unmounted them.
  bool holdImages();
  void releaseImages();

  void save() { writeResultAtomic(opt_.out, result_); }
  std::vector<Descriptor> selectWorkloads();
  Sides commandsFor(const Descriptor& d, const std::string& program, const std::vector<std::string>& extraCtrArgs = {});
  void runWorkload(const Descriptor& raw, size_t index, size_t count);
  std::optional<std::string> cannotRun(const Descriptor& d, const std::string& program) const;
  void finish(WorkloadRun& run, const std::string& status, const std::string& reason, const std::string& tail = "");
  bool setUp(WorkloadRun& run, bool& teardownArmed);
  void measure(WorkloadRun& run, size_t index, size_t count);
  void publish(WorkloadRun& run);
  void store(WorkloadRun& run);
  void runBlocks(WorkloadRun& run, int firstTarget, double blockTime, double ownDeadline, size_t index, size_t count);
  void runBlock(WorkloadRun& run, int block, int target, double blockTime, size_t index, size_t count);
  Descriptor expanded(const Descriptor& raw) const;
  ColdStart coldStart(const std::map<std::string, std::string>& env);
  ScenarioResult scenario(const std::string& name, const std::vector<Descriptor>& descriptors);
  void analyse(FomRecord& f, const DecisionPlan& plan);
  std::string coldConfig();
  void checkOptions() const;
  std::string resolveImages(const std::vector<Descriptor>& descriptors);
  RunConfig config(double budget, const std::string& imageNote) const;
  bool measureAll(const std::vector<Descriptor>& descriptors);
  void compareDataSources(const std::vector<Descriptor>& descriptors);
  std::vector<std::unique_ptr<Keeper>> holdContainerArgs(const WorkloadRun& run);
};

std::vector<Descriptor> Runner::selectWorkloads() {
  std::vector<Descriptor> all;
  fs::path dir = opt_.descriptorDir ? *opt_.descriptorDir : defaultDescriptorDir();
  bool haveSuite = !dir.empty() && fs::is_directory(dir);
  if (haveSuite)
    for (auto& d : loadDescriptorDir(dir))
      if (opt_.workloads.empty() ? std::find(d.profiles.begin(), d.profiles.end(), opt_.profile) != d.profiles.end()
                                 : true)
        all.push_back(std::move(d));
  std::vector<Descriptor> site;
  for (const auto& sd : opt_.siteDirs)
    for (auto& d : loadDescriptorDir(sd)) site.push_back(std::move(d));
  for (const auto& f : opt_.workloadFiles) site.push_back(loadDescriptor(f));
  // Site workloads run whenever given; --workloads then picks among suite and site ones.
  all.insert(all.end(), std::make_move_iterator(site.begin()), std::make_move_iterator(site.end()));
  std::set<std::string> seen;
  for (const auto& d : all)
    if (!seen.insert(d.name).second) throw Error(d.file.string() + ": name: workload '" + d.name + "' is defined twice");
  if (opt_.workloads.empty()) return all;
  std::vector<Descriptor> picked;
  for (const auto& name : opt_.workloads) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Descriptor& d) { return d.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const auto& d : all) known += (known.empty() ? "" : ", ") + d.name;
      throw Error("--workloads: no workload named '" + name + "' (known: " + (known.empty() ? "none" : known) +
                  (haveSuite ? "" : "; no suite descriptors found, looked in '" + dir.string() + "'") + ")");
    }
    picked.push_back(*it);
  }
  return picked;
}

Sides Runner::commandsFor(const Descriptor& d, const std::string& program, const std::vector<std::string>& extraCtrArgs) {
  Sides s;
  std::vector<std::string> argvA = d.argv(opt_.profile, false);
  argvA[0] = program;
  std::vector<std::string> ctrExec{ctr_, "exec"};
  ctrExec.insert(ctrExec.end(), opt_.ctrArgs.begin(), opt_.ctrArgs.end());
  ctrExec.insert(ctrExec.end(), extraCtrArgs.begin(), extraCtrArgs.end());
  ctrExec.insert(ctrExec.end(), d.containerArgs.begin(), d.containerArgs.end());
  // The container's environment is the launch's (ctr passes it through) but for the
  // variables ctr sets itself: PATH is already the container default; LD_LIBRARY_PATH is
  // not passed in by ctr, so it is given explicitly.
  if (auto it = d.env.find("LD_LIBRARY_PATH"); it != d.env.end())
    ctrExec.insert(ctrExec.end(), {"--env", "LD_LIBRARY_PATH=" + it->second});
  auto withBinds = [&](std::vector<std::string> cmd, bool hostStack) {
    if (hostStack) {
      auto binds = hostStackBindArgs();
      cmd.insert(cmd.end(), binds.begin(), binds.end());
      addBindFor(cmd, fs::path(program).parent_path());
    }
    addBindFor(cmd, workdirPath_);
    for (const auto& b : d.binds) addBindFor(cmd, b);
    return cmd;
  };
  std::vector<std::string> argvB;
  switch (opt_.mode) {
    case Mode::RuntimeOverhead: {
      // The default image is host-stack (binds the host's trees); a user image gets the
      // workload's directory bound, so its libraries must match the host's.
      argvB = withBinds(ctrExec, opt_.image.empty());
      if (!opt_.image.empty()) addBindFor(argvB, fs::path(program).parent_path());
      argvB.push_back(imageB_);
      argvB.insert(argvB.end(), argvA.begin(), argvA.end());
      break;
    }
    case Mode::ImageVsHost: {
      s.labelA = "host";
      s.labelB = "image";
      argvB = withBinds(ctrExec, false);
      argvB.push_back(imageB_);
      auto inImage = d.argv(opt_.profile, true);
      argvB.insert(argvB.end(), inImage.begin(), inImage.end());
      break;
    }
    case Mode::ImageVsImage: {
      s.labelA = fs::path(imageA_).filename().string();
      s.labelB = fs::path(imageB_).filename().string();
      auto inImage = d.argv(opt_.profile, true);
      auto cmdA = withBinds(ctrExec, false);
      cmdA.push_back(imageA_);
      cmdA.insert(cmdA.end(), inImage.begin(), inImage.end());
      argvA = cmdA;
      argvB = withBinds(ctrExec, false);
      argvB.push_back(imageB_);
      argvB.insert(argvB.end(), inImage.begin(), inImage.end());
      break;
    }
  }
  // One ctr per rank under mpirun, the same mpirun line both ways (same placement).
  if (d.mpirun) {
    std::vector<std::string> mpi{findInPath("mpirun", kPath), "-np", std::to_string(d.ranks)};
    mpi.insert(mpi.end(), opt_.mpirunArgs.begin(), opt_.mpirunArgs.end());
    mpi.insert(mpi.end(), d.mpirunArgs.begin(), d.mpirunArgs.end());
    argvA.insert(argvA.begin(), mpi.begin(), mpi.end());
    argvB.insert(argvB.begin(), mpi.begin(), mpi.end());
  }
  s.a = argvA;
  s.b = argvB;
  return s;
}

// The spread and location of each side, whatever the rule decides.
Analysis describeSides(const FomRecord& f, const DecisionPlan& plan) {
  std::vector<double> a, b;
  for (const auto& v : f.a)
    if (v) a.push_back(*v);
  for (const auto& v : f.b)
    if (v) b.push_back(*v);
  auto best = [&](const std::vector<double>& v) -> std::optional<double> {
    if (v.empty()) return std::nullopt;
    return f.direction == Direction::Higher ? *std::max_element(v.begin(), v.end()) : *std::min_element(v.begin(), v.end());
  };
  auto med = [](const std::vector<double>& v) { return v.empty() ? std::nullopt : std::optional<double>(median(v)); };
  Analysis an;
  an.cvA = coefficientOfVariation(a);
  an.cvB = coefficientOfVariation(b);
  an.baselineSpread = robustRelativeSpread(a);
  an.bestA = best(a);
  an.bestB = best(b);
  an.medianA = med(a);
  an.medianB = med(b);
  an.ciMethod = ciMethodName(plan.method);
  an.alpha = plan.alpha;
  an.looks = plan.looks;
  an.minPairs = minimumPairs(plan);
  return an;
}

std::string errorWhere(const LaunchError& e) {
  return e.block && *e.block >= 0 ? "block " + std::to_string(*e.block) : std::string("warm-up");
}

void Runner::analyse(FomRecord& f, const DecisionPlan& plan) {
  Analysis an = describeSides(f, plan);
  auto dec = decidePairs(f.a, f.b, f.direction, f.delta, plan);
  an.nPairs = dec ? dec->nPairs : 0;
  std::string note;
  if (dec) {
    an.overhead = dec->overhead;
    if (dec->ci) {
      an.ciLow = dec->ci->lo;
      an.ciHigh = dec->ci->hi;
      an.ciLevel = dec->ciLevel;
    }
    an.pairsNeeded = dec->pairsNeeded;
    f.verdict = dec->verdict;
    note = dec->note;
    if (opt_.mode != Mode::RuntimeOverhead) {
      // A stack delta: how many times faster B's build is than A's, with its interval; no
      // verdict against an overhead delta (the two builds are meant to differ).
      f.verdict = Verdict::Estimate;
      note.clear();
      auto factor = [](double overhead) { return 1 / (1 + overhead); };
      an.speedup = Speedup{factor(dec->overhead), std::nullopt, std::nullopt};
      if (dec->ci) {
        an.speedup->low = factor(dec->ci->hi);
        an.speedup->high = factor(dec->ci->lo);
      } else {
        note = std::to_string(dec->nPairs) + " pair(s): too few for an interval";
      }
    }
  } else {
    f.verdict = Verdict::Error;
    note = "no complete pair of samples";
  }
  if (!f.errors.empty()) {
    f.verdict = Verdict::Error;
    const auto& e = f.errors[0];
    note = std::to_string(f.errors.size()) + " failed launch(es); first: " + errorWhere(e) + " side " + e.side + ": " + e.message;
  }
  an.verdict = verdictName(f.verdict);
  an.note = note;
  f.analysis = an;
}

FomResult fomResult(const FomRecord& f) {
  FomResult out;
  out.name = f.name;
  out.unit = f.unit;
  out.direction = f.direction == Direction::Higher ? "higher" : "lower";
  out.delta = f.delta;
  out.samplesA = f.a;
  out.samplesB = f.b;
  out.errors = f.errors;
  out.analysis = f.analysis;
  return out;
}

Descriptor Runner::expanded(const Descriptor& raw) const {
  Placeholders p;
  for (const auto& dir : programDirs())
    if (fs::is_directory(dir)) {
      p.bindir = dir.string();
      break;
    }
  p.workdir = (workdirPath_ / raw.name).string();
  p.datadir = raw.file.parent_path().string();
  Descriptor d = raw;
  d.command = expand(raw.command, p);
  if (raw.quickArgs) d.quickArgs = expand(*raw.quickArgs, p);
  d.imageCommand = expand(raw.imageCommand, p);
  d.setup = expand(raw.setup, p);
  if (raw.quickSetup) d.quickSetup = expand(*raw.quickSetup, p);
  d.teardown = expand(raw.teardown, p);
  d.mpirunArgs = expand(raw.mpirunArgs, p);
  d.binds = expand(raw.binds, p);
  d.containerArgs = expand(raw.containerArgs, p);
  d.outputFiles = expand(raw.outputFiles, p);
  for (auto& [k, v] : d.env) v = expand(v, p);
  return d;
}

void Runner::finish(WorkloadRun& run, const std::string& status, const std::string& reason, const std::string& tail) {
  run.w.status = status;
  run.w.reason = reason;
  run.w.stderrTail = tail;
  run.w.durationS = now() - run.started;
  save();
  progress_.line(run.d.name + ": " + status + (reason.empty() ? "" : " (" + reason + ")"));
}

// Why a workload cannot run here at all; nullopt when it can.
std::optional<std::string> Runner::cannotRun(const Descriptor& d, const std::string& program) const {
  if (d.requiresRoot && ::geteuid() != 0) return "needs root (requires_root)";
  if (d.mpirun && findInPath("mpirun", kPath).empty()) return "mpirun not found (launcher: mpirun)";
  for (const auto& p : d.requiredPrograms)
    if (resolveProgram(p).empty()) return "required program '" + p + "' not found";
  if (opt_.mode == Mode::ImageVsHost && d.imageCommand.empty())
    return "no image_command: the descriptor does not say how to run the image's own build";
  if (now() >= deadline_) return "the run's --budget is spent";
  if (program.empty() && opt_.mode != Mode::ImageVsImage)
    return "program '" + d.command[0] + "' not found (looked beside ctr-bench and in PATH)";
  return std::nullopt;
}

// The descriptor's setup; false when it made the workload skip or fail (finished then).
bool Runner::setUp(WorkloadRun& run, bool& teardownArmed) {
  const auto& setup = run.d.setupFor(opt_.profile);
  // A container joining a holder that started before setup's mounts (a FUSE dataset, a
  // scratch file system) does not see them, even through --bind: so the images are let
  // go during setup and held again after it.
  releaseImages();
  progress_.status(run.d.name + ": setup");
  auto r = launch(setup, run.env, run.wdir, run.d.timeoutS);
  teardownArmed = true;
  holdImages();
  if (r.interrupted) throw Interrupted{};
  // A setup that cannot make its prerequisites here (no squashfuse, say) says so with
  // exit 77, as a workload's probe does.
  if (isSkip(r)) finish(run, "skipped", "setup: " + skipReason(r));
  else if (!r.ok()) finish(run, "error", "setup failed (" + r.describe() + ")", r.stderrTail());
  return r.ok() && !isSkip(r);
}

void Runner::publish(WorkloadRun& run) {
  run.w.foms.clear();
  for (auto& f : run.foms) {
    analyse(f, run.looks.plan);
    run.w.foms.push_back(fomResult(f));
  }
  run.w.durationS = now() - run.started;
}

void Runner::store(WorkloadRun& run) {
  publish(run);
  save();
}

std::string listText(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "[" + s + "]";
}

void Runner::runBlock(WorkloadRun& run, int block, int target, double blockTime, size_t index, size_t count) {
  std::vector<std::string> order = gsl_rng_uniform_int(rng_.get(), 2) ? std::vector<std::string>{"B", "A"}
                                                                        : std::vector<std::string>{"A", "B"};
  BlockPlan plan{block, order, {}};
  for (const auto& side : order) {
    progress_.status(run.d.name + " [" + std::to_string(index + 1) + "/" + std::to_string(count) + "]: block " +
                     std::to_string(block + 1) + "/" + std::to_string(target) + " (looks at " +
                     (run.looks.pairs.empty() ? std::string("none: too few blocks") : listText(run.looks.pairs)) + "), ETA " +
                     std::to_string(static_cast<int>(blockTime * (target - block))) + " s, run budget left " +
                     std::to_string(std::max(0, static_cast<int>(deadline_ - now()))) + " s" +
                     Progress::verdictSummary(run.w.foms));
    auto r = run.launchOnce(side == "A" ? run.sides.a : run.sides.b);
    if (r.interrupted) {
      run.w.reason = "interrupted in block " + std::to_string(block + 1) + "; that block's samples are partial";
      store(run);
      throw Interrupted{};
    }
    plan.wallS[side] = r.wallS;
    run.record(block, side, r);
  }
  run.w.plan.push_back(plan);
}

// The blocks up to the first look, then look by look while a FOM is INCONCLUSIVE, within
// this workload's share of the budget.
void Runner::runBlocks(WorkloadRun& run, int firstTarget, double blockTime, double ownDeadline, size_t index, size_t count) {
  const auto& looks = run.looks.pairs;
  int target = firstTarget;
  size_t nextLook = 0;
  for (int block = 0;; ++block) {
    if (block >= target) {
      // A planned look (or the end of a profile too short for one).
      bool anyOpen = std::any_of(run.foms.begin(), run.foms.end(), [](const FomRecord& f) { return f.verdict == Verdict::Inconclusive; });
      while (nextLook < looks.size() && looks[nextLook] <= block) ++nextLook;
      if (!anyOpen || nextLook >= looks.size()) break;
      const int more = looks[nextLook] - block;
      if (now() + more * blockTime > ownDeadline) {
        run.w.budgetNote = "no further look: " + std::to_string(more) + " more blocks would pass this workload's share of --budget";
        break;
      }
      target = looks[nextLook];
    }
    if (now() + blockTime > deadline_ + blockTime * 0.5) {
      run.w.budgetNote = "--budget ran out after " + std::to_string(block) + " blocks";
      break;
    }
    const double blockStart = now();
    runBlock(run, block, target, blockTime, index, count);
    blockTime = now() - blockStart;
    store(run);
  }
}

// The probe (A's warm-up), B's warm-up, then the blocks the budget allows.
void Runner::measure(WorkloadRun& run, size_t index, size_t count) {
  const Descriptor& d = run.d;
  // The probe is A's warm-up: a workload that cannot run here says so with exit 77.
  progress_.status(d.name + ": probe and warm-up");
  auto probe = run.launchOnce(run.sides.a);
  if (probe.interrupted) throw Interrupted{};
  if (isSkip(probe)) return finish(run, "skipped", skipReason(probe));
  auto parsedProbe = run.parse(probe);
  if (!probe.ok()) return finish(run, "error", "the bare launch failed (" + probe.describe() + ")", probe.stderrTail());
  if (parsedProbe.error) return finish(run, "error", "the bare launch printed no FOM: " + *parsedProbe.error, probe.stderrTail());
  for (const auto& v : parsedProbe.foms) run.recordFor(v);
  if (!parsedProbe.info.is_null()) run.w.info = parsedProbe.info;

  // The looks are planned before the first block (stats.hpp): blocks up to the first look,
  // then look by look while a FOM is INCONCLUSIVE, up to max_blocks. --quick's 3 blocks are
  // below the minimum pairs: they prove the path and decide nothing.
  const int initial = opt_.blocks.value_or(
      d.blocks.contains(opt_.profile) ? d.blocks.at(opt_.profile) : (opt_.profile == Profile::Quick ? 3 : 10));
  const int cap = std::max(initial, d.maxBlocks.contains(opt_.profile) ? d.maxBlocks.at(opt_.profile)
                                                                        : (opt_.profile == Profile::Quick ? initial : 40));
  run.looks = planLooks(initial, cap, opt_.alpha, opt_.ciMethod);
  run.w.looks = run.looks.pairs;

  // B's warm-up. A container that cannot run the workload at all is an ERROR for every
  // FOM, with ctr's message, and no blocks are spent on it.
  progress_.status(d.name + ": warm-up (" + run.sides.labelB + ")");
  auto warmB = run.launchOnce(run.sides.b);
  if (warmB.interrupted) throw Interrupted{};
  if (!warmB.ok() || run.parse(warmB).error) {
    std::string message = warmB.ok() ? "no FOM in its output" : warmB.describe();
    for (auto& f : run.foms) f.errors.push_back(LaunchError{-1, "", "warm-up", "B", message, warmB.stderrTail()});
    publish(run);
    return finish(run, "error", "the " + run.sides.labelB + " launch failed at warm-up (" + message + ")", warmB.stderrTail());
  }

  // The budget bounds the whole run: the blocks up to the first look must fit in what is left
  // of it (estimated from the two warm-up launches), else the workload is skipped; later
  // looks must fit in this workload's share of what is left.
  const int firstTarget = run.looks.pairs.empty() ? initial : run.looks.pairs.front();
  const double blockTime = probe.wallS + warmB.wallS;
  const double left = deadline_ - now();
  if (firstTarget * blockTime > left) {
    char why[200];
    std::snprintf(why, sizeof why, "does not fit the budget: %d blocks of about %.1f s need %.0f s, %.0f s of --budget left",
                  firstTarget, blockTime, firstTarget * blockTime, std::max(0.0, left));
    run.w.foms.clear();
    return finish(run, "skipped", why);
  }
  const double ownDeadline = now() + std::max(0.0, left / static_cast<double>(count - index));
  runBlocks(run, firstTarget, blockTime, ownDeadline, index, count);
  publish(run);
  finish(run, "ok", "");
}

void Runner::runWorkload(const Descriptor& raw, size_t index, size_t count) {
  result_.workloads.push_back({});
  WorkloadRun run{expanded(raw), result_.workloads.back()};
  const Descriptor& d = run.d;
  run.started = now();
  run.w.name = d.name;
  run.w.description = d.description;
  run.w.descriptor = d.file.string();
  run.w.durationS = 0;
  const std::string program = resolveProgram(d.command[0]);
  if (auto why = cannotRun(d, program)) return finish(run, "skipped", *why);

  run.wdir = workdirPath_ / d.name;
  fs::create_directories(run.wdir);
  ::chmod(run.wdir.c_str(), 0777);
  auto baseEnv = baseEnvironment(&d);
  run.env = envList(baseEnv);
  run.sides = commandsFor(d, program);
  run.w.commands = std::map<std::string, std::vector<std::string>>{{"A", run.sides.a}, {"B", run.sides.b}};
  run.w.labels = SideLabels{run.sides.labelA, run.sides.labelB};
  run.w.env = baseEnv;
  run.deltas = opt_.deltas;

  // teardown runs whatever happens once setup has run (failed or not), or, for a descriptor
  // without setup, once the workload is under way: it may clean what the workload wrote.
  struct Teardown {
    const WorkloadRun& run;
    bool armed = false;
    ~Teardown() {
      if (armed && !run.d.teardown.empty()) {
        try {
          launch(run.d.teardown, run.env, run.wdir, 120);
        } catch (const std::exception&) {
        }
      }
    }
  } teardown{run};
  teardown.armed = d.setupFor(opt_.profile).empty();
  if (!teardown.armed && !setUp(run, teardown.armed)) return;
  // Declared after the teardown: they end (and free the data set) before it runs.
  auto keepers = holdContainerArgs(run);
  measure(run, index, count);
}

// A workload whose container launches carry their own arguments (a dataset bind) gets
// another holder than the run's keepers hold: a keeper of its own, with those arguments, for
// as long as the workload runs, so that B finds that holder mounted as the other ranks of a
// job would keep it, as the bare side finds setup's mount.
std::vector<std::unique_ptr<Keeper>> Runner::holdContainerArgs(const WorkloadRun& run) {
  std::vector<std::unique_ptr<Keeper>> keepers;
  if (run.d.containerArgs.empty()) return keepers;
  for (const auto* argv : {&run.sides.a, &run.sides.b}) {
    // The container launch's own words: from ctr to its image (an mpirun prefix left out).
    auto exec = std::find(argv->begin(), argv->end(), "exec");
    if (exec == argv->end() || exec == argv->begin() || *(exec - 1) != ctr_) continue;
    auto image = std::find_if(exec, argv->end(), [&](const std::string& w) { return w == imageA_ || w == imageB_; });
    if (image == argv->end()) continue;
    std::vector<std::string> k(exec - 1, image + 1);
    k.insert(k.end(), {"/bin/sleep", "2147483647"});
    keepers.push_back(std::make_unique<Keeper>(k, run.env));
  }
  if (!keepers.empty()) ::usleep(300000);  // let them mount; a refusal shows in B's warm-up
  return keepers;
}

std::string Runner::coldConfig() {
  // The site's configuration with 'image linger = 0', so that every launch mounts afresh.
  std::string text;
  std::vector<std::string> candidates;
  if (const char* c = getenv("CTR_CONFIG")) candidates.push_back(c);
  candidates.push_back((fs::path(ctr_).parent_path().parent_path() / "etc/ctr/ctr.conf").string());
  candidates.push_back("/etc/ctr/ctr.conf");
  for (const auto& c : candidates) {
    std::ifstream in(c);
    if (in) {
      text.assign(std::istreambuf_iterator<char>(in), {});
      break;
    }
  }
  fs::path conf = workdirPath_ / "cold-start.conf";
  std::ofstream(conf) << text << "\nimage linger = 0\n";
  ::chmod(conf.c_str(), 0644);
  return conf.string();
}

ColdStart Runner::coldStart(const std::map<std::string, std::string>& baseEnv) {
  // A copy of the image that nothing holds: each cold launch mounts it and, with linger 0,
  // unmounts it at exit. The warm case runs while the keeper holds the original.
  fs::path cold = workdirPath_ / "cold-start.sif";
  std::error_code ec;
  ColdStart out;
  for (const char* k : {"bare", "warm", "cold"}) {
    out.samplesS[k] = {};
    out.medianS[k] = std::nullopt;
  }
  auto skipped = [&](const std::string& why) {
    out.skipped = why;
    return out;
  };
  if (fs::is_directory(imageB_)) return skipped("the image is a directory: nothing to mount");
  if (fs::file_size(imageB_, ec) > (1ull << 30)) return skipped("the image is over 1 GiB: not copied for the cold case");
  fs::copy_file(imageB_, cold, fs::copy_options::overwrite_existing, ec);
  if (ec) return skipped("cannot copy the image: " + ec.message());
  ::chmod(cold.c_str(), 0644);
  auto env = envList(baseEnv);
  auto coldEnv = baseEnv;
  coldEnv["CTR_CONFIG"] = coldConfig();
  auto coldEnvList = envList(coldEnv);
  std::vector<std::string> binds = opt_.image.empty() && opt_.mode == Mode::RuntimeOverhead ? hostStackBindArgs()
                                                                                             : std::vector<std::string>{};
  std::vector<std::string> warmCmd{ctr_, "exec"};
  warmCmd.insert(warmCmd.end(), opt_.ctrArgs.begin(), opt_.ctrArgs.end());
  warmCmd.insert(warmCmd.end(), binds.begin(), binds.end());
  std::vector<std::string> coldCmd = warmCmd;
  warmCmd.insert(warmCmd.end(), {imageB_, "/bin/true"});
  coldCmd.insert(coldCmd.end(), {cold.string(), "/bin/true"});
  out.commands = {{"bare", {"/bin/true"}}, {"warm", warmCmd}, {"cold", coldCmd}};
  const int rounds = opt_.profile == Profile::Quick ? 3 : 15;
  out.rounds = rounds;
  for (int round = 0; round < rounds; ++round) {
    const std::array<const char*, 3> cases{"bare", "warm", "cold"};
    std::array<int, 3> idx{0, 1, 2};
    gsl_ran_shuffle(rng_.get(), idx.data(), idx.size(), sizeof(int));
    std::vector<std::string> order;
    for (int i : idx) order.push_back(cases[static_cast<size_t>(i)]);
    for (const auto& which : order) {
      progress_.status("cold start: round " + std::to_string(round + 1) + "/" + std::to_string(rounds) + " " + which);
      // The previous cold launch's holder must be gone (linger 0 ends it, but not at once),
      // or this launch would join it instead of mounting afresh.
      if (which == "cold") waitForImagesReleased({cold.string()}, 10);
      auto r = launch(out.commands[which], which == "cold" ? coldEnvList : env, workdirPath_, 60);
      if (r.interrupted) throw Interrupted{};
      if (r.ok()) out.samplesS[which].push_back(r.wallS);
      else out.errors.push_back(LaunchError{std::nullopt, "", "", which, r.describe(), r.stderrTail()});
    }
  }
  fs::remove(cold, ec);
  for (const auto& [k, v] : out.samplesS) {
    std::vector<double> x;
    for (const auto& s : v) x.push_back(*s);
    out.medianS[k] = x.empty() ? std::nullopt : std::optional<double>(median(x));
  }
  return out;
}

ScenarioResult Runner::scenario(const std::string& name, const std::vector<Descriptor>& descriptors) {
  // The workload: --scenario-workload, else the first of this run that ran and is not MPI.
  const Descriptor* d = nullptr;
  for (const auto& w : result_.workloads) {
    if (w.status != "ok") continue;
    for (const auto& desc : descriptors)
      if (desc.name == w.name && (opt_.scenarioWorkload.empty() ? !desc.mpirun : desc.name == opt_.scenarioWorkload))
        d = &desc;
    if (d) break;
  }
  if (!d) {
    std::string why = opt_.scenarioWorkload.empty() ? "no single-process workload ran ok in this run"
                                                    : "workload '" + opt_.scenarioWorkload + "' did not run ok in this run";
    progress_.line("scenario " + name + ": skipped (" + why + ")");
    ScenarioResult skipped;
    skipped.name = name;
    skipped.skipped = why;
    return skipped;
  }
  auto ex = std::make_shared<Descriptor>(expanded(*d));
  std::string program = resolveProgram(ex->command[0]);
  fs::path wdir = workdirPath_ / ex->name;
  ScenarioContext c;
  c.workload = ex.get();
  c.containerCommand = [this, ex, program](const std::vector<std::string>& extra) { return commandsFor(*ex, program, extra).b; };
  c.env = envList(baseEnvironment(ex.get()));
  c.cwd = wdir;
  c.profile = opt_.profile;
  c.deltas = opt_.deltas;
  c.progress = &progress_;
  c.rng = rng_.get();
  ScenarioResult out = runScenario(name, c);
  progress_.line("scenario " + name + ": " + (out.skipped.empty() ? "done" : "skipped (" + out.skipped + ")"));
  if (interruptRequested()) throw Interrupted{};
  return out;
}

bool Runner::holdImages() {
  auto env = envList(baseEnv_);
  for (const auto& img : {imageA_, imageB_}) {
    if (img.empty()) continue;
    std::vector<std::string> k{ctr_, "exec"};
    k.insert(k.end(), opt_.ctrArgs.begin(), opt_.ctrArgs.end());
    if (opt_.image.empty() && opt_.mode == Mode::RuntimeOverhead) {
      auto b = hostStackBindArgs();
      k.insert(k.end(), b.begin(), b.end());
    }
    k.insert(k.end(), {img, "/bin/sleep", "2147483647"});
    keepers_.push_back(std::make_unique<Keeper>(k, env));
  }
  ::usleep(300000);  // let the keepers mount their images
  return std::all_of(keepers_.begin(), keepers_.end(), [](const auto& k) { return k->alive(); });
}

void Runner::releaseImages() {
  keepers_.clear();
  std::vector<std::string> images;
  for (const auto& img : {imageA_, imageB_})
    if (!img.empty()) images.push_back(img);
  progress_.status("waiting for ctr to release the images (image linger)");
  waitForImagesReleased(images, 15);
}

void Runner::checkOptions() const {
  switch (opt_.mode) {
    case Mode::RuntimeOverhead: break;
    case Mode::ImageVsHost:
      if (opt_.image.empty()) throw Error("--mode image-vs-host needs --image (the image whose own build is B)");
      break;
    case Mode::ImageVsImage:
      if (opt_.image.empty() || opt_.imageB.empty()) throw Error("--mode image-vs-image needs --image (A) and --image-b (B)");
      break;
  }
  for (const auto& img : {opt_.image, opt_.imageB})
    if (!img.empty() && !fs::exists(img)) throw Error("image " + img + ": no such file or directory");
}

// The images A and B: given, or the host-stack image built for this run's B launches.
// Returns the note the result keeps about a built image.
std::string Runner::resolveImages(const std::vector<Descriptor>& descriptors) {
  if (opt_.mode == Mode::ImageVsImage) {
    imageA_ = fs::absolute(opt_.image).string();
    imageB_ = fs::absolute(opt_.imageB).string();
    return "";
  }
  if (!opt_.image.empty()) {
    imageB_ = fs::absolute(opt_.image).string();
    return "";
  }
  progress_.status("building the host-stack image");
  // The binds of every B launch of this run (commandsFor), so the image can hold their targets.
  std::vector<std::string> execArgs = opt_.ctrArgs, binds = hostStackBindArgs();
  for (const auto& raw : descriptors) {
    const Descriptor d = expanded(raw);
    if (d.command.empty()) continue;
    if (std::string program = resolveProgram(d.command[0]); !program.empty())
      addBindFor(binds, fs::path(program).parent_path());
    for (const auto& b : d.binds) addBindFor(binds, b);
  }
  addBindFor(binds, workdirPath_);
  execArgs.insert(execArgs.end(), binds.begin(), binds.end());
  imageB_ = buildHostStackImage(ctr_, workdirPath_, execArgs, envList(baseEnvironment(nullptr))).string();
  return "host-stack: a skeleton root with the host's /usr, /etc (and /opt) bound read-only";
}

RunConfig Runner::config(double budget, const std::string& imageNote) const {
  RunConfig c;
  c.ctr = ctr_;
  c.ctrArgs = opt_.ctrArgs;
  c.image = imageB_;
  c.imageA = imageA_;
  if (opt_.mode == Mode::ImageVsImage) c.imageB = imageB_;
  c.imageNote = imageNote;
  c.imageHeld = true;
  c.budgetS = budget;
  c.alpha = opt_.alpha;
  c.ciMethod = ciMethodName(opt_.ciMethod);
  c.blocks = opt_.blocks;
  c.deltas = opt_.deltas;
  c.mpirunArgs = opt_.mpirunArgs;
  c.workdir = workdirPath_.string();
  c.env = baseEnv_;
  return c;
}

// Cold start, the workloads, the scenarios; false when interrupted.
bool Runner::measureAll(const std::vector<Descriptor>& descriptors) {
  // Keep the images mounted for the whole run (what the ranks of a job find); the cold
  // start is measured on a copy.
  bool held = holdImages();
  result_.config->imageHeld = held;
  if (!held) progress_.line("warning: the image could not be kept mounted (no /bin/sleep in it?): B launches may mount it afresh");
  bool interrupted = false;
  try {
    if (opt_.coldStart) {
      result_.coldStart = coldStart(baseEnv_);
      save();
    }
    for (size_t i = 0; i < descriptors.size(); ++i) {
      if (interruptRequested()) throw Interrupted{};
      runWorkload(descriptors[i], i, descriptors.size());
    }
    compareDataSources(descriptors);
    for (const auto& s : opt_.scenarios) {
      if (interruptRequested()) throw Interrupted{};
      result_.scenarios.push_back(scenario(s, descriptors));
      save();
    }
  } catch (const Interrupted&) {
    interrupted = true;
  }
  // The images ctr-bench made (host-stack, the cold-start copy) must not stay mounted.
  releaseImages();
  waitForImagesReleased({(workdirPath_ / "cold-start.sif").string()}, 15);
  return !interrupted;
}

// Each workload with compare_source against the one it names, once every workload has run.
void Runner::compareDataSources(const std::vector<Descriptor>& descriptors) {
  auto find = [&](const std::string& name) -> WorkloadResult* {
    auto it = std::find_if(result_.workloads.begin(), result_.workloads.end(), [&](const auto& w) { return w.name == name; });
    return it == result_.workloads.end() ? nullptr : &*it;
  };
  for (const auto& d : descriptors) {
    if (d.compareSource.empty()) continue;
    if (WorkloadResult* w = find(d.name)) w->sourceComparison = compareSources(*w, find(d.compareSource), d.compareSource, opt_.alpha);
  }
  save();
}

// The verdict counts and the exit status (docs/benchmark-guide.md).
RunSummary summarize(const Result& r, bool interrupted) {
  RunSummary s;
  for (const char* v : {"PASS", "FAIL", "FASTER", "INCONCLUSIVE", "ESTIMATE", "ERROR", "SKIPPED"}) s.counts[v] = 0;
  for (const auto& w : r.workloads) {
    if (w.status == "skipped") ++s.counts["SKIPPED"];
    if (w.status == "error" && w.foms.empty()) ++s.counts["ERROR"];
    for (const auto& f : w.foms)
      if (f.analysis) ++s.counts[f.analysis->verdict];
  }
  int status = 0;
  if (s.counts["ERROR"] > 0) status = 3;
  else if (s.counts["FAIL"] > 0) status = 1;
  else if (s.counts["INCONCLUSIVE"] + s.counts["FASTER"] > 0) status = 2;
  s.exitStatus = interrupted ? 130 : status;
  return s;
}

int Runner::run() {
  seed_ = opt_.seed ? opt_.seed : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  rng_.reset(gsl_rng_alloc(gsl_rng_mt19937));
  gsl_rng_set(rng_.get(), static_cast<unsigned long>(seed_));
  ctr_ = resolveCtr(opt_.ctr);
  auto descriptors = selectWorkloads();
  if (descriptors.empty()) throw Error("no workload to run (none in this profile; give --workloads or --workload-file)");
  checkOptions();

  WorkDir workdir(opt_.workdir);
  workdirPath_ = workdir.path();
  const double budget = opt_.budgetS.value_or(opt_.profile == Profile::Quick ? 900 : 7200);
  deadline_ = now() + budget;

  result_.benchVersion = CTR_BENCH_VERSION;
  result_.started = isoNow();
  result_.profile = profileName(opt_.profile);
  result_.mode = modeName(opt_.mode);
  result_.seed = seed_;
  progress_.status("host fingerprint");
  result_.host = collectHostFingerprint(ctr_);
  save();

  const std::string imageNote = resolveImages(descriptors);
  baseEnv_ = baseEnvironment(nullptr);
  result_.config = config(budget, imageNote);
  save();

  const bool interrupted = !measureAll(descriptors);
  result_.summary = summarize(result_, interrupted);
  result_.interrupted = interrupted;
  result_.finished = isoNow();
  save();
  progress_.done();
  printSummaryTable(result_, std::cout);
  if (interrupted) std::cerr << "ctr-bench: interrupted; the samples so far are in " << opt_.out.string() << "\n";
  return *result_.summary->exitStatus;
}

}  // namespace

fs::path defaultDescriptorDir() {
  fs::path installed = exeDir().parent_path() / "share/ctr/bench/workloads";
  if (fs::is_directory(installed)) return installed;
  // A build tree: bench/workloads copies its descriptors beside the programs.
  fs::path built = exeDir().parent_path() / "bench/workloads/descriptors";
  if (fs::is_directory(built)) return built;
  fs::path source = fs::path(CTR_BENCH_SOURCE_DIR) / "bench/workloads";
  if (!std::string(CTR_BENCH_SOURCE_DIR).empty() && fs::is_directory(source) &&
      fs::exists(exeDir().parent_path() / "CMakeCache.txt"))
    return source;
  return installed;
}

std::vector<fs::path> programDirs() {
  fs::path e = exeDir();
  return {e.parent_path() / "bench/workloads", e.parent_path() / "libexec/ctr/bench", e};
}

std::pair<std::string, double> parseDeltaOption(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw Error("--delta " + text + ": expected NAME=X (X a fraction, or a percentage with %)");
  std::string name = text.substr(0, eq), value = text.substr(eq + 1);
  bool percent = !value.empty() && value.back() == '%';
  if (percent) value.pop_back();
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
  } catch (const std::exception&) {
    throw Error("--delta " + text + ": '" + value + "' is not a number");
  }
  if (percent) v /= 100;
  if (!(v > 0 && v < 1)) throw Error("--delta " + text + ": delta must be between 0 and 1 (or 0% and 100%)");
  return {name, v};
}

int runBench(const RunOptions& options) {
  installInterruptHandlers();
  Runner runner(options);
  return runner.run();
}

}  // namespace ctr::bench
