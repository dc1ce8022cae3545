// The image cache (ctr/image_cache.hpp). Layout under the cache root:
//   images/lock                 flock: one puller, one cleaner at a time
//   images/sha256-HEX.sif       the packed image (its mtime is never touched: the per-node
//                               mount cache keys on it)
//   images/sha256-HEX.json      {"digest", "references": [...]}; its mtime is the last use
//   blobs/sha256/HEX            the layers (oci_registry.cpp)
#include "ctr/image_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image_store.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/scratch.hpp"
#include "oci_internal.hpp"

namespace ctr::image::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kScheme = "docker://";

// The root's images/ directory, made (0700) where missing and refused where someone else
// could replace what ctr reads from it (a cache in a shared /var/tmp made by another user;
// a per-user name taken by another user never gets here: cacheRoot uses a sibling).
fs::path imagesDir(const fs::path& root, bool create) {
  const fs::path dir = root / "images";
  if (create) {
    (void)oci::openCacheRoot(root);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw sysError("image cache " + dir.string() + " (set 'image cache dir' or CTR_CACHE_DIR)");
  }
  // Nobody else may rename it or anything above it, nor add or replace what is in it.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return dir;
  requireOwnPrivateDirectory(dir, st, "image cache");
  return dir;
}

// The cache's lock, held while the object lives.
class CacheLock {
 public:
  explicit CacheLock(const fs::path& dir) {
    const auto path = dir / "lock";
    fd_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd_) throw sysError("image cache lock " + path.string());
    while (::flock(fd_.get(), LOCK_EX) != 0) {
      if (errno != EINTR) throw sysError("image cache lock " + path.string());
    }
  }

 private:
  UniqueFd fd_;
};

std::string hexOf(const std::string& digest) { return digest.substr(digest.find(':') + 1); }
fs::path sifPath(const fs::path& dir, const std::string& digest) { return dir / ("sha256-" + hexOf(digest) + ".sif"); }
fs::path recordPath(const fs::path& dir, const std::string& digest) { return dir / ("sha256-" + hexOf(digest) + ".json"); }

std::int64_t mtimeOf(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_mtim.tv_sec) : 0;
}

std::optional<Entry> readEntry(const fs::path& record) {
  std::string text;
  try {
    text = readFileIfPresent(record.string());  // a FIFO or a huge file there is no record
  } catch (const Error&) {
    return std::nullopt;
  }
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("digest") || !json["digest"].is_string())
    return std::nullopt;
  Entry e;
  e.digest = json["digest"].get<std::string>();
  if (json.contains("references") && json["references"].is_array())
    for (const auto& r : json["references"])
      if (r.is_string()) e.references.push_back(r.get<std::string>());
  e.sif = sifPath(record.parent_path(), e.digest);
  struct stat st {};
  if (::stat(e.sif.c_str(), &st) != 0) return std::nullopt;
  e.bytes = static_cast<std::uint64_t>(st.st_size);
  e.lastUsed = mtimeOf(record);
  return e;
}

std::vector<Entry> readEntries(const fs::path& dir) {
  std::vector<Entry> entries;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const auto name = item.path().filename().string();
    if (name.starts_with("sha256-") && name.ends_with(".json"))
      if (auto e = readEntry(item.path())) entries.push_back(std::move(*e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.lastUsed > b.lastUsed; });
  return entries;
}

// The record written anew (a file beside it renamed onto it), which also marks the use.
void writeRecord(const fs::path& dir, const Entry& entry) {
  nlohmann::json json{{"digest", entry.digest}, {"references", entry.references}};
  const auto path = recordPath(dir, entry.digest);
  UniqueFd fd = createReplacing(path, 0600);
  const std::string text = json.dump(2) + "\n";
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw sysError("image cache " + path.string());
}

