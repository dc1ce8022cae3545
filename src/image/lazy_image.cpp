// `ctr exec --lazy oras://REF`: the image as ctr-squashfs will read it, chunk by chunk
// (docs/design-io.md section 6). What the launch itself reads of the SIF (its header, its
// descriptors, the small objects and each partition's superblock) is fetched here, through
// the same cache and checks as the server's reads, so that resolveImage can read the cache's
// data file as it reads a pulled SIF.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <string_view>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/chunk_table.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/lazy_blob.hpp"
#include "ctr/limits.hpp"
#include "ctr/oci.hpp"
#include "ctr/sif.hpp"
#include "ctr/user_dir.hpp"
#include "oci_internal.hpp"

namespace ctr::image::oci {

namespace {

// Objects up to this size are fetched whole (definition file, environment, labels,
// signatures: what the launch and `inspect` read); of a larger one, its first 4 KiB (a
// partition's superblock).
constexpr std::int64_t kSmallObject = 1 << 20;
constexpr std::int64_t kSuperblockBytes = 4096;
// The largest chunk table fetched beside an image: 64 hex digits a MiB, 16 MiB covers 256 GiB.
constexpr std::uint64_t kChunkTableLimit = 16 << 20;

// `length` bytes at `offset` of the blob, fetched (and kept in the cache) where missing.
std::vector<std::uint8_t> readRange(lazy::Blob& blob, std::int64_t offset, std::int64_t length, const std::string& what) {
  if (offset < 0 || length < 0 || static_cast<std::uint64_t>(offset) > blob.size() ||
      static_cast<std::uint64_t>(length) > blob.size() - static_cast<std::uint64_t>(offset))
    throw Error(what + " lies outside the blob");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(length));
  if (blob.read(static_cast<std::uint64_t>(offset), bytes.data(), bytes.size()) != 0)
    throw Error(what + " could not be fetched: " + blob.lastFailure());
  return bytes;
}

// A squashfs partition's tables (inodes, directories, fragments, export, ids, xattrs), which
// mksquashfs writes after the data blocks, from the inode table to the end the superblock
// gives (bytes_used): fetched before the launch, so that the mount's lookups and listings do
// not wait on the link a chunk at a time. Not past kMaxTables, nor outside the partition.
constexpr std::uint64_t kMaxTables = 64 << 20;
void fetchSquashfsTables(lazy::Blob& blob, const sif::Descriptor& d, const std::vector<std::uint8_t>& superblock,
                         const std::string& name) {
  const auto sb = decodeSquashfsSuperblock(superblock);
  if (!sb) return;  // not squashfs
  const std::uint64_t used = sb->bytesUsed, inodes = sb->inodeTableStart;
  if (inodes >= used || used > static_cast<std::uint64_t>(d.size) || used - inodes > kMaxTables) return;
  (void)readRange(blob, d.offset + static_cast<std::int64_t>(inodes), static_cast<std::int64_t>(used - inodes),
                  name + ": the squashfs tables of SIF object " + std::to_string(d.id));
}

// The SIF's header, descriptor table and small objects, each large object's first 4 KiB (a
// partition's superblock) and a squashfs partition's tables, into the cache.
void fetchSifMetadata(lazy::Blob& blob, const std::string& name) {
  const auto headerBytes = readRange(blob, 0, sif::kHeaderSize, name + ": the SIF header");
  const sif::Header header =
      sif::decodeHeader(std::span<const std::uint8_t, sif::kHeaderSize>(headerBytes.data(), sif::kHeaderSize));
  if (header.descriptorsTotal <= 0 || header.descriptorsTotal > 1 << 16)
    throw Error(name + ": not a SIF (descriptor count " + std::to_string(header.descriptorsTotal) + ")");
  const auto table = readRange(blob, header.descriptorsOffset, header.descriptorsTotal * sif::kDescriptorSize,
                               name + ": the SIF descriptor table");
  for (std::int64_t i = 0; i < header.descriptorsTotal; ++i) {
    const sif::Descriptor d = sif::decodeDescriptor(std::span<const std::uint8_t, sif::kDescriptorSize>(
        table.data() + i * sif::kDescriptorSize, static_cast<std::size_t>(sif::kDescriptorSize)));
    if (!d.used) continue;
    const auto first = readRange(blob, d.offset, d.size <= kSmallObject ? d.size : kSuperblockBytes,
                                 name + ": SIF object " + std::to_string(d.id));
    if (d.isPartition() && d.fsType() == static_cast<std::int32_t>(sif::FsType::Squashfs))
      fetchSquashfsTables(blob, d, first, name);
  }
}

// The spec, where the server reads it: <cache>/<hex>.spec, 0600 (it may hold a token),
// replaced whole.
std::filesystem::path writeSpec(const lazy::Spec& spec) {
  const UserDir dir = openUserDir(spec.cacheDir, "lazy image cache", true, WhenTaken::Refuse);
  const std::string name = spec.digest.substr(7) + ".spec";
  const std::string tmp = name + ".tmp" + std::to_string(::getpid());
  const std::string text = lazy::specText(spec);
  UniqueFd fd(::openat(dir.fd.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::renameat(dir.fd.get(), tmp.c_str(), dir.fd.get(), name.c_str()) != 0) {
    const Error error = sysError("write " + (dir.path / name).string());
    ::unlinkat(dir.fd.get(), tmp.c_str(), 0);
    throw error;
  }
  return dir.path / name;
}

}  // namespace

namespace {

// The launch's part of a lazily read image, whatever its source: room in the cache, the spec
// written, the source probed for ranges, the SIF's metadata fetched, the image resolved.
LazyOpened openLazy(lazy::Spec spec, const PullOptions& options, const std::string& digest, const std::string& via) {
  const std::filesystem::path cacheDir = spec.cacheDir;
  // Room for what the image will take here: all of it where the server prefetches the rest.
  const std::uint64_t maxBytes = options.limits.lazyCacheMaxBytes;
  if (!lazy::makeRoom(cacheDir, spec.digest, spec.prefetch ? spec.table.size : 0, maxBytes)) {
    spdlog::warn("{}: the lazy image cache {} has no room for all of it within 'lazy cache max size' ({}): its chunks "
                 "are fetched as they are read, not prefetched",
                 spec.name, cacheDir.string(), limits::formatSize(maxBytes));
    spec.prefetch = false;
  }
  const std::filesystem::path specFile = writeSpec(spec);
  const std::filesystem::path dataFile = cacheDir / (spec.digest.substr(7) + ".data");
  lazy::Spec here = spec;
  here.prefetch = false;  // the server's to do: this process ends once the launch is planned
  std::optional<lazy::Blob> blob(std::in_place, std::move(here));
  blob->quiet(true);  // what fails here is thrown, in one line
  if (!blob->servesRanges()) {
    blob.reset();
    lazy::removeEntry(cacheDir, spec.digest);  // nothing in it: the image is pulled whole instead
    return {std::nullopt, "is served by a server that ignores range requests (HTTP 200)"};
  }
  fetchSifMetadata(*blob, spec.name);
  ImageSource source = resolveImage(dataFile);
  // The file grows as chunks arrive: its times would make every launch another holder's.
  source.mtimeNs = source.ctimeNs = 0;
  source.reference = spec.name;
  source.digest = digest;
  source.via = via;
  const auto [cached, chunks] = blob->cachedChunks();
  source.lazy = ImageSource::Lazy{specFile.string(), spec.url,    lazy::logFile(spec).string(), chunks,
                                  cached,           spec.prefetch, !spec.unverified};
  spdlog::info("{}: read lazily from {}, {} of {} chunks cached in {}", spec.name, spec.url, cached, chunks,
               cacheDir.string());
  return {std::move(source), ""};
}

}  // namespace

LazyOpened orasLazy(const std::string& reference, const PullOptions& options, const std::filesystem::path& cacheDir) {
  const Reference ref = parseReference(reference);
  RegistryClient client(ref, options);
  const OrasManifest oras = orasManifest(client, ref, reference, options);
  const std::string name = "oras://" + reference;
  std::optional<ChunkTable> table;
  if (!oras.configDigest.empty()) table = parseChunkTableConfig(client.smallBlob(oras.configDigest), oras.sifSize);
  if (!table && !options.limits.lazyUnverified)
    return {std::nullopt, "has no chunk table (pushed by another tool than ctr push?)"};
  const bool unverified = !table;
  if (unverified) {
    spdlog::warn("{} has no chunk table: read lazily unchecked ('lazy unverified = allow'), the whole checked once "
                 "every chunk is here",
                 name);
    table = lazy::unverifiedTable(oras.sifSize);
  }
  const auto access = client.blobAccess(oras.sifDigest);
  lazy::Spec spec{name,          access.url,        access.authorization, access.tokenUrl, access.tokenAuthorization,
                  oras.sifDigest, std::move(*table), cacheDir, options.limits.lazyPrefetch, unverified};
  return openLazy(std::move(spec), options, oras.manifestDigest, "lazily from " + ref.registry);
}

LazyOpened urlLazy(const std::string& url, const PullOptions& options, const std::filesystem::path& cacheDir) {
  // The table beside the image (`ctr sif chunks IMAGE > IMAGE.chunks`), from the same server:
  // as trusted as the image's own bytes from it would be, and each chunk checked against it.
  const UniqueFd memory(::memfd_create("ctr-chunk-table", MFD_CLOEXEC));
  if (!memory) throw sysError("memfd_create");
  const std::string tableUrl = url + ".chunks";
  try {
    (void)RegistryClient::download(tableUrl, memory.get(), kChunkTableLimit, options);
  } catch (const Error& e) {
    return {std::nullopt, "has no chunk table beside it (" + std::string(e.what()) +
                              "; `ctr sif chunks IMAGE > IMAGE.chunks` writes one)"};
  }
  struct stat st {};
  std::string text;
  if (::fstat(memory.get(), &st) == 0) text.resize(static_cast<std::size_t>(st.st_size));
  if (::pread(memory.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw sysError("read " + tableUrl);
  auto parsed = withContext(tableUrl, [&] { return parseUrlChunkTable(text); });
  lazy::Spec spec{url, url, "", "", "", parsed.digest, std::move(parsed.table), cacheDir, options.limits.lazyPrefetch};
  return openLazy(std::move(spec), options, parsed.digest, "lazily from " + urlServer(url));
}

}  // namespace ctr::image::oci

namespace ctr::image::lazy {

namespace {

// What a cache entry's files say about it; false where `hex` names no entry (no .have).
bool readEntry(int dirFd, const std::string& hex, CacheEntry& entry) {
  const UniqueFd have(::openat(dirFd, (hex + ".have").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!have || ::fstat(have.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  entry.digest = "sha256:" + hex;
  entry.lastUsed = st.st_mtim.tv_sec;
  entry.diskBytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
  std::vector<std::uint8_t> marks(static_cast<std::size_t>(std::max<off_t>(st.st_size - 64, 0)));
  if (!marks.empty() && ::pread(have.get(), marks.data(), marks.size(), 64) == static_cast<ssize_t>(marks.size())) {
    entry.chunks = marks.size();
    entry.cached = static_cast<std::uint64_t>(std::count(marks.begin(), marks.end(), 1));
  }
  entry.inUse = ::flock(have.get(), LOCK_EX | LOCK_NB) != 0;  // a server holds it shared
  for (const char* suffix : {".data", ".spec", ".log"})
    if (struct stat file {}; ::fstatat(dirFd, (hex + suffix).c_str(), &file, AT_SYMLINK_NOFOLLOW) == 0) {
      entry.diskBytes += static_cast<std::uint64_t>(file.st_blocks) * 512;
      if (std::string_view(suffix) == ".data") entry.blobBytes = static_cast<std::uint64_t>(file.st_size);
    }
  // The image's name, from the spec ctr wrote (a token in it is not shown).
  if (const UniqueFd spec(::openat(dirFd, (hex + ".spec").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)); spec) {
    std::string text(1 << 20, '\0');
    const ssize_t n = ::read(spec.get(), text.data(), text.size());
    const auto json = nlohmann::json::parse(text.substr(0, n > 0 ? static_cast<std::size_t>(n) : 0), nullptr, false);
    if (json.is_object() && json.contains("name") && json["name"].is_string()) entry.name = json["name"].get<std::string>();
  }
  return true;
}

}  // namespace

std::vector<CacheEntry> listCache(const std::filesystem::path& dir) {
  std::vector<CacheEntry> out;
  const UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirFd) return out;  // no cache yet
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = item.path().filename().string();
    if (file.size() != 64 + 5 || !file.ends_with(".have")) continue;
    CacheEntry entry;
    if (readEntry(dirFd.get(), file.substr(0, 64), entry)) out.push_back(std::move(entry));
  }
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.lastUsed > b.lastUsed; });
  return out;
}

bool removeEntry(const std::filesystem::path& dir, const std::string& digest) {
  const UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const std::string hex = digest.substr(7);
  // Under the entry's lock, so that a server opening it meanwhile waits, then makes it anew.
  const UniqueFd have(dirFd ? ::openat(dirFd.get(), (hex + ".have").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1);
  if (!have || ::flock(have.get(), LOCK_EX | LOCK_NB) != 0) return false;
  for (const char* suffix : {".data", ".spec", ".log", ".have"}) ::unlinkat(dirFd.get(), (hex + suffix).c_str(), 0);
  return true;
}

std::vector<CacheEntry> cleanCache(const std::filesystem::path& dir, std::optional<std::int64_t> unusedSeconds,
                                   bool dryRun) {
  std::vector<CacheEntry> removed;
  const std::int64_t now = ::time(nullptr);
  for (const auto& entry : listCache(dir)) {
    if (entry.inUse || (unusedSeconds && now - entry.lastUsed < *unusedSeconds)) continue;
    if (dryRun || removeEntry(dir, entry.digest)) removed.push_back(entry);
  }
  return removed;
}

bool makeRoom(const std::filesystem::path& dir, const std::string& digest, std::uint64_t bytes,
              std::uint64_t maxBytes) {
  auto entries = listCache(dir);  // most recently used first
  std::uint64_t total = 0, own = 0;
  for (const auto& e : entries) (e.digest == digest ? own : total) += e.diskBytes;
  total += std::max(bytes, own);
  for (auto it = entries.rbegin(); it != entries.rend() && total > maxBytes; ++it) {
    if (it->digest == digest || it->inUse || !removeEntry(dir, it->digest)) continue;
    spdlog::info("lazy image cache: removed {} ({}, least recently used) to stay within {}",
                 it->name.empty() ? it->digest : it->name, limits::formatSize(it->diskBytes), limits::formatSize(maxBytes));
    total -= it->diskBytes;
  }
  return total <= maxBytes;
}

}  // namespace ctr::image::lazy
