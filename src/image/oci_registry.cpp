// The registry client: libcurl (loaded on first use), one connection reused for every
// request of a pull, token and basic authentication, a blob cache keyed by digest.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "ctr/credentials.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/limits.hpp"
#include "ctr/log.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/user_dir.hpp"
#include "oci_internal.hpp"
#include "oci_libs.hpp"

namespace ctr::image::oci {

// progress

Progress::Progress()
    : enabled_(spdlog::default_logger_raw()->should_log(spdlog::level::warn)), line_(STDERR_FILENO) {}

// On a terminal, a line left updating ends: an error message comes next.
Progress::~Progress() {
  if (enabled_ && line_.tty()) line_.clear();
}

namespace {
std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

void Progress::start(std::string label, std::uint64_t total) {
  label_ = std::move(label);
  total_ = total;
  last_ = {};
  if (!enabled_) return;
  if (line_.tty()) update(0);
  else line_.print(label_ + ": fetching " + megabytes(total_));
}

void Progress::update(std::uint64_t bytes) {
  if (!enabled_ || !line_.tty()) return;
  auto now = std::chrono::steady_clock::now();
  if (bytes != 0 && bytes != total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  line_.show(label_ + ": " + megabytes(bytes) + " / " + megabytes(total_));
}

// On a terminal the layers share one updating line (finish() sums them up); otherwise
// each layer's end is a line of its own.
void Progress::done(const std::string& what, bool cached) {
  ++layers_;
  (cached ? cachedLayers_ : fetchedLayers_) += 1;
  if (!cached) fetchedBytes_ += total_;
  if (!enabled_) return;
  if (line_.tty()) line_.show(label_ + ": " + what);
  else line_.print(label_ + ": " + what);
}

void Progress::finish() {
  if (!enabled_ || !line_.tty() || layers_ == 0) return;
  line_.print(std::to_string(layers_) + (layers_ == 1 ? " layer: " : " layers: ") + std::to_string(fetchedLayers_) +
              " fetched (" + megabytes(fetchedBytes_) + "), " + std::to_string(cachedLayers_) + " from the cache");
}

void Progress::note(const std::string& line) {
  if (enabled_) line_.print(line);
}

// cache and messages

std::filesystem::path cacheRoot(const PullOptions& options) {
  // A directory the user named (--disable-cache's scratch, CTR_CACHE_DIR) is used as it is:
  // the writers refuse it where it is not theirs alone (openUserDir, WhenTaken::Refuse).
  if (!options.cacheDir.empty()) return options.cacheDir;
  if (const char* dir = std::getenv("CTR_CACHE_DIR"); dir && *dir) return dir;
  // A per-user name ('image cache dir = /var/tmp/ctr-cache-%u', ~/.cache/ctr) that
  // somebody else took first is replaced by the user's own directory beside it.
  if (!options.limits.cacheDir.empty())
    return chooseUserDir(expandUidPattern(options.limits.cacheDir, ::geteuid(), "'image cache dir'"), "image cache");
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return chooseUserDir(std::filesystem::path(xdg) / "ctr", "image cache");
  const std::filesystem::path home = homeDirectory();
  if (home.empty()) throw Error("no cache directory: set CTR_CACHE_DIR or HOME");
  return chooseUserDir(home / ".cache" / "ctr", "image cache");
}

std::filesystem::path openCacheRoot(const std::filesystem::path& root) {
  UserDir dir = openUserDir(root, "image cache", true, WhenTaken::Refuse);
  return dir.path;
}

std::string digestMismatch(const std::string& what, const std::string& expected, const std::string& got,
                           const std::string& image) {
  return what + " " + expected + " of " + image + ": digest mismatch (got " + got + ")";
}

// limits and token realms

std::string limitSetting(const config::PullPolicy& limits, std::uint64_t limit, std::string_view key) {
  return "the limit is " + limits::formatSize(limit) + ": '" + std::string(key) + "' in " +
         (limits.configFile.empty() ? std::string("ctr.conf") : limits.configFile);
}

void checkDeclaredSizes(const std::vector<DeclaredBlob>& blobs, const config::PullPolicy& limits, const std::string& image) {
  std::uint64_t total = 0;
  for (const auto& b : blobs) {
    if (b.size > limits.maxBlobBytes)
      throw Error(b.label + ": declared as " + std::to_string(b.size) + " bytes, more than one blob may be (" +
                  limitSetting(limits, limits.maxBlobBytes, "pull max blob size") + ")");
    total = b.size > ~std::uint64_t{0} - total ? ~std::uint64_t{0} : total + b.size;  // saturates, never wraps
    if (total > limits.maxTotalBytes)
      throw Error(image + ": its layers are declared as more than " + limits::formatSize(limits.maxTotalBytes) +
                  " together (" + limitSetting(limits, limits.maxTotalBytes, "pull max total size") + ")");
  }
}

void checkNoControlCharacters(std::string_view value, const std::string& what) {
  for (unsigned char c : value)
    if (c < 0x20 || c == 0x7f) throw Error(what + " holds a control character: refused");
}

void checkTokenText(std::string_view token, const std::string& what) {
  checkNoControlCharacters(token, what);
  for (unsigned char c : token)
    if (c <= 0x20 || c >= 0x7f) throw Error(what + " holds a space or a non-ASCII byte: refused");
}

namespace {

struct UrlAuthority {
  std::string scheme;  // lower case
  std::string host;    // lower case; "[::1]" keeps its brackets
  unsigned port = 0;   // explicit, else the scheme's default
};

unsigned defaultPort(std::string_view scheme) { return scheme == "http" ? 80 : 443; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "host", "host:port", "[v6]" or "[v6]:port" with `scheme`'s default port; nullopt if malformed.
std::optional<UrlAuthority> parseAuthority(std::string_view text, std::string_view scheme) {
  UrlAuthority a{std::string(scheme), {}, defaultPort(scheme)};
  std::string_view port;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a.host = lower(text.substr(0, close + 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::nullopt;
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const auto colon = text.find(':');
    a.host = lower(text.substr(0, colon));
    if (colon != std::string_view::npos) port = text.substr(colon + 1);
    if (colon != std::string_view::npos && port.empty()) return std::nullopt;
  }
  if (a.host.empty() || a.host == "[]") return std::nullopt;
  if (!port.empty()) {
    unsigned n = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || n > 65535) return std::nullopt;
      n = n * 10 + static_cast<unsigned>(c - '0');
    }
    if (n == 0 || n > 65535) return std::nullopt;
    a.port = n;
  }
  return a;
}

}  // namespace

void checkTokenRealm(std::string_view realm, std::string_view registryScheme, std::string_view registry,
                     const config::PullPolicy& limits) {
  const std::string what = "registry " + std::string(registry) + " sent the token realm '";
  // Printed only once known to be harmless on a terminal.
  checkNoControlCharacters(realm, "the token realm of registry " + std::string(registry));
  const std::string quoted = what + std::string(realm) + "'";
  const auto sep = realm.find("://");
  const std::string scheme = lower(realm.substr(0, sep == std::string_view::npos ? 0 : sep));
  if (scheme != "https" && scheme != "http")
    throw Error(quoted + ": refused: a token realm must be an https URL");
  if (realm.find(' ') != std::string_view::npos) throw Error(quoted + ": refused: a URL holds no space");
  std::string_view authorityText = realm.substr(sep + 3);
  authorityText = authorityText.substr(0, authorityText.find_first_of("/?#"));
  if (authorityText.find('@') != std::string_view::npos)
    throw Error(quoted + ": refused: user information in a token realm");
  const auto realmAt = parseAuthority(authorityText, scheme);
  const auto registryAt = parseAuthority(registry, registryScheme);
  if (!realmAt || !registryAt) throw Error(quoted + ": refused: not a host[:port] ctr can check");
  if (scheme == "http" && (registryScheme != "http" || realmAt->host != registryAt->host))
    throw Error(quoted + ": refused: a token realm over plain http is accepted only on the registry's own host when the "
                "registry itself is reached over http (use https)");
  if (realmAt->host == registryAt->host && realmAt->port == registryAt->port) return;
  for (const auto& entry : limits.tokenRealmHosts) {
    const auto allowed = parseAuthority(entry, scheme);
    if (allowed && allowed->host == realmAt->host && allowed->port == realmAt->port) return;
  }
  throw Error(quoted + ": refused: it is on another host or port than the registry (an admin can allow it with "
              "'pull token realm hosts' in " + (limits.configFile.empty() ? std::string("ctr.conf") : limits.configFile) + ")");
}

// the client

namespace {

constexpr const char* kManifestAccept =
    "Accept: application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

// WWW-Authenticate: Bearer realm="https://auth/token",service="registry",scope="repository:x:pull"
std::map<std::string, std::string> parseChallenge(const std::string& header, std::string& scheme) {
  std::map<std::string, std::string> params;
  auto space = header.find(' ');
  scheme = lower(header.substr(0, space));
  std::size_t pos = space == std::string::npos ? header.size() : space + 1;
  while (pos < header.size()) {
    while (pos < header.size() && (header[pos] == ' ' || header[pos] == ',')) ++pos;
    auto eq = header.find('=', pos);
    if (eq == std::string::npos) break;
    std::string key = lower(header.substr(pos, eq - pos));
    std::string value;
    pos = eq + 1;
    if (pos < header.size() && header[pos] == '"') {
      ++pos;
      while (pos < header.size() && header[pos] != '"') {
        if (header[pos] == '\\' && pos + 1 < header.size()) ++pos;
        value += header[pos++];
      }
      ++pos;
    } else {
      auto end = header.find(',', pos);
      value = header.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      pos = end == std::string::npos ? header.size() : end;
    }
    params[key] = value;
  }
  return params;
}

bool isLocalRegistry(const std::string& registry) {
  std::string host = registry;
  if (host.starts_with('[')) host = host.substr(0, host.find(']') + 1);
  else host = host.substr(0, host.find(':'));
  return host == "localhost" || host == "[::1]" || host.starts_with("127.");
}

}  // namespace

struct RegistryClient::Impl {
  const CurlApi& curl = curlApi();
  CURL* handle = nullptr;
  Impl() : handle(curl.easy_init()) {
    if (!handle) throw Error("curl_easy_init failed");
  }
  ~Impl() { curl.easy_cleanup(handle); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  std::string base;  // "https://host:port/v2/"
  std::string scheme;  // "https", or "http" (--nohttps, 127.0.0.1, localhost)
  std::string host;        // "host:port" of this endpoint: what messages name
  std::string repository;  // the repository's path here (a mirror's path prefix in front)
  bool mirror = false;
  config::PullPolicy limits;
  std::string username, password;
  std::string credentialSource;  // where they came from (never the secret), for messages
  std::string authorization;  // "Authorization: Bearer ..." once known
  std::string authorizedScope;  // the scope that token was asked for (a push needs another)
  std::string tokenUrl;         // where that token was asked for (realm, service, scope)
  bool useBasic = false;

  // An upload's body (push): `uploadFd` from `uploadOffset` on, else `uploadText`.
  int uploadFd = -1;
  std::uint64_t uploadOffset = 0;
  std::string uploadText;

  static size_t onRead(char* buffer, size_t size, size_t n, void* user) {
    auto* self = static_cast<Impl*>(user);
    const size_t want = size * n;
    if (self->uploadFd < 0) {
      const size_t len = std::min(want, self->uploadText.size() - self->uploadOffset);
      std::memcpy(buffer, self->uploadText.data() + self->uploadOffset, len);
      self->uploadOffset += len;
      return len;
    }
    for (;;) {
      const ssize_t got = ::pread(self->uploadFd, buffer, want, static_cast<off_t>(self->uploadOffset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return CURL_READFUNC_ABORT;
      self->uploadOffset += static_cast<std::uint64_t>(got);
      if (self->progress) self->progress->update(self->uploadOffset);
      return static_cast<size_t>(got);
    }
  }

  // The next request sends `size` bytes of the upload body with `method` (PUT).
  void setUpload(std::uint64_t size) {
    uploadOffset = 0;
    curl.easy_setopt(handle, CURLOPT_UPLOAD, 1L);
    curl.easy_setopt(handle, CURLOPT_READFUNCTION, &Impl::onRead);
    curl.easy_setopt(handle, CURLOPT_READDATA, this);
    curl.easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  }

  // Per request
  std::map<std::string, std::string> headers;
  std::string body;
  std::size_t bodyLimit = 0;
  bool bodyOverflow = false;
  int sinkFd = -1;
  std::uint64_t sinkLimit = 0;  // a blob's declared size: one byte more stops the transfer
  bool sinkOverflow = false;
  bool errorBodyOverflow = false;
  Digester* digester = nullptr;
  std::uint64_t received = 0;
  Progress* progress = nullptr;
  std::string errorBody;
  std::uint64_t errorBytes = 0;
  bool writeFailed = false;

  static size_t onHeader(char* data, size_t size, size_t n, void* user) {
    auto* self = static_cast<Impl*>(user);
    std::string line(data, size * n);
    if (line.starts_with("HTTP/")) self->headers.clear();  // each redirect hop starts anew
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      self->headers[lower(line.substr(0, colon))] = value;
    }
    return size * n;
  }

  static size_t onData(char* data, size_t size, size_t n, void* user) {
    auto* self = static_cast<Impl*>(user);
    const size_t len = size * n;
    long status = 0;
    self->curl.easy_getinfo(self->handle, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status >= 300) {  // an error document or a redirect's body
      if (self->errorBody.size() < 4096) self->errorBody.append(data, std::min<size_t>(len, 4096));
      // Kept short, and an endless one is cut off: its status is what counts.
      if ((self->errorBytes += len) > (64u << 10)) {
        self->errorBodyOverflow = true;
        return 0;
      }
      return len;
    }
    if (self->sinkFd >= 0) {
      // Checked as the bytes arrive, not at the end: a blob declared as 1 MiB cannot stream
      // gigabytes into the cache.
      if (self->received + len > self->sinkLimit) {
        self->sinkOverflow = true;
        return 0;
      }
      const char* p = data;
      size_t left = len;
      while (left > 0) {
        ssize_t w = ::write(self->sinkFd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          self->writeFailed = true;
          return 0;
        }
        p += w;
        left -= static_cast<size_t>(w);
      }
    } else {
      if (self->body.size() + len > self->bodyLimit) {
        self->bodyOverflow = true;
        return 0;
      }
      self->body.append(data, len);
    }
    if (self->digester) self->digester->update(data, len);
    self->received += len;
    if (self->progress) self->progress->update(self->received);
    return len;
  }

  static int onProgress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) { return cancelled() ? 1 : 0; }

  void prepare() {
    headers.clear();
    body.clear();
    errorBody.clear();
    errorBytes = 0;
    bodyOverflow = writeFailed = sinkOverflow = errorBodyOverflow = false;
    received = 0;
    sinkFd = -1;
    sinkLimit = 0;
    digester = nullptr;
    progress = nullptr;
    curl.easy_reset(handle);
    curl.easy_setopt(handle, CURLOPT_USERAGENT, "ctr");
    curl.easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
    curl.easy_setopt(handle, CURLOPT_MAXREDIRS, 10L);
    curl.easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, 30L);
    // A stalled transfer (under 1 KiB/s for a minute) fails instead of hanging a job.
    curl.easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl.easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, 60L);
    curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, &Impl::onHeader);
    curl.easy_setopt(handle, CURLOPT_HEADERDATA, this);
    curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &Impl::onData);
    curl.easy_setopt(handle, CURLOPT_WRITEDATA, this);
    curl.easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
    curl.easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, &Impl::onProgress);
    curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    // http(s) only, whatever a realm or a redirect names (file://, dict://, gopher://...);
    // an https registry is never redirected to plain http.
    const char* redirects = scheme == "https" ? "https" : "http,https";
    if (curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl.easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, redirects) != CURLE_OK) {
      // libcurl < 7.85 (the _STR options are newer): the bit masks, deprecated since.
      const long https = CURLPROTO_HTTPS, both = CURLPROTO_HTTP | CURLPROTO_HTTPS;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      curl.easy_setopt(handle, CURLOPT_PROTOCOLS, both);
      curl.easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, scheme == "https" ? https : both);
