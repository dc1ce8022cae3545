// A blob read chunk by chunk over HTTP into the user's node cache, each chunk checked before
// it is kept or used (docs/design-io.md section 6).
#include "ctr/lazy_blob.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "oci_libs.hpp"

namespace ctr::image::lazy {

ChunkTable unverifiedTable(std::uint64_t size) {
  ChunkTable table;
  table.size = size;
  table.digests.resize((size + table.chunkSize - 1) / table.chunkSize);
  return table;
}

std::string specText(const Spec& spec) {
  nlohmann::json json{{"name", spec.name},
                      {"url", spec.url},
                      {"authorization", spec.authorization},
                      {"tokenUrl", spec.tokenUrl},
                      {"tokenAuthorization", spec.tokenAuthorization},
                      {"digest", spec.digest},
                      {"cacheDir", spec.cacheDir.string()},
                      {"prefetch", spec.prefetch}};
  if (spec.unverified)
    json["unverified"] = {{"size", spec.table.size}};  // 1 MiB chunks, checked as a whole
  else
    json["chunks"] = nlohmann::json::parse(chunkTableConfig(spec.table));
  return json.dump();
}

Spec parseSpec(std::string_view text) {
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object()) throw Error("lazy image spec: not a JSON object");
  auto field = [&](const char* key) {
    const auto it = json.find(key);
    if (it == json.end() || !it->is_string()) throw Error(std::string("lazy image spec: no '") + key + "' string");
    return it->get<std::string>();
  };
  Spec spec;
  spec.name = field("name");
  spec.url = field("url");
  spec.authorization = field("authorization");
  spec.tokenUrl = field("tokenUrl");
  spec.tokenAuthorization = field("tokenAuthorization");
  if (!spec.tokenUrl.empty() && !spec.tokenUrl.starts_with("http://") && !spec.tokenUrl.starts_with("https://"))
    throw Error("lazy image spec: the token URL is not http(s): " + spec.tokenUrl);
  spec.digest = field("digest");
  spec.cacheDir = field("cacheDir");
  if (!spec.url.starts_with("http://") && !spec.url.starts_with("https://"))
    throw Error("lazy image spec: the URL is not http(s): " + spec.url);
  if (!isSha256Digest(spec.digest))
    throw Error("lazy image spec: '" + spec.digest + "' is not a sha256 digest");
  if (!spec.cacheDir.is_absolute()) throw Error("lazy image spec: the cache directory is not an absolute path");
  if (const auto prefetch = json.find("prefetch"); prefetch != json.end()) {
    if (!prefetch->is_boolean()) throw Error("lazy image spec: 'prefetch' is not true or false");
    spec.prefetch = prefetch->get<bool>();
  }
  if (const auto unverified = json.find("unverified"); unverified != json.end()) {
    if (!unverified->is_object() || !unverified->contains("size") || !(*unverified)["size"].is_number_unsigned())
      throw Error("lazy image spec: 'unverified' has no size");
    spec.unverified = true;
    spec.table = unverifiedTable((*unverified)["size"].get<std::uint64_t>());
    return spec;
  }
  // The table as the config carries it; its size is checked against the one it states.
  const auto chunks = json.find("chunks");
  if (chunks == json.end() || !chunks->is_object() || !chunks->contains(kChunkTableKey) ||
      !(*chunks)[kChunkTableKey].is_object() || !(*chunks)[kChunkTableKey].contains("size") ||
      !(*chunks)[kChunkTableKey]["size"].is_number_unsigned())
    throw Error("lazy image spec: no chunk table");
  auto table = parseChunkTableConfig(chunks->dump(), (*chunks)[kChunkTableKey]["size"].get<std::uint64_t>());
  if (!table) throw Error("lazy image spec: no chunk table");
  spec.table = std::move(*table);
  return spec;
}

std::filesystem::path logFile(const Spec& spec) { return spec.cacheDir / (spec.digest.substr(7) + ".log"); }

