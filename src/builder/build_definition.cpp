// buildDefinition: `ctr build OUT RECIPE.def` (see ctr/build.hpp and docs/architecture.md,
// "Builds"). Orchestration only: the parser is deffile.cpp, the steps' plans come from
// launch::planBuildStep, runtime::run executes them, packSif packs.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>

#include "build_progress.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/scratch.hpp"
#include "ctr/build.hpp"
#include "ctr/oci.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/launch.hpp"
#include "ctr/log.hpp"
#include "ctr/install_paths.hpp"
#include "ctr/run_process.hpp"
#include "ctr/runtime.hpp"
#include "ctr/sif.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::builder {

namespace {

namespace fs = std::filesystem;

volatile sig_atomic_t gInterrupted = 0;

extern "C" void onBuildSignal(int sig) {
  gInterrupted = sig;
  terminateChildren(sig);
}

// SIGINT/SIGTERM/SIGHUP: children are stopped and the build unwinds (RAII removes the
// temporary directory) at the next check; a step run through runtime::run gets the signal
// forwarded and fails.
void installBuildSignals() {
  prepareChildTermination();
  struct sigaction sa {};
  sa.sa_handler = onBuildSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (::sigaction(sig, &sa, nullptr) != 0) throw sysError("sigaction");
}

void checkInterrupted() {
  if (gInterrupted) throw Error(std::string("interrupted by ") + sigabbrev_np(gInterrupted)).withStatus(128 + gInterrupted);
}

// stdout and stderr into the build log while a step runs (its programs inherit them).
class LogRedirect {
 public:
  explicit LogRedirect(int logFd) {
    std::fflush(stdout);
    std::fflush(stderr);
    out_.reset(::fcntl(1, F_DUPFD_CLOEXEC, 3));
    err_.reset(::fcntl(2, F_DUPFD_CLOEXEC, 3));
    if (!out_ || !err_ || ::dup2(logFd, 1) < 0 || ::dup2(logFd, 2) < 0) throw sysError("redirect output to the build log");
  }
  ~LogRedirect() {
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(out_.get(), 1);
    ::dup2(err_.get(), 2);
  }
  LogRedirect(const LogRedirect&) = delete;
  LogRedirect& operator=(const LogRedirect&) = delete;