#pragma GCC diagnostic pop
    }
  }

  // get()'s answers besides an HTTP status: fewer bytes than Content-Length; more than the
  // sink's declared size.
  static constexpr long kTruncated = -1, kLargerThanDeclared = -2;

  // Performs GET `url`; returns the HTTP status. Throws for transport errors.
  long get(const std::string& url, const char* accept, bool authenticate = true) {
    curl_slist* list = nullptr;
    if (accept) list = curl.slist_append(list, accept);
    if (authenticate && !authorization.empty()) list = curl.slist_append(list, authorization.c_str());
    curl.easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl.easy_setopt(handle, CURLOPT_HTTPHEADER, list);
    if (authenticate && useBasic) {
      curl.easy_setopt(handle, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
      curl.easy_setopt(handle, CURLOPT_USERNAME, username.c_str());
      curl.easy_setopt(handle, CURLOPT_PASSWORD, password.c_str());
    }
    CURLcode rc = curl.easy_perform(handle);
    curl.easy_setopt(handle, CURLOPT_HTTPHEADER, nullptr);
    curl.slist_free_all(list);
    if (rc == CURLE_ABORTED_BY_CALLBACK && cancelled()) throw Error("interrupted");
    if (rc == CURLE_WRITE_ERROR && bodyOverflow) throw Error(url + ": response too large");
    if (rc == CURLE_WRITE_ERROR && writeFailed) throw sysError("writing to the blob cache");
    if (rc == CURLE_WRITE_ERROR && sinkOverflow) return kLargerThanDeclared;
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && errorBodyOverflow)) {
      // CURLE_PARTIAL_FILE: fewer bytes than Content-Length, the caller says "truncated".
      if (rc == CURLE_PARTIAL_FILE) return kTruncated;
      throw Error("cannot reach " + std::string(mirror ? "mirror " : "registry ") + host + ": " + curl.easy_strerror(rc));
    }
    long status = 0;
    curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    return status;
  }

  // After a 401: follows the challenge (a bearer token from the realm, or basic auth).
  // Returns false when there is nothing more to try.
  bool authenticate() {
    auto it = headers.find("www-authenticate");
    if (it == headers.end()) return false;
    std::string challenge;
    auto params = parseChallenge(it->second, challenge);
    if (challenge == "basic") {
      if (useBasic || username.empty()) return false;
      useBasic = true;
      return true;
    }
    const std::string wantedScope = params.count("scope")  ? params["scope"]
                                    : repository.empty() ? std::string()
                                                         : "repository:" + repository + ":pull";
    // Once per scope: a push is challenged again for push rights after a pull's token.
    if (challenge != "bearer" || (!authorization.empty() && wantedScope == authorizedScope) || params["realm"].empty())
      return false;
    // The realm receives the user's credentials: the registry may not send them anywhere.
    checkTokenRealm(params["realm"], scheme, host, limits);
    checkNoControlCharacters(params["service"], "the token service named by registry " + host);
    checkNoControlCharacters(params["scope"], "the token scope named by registry " + host);
    std::string url = params["realm"];
    char sep = url.find('?') == std::string::npos ? '?' : '&';
    auto addParam = [&](const char* key, const std::string& value) {
      if (value.empty()) return;
      // Percent-encoding of the query value (RFC 3986: unreserved characters kept).
      std::string out;
      for (unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == ':' || c == '/') out += static_cast<char>(c);
        else {
          char hex[4];
          std::snprintf(hex, sizeof hex, "%%%02X", c);
          out += hex;
        }
      }
      url += sep;
      url += key;
      url += '=';
      url += out;
      sep = '&';
    };
    addParam("service", params["service"]);
    addParam("scope", wantedScope);  // none for a login's check of /v2/
    prepare();
    bodyLimit = 1 << 20;
    const bool basicForToken = !username.empty();
    if (basicForToken) {
      curl.easy_setopt(handle, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
      curl.easy_setopt(handle, CURLOPT_USERNAME, username.c_str());
      curl.easy_setopt(handle, CURLOPT_PASSWORD, password.c_str());
    }
    long status = get(url, nullptr, false);
    if ((status == 401 || status == 403) && basicForToken)
      throw Error("the token service " + params["realm"] + " of " + host + " refused " + credentialSource +
                  " (HTTP " + std::to_string(status) + ")");
    if (status != 200) throw Error("token request to " + params["realm"] + " for " + host + " failed: HTTP " + std::to_string(status));
    auto json = nlohmann::json::parse(body, nullptr, false);
    std::string token;
    if (json.is_object()) {
      if (json.contains("token") && json["token"].is_string()) token = json["token"];
      else if (json.contains("access_token") && json["access_token"].is_string()) token = json["access_token"];
    }
    if (token.empty()) throw Error("token response from " + params["realm"] + " holds no token");
    checkTokenText(token, "the token from " + params["realm"]);
    authorization = "Authorization: Bearer " + token;
    authorizedScope = wantedScope;
    tokenUrl = url;
    return true;
  }

  // A registry that answers 429 (too many requests: a thousand nodes asking at once, a rate
  // limit) is asked again after its Retry-After (at most kBusyWaitCap), else after 1, 2, 4, 8
  // s: at most kBusyRetries times, so a job waits a bounded time, then fails naming it.
  static constexpr int kBusyRetries = 4;
  static constexpr long kBusyWaitCap = 30;
  int busyRetries = 0;  // in this endpoint's current request
  bool busyWarned = false;

  // How long to wait before asking again after a 429; false when the retries are spent.
  bool waitWhenBusy() {
    if (busyRetries >= kBusyRetries) return false;
    long seconds = 1L << busyRetries;
    if (auto it = headers.find("retry-after"); it != headers.end()) {
      char* end = nullptr;
      const long given = std::strtol(it->second.c_str(), &end, 10);
      if (end != it->second.c_str() && *end == '\0' && given >= 0) seconds = std::min(given, kBusyWaitCap);
    }
    if (!busyWarned)
      spdlog::warn("{} answers HTTP 429 (too many requests): asking again in {} s (at most {} times)", host, seconds,
                   kBusyRetries);
    busyWarned = true;
    ++busyRetries;
    for (long tenths = 0; tenths < seconds * 10; ++tenths) {
      if (cancelled()) throw Error("interrupted");
      ::usleep(100 * 1000);
    }
    return true;
  }

  // " (429 after N tries)" for the messages of a request whose retries were spent.
  [[nodiscard]] std::string busyNote(long status) const {
    return status == 429 && busyRetries > 0 ? " after " + std::to_string(busyRetries + 1) + " tries" : "";
  }

  // GET with one round of authentication and bounded retries on 429. The caller has set the sink.
  template <typename Setup>
  long getAuthenticated(const std::string& url, const char* accept, Setup setup) {
    busyRetries = 0;
    for (int attempt = 0;; ++attempt) {
      prepare();
      setup();
      long status = get(url, accept);
      if (status == 429 && waitWhenBusy()) {
        --attempt;
        continue;
      }
      if (status != 401 || attempt > 0) return status;
      if (!authenticate()) return status;
    }
  }

  // "MANIFEST_UNKNOWN: manifest unknown" from the registry's error document, if any.
  [[nodiscard]] std::string registryError() const {
    auto j = nlohmann::json::parse(errorBody, nullptr, false);
    if (!j.is_object() || !j.contains("errors") || !j["errors"].is_array() || j["errors"].empty()) return {};
    const auto& e = j["errors"][0];
    std::string code = e.value("code", ""), msg = e.value("message", "");
    return code + (msg.empty() ? "" : ": " + msg);
  }
};