namespace {

// H.have starts with this header; then one byte a chunk (1: verified and in H.data).
struct Header {
  char magic[8];
  std::uint64_t chunkSize, size, chunks;
  char bootId[32];
};
static_assert(sizeof(Header) == 64);
constexpr char kMagic[8] = {'C', 'T', 'R', 'L', 'A', 'Z', 'Y', '1'};
// An entry whose chunks were not checked one by one (Spec::unverified), until the whole is.
constexpr char kUncheckedMagic[8] = {'C', 'T', 'R', 'L', 'A', 'Z', 'U', '1'};
constexpr off_t kHeaderBytes = sizeof(Header);
constexpr int kAttempts = 4;  // a request and three retries
constexpr std::size_t kParallel = 4;  // chunks of one read fetched at once
// The prefetch waits for this long without a read that waited for a chunk; after a pass with
// failures, this long before the next.
constexpr std::chrono::milliseconds kIdle(300);
constexpr std::chrono::seconds kPrefetchRetry(10);
constexpr std::chrono::milliseconds kBackoff[] = {std::chrono::milliseconds(200), std::chrono::milliseconds(500),
                                                  std::chrono::milliseconds(1000)};

// The kernel's id of this boot, hex digits only; a cache entry of another boot may hold
// chunks whose bytes never reached the disk.
std::string bootId() {
  char text[64] = {};
  UniqueFd fd(::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
  const ssize_t n = fd ? ::read(fd.get(), text, sizeof text - 1) : -1;
  std::string id;
  for (ssize_t i = 0; i < n; ++i)
    if (std::isxdigit(static_cast<unsigned char>(text[i]))) id += text[i];
  id.resize(32, '0');
  return id;
}

// An open-file-description lock on `length` bytes at `start` of `fd` (F_OFD_SETLKW: threads
// and processes each with their own open of the file exclude each other; the kernel drops it
// when the last descriptor of that open goes, a killed server's included).
void lockRange(int fd, off_t start, off_t length, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = length;
  while (::fcntl(fd, F_OFD_SETLKW, &lock) != 0)
    if (errno != EINTR) throw sysError("lock the lazy cache");
}

// All `length` bytes at `offset`, with pread or pwrite (`io`): false on an error or an end.
template <typename Buffer, typename Io>
bool transferFull(Io io, int fd, Buffer* buffer, std::size_t length, off_t offset) {
  auto* p = reinterpret_cast<std::conditional_t<std::is_const_v<Buffer>, const char, char>*>(buffer);
  while (length > 0) {
    const ssize_t n = io(fd, p, length, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    offset += n;
    length -= static_cast<std::size_t>(n);
  }
  return true;
}
bool preadFull(int fd, void* out, std::size_t length, off_t offset) {
  return transferFull(::pread, fd, out, length, offset);
}
bool pwriteFull(int fd, const void* data, std::size_t length, off_t offset) {
  return transferFull(::pwrite, fd, data, length, offset);
}

// One range request's answer, at most `want` bytes kept (one more marks "too long").
struct Answer {
  std::string body;
  std::size_t want = 0;
  static size_t onData(char* data, size_t size, size_t n, void* user) {
    auto* self = static_cast<Answer*>(user);
    const size_t len = size * n;
    if (self->body.size() + len > self->want) return 0;  // more than asked for: abort
    self->body.append(data, len);
    return len;
  }
};

}  // namespace

struct Blob::Impl {
  Spec spec;
  UniqueFd data, have;
  std::vector<std::atomic<std::uint8_t>> cached;  // per chunk, 1 once verified here or seen in H.have
  std::atomic<std::uint64_t> cachedCount{0};
  std::mutex mutex;
  std::condition_variable changed;
  std::set<std::uint64_t> inFlight;  // chunks a thread of this process is fetching
  std::set<std::uint64_t> failedChunks;  // chunks that failed here, logged once
  std::string lastFailure;               // what the last failure said (Blob::lastFailure)
  bool quiet = false;                    // failures not logged (Blob::quiet)
  std::vector<CURL*> idleHandles;    // kept open: their connections are reused
  std::mutex handlesMutex;
  std::mutex authorizationMutex;  // spec.authorization changes when a token is refreshed
  using Clock = std::chrono::steady_clock;
  std::atomic<Clock::rep> lastDemand{0};  // when a read last asked for a chunk not cached
  std::thread prefetcher;
  std::atomic<bool> stopping{false};  // the blob closes: the prefetch ends, transfers abort
  // The source answered a range request with the whole blob (HTTP 200): no range is served,
  // so no try again.
  std::atomic<bool> rangesIgnored{false};
  // Spec::unverified: the whole blob was checked (or the entry was a checked one), or failed.
  std::atomic<bool> wholeChecked{false}, wholeFailed{false}, checkStarted{false};
  std::thread checker;
  std::mutex stopMutex;
  std::condition_variable stopWake;

  explicit Impl(Spec s) : spec(std::move(s)), cached(spec.table.chunkCount()) {}

  ~Impl() {
    for (CURL* handle : idleHandles) oci::curlApi().easy_cleanup(handle);
  }

  void open() {
    // ctr made the directory and checked the path to it (openUserDir) when it wrote the spec;
    // here, perhaps in the image holder's user namespace (where root's directories above it
    // are nobody's), the directory itself must still be the user's alone.
    const std::filesystem::path& dir = spec.cacheDir;
    const UniqueFd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!dirFd || ::fstat(dirFd.get(), &st) != 0) throw sysError("open the lazy image cache " + dir.string());
    if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
      throw Error("the lazy image cache " + dir.string() + " is not this user's alone (mode 0700): refused");
    const std::string hex = spec.digest.substr(7);
    const int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW;
    have = UniqueFd(::openat(dirFd.get(), (hex + ".have").c_str(), flags, 0600));
    if (!have) throw sysError("open " + (dir / (hex + ".have")).string());
    data = UniqueFd(::openat(dirFd.get(), (hex + ".data").c_str(), flags, 0600));
    if (!data) throw sysError("open " + (dir / (hex + ".data")).string());
    // Held while the entry is open: `ctr cache clean` removes only entries nobody holds.
    while (::flock(have.get(), LOCK_SH) != 0)
      if (errno != EINTR) throw sysError("lock " + (dir / (hex + ".have")).string());
    ::futimens(have.get(), nullptr);  // when it was last used: what clean's --days looks at
    // The header is written, where missing or another boot's, under its own lock: the
    // chunk bytes after it are locked one by one by fetching servers.
    lockRange(have.get(), 0, kHeaderBytes, F_WRLCK);
    Header want{};
    std::memcpy(want.magic, kMagic, sizeof kMagic);
    want.chunkSize = spec.table.chunkSize;
    want.size = spec.table.size;
    want.chunks = spec.table.chunkCount();
    const std::string boot = bootId();
    std::memcpy(want.bootId, boot.data(), sizeof want.bootId);
    Header found{};
    const bool read = preadFull(have.get(), &found, sizeof found, 0);
    // An unchecked reader takes a checked entry as it is; a checked one never an unchecked one.
    if (read && spec.unverified && std::memcmp(&found, &want, sizeof want) == 0) wholeChecked = true;
    if (spec.unverified && !wholeChecked) std::memcpy(want.magic, kUncheckedMagic, sizeof kUncheckedMagic);
    if (!read || std::memcmp(&found, &want, sizeof want) != 0) {
      // New, or left by another boot or another table: emptied, then marked as this boot's;
      // not while another server reads it (an unchecked one, where this one checks).
      const bool alone = ::flock(have.get(), LOCK_EX | LOCK_NB) == 0;
      while (::flock(have.get(), LOCK_SH) != 0 && errno == EINTR) {
      }
      if (!alone && read && found.chunks != 0)
        throw Error(spec.name + ": its lazy cache entry " + (dir / hex).string() +
                    " is in use by a launch that reads it another way (unchecked): try again once it ends");
      if (::ftruncate(have.get(), 0) != 0 || ::ftruncate(data.get(), 0) != 0 ||
          ::ftruncate(data.get(), static_cast<off_t>(spec.table.size)) != 0 ||
          ::ftruncate(have.get(), kHeaderBytes + static_cast<off_t>(want.chunks)) != 0 ||
          !pwriteFull(have.get(), &want, sizeof want, 0))
        throw sysError("make the lazy cache entry " + (dir / hex).string());
    }
    lockRange(have.get(), 0, kHeaderBytes, F_UNLCK);
    std::vector<std::uint8_t> marks(want.chunks);
    if (!marks.empty() && !preadFull(have.get(), marks.data(), marks.size(), kHeaderBytes))
      throw sysError("read " + (dir / (hex + ".have")).string());
    for (std::size_t i = 0; i < marks.size(); ++i)
      if (marks[i] == 1) cached[i] = 1, ++cachedCount;
    checkWholeWhenComplete();  // an unchecked entry left complete by a server that ended first
  }

  // Spec::unverified: once every chunk is cached, the whole blob is checked against its
  // digest, in a thread of its own (a 10 GB blob takes a while). It matches: the entry is
  // marked checked. It does not: the entry is emptied, logged, and every later read gets EIO.
  void checkWholeWhenComplete() {
    if (!spec.unverified || wholeChecked || cachedCount.load() < cached.size() || checkStarted.exchange(true)) return;
    checker = std::thread([this] { checkWhole(); });
  }

  void checkWhole() {
    try {
      Digester digester("sha256");
      std::vector<char> buffer(spec.table.chunkSize);
      for (std::uint64_t i = 0; i < spec.table.chunkCount() && !stopping; ++i) {
        const std::size_t length = spec.table.chunkLength(i);
        if (!preadFull(data.get(), buffer.data(), length, static_cast<off_t>(spec.table.chunkOffset(i))))
          throw sysError("read the lazy cache file");
        digester.update(buffer.data(), length);
      }
      if (stopping) return;
      const std::string got = digester.digest();
      lockRange(have.get(), 0, kHeaderBytes, F_WRLCK);
      if (got == spec.digest) {
        wholeChecked = true;
        pwriteFull(have.get(), kMagic, sizeof kMagic, 0);  // checked: any launch may use it now
        lockRange(have.get(), 0, kHeaderBytes, F_UNLCK);
        spdlog::info("{}: all {} chunks cached, and the blob matches its digest (read without a chunk table)", spec.name,
                     cached.size());
        return;
      }
      wholeFailed = true;
      const std::vector<std::uint8_t> none(cached.size(), 0);
      pwriteFull(have.get(), none.data(), none.size(), kHeaderBytes);
      lockRange(have.get(), 0, kHeaderBytes, F_UNLCK);
      for (auto& c : cached) c = 0;
      cachedCount = 0;
      (void)::ftruncate(data.get(), 0);
      (void)::ftruncate(data.get(), static_cast<off_t>(spec.table.size));
      spdlog::error("{}: read without a chunk table ('lazy unverified = allow'): the whole blob from {} is {}, not its "
                    "digest {}: the cache entry is emptied, and every later read gets EIO",
                    spec.name, spec.url, got, spec.digest);
    } catch (const Error& e) {
      spdlog::error("{}: checking the whole blob: {}", spec.name, e.what());
    }
  }

  CURL* takeHandle() {
    {
      std::lock_guard lock(handlesMutex);
      if (!idleHandles.empty()) {
        CURL* handle = idleHandles.back();
        idleHandles.pop_back();
        return handle;
      }
    }
    return oci::curlApi().easy_init();
  }

  void giveBack(CURL* handle) {
    std::lock_guard lock(handlesMutex);
    idleHandles.push_back(handle);
  }

  static int onProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Impl*>(self)->stopping.load() ? 1 : 0;
  }

