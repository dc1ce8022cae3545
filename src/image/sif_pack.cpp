// `ctr build`: packs a directory into squashfs with mksquashfs, then wraps it in a SIF laid
// out as `apptainer build` does (sif-format.md §8): launch script, Def.FILE if the tree has
// one, the squashfs as the primary system partition, all in group 1.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "ctr/install_paths.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/log.hpp"
#include "ctr/run_process.hpp"
#include "ctr/sif.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/scratch.hpp"

namespace ctr::image {

namespace {

// Temporary paths the signal handler must remove. Fixed-size storage: a handler may only
// touch memory that needs no allocation (signal-safety(7)).
constexpr std::size_t kMaxTemps = 4;
constexpr std::size_t kMaxPath = 4096;
char gTempPaths[kMaxTemps][kMaxPath];
volatile sig_atomic_t gTempUsed[kMaxTemps];

}  // namespace

namespace {

extern "C" void onFatalSignal(int sig) {
  // Newest first: files before the scratch directory that holds them.
  for (std::size_t i = kMaxTemps; i-- > 0;) {
    if (gTempUsed[i] && ::unlink(gTempPaths[i]) != 0) ::rmdir(gTempPaths[i]);
  }
  terminateChildren(sig);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void installSignalCleanup() {
  prepareChildTermination();
  struct sigaction sa {};
  sa.sa_handler = onFatalSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    if (::sigaction(sig, &sa, nullptr) != 0) throw sysError("sigaction");
  }
}

// A temporary file created with O_EXCL next to the output, removed unless committed.
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& near, const std::string& suffix) {
    std::string tmpl = (near.parent_path() / ("." + near.filename().string() + suffix + ".XXXXXX")).string();
    if (tmpl.size() >= kMaxPath) throw Error(tmpl + ": path too long");
    for (slot_ = 0; slot_ < kMaxTemps && gTempUsed[slot_]; ++slot_) {
    }
    if (slot_ == kMaxTemps) throw Error("internal error: too many temporary files");
    // Block the cleanup signals while the name is created and registered, so the handler
    // never sees a file that is not yet on its list.
    sigset_t block, old;
    sigemptyset(&block);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, sig);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    fd_.reset(::mkostemp(tmpl.data(), O_CLOEXEC));
    int err = errno;
    if (fd_) {
      std::memcpy(gTempPaths[slot_], tmpl.c_str(), tmpl.size() + 1);
      gTempUsed[slot_] = 1;
    }
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    if (!fd_) throw sysError("create temporary file in " + near.parent_path().string(), err);
    path_ = tmpl;
  }
  ~TempFile() {
    if (gTempUsed[slot_]) {
      ::unlink(path_.c_str());
      gTempUsed[slot_] = 0;
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int fd() const { return fd_.get(); }

  // Renames onto `target`; from then on the file is no longer temporary.
  void commit(const std::filesystem::path& target) {
    if (::rename(path_.c_str(), target.c_str()) != 0) throw sysError("rename " + path_ + " to " + target.string());
    gTempUsed[slot_] = 0;
  }

 private:
  std::size_t slot_ = 0;
  std::string path_;
  UniqueFd fd_;
};

std::string readSmallFile(const std::filesystem::path& p) {
  return readCheckedFile(p.string(), 16u << 20, p.string());
}

// A private scratch directory (scratch.hpp) that the signal handler removes too.
class SignalSafeScratch {
 public:
  explicit SignalSafeScratch(const std::filesystem::path& output) : scratch_(output, "pack") {
    for (slot_ = 0; slot_ < kMaxTemps && gTempUsed[slot_]; ++slot_) {
    }
    const std::string path = scratch_.path().string();
    if (slot_ == kMaxTemps || path.size() >= kMaxPath) throw Error("internal error: too many temporary files");
    std::memcpy(gTempPaths[slot_], path.c_str(), path.size() + 1);
    gTempUsed[slot_] = 1;
  }
  ~SignalSafeScratch() { gTempUsed[slot_] = 0; }
  SignalSafeScratch(const SignalSafeScratch&) = delete;
  SignalSafeScratch& operator=(const SignalSafeScratch&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return scratch_.path(); }

 private:
  ScratchDir scratch_;
  std::size_t slot_ = 0;
};

// mksquashfs pseudo definitions that clear the setuid/setgid bits of every such file of
// `rootfs` (packed -all-root, they would otherwise become root's); "" when there are none.
std::string clearSetidPseudoFile(const std::filesystem::path& rootfs) {
  std::string text;
  const ImageTree tree(rootfs);
  for (const auto& path : setidFiles(tree)) {
    struct stat st {};
    auto [dir, name] = tree.parentOf(path);
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::string quoted = "\"";
    for (char c : path.substr(1)) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 0777));
    text += quoted + "\" m " + mode + " 0 0\n";
  }
  return text;
}