namespace {

// Docker Hub by any of its names.
std::string registryName(std::string_view registry) {
  if (registry == "docker.io" || registry == "index.docker.io" || registry == "registry-1.docker.io")
    return "docker.io";
  return std::string(registry);
}

}  // namespace

std::vector<Endpoint> registryEndpoints(const Reference& ref, const PullOptions& options) {
  std::vector<Endpoint> endpoints;
  bool origin = true;
  for (const auto& m : options.limits.mirrors) {
    if (registryName(m.registry) != registryName(ref.registry)) continue;
    Endpoint e;
    std::string_view rest = m.location;
    if (rest.starts_with("https://") || rest.starts_with("http://")) {
      e.scheme = std::string(rest.substr(0, rest.find(':')));
      rest.remove_prefix(e.scheme.size() + 3);
    }
    const auto slash = rest.find('/');
    e.host = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) {
      std::string prefix(rest.substr(slash + 1));
      while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
      if (!prefix.empty()) e.prefix = prefix + "/";
    }
    if (e.scheme.empty()) e.scheme = options.noHttps || isLocalRegistry(e.host) ? "http" : "https";
    e.mirror = true;
    endpoints.push_back(std::move(e));
    origin = origin && !m.only;
  }
  if (origin) endpoints.push_back({options.noHttps || isLocalRegistry(ref.registry) ? "http" : "https", ref.registry, "", false});
  return endpoints;
}