// The record written anew with its mtime (its last use) as it was: a change of its
// references is no use of the image.
void rewriteRecordKeepingUse(const fs::path& dir, const Entry& entry) {
  struct stat st {};
  const auto path = recordPath(dir, entry.digest);
  const bool known = ::stat(path.c_str(), &st) == 0;
  writeRecord(dir, entry);
  if (!known) return;
  const timespec times[2] = {st.st_atim, st.st_mtim};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

// Marks a use: the record's mtime (not the SIF's).
void touch(const fs::path& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

void removeEntry(const fs::path& dir, const std::string& digest) {
  ::unlink(sifPath(dir, digest).c_str());
  ::unlink(recordPath(dir, digest).c_str());
}

// Under the lock: the least recently used images go until the rest fit in `maxBytes`;
// `keep` (the image just asked for) stays whatever its size.
void evict(const fs::path& dir, std::uint64_t maxBytes, const std::string& keep) {
  auto entries = readEntries(dir);
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  for (auto it = entries.rbegin(); it != entries.rend() && total > maxBytes; ++it) {
    if (it->digest == keep) continue;
    spdlog::info("image cache: removing {} ({} MiB, least recently used) to stay within {} MiB",
                 it->references.empty() ? it->digest : it->references.front(), it->bytes >> 20, maxBytes >> 20);
    removeEntry(dir, it->digest);
    total -= it->bytes;
  }
}

// The cached entry whose record names `reference`, most recently used first.
std::optional<Entry> lastFor(const fs::path& dir, const std::string& reference) {
  for (auto& e : readEntries(dir))
    if (std::find(e.references.begin(), e.references.end(), reference) != e.references.end()) return e;
  return std::nullopt;
}

std::string byDigest(const std::string& reference, const std::string& digest) {
  const auto ref = oci::parseReference(reference);
  return std::string(kScheme) + ref.registry + "/" + ref.repository + "@" + digest;
}

// 'image store copy': whether a store entry is copied to the node's cache before it runs
// (auto: where the store is on a network or parallel file system).
bool copyFromStore(const oci::PullOptions& options) {
  switch (options.limits.storeCopy) {
    case config::StoreCopy::Never: return false;
    case config::StoreCopy::Always: return true;
    case config::StoreCopy::Auto: break;
  }
  struct statfs fs {};
  return ::statfs(options.limits.storeDir.c_str(), &fs) == 0 && sharedFilesystemName(fs.f_type).has_value();
}

// Makes `got` the store's entry: run in place (got.sif the store's SIF, checked to be the
// file its writer wrote) or copied to got.sif in the cache (its sha256 checked on the way).
// False where it fails the check (dropped when it is the user's own): it never runs.
bool useStored(Acquired& got, const store::Entry& stored, const oci::PullOptions& options) {
  if (copyFromStore(options)) {
    try {
      store::copyVerified(stored, got.sif);
    } catch (const Error& e) {
      spdlog::warn("{}; fetching the image again", e.oneLine());
      store::discard(stored, ::geteuid());
      return false;
    }
    got.via = "the site image store, copied to the image cache";
    return true;
  }
  if (!store::unchangedInPlace(stored)) {
    store::discard(stored, ::geteuid());
    return false;
  }
  got.sif = stored.sif;
  got.via = "the site image store";
  return true;
}

// The image the reference named when the registry was last reached, where the registry
// cannot be reached now (`why`): the node's cached copy, else the site store's. False: none.
bool ranBefore(Acquired& got, const fs::path& dir, const oci::PullOptions& options, const Error& why) {
  if (auto earlier = lastFor(dir, got.reference)) {
    spdlog::warn("{}: {}; running the copy cached before ({})", got.reference, why.oneLine(), earlier->digest);
    touch(recordPath(dir, earlier->digest));
    got.digest = earlier->digest;
    got.sif = earlier->sif;
    got.offline = true;
    return true;
  }
  if (options.limits.storeDir.empty()) return false;
  auto stored = store::findByReference(options.limits.storeDir, got.reference, ::geteuid());
  if (!stored || !store::unchangedInPlace(*stored)) return false;
  spdlog::warn("{}: {}; running the site store's copy ({})", got.reference, why.oneLine(), stored->digest);
  got.digest = stored->digest;
  got.sif = stored->sif;
  got.via = "the site image store";
  got.offline = true;
  return true;
}

// A miss in the node's cache, under its lock: the store's entry of got.digest when there is
// a sound one (useStored), else, when this launch may fill it, `fill` (another node's launch
// filling it is waited for). False: pull.
bool fromStore(Acquired& got, const oci::PullOptions& options, std::unique_ptr<store::Fill>& fill) {
  const fs::path root = options.limits.storeDir;
  for (int tries = 0; tries < 2; ++tries) {
    auto stored = store::find(root, got.digest, ::geteuid());
    if (!stored) {
      auto claim = store::claim(root, got.digest, ::geteuid(), std::chrono::seconds(options.limits.storeWaitSeconds));
      stored = std::move(claim.entry);
      fill = std::move(claim.fill);
    }
    if (!stored) return false;                         // this launch fills it, or pulls for itself
    if (useStored(got, *stored, options)) return true;  // else corrupt: never run, fetched again
  }
  return false;
}

}  // namespace

bool isRegistryReference(std::string_view image) { return image.starts_with(kScheme); }

Acquired acquire(const std::string& reference, const oci::PullOptions& given) {
  oci::PullOptions options = given;
  options.limits.storeDir = store::rootOf(given.limits);  // ctr.conf's, else $CTR_IMAGE_STORE
  if (!isRegistryReference(reference)) throw Error(reference + ": not a docker:// reference");
  (void)oci::parseReference(reference);  // a malformed one is refused before any request
  const fs::path dir = imagesDir(oci::cacheRoot(options), true);
  Acquired got;
  got.reference = reference;
  try {
    got.digest = oci::manifestDigest(reference, options);
  } catch (const Error& e) {
    if (!ranBefore(got, dir, options, e)) throw Error(reference + ": " + e.oneLine());
    return got;
  }
  got.sif = sifPath(dir, got.digest);
  CacheLock lock(dir);
  auto entry = readEntry(recordPath(dir, got.digest));
  std::unique_ptr<store::Fill> fill;
  if (!entry) {
    // A SIF without its record is what a pull cut off between the two renames left.
    ::unlink(got.sif.c_str());
    if (!options.limits.storeDir.empty() && fromStore(got, options, fill)) {
      if (got.sif != sifPath(dir, got.digest)) return got;  // in place: the node's cache keeps nothing
      entry = Entry{got.digest, {}, got.sif, 0, 0};
    }
  }
  if (!entry) {
    oci::Progress().note(reference + ": pulling " + got.digest + " into the image cache " + dir.string());
    oci::PullRequest pull;
    pull.output = got.sif;
    pull.source = byDigest(reference, got.digest);  // what the digest names, even if the tag moves meanwhile
    pull.options = options;
    oci::pullToSif(pull);
    ::chmod(got.sif.c_str(), 0600);
    entry = Entry{got.digest, {}, got.sif, 0, 0};
    got.pulled = true;
    if (fill) {
      oci::Progress().note(reference + ": keeping " + got.digest + " in the image store " + options.limits.storeDir);
      fill->publish(got.sif, reference);
      fill.reset();
    }
  }
  if (std::find(entry->references.begin(), entry->references.end(), reference) == entry->references.end())
    entry->references.push_back(reference);
  writeRecord(dir, *entry);
  // A reference names one image: a moved tag's earlier image is no longer it (else which
  // copy runs offline would hang on which record was touched last, to the second).
  for (auto& other : readEntries(dir)) {
    const auto it = std::find(other.references.begin(), other.references.end(), reference);
    if (other.digest != got.digest && it != other.references.end()) {
      other.references.erase(it);
      rewriteRecordKeepingUse(dir, other);
    }
  }
  evict(dir, options.limits.cacheMaxBytes, got.digest);
  return got;
}

Listing list(const oci::PullOptions& options) {
  Listing listing;
  listing.root = oci::cacheRoot(options);
  const fs::path dir = listing.root / "images";
  if (fs::exists(dir)) listing.images = readEntries(imagesDir(listing.root, false));
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(listing.root / "blobs" / "sha256", ec)) {
    const Blob blob{item.path().filename().string(), item.file_size(ec), mtimeOf(item.path())};
    ++listing.blobs;
    listing.blobBytes += blob.bytes;
    listing.blobList.push_back(blob);
  }
  return listing;
}

Cleaned clean(const oci::PullOptions& options, std::optional<std::chrono::seconds> unusedFor, bool dryRun,
              Kinds kinds) {
  Cleaned cleaned;
  const fs::path root = oci::cacheRoot(options);
  const auto cutoff = unusedFor ? static_cast<std::int64_t>(std::time(nullptr)) - unusedFor->count()
                                : std::numeric_limits<std::int64_t>::max();
  if (fs::exists(root)) {
    const fs::path dir = imagesDir(root, true);
    CacheLock lock(dir);
    for (const auto& e : readEntries(dir)) {
      if (!kinds.images || e.lastUsed > cutoff) continue;
      ++cleaned.images;
      cleaned.bytes += e.bytes;
      if (!dryRun) removeEntry(dir, e.digest);
    }
    std::error_code ec;
    for (const auto& blob : fs::directory_iterator(root / "blobs" / "sha256", ec)) {
      if (!kinds.blobs || mtimeOf(blob.path()) > cutoff) continue;
      ++cleaned.blobs;
      cleaned.bytes += blob.file_size(ec);
      if (!dryRun) ::unlink(blob.path().c_str());
    }
  }
  return cleaned;
}

}  // namespace ctr::image::cache