// The output as an absolute path, once the tree is a directory and the output may be written.
std::filesystem::path checkedSifOutput(const PackOptions& options) {
  const auto output = std::filesystem::absolute(options.output);
  std::error_code ec;
  if (!std::filesystem::is_directory(options.rootfs, ec)) {
    throw Error(options.rootfs.string() + ": not a directory");
  }
  if (std::filesystem::exists(std::filesystem::symlink_status(output, ec)) && !options.force) {
    throw Error(options.output.string() + ": already exists (use --force to overwrite)");
  }
  if (std::filesystem::is_directory(output, ec)) throw Error(options.output.string() + ": is a directory");
  return output;
}

// --deterministic's time for every file and the squashfs itself: $SOURCE_DATE_EPOCH where it is
// set (reproducible-builds.org), else 0. mksquashfs reads the variable itself too (it would
// keep older file times), and refuses it beside -mkfs-time/-all-time: it is taken out of its
// environment then (mksquashfsCommand).
std::string deterministicTime() {
  const char* sde = std::getenv("SOURCE_DATE_EPOCH");
  if (sde == nullptr || *sde == '\0') return "0";
  const std::string value = sde;
  if (value.size() > 10 || value.find_first_not_of("0123456789") != std::string::npos ||
      std::stoull(value) > 0xffffffffULL)
    throw Error("SOURCE_DATE_EPOCH=" + value + ": expected seconds since 1970, at most 4294967295 (squashfs keeps "
                "32-bit times)");
  return value;
}

std::vector<std::string> mksquashfsCommand(const PackOptions& options, const std::filesystem::path& scratch,
                                           const std::string& squashfs) {
  std::vector<std::string> argv{findProgram(Program::Mksquashfs), options.rootfs.string(), squashfs,
                                "-noappend", "-quiet", "-no-progress"};
  // Run unprivileged, file owners would be the builder's uid, which means nothing inside
  // a container on another node; Apptainer's unprivileged builds make them root as well.
  if (options.allRoot.value_or(::geteuid() != 0)) {
    argv.emplace_back("-all-root");
    if (const std::string pseudo = clearSetidPseudoFile(options.rootfs); !pseudo.empty()) {
      const auto pseudoPath = scratch / "clear-setid.pseudo";
      writeFile(pseudoPath.string(), pseudo);
      argv.insert(argv.end(), {"-pf", pseudoPath.string()});
    }
  }
  if (options.deterministic) {
    const std::string time = deterministicTime();
    argv.insert(argv.end(), {"-reproducible", "-mkfs-time", time, "-all-time", time});
    // Whoever runs it (a definition build: as the build's root): env(1), Essential in Debian.
    if (const char* sde = std::getenv("SOURCE_DATE_EPOCH"); sde != nullptr)
      argv.insert(argv.begin(), {"/usr/bin/env", "-u", "SOURCE_DATE_EPOCH"});
  }
  argv.insert(argv.end(), options.mksquashfsArgs.begin(), options.mksquashfsArgs.end());
  return argv;
}