RegistryClient::RegistryClient(Reference ref, const PullOptions& options)
    : ref_(std::move(ref)), cacheDir_(cacheRoot(options)) {
  auto places = credentials::defaultPlaces();
  if (!options.authFile.empty()) places.ctrFile = options.authFile;
  for (const auto& e : registryEndpoints(ref_, options)) {
    auto impl = std::make_unique<Impl>();
    impl->scheme = e.scheme;
    impl->host = e.host;
    impl->mirror = e.mirror;
    impl->repository = ref_.repository.empty() ? std::string() : e.prefix + ref_.repository;
    impl->base = e.scheme + "://" + e.host + "/v2/";
    impl->limits = options.limits;
    // The credentials given are the registry's; a mirror is reached with its own host's.
    if (!options.username.empty() && !e.mirror) {
      impl->username = options.username;
      impl->password = options.password;
      impl->credentialSource = "the credentials given";
    } else if (auto found = credentials::lookup(e.host, places)) {
      impl->username = std::move(found->username);
      impl->password = std::move(found->password);
      impl->credentialSource = "credentials from " + found->source;
    }
    endpoints_.push_back(std::move(impl));
  }
  if (endpoints_.empty()) throw Error("no endpoint for " + ref_.registry);  // registryEndpoints always gives one
}