 private:
  UniqueFd out_, err_;
};

std::string lastLines(const std::string& text, std::size_t count) {
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (std::size_t n = 0; n < count && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

// A path of %files inside an image, written relative to its "/" and never above it (the
// copy resolves it inside the image: its symlinks cannot lead out either).
std::string inImage(const std::string& path, const std::string& where) {
  fs::path relative = fs::path(path).relative_path().lexically_normal();
  if (relative.empty() || *relative.begin() == "..") throw Error(where + ": '" + path + "' leaves the image's root");
  return "/" + relative.string();
}

// Whether --section lets `name` run (no list, or "all" in it: every section).
bool sectionRuns(const std::vector<std::string>& sections, std::string_view name) {
  if (sections.empty()) return true;
  return std::find(sections.begin(), sections.end(), "all") != sections.end() ||
         std::find(sections.begin(), sections.end(), name) != sections.end();
}

class Build {
 public:
  explicit Build(const DefinitionBuildOptions& options) : options_(options) {
    output_ = fs::absolute(options.output).lexically_normal();
    if (output_.filename().empty()) output_ = output_.parent_path();
    logPath_ = output_.string() + ".build.log";
    // ctr.conf once for the whole build, and the one cache rule `ctr pull` follows.
    policy_ = config::loadDefaultPolicy();
    host_ = host::discoverHost();
    host::discoverNeeds(host_, launch::needsOfBuild(), policy_);
    root_ = launch::planBuildRoot(host_, *host_.subordinate);
    fullIds_ = host_.user.uid == 0 || root_.mapHelpers;
    image::oci::PullOptions pull;
    pull.cacheDir = options.cacheDir;
    pull.limits = policy_.pull;
    cacheDir_ = image::oci::cacheRoot(pull);
  }
  ~Build() { removeTemp(); }
  Build(const Build&) = delete;
  Build& operator=(const Build&) = delete;

  void run();

 private:
  // A phase: the terminal's updating line (a plain line when not a terminal) and the log.
  void note(const std::string& line) {
    // The log first: the terminal's line shows the log's last line once it is not this marker.
    if (log_) {
      const std::string text = "==> " + line + "\n";
      (void)!::write(log_.get(), text.data(), text.size());
    }
    if (display_) display_->phase(line);
    else std::fprintf(stderr, "ctr build: %s\n", line.c_str());
  }
  // A line that stays on the terminal (warnings, notes, the result), and in the log.
  void say(const std::string& line) {
    if (display_) display_->line("ctr build: " + line);
    else std::fprintf(stderr, "ctr build: %s\n", line.c_str());
    if (log_) {
      const std::string text = "==> " + line + "\n";
      (void)!::write(log_.get(), text.data(), text.size());
    }
  }
  int runAsUser(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
    LogRedirect redirect(log_.get());
    ProcessOptions po;
    if (!env.empty()) po.env = env;
    auto result = runProcess(argv, po);
    return result.signal ? 128 + result.signal : result.exitCode;
  }
  // As root of the build's namespace; with one id mapped, that root is the caller on the
  // host, so the program runs as the caller (the files come out the same).
  int runAsRoot(const std::vector<std::string>& argv) {
    if (!fullIds_ || host_.user.uid == 0) return runAsUser(argv);
    LogRedirect redirect(log_.get());
    return runtime::runAsBuildRoot(root_, argv);
  }
  [[noreturn]] void failStep(const std::string& what, int status) {
    const std::string tail = lastLines(readFileIfPresent(logPath_), 15);
    throw Error(what + " failed with exit status " + std::to_string(status) + "; last lines of its output:\n" +
                tail + "\n(full log: " + logPath_ + ")")
        .withStatus(status > 0 && status < 256 ? status : 1);
  }
  void removeTemp() {
    if (temp_.empty()) return;
    // Files %post made for other mapped ids are removed as the namespace's root.
    try {
      if (fullIds_ && host_.user.uid != 0) (void)runtime::runAsBuildRoot(root_, {"/bin/rm", "-rf", "--", temp_.string()});
    } catch (const Error&) {
    }
    std::error_code ec;
    fs::remove_all(temp_, ec);
    if (ec) std::fprintf(stderr, "ctr build: warning: could not remove %s: %s\n", temp_.c_str(), ec.message().c_str());
    temp_.clear();
  }
  void runStep(const deffile::Definition& stage, const fs::path& rootfs, launch::BuildSection section,
               const std::vector<std::string>& argv, const std::string& what);
  void copyFiles(const std::vector<deffile::FileEntry>& entries, const fs::path& sourceRoot, const fs::path& rootfs,
                 const std::string& destBase);
  // Runs `body` where the image trees' files can be read and changed: as the caller, or as
  // root of the build's namespace when other ids are mapped (their files are theirs).
  std::string asTreeOwner(const std::function<std::string()>& body) {
    if (fullIds_ && host_.user.uid != 0) return runtime::runAsBuildRoot(root_, body);
    return body();
  }
  void asTreeOwner(const std::function<void()>& body) {
    (void)asTreeOwner(std::function<std::string()>([&] {
      body();
      return std::string();
    }));
  }
  void writeMetadata(const deffile::Definition& stage, const std::string& storedText, const fs::path& rootfs);
  void runHostScript(const deffile::Section& section, const fs::path& rootfs, const std::string& what);
  void buildStage(std::size_t index, const deffile::DefinitionFile& def);
  const BootstrapAgent& bootstrapAgentOf(const deffile::Definition& stage) const;
  void explainStage(const deffile::Definition& stage, const fs::path& rootfs, const std::string& prefix);
  void bootstrap(const deffile::Definition& stage, const BootstrapAgent& agent, const fs::path& rootfs,
                 const std::string& prefix);
  void addStageFiles(std::size_t index, const deffile::DefinitionFile& def, const fs::path& rootfs,
                     const std::string& prefix);
  void runScript(const deffile::Definition& stage, const fs::path& rootfs, const std::string& path,
                 const std::string& body, const deffile::Section& section, const std::string& what);
  void runStageScripts(const deffile::Definition& stage, const std::string& storedText, const fs::path& rootfs,
                       const std::string& prefix);
  void reportDefinitionWarnings(const deffile::DefinitionFile& def);
  void checkOutput(const deffile::DefinitionFile& def) const;
  void prepareWorkspace();
  void stripPrivilegedFiles(const fs::path& rootfs);
  void placeSandbox(const fs::path& rootfs);
  void packSif(const deffile::DefinitionFile& def, const fs::path& rootfs);

  DefinitionBuildOptions options_;
  fs::path output_;
  std::string logPath_;
  host::HostFacts host_;
  launch::BuildRoot root_;
  bool fullIds_ = false;
  fs::path cacheDir_;
  config::Policy policy_;
  fs::path temp_;
  UniqueFd log_;
  std::unique_ptr<PhaseDisplay> display_;
  std::vector<fs::path> rootfses_;
  std::int64_t epoch_ = 0;
};

void Build::runStep(const deffile::Definition& stage, const fs::path& rootfs, launch::BuildSection section,
                    const std::vector<std::string>& argv, const std::string& what) {
  (void)stage;
  launch::BuildStepOptions step;
  step.section = section;
  step.sandbox = rootfs.string();
  step.stageDir = (temp_ / "mnt").string();
  step.argv = argv;
  step.hostEnv = host_.env;
  step.writableTmpfs = options_.writableTmpfs;
  auto plan = launch::planBuildStep(step, policy_, host_, *host_.subordinate);
  if (options_.explain) {
    std::cout << "== " << what << '\n' << launch::toText(plan);
    return;
  }
  note(what);
  int status = 0;
  {
    LogRedirect redirect(log_.get());
    status = runtime::run(plan);
  }
  checkInterrupted();
  if (status != 0) {
    if (!fullIds_ && host_.user.uid != 0)
      say("note: only root is mapped in the build's user namespace (" + root_.mapNote + ")");
    failStep(what, status);
  }
}

// %files: each source (a host path, or with `sourceRoot` a path in an earlier stage's
// image) copied as `cp -a` would, through descriptors: the destination resolved inside the
// image, so that a symlink the base image planted (opt -> /etc) leads to the image's /etc,
// not the host's; the earlier stage's paths resolved inside that image likewise.
void Build::copyFiles(const std::vector<deffile::FileEntry>& entries, const fs::path& sourceRoot,
                      const fs::path& rootfs, const std::string& destBase) {
  const bool fromHost = sourceRoot.empty();
  for (const auto& entry : entries) {
    const std::string where = options_.recipe.string() + ":" + std::to_string(entry.line);
    auto copyEntries = [&] {
      const image::ImageTree tree(rootfs);
      std::unique_ptr<image::ImageTree> source;
      if (!fromHost) source = std::make_unique<image::ImageTree>(sourceRoot);
      // Glob patterns expand on the host (relative ones from the current directory) or in the
      // earlier stage's image, as in Apptainer; each match is copied as its own source.
      const std::vector<std::string> sources = withContext(where + ": %files source", [&] {
        if (!fromHost) return expandFilesSourceInImage(entry.source, *source);
        return expandFilesSource(entry.source, entry.source.starts_with('/') ? fs::path("/") : fs::current_path());
      });
      const bool intoDirectory = entry.destination.ends_with('/');
      if (sources.size() > 1 && !entry.destination.empty() && !intoDirectory &&
          !tree.isDirectory(joinPath(destBase, inImage(entry.destination, where))))
        throw Error(where + ": %files source '" + entry.source + "' matches " + std::to_string(sources.size()) +
                    " paths, so its destination must be a directory: end '" + entry.destination + "' with '/'");
      for (const auto& matched : sources) {
        const std::string destination = entry.destination.empty() ? matched : entry.destination;
        // joinPath drops a trailing '/': whether the destination is a directory is kept apart.
        const std::string target = joinPath(destBase, inImage(destination, where));
        const std::string shown = fromHost ? fs::absolute(matched).string() : inImage(matched, where);
        auto [dir, name] = withContext(where + ": %files source " + shown, [&] {
          return image::openSource(source.get(), fromHost ? matched : inImage(matched, where));
        });
        struct stat st {};
        if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
          throw Error(where + ": %files source " + shown + " does not exist");
        image::CopyOptions copy;
        copy.preserveOwner = !fromHost || ::geteuid() == 0;
        // An ordinary caller's files become root's in the image: not as setuid/setgid ones.
        copy.dropSetid = fromHost && ::geteuid() != 0;
        image::copyIntoTree(dir.get(), name, tree, target, intoDirectory, copy, where + ": copying " + matched);
      }
    };
    // The host's files are read as the caller; an earlier stage's as the owner of its files.
    if (fromHost) copyEntries();
    else asTreeOwner(copyEntries);
  }
}

// The definition's /.singularity.d and /scif files, the base files and labels.json, all
// written inside the image (its symlinks cannot lead these writes to the host).
void Build::writeMetadata(const deffile::Definition& stage, const std::string& storedText, const fs::path& rootfs) {
  const image::ImageTree tree(rootfs);
  for (const auto& file : metadataFiles(stage, storedText)) {
    const std::string path = "/" + file.path;
    if (file.path == ".singularity.d/env/90-environment.sh" && !sectionRuns(options_.sections, "environment")) continue;
    if (file.path == ".singularity.d/Singularity" && tree.exists(path)) {
      // The base image's definition goes to bootstrap_history, as Apptainer keeps it.
      const std::string history = "/.singularity.d/bootstrap_history/Singularity";
      int n = 0;
      while (tree.exists(history + std::to_string(n))) ++n;
      tree.rename(path, history + std::to_string(n));
    }
    std::string content = file.content;
    if (file.appendIfPresent && tree.exists(path))
      content = tree.readFile(path) + "\n" + content.substr(content.find("\n\n") + 2);
    tree.writeFile(path, content, file.mode);
  }
  // The files every Apptainer image has (base env scripts, actions), where the recipe and
  // its base image did not bring them: the same writer as for pulled images.
  image::oci::writeApptainerBaseFiles(tree);
  nlohmann::json existing = nlohmann::json::object();
  const std::string labelsPath = "/.singularity.d/labels.json";
  if (const std::string text = tree.readFile(labelsPath); !text.empty()) {
    existing = nlohmann::json::parse(text, nullptr, false);
    if (existing.is_discarded()) throw Error("the base image's /.singularity.d/labels.json is not JSON");
  }
  if (!sectionRuns(options_.sections, "labels")) {
    tree.remove("/.build.labels");
    return;
  }
  const std::string labels = labelsJson(existing, tree.readFile("/.build.labels"), stage, epoch_, image::sif::hostArch());
  tree.remove("/.build.labels");
  tree.writeFile(labelsPath, labels, 0644);
}

void Build::runHostScript(const deffile::Section& section, const fs::path& rootfs, const std::string& what) {
  note(what);
  const fs::path script = temp_ / section.name;
  writeFile(script.string(), section.body);
  std::vector<std::string> env = host_.env;
  for (const char* n : {"APPTAINER_ROOTFS=", "SINGULARITY_ROOTFS="}) env.push_back(n + rootfs.string());
  for (const char* n : {"APPTAINER_ENVIRONMENT=", "SINGULARITY_ENVIRONMENT="})
    env.push_back(std::string(n) + "/.singularity.d/env/91-environment.sh");
  const int status = runAsUser(deffile::scriptCommand(section, script.string()), env);
  ::unlink(script.c_str());
  if (status != 0) failStep(what.substr(0, what.find(" (")), status);
  checkInterrupted();
}

// One stage of a definition file (Apptainer's order): %pre on the host, the bootstrap,
// %files from earlier stages, %setup, the host's %files and the apps' files, then %post,
// the metadata, %appinstall and %test inside the stage's tree.
void Build::buildStage(std::size_t index, const deffile::DefinitionFile& def) {
  const auto& stage = def.stages[index];
  const std::string name = stage.header.stage().empty() ? std::to_string(index + 1) : stage.header.stage();
  const std::string prefix = def.stages.size() > 1 ? "stage " + name + ": " : "";
  // --update: the existing sandbox is the root, as it is (the header is skipped).
  const fs::path rootfs = options_.update ? output_ : temp_ / ("rootfs-" + std::to_string(index));
  rootfses_.push_back(rootfs);
  const BootstrapAgent& agent = bootstrapAgentOf(stage);
  if (options_.explain) {
    explainStage(stage, rootfs, prefix);
    return;
  }
  if (options_.update) {
    note(prefix + "--update: the header skipped, the sections run over " + rootfs.string());
  } else {
    if (::mkdir(rootfs.c_str(), 0755) != 0) throw sysError("mkdir " + rootfs.string());
    // %pre: on the host, as the caller, before the bootstrap (Apptainer's runHostScript):
    // $APPTAINER_ROOTFS names the still empty root.
    if (stage.pre.present()) runHostScript(stage.pre, rootfs, prefix + "%pre (on the host)");
    bootstrap(stage, agent, rootfs, prefix);
  }
  addStageFiles(index, def, rootfs, prefix);
  runStageScripts(stage, def.storedText, rootfs, prefix);
}

const BootstrapAgent& Build::bootstrapAgentOf(const deffile::Definition& stage) const {
  const std::string agentName = stage.header.bootstrap();
  const BootstrapAgent* agent = findBootstrapAgent(agentName);
  if (agent) return *agent;
  std::string known;
  for (const auto& n : bootstrapAgentNames()) known += (known.empty() ? "" : ", ") + n;
  throw Error(options_.recipe.string() + ":" + std::to_string(stage.line) + ": Bootstrap: " + agentName +
              " is not supported by ctr (supported: " + known + ")");
}

// --explain: what the stage would do, with the host's %files expanded as a build would
// (a missing source or a pattern that matches nothing is the same error), and %post's plan.
void Build::explainStage(const deffile::Definition& stage, const fs::path& rootfs, const std::string& prefix) {
  std::cout << "== " << prefix << "bootstrap " << stage.header.bootstrap() << " into " << rootfs.string() << '\n';
  auto explainFiles = [&](const std::vector<deffile::FileEntry>& entries, const std::string& title,
                          const std::string& destPrefix) {
    std::cout << "== " << prefix << title << '\n';
    for (const auto& entry : entries) {
      const std::string where = options_.recipe.string() + ":" + std::to_string(entry.line);
      const fs::path base = entry.source.starts_with('/') ? fs::path("/") : fs::current_path();
      for (const auto& matched :
           withContext(where + ": %files source", [&] { return expandFilesSource(entry.source, base); })) {
        std::error_code ec;
        if (!fs::exists(fs::symlink_status(fs::absolute(matched), ec)))
          throw Error(where + ": %files source " + fs::absolute(matched).string() + " does not exist");
        std::cout << "  " << matched << " -> " << destPrefix << (entry.destination.empty() ? matched : entry.destination)
                  << '\n';
      }
    }
  };
  for (const auto& files : stage.files) {
    if (!files.fromStage.empty()) {
      std::cout << "== " << prefix << "%files from " << files.fromStage << '\n';
      for (const auto& entry : files.entries)
        std::cout << "  " << entry.source << " -> " << (entry.destination.empty() ? entry.source : entry.destination)
                  << '\n';
      continue;
    }
    explainFiles(files.entries, "%files", "");
  }
  for (const auto& app : stage.apps)
    if (!app.fileEntries.empty()) explainFiles(app.fileEntries, "%appfiles " + app.name, "/scif/apps/" + app.name + "/");
  if (stage.post.present())
    runStep(stage, rootfs, launch::BuildSection::Post, deffile::scriptCommand(stage.post, "/.post.script"), prefix + "%post");
}

// The bootstrap agent fills the empty tree; then Apptainer's base layout, so that %post can
// write $APPTAINER_ENVIRONMENT.
void Build::bootstrap(const deffile::Definition& stage, const BootstrapAgent& agent, const fs::path& rootfs,
                      const std::string& prefix) {
  const std::string agentName = stage.header.bootstrap();
  note(prefix + "bootstrap " + agentName + (stage.header.from().empty() ? "" : " from " + stage.header.from()));
  BootstrapContext ctx;
  ctx.stage = &stage;
  ctx.rootfs = rootfs;
  ctx.recipeDir = fs::absolute(options_.recipe).parent_path();
  ctx.tempDir = temp_;
  ctx.cacheDir = cacheDir_;
  ctx.pull = policy_.pull;
  ctx.runAsRoot = [this](const std::vector<std::string>& argv) { return runAsRoot(argv); };
  ctx.runAsUser = [this](const std::vector<std::string>& argv) { return runAsUser(argv); };
  ctx.note = [this, &prefix](const std::string& line) { note(prefix + line); };
  // Importers (docker, oci...) draw their own progress line on the terminal.
  if (display_ && agentName != "scratch" && agentName != "localimage" && agentName != "debootstrap") display_->suspend();
  withContext(options_.recipe.string() + ":" + std::to_string(stage.line) + ": Bootstrap: " + agentName,
              [&] { agent(ctx); });
  checkInterrupted();
  asTreeOwner([&] {
    const image::ImageTree tree(rootfs);
    for (const char* dir : {"/.singularity.d/env", "/.singularity.d/actions", "/.singularity.d/libs"})
      (void)tree.directory(dir, true);
  });
}

// %files from STAGE first, then %setup, then the host's %files (Apptainer's order), then
// each app's directories and %appfiles.
void Build::addStageFiles(std::size_t index, const deffile::DefinitionFile& def, const fs::path& rootfs,
                          const std::string& prefix) {
  const auto& stage = def.stages[index];
  const bool files = sectionRuns(options_.sections, "files");
  for (const auto& entry : stage.files) {
    if (!files || entry.fromStage.empty()) continue;
    std::size_t from = index;
    for (std::size_t j = 0; j < index; ++j)
      if (def.stages[j].header.stage() == entry.fromStage) from = j;
    if (from == index)
      throw Error(options_.recipe.string() + ":" + std::to_string(entry.line) + ": %files from " + entry.fromStage +
                  ": no earlier stage has that name");
    note(prefix + "%files from " + entry.fromStage);
    copyFiles(entry.entries, rootfses_[from], rootfs, "/");
  }
  if (stage.setup.present() && sectionRuns(options_.sections, "setup"))
    runHostScript(stage.setup, rootfs, prefix + "%setup (on the host)");
  for (const auto& entry : stage.files) {
    if (!files || !entry.fromStage.empty()) continue;
    note(prefix + "%files");
    copyFiles(entry.entries, {}, rootfs, "/");
  }
  for (const auto& app : stage.apps) {
    const std::string appRoot = "/scif/apps/" + app.name;
    asTreeOwner([&] {
      const image::ImageTree tree(rootfs);
      for (const char* dir : {"bin", "lib", "scif/env"}) (void)tree.directory(appRoot + "/" + dir, true);
      for (const char* dir : {"input", "output"}) (void)tree.directory("/scif/data/" + app.name + "/" + dir, true);
    });
    if (files && !app.fileEntries.empty()) {
      note(prefix + "%appfiles " + app.name);
      copyFiles(app.fileEntries, {}, rootfs, appRoot);
    }
  }
}

// Runs `body` as the script `path` in the stage's tree for `section`, then removes it.
void Build::runScript(const deffile::Definition& stage, const fs::path& rootfs, const std::string& path,
                      const std::string& body, const deffile::Section& section, const std::string& what) {
  asTreeOwner([&] { image::ImageTree(rootfs).writeFile(path, body, 0755); });
  runStep(stage, rootfs, launch::BuildSection::Post, deffile::scriptCommand(section, path), what);
  asTreeOwner([&] { image::ImageTree(rootfs).remove(path); });
}

// %post, the metadata (/.singularity.d, /scif/apps), each %appinstall, then %test.
void Build::runStageScripts(const deffile::Definition& stage, const std::string& storedText, const fs::path& rootfs,
                            const std::string& prefix) {
  const bool post = sectionRuns(options_.sections, "post");
  if (stage.post.present() && post)
    runScript(stage, rootfs, "/.post.script", stage.post.body, stage.post, prefix + "%post");
  note(prefix + "metadata (/.singularity.d" + (stage.apps.empty() ? "" : ", /scif/apps") + ")");
  asTreeOwner([&] { writeMetadata(stage, storedText, rootfs); });
  for (const auto& app : stage.apps) {
    if (!app.install.present() || !post) continue;
    runScript(stage, rootfs, "/.appinstall.script",
              ". /scif/apps/" + app.name + "/scif/env/01-base.sh\ncd /scif/apps/" + app.name + "\n" + app.install.body,
              app.install, prefix + "%appinstall " + app.name);
  }
  if (stage.test.present() && !options_.noTest && sectionRuns(options_.sections, "test")) {
    runStep(stage, rootfs, launch::BuildSection::Test, {"/.singularity.d/test"}, prefix + "%test");
  } else if (stage.test.present()) {
    note(prefix + "%test skipped (" + std::string(options_.noTest ? "--notest" : "--section") + ")");
  }
}

void Build::reportDefinitionWarnings(const deffile::DefinitionFile& def) {
  for (const auto& warning : def.warnings) say("warning: " + warning);
  if (!def.unusedBuildArgs.empty()) {
    std::string names;
    for (const auto& n : def.unusedBuildArgs) names += (names.empty() ? "" : ", ") + n;
    if (!options_.warnUnusedBuildArgs)
      throw Error("unused --build-arg: " + names + " (no stage uses them; --warn-unused-build-args makes this a warning)");
    say("warning: unused --build-arg: " + names);
  }
}

// --update needs the sandbox it updates; otherwise the output must be free (or --force).
void Build::checkOutput(const deffile::DefinitionFile& def) const {
  std::error_code ec;
  if (options_.update) {
    if (!options_.sandbox || !fs::is_directory(fs::symlink_status(output_, ec)))
      throw Error("--update runs the definition over an existing sandbox directory: give --sandbox and an existing "
                  "directory OUT (" + options_.output.string() + " is " +
                  (fs::exists(fs::symlink_status(output_, ec)) ? "not a directory" : "missing") + ")");
    if (def.stages.size() != 1)
      throw Error("--update takes a definition of one stage (" + options_.recipe.string() + " has " +
                  std::to_string(def.stages.size()) + ")");
  } else if (fs::exists(fs::symlink_status(output_, ec)) && !options_.force && !options_.explain) {
    throw Error(options_.output.string() + ": already exists (use --force to overwrite)");
  }
  if (!options_.sandbox && fs::is_directory(output_, ec)) throw Error(options_.output.string() + ": is a directory");
}

// The build's temporary directory and its log.
void Build::prepareWorkspace() {
  installBuildSignals();
  // Next to the output where only root and the caller can change that directory (the final
  // rename stays on one file system), else in a private temporary directory (scratch.hpp).
  temp_ = image::makeScratchDir(output_, "build");
  if (::mkdir((temp_ / "mnt").c_str(), 0700) != 0) throw sysError("mkdir in " + temp_.string());
  if (!options_.explain) {
    // A new file, whatever was there: a symlink in its place is replaced, not written through.
    log_ = withContext("the build log", [&] { return image::createReplacing(logPath_, 0600); });
    say("building " + output_.string() + " from " + options_.recipe.string() + " (log: " + logPath_ + ")");
  }
}

// A sandbox stays on the host, readable by others: no setuid/setgid file, file
// capability or device node of the image goes with it unless the caller insists.
void Build::stripPrivilegedFiles(const fs::path& rootfs) {
  if (options_.keepPrivilegedFiles) {
    say("warning: --keep-privileged-files: setuid/setgid files, file capabilities and device nodes stay in " +
        output_.string() + "; anyone who can reach it can use them on this host");
    return;
  }
  note("dropping setuid/setgid bits, file capabilities and device nodes");
  const std::string dropped = asTreeOwner(std::function<std::string()>([&] {
    const image::PrivilegedFiles d = image::dropPrivilegedFiles(image::ImageTree(rootfs));
    if (d.total() == 0) return std::string();
    return std::to_string(d.setidBits) + " setuid/setgid bits, " + std::to_string(d.capabilities) +
           " file capabilities, " + std::to_string(d.deviceNodes) + " device nodes";
  }));
  if (!dropped.empty()) say("dropped from the sandbox: " + dropped + " (--keep-privileged-files keeps them)");
}

void Build::placeSandbox(const fs::path& rootfs) {
  stripPrivilegedFiles(rootfs);
  if (options_.update) return;  // an update worked in place
  std::error_code ec;
  if (fs::exists(fs::symlink_status(output_, ec))) {
    if (fullIds_ && host_.user.uid != 0) (void)runtime::runAsBuildRoot(root_, {"/bin/rm", "-rf", "--", output_.string()});
    fs::remove_all(output_, ec);
    if (ec) throw Error("cannot replace " + output_.string() + ": " + ec.message());
  }
  // Across file systems this copies: as the owner of the tree's files.
  asTreeOwner([&] { image::moveIntoPlace(rootfs, output_, false); });
}

void Build::packSif(const deffile::DefinitionFile& def, const fs::path& rootfs) {
  note("packing " + output_.string() + " (mksquashfs" + (options_.deterministic ? ", deterministic" : "") + ")");
  image::PackOptions pack;
  pack.output = output_;
  pack.rootfs = rootfs;
  pack.force = options_.force;
  pack.deterministic = options_.deterministic;
  pack.definition = def.storedText;
  // Apptainer records `inspect --json --labels --deffile`; ctr records every part (what
  // `ctr inspect` then reads without unpacking the image), in the same JSON form.
  image::ApptainerQuery everything;
  everything.all = true;
  image::ApptainerMetadata metadata = inspectLikeApptainer(rootfs, everything);
  metadata.deffile = def.storedText;
  pack.inspectMetadataJson = metadata.toJson().dump();
  pack.installSignalCleanup = false;
  // Packed as the build's root, so files keep the owners they have in the container.
  pack.allRoot = !fullIds_;
  pack.runMksquashfs = [this](std::vector<std::string> argv) { return runAsRoot(argv); };
  pack.mksquashfsArgs = options_.mksquashfsArgs;
  std::string summary;
  {
    LogRedirect redirect(log_.get());
    summary = image::packSif(pack);
  }
  // Verbose: the squashfs's summary on stdout, where Apptainer's verbose build lets
  // mksquashfs print its own (--mksquashfs-args '-comp lz4' shows "lz4 compressed").
  if (spdlog::should_log(spdlog::level::info)) std::cout << output_.string() << ": " << summary << std::endl;
}

void Build::run() {
  const auto started = std::chrono::steady_clock::now();
  const std::string text = readCheckedFile(options_.recipe.string(), 16u << 20, options_.recipe.string());
  const auto def = deffile::parseDefinition(text, options_.recipe.string(), options_.buildArgs);
  if (!options_.explain)
    display_ = std::make_unique<PhaseDisplay>(STDERR_FILENO, "ctr build", logPath_,
                                              !spdlog::default_logger_raw()->should_log(spdlog::level::warn));
  reportDefinitionWarnings(def);
  checkOutput(def);

  if (const char* sde = std::getenv("SOURCE_DATE_EPOCH"); sde && *sde) epoch_ = std::strtoll(sde, nullptr, 10);
  else epoch_ = options_.deterministic ? 0 : static_cast<std::int64_t>(std::time(nullptr));

  prepareWorkspace();
  for (std::size_t i = 0; i < def.stages.size(); ++i) {
    buildStage(i, def);
    checkInterrupted();
  }
  if (options_.explain) return;

  const fs::path& rootfs = rootfses_.back();
  if (options_.sandbox) placeSandbox(rootfs);
  else packSif(def, rootfs);
  checkInterrupted();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", seconds);
  if (display_) display_->suspend();
  say("built " + output_.string() + " in " + took + " s");
  if (display_) display_->finish();
}

}  // namespace

const std::vector<std::string>& buildSectionNames() {
  static const std::vector<std::string> names{"setup", "post", "files", "environment", "test", "labels", "none", "all"};
  return names;
}

void buildDefinition(const DefinitionBuildOptions& options) {
  Build build(options);
  build.run();
}

}  // namespace ctr::builder