void packSquashfs(const PackOptions& options, const std::filesystem::path& scratch, const std::string& squashfs) {
  log::StepTimer step("mksquashfs " + options.rootfs.string());
  const std::vector<std::string> argv = mksquashfsCommand(options, scratch, squashfs);
  if (options.runMksquashfs) {
    if (const int status = options.runMksquashfs(argv); status != 0)
      throw Error("mksquashfs " + options.rootfs.string() + " failed (exit status " + std::to_string(status) + ")");
  } else {
    ProcessOptions po;
    po.captureStdout = true;
    po.captureStderr = true;
    runProcessChecked(argv, po);
  }
}

// The definition the SIF carries: the build's, else the tree's own, else none ("").
std::string definitionText(const PackOptions& options) {
  if (!options.definition.empty()) return options.definition;
  std::error_code ec;
  const auto deffilePath = options.rootfs / ".singularity.d" / "Singularity";
  return std::filesystem::is_regular_file(deffilePath, ec) ? readSmallFile(deffilePath) : std::string();
}

// The SIF's objects in Apptainer's order; they refer to `deffile` and `options` without copying.
std::vector<sif::ObjectInput> sifObjects(const PackOptions& options, const std::string& deffile,
                                         const TempFile& squashfs, std::int64_t squashfsSize) {
  std::vector<sif::ObjectInput> objects;
  if (!deffile.empty()) {
    sif::ObjectInput def;
    def.type = sif::DataType::Deffile;
    def.data = sif::DataSource::fromBytes(
        std::span(reinterpret_cast<const std::uint8_t*>(deffile.data()), deffile.size()));
    objects.push_back(def);
  }
  if (!options.inspectMetadataJson.empty()) {
    // Apptainer's name for it (pkg/image/sif.go), between the definition and the partition.
    sif::ObjectInput metadata;
    metadata.type = sif::DataType::GenericJson;
    metadata.name = "inspect-metadata.json";
    metadata.data = sif::DataSource::fromBytes(std::span(
        reinterpret_cast<const std::uint8_t*>(options.inspectMetadataJson.data()), options.inspectMetadataJson.size()));
    objects.push_back(metadata);
  }
  const std::string arch = options.arch.empty() ? sif::hostArch() : options.arch;
  if (!sif::archCode(arch))
    throw Error(options.arch.empty() ? "cannot build a SIF on an unknown architecture"
                                     : "architecture " + arch + " has no SIF code");
  sif::ObjectInput part;
  part.type = sif::DataType::Partition;
  part.partition = sif::PartitionInfo{sif::FsType::Squashfs, sif::PartType::PrimSys, arch};
  // mksquashfs wrote through its own descriptor; read ours from the start.
  if (::lseek(squashfs.fd(), 0, SEEK_SET) != 0) throw sysError("seek " + squashfs.path());
  part.data = sif::DataSource::fromFd(squashfs.fd(), squashfsSize);
  objects.push_back(part);
  return objects;
}

void writeSif(const TempFile& sifFile, const std::vector<sif::ObjectInput>& objects, bool deterministic) {
  sif::CreateOptions create;
  create.launchScript = sif::kApptainerLaunchScript;
  if (!deterministic) {
    create.id = sif::randomUuid();
    create.time = static_cast<std::int64_t>(std::time(nullptr));
  }
  log::StepTimer step("write SIF");
  sif::writeNewImage(sifFile.fd(), create, objects);
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(sifFile.fd(), 0666 & ~mask) != 0) throw sysError("chmod " + sifFile.path());
  if (::fsync(sifFile.fd()) != 0) throw sysError("fsync " + sifFile.path());
}

}  // namespace

std::string packSif(const PackOptions& options) {
  log::StepTimer timer("build " + options.output.string());
  const auto output = checkedSifOutput(options);
  if (options.installSignalCleanup) installSignalCleanup();

  // mksquashfs writes by path: into a directory nobody else can change (scratch.hpp).
  SignalSafeScratch scratch(output);
  TempFile squashfs(scratch.path() / "image", ".squashfs");
  packSquashfs(options, scratch.path(), squashfs.path());
  struct stat st {};
  if (::fstat(squashfs.fd(), &st) != 0) throw sysError("stat " + squashfs.path());

  const std::string deffile = definitionText(options);
  const std::vector<sif::ObjectInput> objects = sifObjects(options, deffile, squashfs, st.st_size);
  TempFile sifFile(output, ".sif");
  writeSif(sifFile, objects, options.deterministic);
  const std::string summary = describeSquashfs(squashfs.fd());
  sifFile.commit(output);
  spdlog::info("built {} ({} bytes of {})", output.string(), st.st_size, summary);
  return summary;
}