template <typename Request>
auto RegistryClient::viaEndpoints(Request&& request) -> decltype(request(std::declval<Impl&>())) {
  for (;;) {
    Impl& I = *endpoints_[current_];
    try {
      return request(I);
    } catch (const Error& e) {
      if (current_ + 1 == endpoints_.size() || cancelled()) throw;
      const Impl& next = *endpoints_[current_ + 1];
      // Once per mirror and pull: the ones after it serve the rest.
      spdlog::warn("mirror {} of {}: {}; trying {}", I.host, ref_.registry, e.oneLine(),
                   next.mirror ? "mirror " + next.host : "the registry itself");
      ++current_;
    }
  }
}

long RegistryClient::ping() {
  auto& I = *endpoints_[current_];
  return I.getAuthenticated(I.base, nullptr, [&] { I.bodyLimit = 64 << 10; });
}

std::string RegistryClient::accessDenied(long status) const {
  const auto& I = *endpoints_[current_];
  const std::string key = credentials::registryKey(I.host);
  return "access denied by " + I.host + " (HTTP " + std::to_string(status) + "; " +
         (I.credentialSource.empty() ? "no credentials for " + key + ": ctr registry login " + key
                                     : I.credentialSource + " for " + key) +
         ")";
}

RegistryClient::~RegistryClient() = default;