  // GET `url` (a byte range of it where `range` is not empty) with the header line `header`;
  // at most `want` bytes of the answer kept in `answer`. The HTTP status, or 0 and `why`.
  long get(const std::string& url, const std::string& range, const std::string& header, std::size_t want,
           std::string& answer, std::string& why) {
    const auto& curl = oci::curlApi();
    CURL* handle = takeHandle();
    if (!handle) {
      why = "curl_easy_init failed";
      return 0;
    }
    Answer body;
    body.want = want;
    body.body.reserve(want);
    curl_slist* headers = header.empty() ? nullptr : curl.slist_append(nullptr, header.c_str());
    curl.easy_reset(handle);
    curl.easy_setopt(handle, CURLOPT_URL, url.c_str());
    if (!range.empty()) curl.easy_setopt(handle, CURLOPT_RANGE, range.c_str());
    curl.easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl.easy_setopt(handle, CURLOPT_USERAGENT, "ctr");
    curl.easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);  // registries send blob reads to object stores
    curl.easy_setopt(handle, CURLOPT_MAXREDIRS, 10L);
    curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    curl.easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, url.starts_with("https:") ? "https" : "http,https");
    curl.easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, 10L);
    // A stalled transfer fails (and is tried again) rather than hanging the reader.
    curl.easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl.easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, 30L);
    curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    // A transfer aborts when the blob closes (the server is ending): the prefetch's last one.
    curl.easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
    curl.easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, &Impl::onProgress);
    curl.easy_setopt(handle, CURLOPT_XFERINFODATA, this);
    curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &Answer::onData);
    curl.easy_setopt(handle, CURLOPT_WRITEDATA, &body);
    const CURLcode rc = curl.easy_perform(handle);
    long status = 0;
    curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    curl.easy_setopt(handle, CURLOPT_HTTPHEADER, nullptr);
    curl.slist_free_all(headers);
    giveBack(handle);
    // An answer too long for `want` is cut off (CURLE_WRITE_ERROR): its status still says why.
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && status != 0)) {
      why = curl.easy_strerror(rc);
      return 0;
    }
    answer = std::move(body.body);
    return status;
  }

  // GET the chunk's bytes; "" and `why` set when it could not; `status` the HTTP status.
  std::string request(std::uint64_t index, std::string& why, long& status) {
    const std::uint64_t start = spec.table.chunkOffset(index), length = spec.table.chunkLength(index);
    std::string header;
    {
      std::lock_guard lock(authorizationMutex);
      header = spec.authorization;
    }
    std::string body;
    status = get(spec.url, std::to_string(start) + "-" + std::to_string(start + length - 1), header, length, body, why);
    if (status == 0) return {};
    if (status == 200) {
      why = "the server ignores range requests (HTTP 200)";
      rangesIgnored = true;
      return {};
    }
    if (status != 206) {
      why = "HTTP " + std::to_string(status);
      return {};
    }
    if (body.size() != length) {
      why = "got " + std::to_string(body.size()) + " of " + std::to_string(length) + " bytes";
      return {};
    }
    return body;
  }

  // A new bearer token from the token service the spec names (the one ctr used), as the
  // registry asks when it answers 401; false when there is none or it gave none.
  bool refreshToken(std::string& why) {
    if (spec.tokenUrl.empty()) return false;
    std::string body;
    const long status = get(spec.tokenUrl, "", spec.tokenAuthorization, 1 << 20, body, why);
    if (status != 200) {
      if (status != 0) why = "the token service answered HTTP " + std::to_string(status);
      return false;
    }
    const auto json = nlohmann::json::parse(body, nullptr, false);
    std::string token;
    for (const char* key : {"token", "access_token"})
      if (token.empty() && json.is_object() && json.contains(key) && json[key].is_string())
        token = json[key].get<std::string>();
    // A header line: printable, no space (a token is base64url and dots).
    if (token.empty() || std::any_of(token.begin(), token.end(), [](char c) { return c <= ' ' || c == 0x7f; })) {
      why = "the token service's answer holds no usable token";
      return false;
    }
    std::lock_guard lock(authorizationMutex);
    spec.authorization = "Authorization: Bearer " + token;
    return true;
  }

  // Fetches chunk `index` into the cache unless another server did meanwhile: 0 or EIO.
  int fetch(std::uint64_t index) {
    const off_t mark = kHeaderBytes + static_cast<off_t>(index);
    try {
      lockRange(have.get(), mark, 1, F_WRLCK);
    } catch (const Error& e) {
      spdlog::error("{}: {}", spec.name, e.what());
      return EIO;
    }
    struct Unlock {
      int fd;
      off_t at;
      ~Unlock() {
        try {
          lockRange(fd, at, 1, F_UNLCK);
        } catch (const Error&) {  // closing the cache file drops it anyway
        }
      }
    } unlock{have.get(), mark};
    std::uint8_t byte = 0;
    if (preadFull(have.get(), &byte, 1, mark) && byte == 1) return markCached(index);
    std::string why, bytes;
    bool refreshed = false;  // once a fetch: a token that the registry refuses at once is not expired
    for (int attempt = 0; attempt < kAttempts && bytes.empty() && !stopping && !rangesIgnored; ++attempt) {
      if (attempt > 0 && pause(kBackoff[attempt - 1])) break;
      long status = 0;
      bytes = request(index, why, status);
      if (status == 401 && !refreshed) {
        refreshed = true;
        std::string refreshWhy;
        if (refreshToken(refreshWhy)) {
          spdlog::info("{}: a new token from {}", spec.name, spec.tokenUrl);
          bytes = request(index, why, status);
        } else if (!refreshWhy.empty()) {
          why += " (no new token: " + refreshWhy + ")";
        }
      }
    }
    if (bytes.empty() && stopping) return EIO;  // the server is ending: nobody reads it
    if (bytes.empty())
      return failed(index, fmt::format("{}: chunk {} of {} from {}: {} (after {} tries): EIO", spec.name, index,
                                       spec.table.chunkCount(), spec.url, why, kAttempts));
    if (!spec.unverified && !spec.table.matches(index, bytes.data(), bytes.size()))
      return failed(index, fmt::format("{}: chunk {} of {} from {} does not match its digest in the chunk table: "
                                       "refused, not cached (EIO)",
                                       spec.name, index, spec.table.chunkCount(), spec.url));
    // The chunk first, then its mark: a server killed between the two leaves a chunk to fetch
    // again, never a mark without its chunk.
    const std::uint8_t one = 1;
    if (!pwriteFull(data.get(), bytes.data(), bytes.size(), static_cast<off_t>(spec.table.chunkOffset(index))) ||
        !pwriteFull(have.get(), &one, 1, mark)) {
      spdlog::error("{}: cannot write chunk {} to the lazy cache {}: {}: EIO", spec.name, index,
                    spec.cacheDir.string(), std::strerror(errno));
      return EIO;
    }
    return markCached(index);
  }

  // A chunk that failed: EIO, and one line a chunk says why (the kernel asks again for the
  // pages of a read that failed, and reads ahead), unless `quiet` (the launch throws it).
  int failed(std::uint64_t index, std::string message) {
    std::lock_guard lock(mutex);
    if (failedChunks.insert(index).second && !quiet) spdlog::error("{}", message);
    lastFailure = std::move(message);
    return EIO;
  }

  int markCached(std::uint64_t index) {
    if (cached[index].exchange(1) == 0) ++cachedCount;
    checkWholeWhenComplete();
    return 0;
  }

  // Chunk `index` is in the cache when this returns 0; one thread of this process fetches it,
  // the others wait for that thread.
  int ensure(std::uint64_t index, bool demand = true) {
    if (cached[index].load(std::memory_order_acquire) == 1) return 0;
    if (demand) lastDemand = Clock::now().time_since_epoch().count();
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return inFlight.count(index) == 0; });
    if (cached[index].load() == 1) return 0;
    inFlight.insert(index);
    lock.unlock();
    const int result = fetch(index);
    lock.lock();
    inFlight.erase(index);
    changed.notify_all();
    return result;
  }

  // The background prefetch (spec.prefetch): every chunk not cached yet, in order, each once
  // no read has waited for a chunk for kIdle (a job's reads keep the link); passes again after
  // a pause while some failed; ends when the image is whole or the blob closes.
  void prefetchAll() {
    for (;;) {
      bool whole = true;
      for (std::uint64_t i = 0; i < cached.size(); ++i) {
        if (cached[i].load() == 1) continue;
        for (;;) {
          const auto idle = Clock::now() - Clock::time_point(Clock::duration(lastDemand.load()));
          if (idle >= kIdle) break;
          if (pause(kIdle - idle)) return;
        }
        if (stopping || wholeFailed) return;
        whole = ensure(i, false) == 0 && whole;
      }
      if (whole) break;
      if (pause(kPrefetchRetry)) return;
    }
    spdlog::info("{}: all {} chunks cached", spec.name, cached.size());
  }

  // Sleeps `how long`, or less when the blob closes: true then.
  bool pause(Clock::duration howLong) {
    std::unique_lock lock(stopMutex);
    return stopWake.wait_for(lock, howLong, [&] { return stopping.load(); });
  }

  void startPrefetch() {
    lastDemand = Clock::now().time_since_epoch().count();  // the job's first reads come first
    if (spec.prefetch && cachedCount.load() < cached.size()) prefetcher = std::thread([this] { prefetchAll(); });
  }

  void stopPrefetch() {
    {
      std::lock_guard lock(stopMutex);
      stopping = true;
    }
    stopWake.notify_all();
    if (prefetcher.joinable()) prefetcher.join();
    if (checker.joinable()) checker.join();
  }
};