std::vector<std::string> unsquashfsCommand(const ImageSource& source, const std::string& dest) {
  std::vector<std::string> argv{findProgram(Program::Unsquashfs), "-f", "-n", "-d", dest};
  if (::getuid() != 0 || ::geteuid() != 0) argv.emplace_back("-user-xattrs");
  if (source.offset != 0) argv.insert(argv.end(), {"-o", std::to_string(source.offset)});
  argv.push_back(source.path.string());
  return argv;
}

namespace {

// The image's squashfs unpacked (unsquashfs) into `root`, a path in a scratch directory.
void unsquash(const ImageSource& source, const std::string& root) {
  ProcessOptions po;
  po.captureStdout = true;
  po.captureStderr = true;
  runProcessChecked(unsquashfsCommand(source, root), po);
}

std::filesystem::path checkedOutput(const std::filesystem::path& output, bool force) {
  const auto absolute = std::filesystem::absolute(output);
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(absolute, ec)) && !force)
    throw Error(output.string() + ": already exists (use --force to overwrite)");
  return absolute;
}

}  // namespace

void repackImage(const std::filesystem::path& image, const PackOptions& options) {
  const ImageSource source = resolveImage(image);
  const auto output = checkedOutput(options.output, options.force);
  const ScratchDir scratch(output, "unpack");
  const std::string root = (scratch.path() / "root").string();
  unsquash(source, root);
  PackOptions pack = options;
  pack.rootfs = root;
  (void)packSif(pack);
}

PrivilegedFiles unpackToSandbox(const std::filesystem::path& image, const std::filesystem::path& output, bool force,
                                bool keepPrivilegedFiles) {
  const ImageSource source = resolveImage(image);
  if (source.kind == ImageKind::Directory) throw Error(image.string() + ": a directory, not an image to unpack");
  const auto target = checkedOutput(output, force);
  const ScratchDir scratch(target, "unpack");
  const auto root = scratch.path() / "root";
  unsquash(source, root.string());
  PrivilegedFiles dropped;
  if (!keepPrivilegedFiles) dropped = dropPrivilegedFiles(ImageTree(root));
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(target, ec))) {
    std::filesystem::remove_all(target, ec);
    if (ec) throw Error("cannot replace " + output.string() + ": " + ec.message());
  }
  moveIntoPlace(root, target, false);
  return dropped;
}

PrivilegedFiles unpackOverSandbox(const std::filesystem::path& image, const std::filesystem::path& sandbox,
                                  bool keepPrivilegedFiles) {
  const ImageSource source = resolveImage(image);
  if (source.kind == ImageKind::Directory) throw Error(image.string() + ": a directory, not an image to unpack");
  const auto target = std::filesystem::absolute(sandbox);
  UniqueFd to(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to) throw sysError(sandbox.string() + ": not an existing sandbox directory to update");
  const ScratchDir scratch(target, "unpack");
  const auto root = scratch.path() / "root";
  unsquash(source, root.string());
  PrivilegedFiles dropped;
  if (!keepPrivilegedFiles) dropped = dropPrivilegedFiles(ImageTree(root));
  UniqueFd from(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!from) throw sysError("open " + root.string());
  CopyOptions copy;
  copy.preserveOwner = ::geteuid() == 0;
  for (const auto& entry : std::filesystem::directory_iterator(root))
    copyEntry(from.get(), entry.path().filename().string(), to.get(), entry.path().filename().string(), copy,
              "update " + sandbox.string() + " from " + image.string());
  return dropped;
}

}  // namespace ctr::image