RegistryClient::BlobAccess RegistryClient::blobAccess(const std::string& digest) const {
  const Impl& I = *endpoints_[current_];
  const std::string basic =
      I.username.empty() ? std::string() : "Authorization: Basic " + base64Encode(I.username + ":" + I.password);
  BlobAccess access{I.base + I.repository + "/blobs/" + digest, I.authorization, I.tokenUrl, I.tokenUrl.empty() ? "" : basic};
  if (access.authorization.empty() && I.useBasic) access.authorization = basic;
  return access;
}

FetchedDocument RegistryClient::manifest(const std::string& tagOrDigest) {
  return viaEndpoints([&](Impl& I) { return manifestFrom(I, tagOrDigest); });
}

FetchedDocument RegistryClient::manifestFrom(Impl& I, const std::string& tagOrDigest) {
  const std::string url = I.base + I.repository + "/manifests/" + tagOrDigest;
  long status = I.getAuthenticated(url, kManifestAccept, [&] { I.bodyLimit = 4 << 20; });
  const std::string name = ref_.repository + (tagOrDigest.starts_with("sha256:") ? "@" : ":") + tagOrDigest;
  if (status == 404) {
    throw Error("manifest unknown: " + name + " not in " + I.host);
  }
  if (status == 401 || status == 403) throw Error(name + ": " + accessDenied(status));
  if (status != 200) {
    std::string why = I.registryError();
    throw Error("manifest of " + name + " from " + I.host + ": HTTP " + std::to_string(status) + I.busyNote(status) +
                (why.empty() ? "" : " (" + why + ")"));
  }
  Digester d;
  d.update(I.body.data(), I.body.size());
  FetchedDocument doc{std::move(I.body), "", d.digest()};
  if (auto it = I.headers.find("content-type"); it != I.headers.end()) doc.mediaType = it->second.substr(0, it->second.find(';'));
  std::string expected = tagOrDigest.starts_with("sha256:") ? tagOrDigest : "";
  if (expected.empty()) {
    if (auto it = I.headers.find("docker-content-digest"); it != I.headers.end()) expected = it->second;
  }
  if (!expected.empty() && expected != doc.digest) throw Error(digestMismatch("manifest", expected, doc.digest, name));
  spdlog::info("manifest {} from {}{}", name, I.mirror ? "mirror " : "", I.host);
  return doc;
}

