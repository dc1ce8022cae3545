// The site image store (ctr/image_store.hpp).
#include "ctr/image_store.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/config.hpp"
#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "oci_internal.hpp"

namespace ctr::image::store {

namespace fs = std::filesystem;

namespace {

constexpr auto kHeartbeat = std::chrono::seconds(5);
constexpr auto kDeadFiller = std::chrono::seconds(60);  // a .filling file unchanged this long
constexpr std::int64_t kLeftoverAge = 3600;              // seconds before clean takes a .tmp-
constexpr std::size_t kMaxRecord = 1 << 20;

std::string hexOf(const std::string& digest) { return digest.substr(digest.find(':') + 1); }
std::string baseName(const std::string& digest) { return "sha256-" + hexOf(digest); }

std::int64_t nowSeconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

// ROOT must be a directory nobody but its owner can rename entries in: not writable by
// group or others, or sticky (users then make their own UID directories in it).
struct stat checkedRoot(const fs::path& root) {
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) throw sysError("image store " + root.string() + " ('image store dir')");
  if (!S_ISDIR(st.st_mode)) throw Error("image store " + root.string() + " is " + fileTypeName(st.st_mode) + ", not a directory");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    throw Error("image store " + root.string() + " is writable by others without the sticky bit: refused "
                "(chmod 1777 for a store users fill, 0755 for one only its owner fills)");
  return st;
}

// The writers `uid` trusts, in the order their directories are searched.
std::vector<uid_t> trustedWriters(const struct stat& root, uid_t uid) {
  std::vector<uid_t> writers{uid};
  for (uid_t w : {root.st_uid, uid_t{0}})
    if (std::find(writers.begin(), writers.end(), w) == writers.end()) writers.push_back(w);
  return writers;
}

// ROOT/W, when it is W's directory that nobody else can write.
std::optional<fs::path> writerDir(const fs::path& root, uid_t writer) {
  const fs::path dir = root / std::to_string(writer);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != writer ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return std::nullopt;
  return dir;
}

// The entry whose record is `record` in W's directory, when complete and W's own.
std::optional<Entry> readEntry(const fs::path& record, uid_t writer) {
  UniqueFd fd(::open(record.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat rst {};
  if (!fd || ::fstat(fd.get(), &rst) != 0 || !S_ISREG(rst.st_mode) || rst.st_uid != writer) return std::nullopt;
  std::string text;
  try {
    text = readAllBounded(fd.get(), kMaxRecord, record.string());
  } catch (const Error&) {
    return std::nullopt;
  }
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  Entry e;
  try {
    e.digest = json.at("digest").get<std::string>();
    e.sifDigest = json.at("sif_digest").get<std::string>();
    e.bytes = json.at("sif_bytes").get<std::uint64_t>();
    e.identity = json.at("sif_identity").get<std::string>();
    e.created = json.value("created", std::int64_t{0});
    for (const auto& r : json.value("references", nlohmann::json::array()))
      if (r.is_string()) e.references.push_back(r.get<std::string>());
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (record.filename() != baseName(e.digest) + ".json") return std::nullopt;
  e.sif = record.parent_path() / (baseName(e.digest) + ".sif");
  e.writer = writer;
  struct stat sst {};
  if (::lstat(e.sif.c_str(), &sst) != 0 || !S_ISREG(sst.st_mode) || sst.st_uid != writer ||
      static_cast<std::uint64_t>(sst.st_size) != e.bytes)
    return std::nullopt;
  e.lastUsed = std::max<std::int64_t>(rst.st_mtim.tv_sec, sst.st_atim.tv_sec);
  return e;
}

std::vector<Entry> entriesIn(const fs::path& dir, uid_t writer) {
  std::vector<Entry> entries;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const auto name = item.path().filename().string();
    if (name.starts_with("sha256-") && name.ends_with(".json"))
      if (auto e = readEntry(item.path(), writer)) entries.push_back(std::move(*e));
  }
  return entries;
}

// What changes whenever anyone writes, truncates, replaces or chmods the file, as every node
// sees it: the inode, the size, the mtime and the ctime (no user can set a ctime).
std::string identityOf(const struct stat& st) {
  return std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

// A new file beside `final` (O_EXCL, `mode`) that becomes `final` once complete.
class NewFile {
 public:
  NewFile(const fs::path& final, mode_t mode) : final_(final) {
    std::array<char, 256> host{};
    ::gethostname(host.data(), host.size() - 1);
    temp_ = final.parent_path() / (".tmp-" + final.filename().string() + "." + host.data() + "." + std::to_string(::getpid()));
    fd_ = UniqueFd(::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd_) throw sysError("create " + temp_.string());
  }
  ~NewFile() {
    if (!done_) ::unlink(temp_.c_str());
  }
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;
  [[nodiscard]] int fd() const { return fd_.get(); }
  // fsync, then the rename: a reader sees the whole file or none.
  void commit() {
    if (::fsync(fd_.get()) != 0) throw sysError("fsync " + temp_.string());
    if (::close(fd_.release()) != 0) throw sysError("close " + temp_.string());
    if (::rename(temp_.c_str(), final_.c_str()) != 0) throw sysError("rename " + temp_.string());
    done_ = true;
  }

 private:
  fs::path final_, temp_;
  UniqueFd fd_;
  bool done_ = false;
};

// Copies `in` to `out`, returning the sha256 of what was read (one read for both).
std::string copyHashing(int in, int out, const std::string& what) {
  Digester digester;
  std::vector<char> buf(std::size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sysError("read " + what);
    if (n == 0) break;
    digester.update(buf.data(), static_cast<std::size_t>(n));
    writeAllTo(out, std::string_view(buf.data(), static_cast<std::size_t>(n)), "copy of " + what);
  }
  return digester.digest();
}

UniqueFd openSif(const Entry& entry) {
  UniqueFd fd(::open(entry.sif.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) throw sysError("image store entry " + entry.sif.string());
  return fd;
}

std::string corrupt(const Entry& entry, const std::string& got) {
  return "image store entry " + entry.sif.string() + " is corrupt (sha256 " + got + ", its record says " +
         entry.sifDigest + ")";
}

// What the .filling file of a live filler says, and when it last changed (its mtime as the
// file server keeps it: compared only with itself, so clocks of other nodes do not matter).
struct FillerState {
  std::string who;
  struct timespec changed {};
};
std::optional<FillerState> fillerOf(const fs::path& marker) {
  UniqueFd fd(::open(marker.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  FillerState state;
  state.changed = st.st_mtim;
  try {
    state.who = readAllBounded(fd.get(), 512, marker.string());
  } catch (const Error&) {
  }
  while (!state.who.empty() && (state.who.back() == '\n' || state.who.back() == ' ')) state.who.pop_back();
  return state;
}

// Whether the filler "HOST PID" ran on this host and is gone: no need to wait a minute.
bool deadHere(const std::string& who, const std::string& host) {
  const auto space = who.rfind(' ');
  if (space == std::string::npos || who.substr(0, space) != host) return false;
  pid_t pid = 0;
  try {
    pid = static_cast<pid_t>(std::stol(who.substr(space + 1)));
  } catch (const std::exception&) {
    return false;
  }
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

// ROOT/UID for writing, made where missing (0755 for root and ROOT's owner, whose entries
// everyone runs; 0700 for other users, whose images may be private); nullopt where the
// store does not let this user write.
std::optional<fs::path> ownDir(const fs::path& root, const struct stat& rootSt, uid_t uid) {
  const fs::path dir = root / std::to_string(uid);
  const mode_t mode = uid == 0 || uid == rootSt.st_uid ? 0755 : 0700;
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    if (errno == EACCES || errno == EPERM || errno == EROFS) return std::nullopt;
    throw sysError("image store " + dir.string());
  }
  auto usable = writerDir(root, uid);
  if (!usable) throw Error("image store " + dir.string() + " is not a directory of uid " + std::to_string(uid) +
                           " that only it can write: refused");
  if (::access(dir.c_str(), W_OK) != 0) return std::nullopt;
  return usable;
}

}  // namespace

fs::path rootOf(const config::PullPolicy& pull) {
  if (!pull.storeDir.empty()) return pull.storeDir;
  const char* env = std::getenv("CTR_IMAGE_STORE");
  if (env == nullptr || *env == '\0') return {};
  if (*env != '/') throw Error("CTR_IMAGE_STORE='" + std::string(env) + "': not an absolute path");
  return env;
}

std::optional<Entry> find(const fs::path& root, const std::string& digest, uid_t uid) {
  const struct stat rootSt = checkedRoot(root);
  for (uid_t writer : trustedWriters(rootSt, uid)) {
    const auto dir = writerDir(root, writer);
    if (!dir) continue;
    if (auto e = readEntry(*dir / (baseName(digest) + ".json"), writer); e && e->digest == digest) return e;
  }
  return std::nullopt;
}

std::optional<Entry> findByReference(const fs::path& root, const std::string& reference, uid_t uid) {
  const struct stat rootSt = checkedRoot(root);
  std::optional<Entry> best;
  for (uid_t writer : trustedWriters(rootSt, uid)) {
    const auto dir = writerDir(root, writer);
    if (!dir) continue;
    for (auto& e : entriesIn(*dir, writer))
      if (std::find(e.references.begin(), e.references.end(), reference) != e.references.end() &&
          (!best || e.created > best->created))
        best = std::move(e);
  }
  return best;
}

void copyVerified(const Entry& entry, const fs::path& dest) {
  UniqueFd in = openSif(entry);
  NewFile out(dest, 0600);
  const std::string got = copyHashing(in.get(), out.fd(), entry.sif.string());
  if (got != entry.sifDigest) throw Error(corrupt(entry, got));
  out.commit();
}

bool unchangedInPlace(const Entry& entry) {
  struct stat st {};
  if (::lstat(entry.sif.c_str(), &st) == 0 && S_ISREG(st.st_mode) && identityOf(st) == entry.identity) return true;
  spdlog::warn("image store entry {} has changed since it was written (inode, size, mtime or ctime): not run",
               entry.sif.string());
  return false;
}

bool verify(const Entry& entry) {
  UniqueFd in = openSif(entry);
  const std::string got = digestFile(in.get(), entry.sif.string()).digest;
  if (got == entry.sifDigest) return true;
  spdlog::warn("{}", corrupt(entry, got));
  return false;
}

bool discard(const Entry& entry, uid_t uid) {
  if (entry.writer != uid && uid != 0) return false;
  ::unlink((entry.sif.parent_path() / (baseName(entry.digest) + ".json")).c_str());
  ::unlink(entry.sif.c_str());
  return true;
}

struct Fill::Heartbeat {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

Fill::Fill(fs::path dir, std::string digest)
    : dir_(std::move(dir)), digest_(std::move(digest)), heartbeat_(std::make_unique<Heartbeat>()) {
  const fs::path marker = dir_ / (baseName(digest_) + ".filling");
  heartbeat_->thread = std::thread([this, marker] {
    std::unique_lock lock(heartbeat_->mutex);
    while (!heartbeat_->wake.wait_for(lock, kHeartbeat, [this] { return heartbeat_->stop; }))
      ::utimensat(AT_FDCWD, marker.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  });
}

Fill::~Fill() {
  {
    std::lock_guard lock(heartbeat_->mutex);
    heartbeat_->stop = true;
  }
  heartbeat_->wake.notify_all();
  heartbeat_->thread.join();
  ::unlink((dir_ / (baseName(digest_) + ".filling")).c_str());
}

bool Fill::publish(const fs::path& localSif, const std::string& reference) {
  const std::string base = baseName(digest_);
  try {
    UniqueFd in(::open(localSif.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in) throw sysError("open " + localSif.string());
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) throw sysError("stat " + localSif.string());
    struct stat dirSt {};
    const mode_t mode = ::stat(dir_.c_str(), &dirSt) == 0 && (dirSt.st_mode & S_IROTH) != 0 ? 0644 : 0600;
    NewFile sif(dir_ / (base + ".sif"), mode);
    const std::string sifDigest = copyHashing(in.get(), sif.fd(), localSif.string());
    sif.commit();
    struct stat stored {};
    if (::lstat((dir_ / (base + ".sif")).c_str(), &stored) != 0) throw sysError("stat " + (dir_ / (base + ".sif")).string());
    const nlohmann::json record{{"digest", digest_},
                                {"references", {reference}},
                                {"sif_digest", sifDigest},
                                {"sif_bytes", static_cast<std::uint64_t>(st.st_size)},
                                {"sif_identity", identityOf(stored)},
                                {"created", nowSeconds()}};
    NewFile json(dir_ / (base + ".json"), mode);
    writeAllTo(json.fd(), record.dump(2) + "\n", "image store record");
    json.commit();
    UniqueFd dirFd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dirFd) ::fsync(dirFd.get());
    return true;
  } catch (const Error& e) {
    ::unlink((dir_ / (base + ".sif")).c_str());  // a SIF without its record: nobody's entry
    spdlog::warn("image store {}: cannot keep {} there ({}); this launch runs the node's own copy", dir_.string(),
                 reference, e.oneLine());
    return false;
  }
}

Claim claim(const fs::path& root, const std::string& digest, uid_t uid, std::chrono::seconds wait) {
  const struct stat rootSt = checkedRoot(root);
  Claim result;
  const auto dir = ownDir(root, rootSt, uid);
  if (!dir) return result;
  const fs::path marker = *dir / (baseName(digest) + ".filling");
  const auto start = std::chrono::steady_clock::now();
  std::optional<FillerState> seen;
  auto seenSince = start;
  bool told = false;
  for (;;) {
    if (auto e = find(root, digest, uid)) {
      result.entry = std::move(e);
      return result;
    }
    std::array<char, 256> host{};
    ::gethostname(host.data(), host.size() - 1);
    UniqueFd fd(::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd) {
      writeAllTo(fd.get(), std::string(host.data()) + " " + std::to_string(::getpid()) + "\n", marker.string());
      result.fill = std::make_unique<Fill>(*dir, digest);
      return result;
    }
    if (errno != EEXIST) throw sysError("image store " + marker.string());
    const auto now = std::chrono::steady_clock::now();
    auto state = fillerOf(marker);
    if (state && (!seen || seen->changed.tv_sec != state->changed.tv_sec || seen->changed.tv_nsec != state->changed.tv_nsec)) {
      seen = state;
      seenSince = now;
    }
    if (state && (now - seenSince > kDeadFiller || deadHere(state->who, host.data()))) {
      spdlog::warn("image store: {} stopped filling {} ({}); taking it over", state->who, digest, marker.string());
      ::unlink(marker.c_str());
      seen.reset();
      continue;
    }
    if (now - start > wait)
      throw Error("image store: waited " + std::to_string(wait.count()) + " s for " + (state ? state->who : "another launch") +
                  " to fill " + digest + " (" + marker.string() + "): giving up ('image store wait')");
    if (!told && state) {
      oci::Progress().note("image store: " + state->who + " is filling " + digest + "; waiting for it");
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500 + ::getpid() % 500));
  }
}

std::vector<Entry> list(const fs::path& root) {
  (void)checkedRoot(root);
  std::vector<Entry> entries;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(root, ec)) {
    const std::string name = item.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto writer = static_cast<uid_t>(std::stoul(name));
    if (const auto dir = writerDir(root, writer))
      for (auto& e : entriesIn(*dir, writer)) entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.lastUsed > b.lastUsed; });
  return entries;
}

Cleaned clean(const fs::path& root, const CleanOptions& options) {
  Cleaned cleaned;
  auto entries = list(root);  // newest use first
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  const std::int64_t cutoff = options.unusedFor ? nowSeconds() - options.unusedFor->count() : 0;
  // Oldest first, so that --max-size takes the least recently used.
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    const bool byReference = !options.reference.empty() &&
                             std::find(it->references.begin(), it->references.end(), options.reference) != it->references.end();
    const bool byAge = options.unusedFor && it->lastUsed <= cutoff;
    const bool bySize = options.maxBytes && total > *options.maxBytes;
    if (!options.all && !byReference && !byAge && !bySize) continue;
    const fs::path record = it->sif.parent_path() / (baseName(it->digest) + ".json");
    if (!options.dryRun && ::unlink(record.c_str()) != 0) {
      spdlog::warn("image store: cannot remove {}: {}", record.string(), std::strerror(errno));
      continue;
    }
    if (!options.dryRun) ::unlink(it->sif.c_str());
    total -= it->bytes;
    cleaned.bytes += it->bytes;
    cleaned.entries.push_back(*it);
  }
  // Leftovers of killed writers: .tmp- files, .filling files nobody refreshes, SIFs without a record.
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(root, ec)) {
    std::error_code ec2;
    for (const auto& item : fs::directory_iterator(dir.path(), ec2)) {
      const std::string name = item.path().filename().string();
      struct stat st {};
      if (::lstat(item.path().c_str(), &st) != 0 || (!options.all && nowSeconds() - st.st_mtim.tv_sec < kLeftoverAge))
        continue;
      const bool orphanSif = name.ends_with(".sif") && !fs::exists(item.path().parent_path() / (name.substr(0, name.size() - 4) + ".json"));
      if (!name.starts_with(".tmp-") && !name.ends_with(".filling") && !orphanSif) continue;
      if (!options.dryRun && ::unlink(item.path().c_str()) != 0) continue;
      ++cleaned.leftovers;
      cleaned.bytes += static_cast<std::uint64_t>(st.st_size);
    }
  }
  if (options.all && !options.dryRun) ::rmdir((root / std::to_string(::geteuid())).c_str());  // once empty
  return cleaned;
}

}  // namespace ctr::image::store