Blob::Blob(Spec spec) : impl_(std::make_unique<Impl>(std::move(spec))) {
  impl_->open();
  impl_->startPrefetch();
}
Blob::~Blob() { impl_->stopPrefetch(); }

int Blob::read(std::uint64_t offset, void* out, std::size_t length) {
  const ChunkTable& table = impl_->spec.table;
  if (offset > table.size || length > table.size - offset) return EINVAL;
  if (impl_->wholeFailed) return EIO;
  if (length == 0) return 0;
  // The chunks the read spans that are not here yet, fetched side by side (a read of a
  // squashfs partition's tables at a launch spans several): at most kParallel at once.
  const std::uint64_t first = offset / table.chunkSize, last = (offset + length - 1) / table.chunkSize;
  std::vector<std::uint64_t> missing;
  for (std::uint64_t index = first; index <= last; ++index)
    if (impl_->cached[index].load(std::memory_order_acquire) != 1) missing.push_back(index);
  std::atomic<std::size_t> next{0};
  std::atomic<int> error{0};
  auto work = [&] {
    for (std::size_t i = next++; i < missing.size() && error == 0; i = next++)
      if (const int err = impl_->ensure(missing[i]); err != 0) error = err;
  };
  std::vector<std::thread> helpers;
  for (std::size_t i = 1; i < std::min<std::size_t>(missing.size(), kParallel); ++i) helpers.emplace_back(work);
  work();
  for (auto& helper : helpers) helper.join();
  if (error != 0) return error;
  return preadFull(impl_->data.get(), out, length, static_cast<off_t>(offset)) ? 0 : EIO;
}

bool Blob::servesRanges() {
  // Quiet while it asks: a refusal is its answer, not an error to log.
  std::uint8_t first = 0;
  const bool wasQuiet = impl_->quiet;
  impl_->quiet = true;
  const int err = read(0, &first, 1);
  impl_->quiet = wasQuiet;
  if (err == 0) return true;
  if (impl_->rangesIgnored) return false;
  throw Error(lastFailure());
}

void Blob::quiet(bool quiet) { impl_->quiet = quiet; }

std::string Blob::lastFailure() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->lastFailure.empty() ? impl_->spec.name + ": a read failed" : impl_->lastFailure;
}

std::uint64_t Blob::size() const { return impl_->spec.table.size; }

std::pair<std::uint64_t, std::uint64_t> Blob::cachedChunks() const {
  return {impl_->cachedCount.load(), impl_->spec.table.chunkCount()};
}

}  // namespace ctr::image::lazy