std::string RegistryClient::smallBlob(const std::string& digest) {
  return viaEndpoints([&](Impl& I) {
    Digester d;
    long status = I.getAuthenticated(I.base + I.repository + "/blobs/" + digest, nullptr, [&] {
      I.bodyLimit = 16 << 20;
      I.digester = &d;
    });
    I.digester = nullptr;
    if (status != 200)
      throw Error("blob " + digest + " of " + ref_.shortName() + ": HTTP " + std::to_string(status) + I.busyNote(status) +
                  " from " + I.host);
    std::string got = d.digest();
    if (got != digest) throw Error(digestMismatch("blob", digest, got, ref_.shortName()));
    return std::move(I.body);
  });
}

std::filesystem::path RegistryClient::blobToCache(const std::string& digest, std::uint64_t size, Progress& progress,
                                                  const std::string& label) {
  if (auto path = cachedBlob(digest, size)) {
    progress.start(label, size);
    progress.done("cached (" + std::to_string(size) + " bytes)", true);
    return *path;
  }
  return viaEndpoints([&](Impl& I) { return blobFrom(I, digest, size, progress, label); });
}

std::optional<std::filesystem::path> RegistryClient::cachedBlob(const std::string& digest, std::uint64_t size) const {
  auto path = cacheDir_ / "blobs" / "sha256" / digest.substr(7);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != size) return std::nullopt;
  // Its time is its last use, which `cache clean --days` reads (best effort: a cache that
  // cannot be touched is still read).
  (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return path;
}

std::filesystem::path RegistryClient::blobFrom(Impl& I, const std::string& digest, std::uint64_t size,
                                               Progress& progress, const std::string& label) {
  const auto dir = cacheDir_ / "blobs" / "sha256";
  const auto path = dir / digest.substr(7);
  // The cache root is the user's alone (and root's cache root's alone: nobody else's
  // symlink or directory on the way), so what is below it is only ever the user's doing.
  (void)openCacheRoot(cacheDir_);
  for (const auto& d : {cacheDir_ / "blobs", dir})
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) throw sysError("create the blob cache " + d.string());
  std::string tmpl = (dir / (".download-" + digest.substr(7, 12) + ".XXXXXX")).string();
  UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) throw sysError("create a file in the blob cache " + dir.string());
  struct Unlink {
    std::string p;
    bool keep = false;
    ~Unlink() {
      if (!keep) ::unlink(p.c_str());
    }
  } guard{tmpl};
  Digester d;
  progress.start(label, size);
  long status = I.getAuthenticated(I.base + I.repository + "/blobs/" + digest, nullptr, [&] {
    I.sinkFd = fd.get();
    I.sinkLimit = size;
    I.digester = &d;
    I.progress = &progress;
    if (::ftruncate(fd.get(), 0) != 0 || ::lseek(fd.get(), 0, SEEK_SET) != 0) throw sysError("truncate " + tmpl);
  });
  I.sinkFd = -1;
  I.digester = nullptr;
  I.progress = nullptr;
  const std::string what = "blob " + digest + " of " + ref_.shortName();
  if (status == Impl::kLargerThanDeclared)
    throw Error(what + ": larger than its manifest says (" + std::to_string(size) +
                " bytes): the download was stopped there");
  if (status == Impl::kTruncated || (status == 200 && I.received < size))
    throw Error(what + ": truncated (got " + std::to_string(I.received) + " of " + std::to_string(size) + " bytes)");
  if (status == 404) throw Error(what + ": blob unknown to " + I.host);
  if (status != 200) throw Error(what + ": HTTP " + std::to_string(status) + I.busyNote(status) + " from " + I.host);
  if (I.received > size)
    throw Error(what + ": larger than its manifest says (" + std::to_string(I.received) + " > " + std::to_string(size) + " bytes)");
  std::string got = d.digest();
  if (got != digest) throw Error(digestMismatch("blob", digest, got, ref_.shortName()));
  if (::fchmod(fd.get(), 0600) != 0 || ::rename(tmpl.c_str(), path.c_str()) != 0) throw sysError("store " + path.string());
  guard.keep = true;
  progress.done("done (" + std::to_string(size) + " bytes" + (I.mirror ? ", from mirror " + I.host : "") + ")", false);
  return path;
}

std::string urlServer(const std::string& url) {
  const auto colon = url.find("://");
  const auto start = colon == std::string::npos ? 0 : colon + 3;
  return url.substr(start, url.find('/', start) - start);
}

std::uint64_t RegistryClient::download(const std::string& url, int fd, std::uint64_t limit,
                                       const PullOptions& options) {
  Impl I;
  I.host = urlServer(url);  // what the messages name
  I.repository = url;
  I.scheme = url.substr(0, url.find("://"));
  I.limits = options.limits;
  I.prepare();
  I.sinkFd = fd;
  I.sinkLimit = limit;
  const long status = I.get(url, nullptr, false);
  if (status == Impl::kLargerThanDeclared)
    throw Error(url + ": larger than 'pull max blob size' (" + std::to_string(limit) + " bytes): the download was stopped");
  if (status == Impl::kTruncated) throw Error(url + ": truncated (got " + std::to_string(I.received) + " bytes)");
  if (status != 200) throw Error(url + ": HTTP " + std::to_string(status));
  return I.received;
}

bool RegistryClient::hasBlob(const std::string& digest) {
  auto& I = *endpoints_[current_];
  const long status = I.getAuthenticated(I.base + I.repository + "/blobs/" + digest, nullptr, [&] {
    I.curl.easy_setopt(I.handle, CURLOPT_NOBODY, 1L);
  });
  if (status == 401 || status == 403) throw Error(ref_.shortName() + ": " + accessDenied(status));
  return status == 200;
}

// POST /v2/NAME/blobs/uploads/ for a session, then PUT its Location with the digest and the
// bytes `body` sets up (a monolithic upload, as the distribution spec describes it).
void RegistryClient::upload(const std::string& digest, std::uint64_t size, const std::function<void(Impl&)>& body) {
  auto& I = *endpoints_[current_];
  const std::string what = "push of blob " + digest + " of " + ref_.shortName() + " to " + I.host;
  long status = I.getAuthenticated(I.base + I.repository + "/blobs/uploads/", nullptr, [&] {
    I.bodyLimit = 64 << 10;
    I.curl.easy_setopt(I.handle, CURLOPT_POST, 1L);
    I.curl.easy_setopt(I.handle, CURLOPT_POSTFIELDS, "");
    I.curl.easy_setopt(I.handle, CURLOPT_POSTFIELDSIZE, 0L);
  });
  if (status == 401 || status == 403) throw Error(what + ": " + accessDenied(status));
  const auto location = I.headers.find("location");
  if (status != 202 || location == I.headers.end() || location->second.empty())
    throw Error(what + ": HTTP " + std::to_string(status) + I.busyNote(status) + " to the upload request" +
                (I.registryError().empty() ? "" : " (" + I.registryError() + ")"));
  std::string url = location->second;
  if (url.starts_with("/")) url = I.scheme + "://" + I.host + url;
  // The upload URL must stay with the registry: the user's credentials go along.
  if (!url.starts_with(I.scheme + "://" + I.host + "/"))
    throw Error(what + ": the registry named an upload URL elsewhere (" + url.substr(0, 100) + "): refused");
  checkNoControlCharacters(url, "the upload URL from " + I.host);
  url += (url.find('?') == std::string::npos ? "?" : "&") + std::string("digest=") + digest;
  status = I.getAuthenticated(url, "Content-Type: application/octet-stream", [&] {
    I.bodyLimit = 64 << 10;
    body(I);
    I.setUpload(size);
  });
  I.uploadFd = -1;
  I.uploadText.clear();
  I.progress = nullptr;
  if (status == 401 || status == 403) throw Error(what + ": " + accessDenied(status));
  if (status != 201)
    throw Error(what + ": HTTP " + std::to_string(status) + I.busyNote(status) +
                (I.registryError().empty() ? "" : " (" + I.registryError() + ")"));
}

void RegistryClient::uploadBlob(const std::string& digest, int fd, std::uint64_t size, Progress& progress) {
  upload(digest, size, [&](Impl& I) {
    I.uploadFd = fd;
    I.progress = &progress;
  });
}

void RegistryClient::uploadBlob(const std::string& digest, const std::string& text) {
  upload(digest, text.size(), [&](Impl& I) { I.uploadText = text; });
}

void RegistryClient::putManifest(const std::string& tag, const std::string& mediaType, const std::string& body) {
  auto& I = *endpoints_[current_];
  const std::string contentType = "Content-Type: " + mediaType;
  const long status = I.getAuthenticated(I.base + I.repository + "/manifests/" + tag, contentType.c_str(), [&] {
    I.bodyLimit = 64 << 10;
    I.uploadText = body;
    I.setUpload(body.size());
  });
  I.uploadText.clear();
  const std::string what = "push of the manifest of " + ref_.shortName() + " to " + I.host;
  if (status == 401 || status == 403) throw Error(what + ": " + accessDenied(status));
  if (status != 201)
    throw Error(what + ": HTTP " + std::to_string(status) + I.busyNote(status) +
                (I.registryError().empty() ? "" : " (" + I.registryError() + ")"));
}

void RegistryClient::evict(const std::string& digest) {
  ::unlink((cacheDir_ / "blobs" / "sha256" / digest.substr(7)).c_str());
}

void checkLogin(const std::string& registry, const PullOptions& options) {
  Reference ref;
  ref.registry = registry;
  PullOptions origin = options;  // the registry's own check of the credentials, not a mirror's
  origin.limits.mirrors.clear();
  RegistryClient client(ref, origin);
  const long status = client.ping();
  if (status == 401 || status == 403)
    throw Error("login to " + registry + " refused: " + client.accessDenied(status));
  if (status != 200) throw Error("login to " + registry + ": HTTP " + std::to_string(status) + " from " + registry + "/v2/");
}

}  // namespace ctr::image::oci
