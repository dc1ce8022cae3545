// Shared between the OCI sources: the registry client, the blob cache and the progress
// display. Not part of the image module's interface.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ctr/oci.hpp"
#include "ctr/status_line.hpp"

namespace ctr::image::oci {

// One line per blob: on a terminal it is rewritten as bytes arrive; otherwise a line when
// a blob starts and one when it is done. Silent with -q. Drawn with ctr::StatusLine.
class Progress {
 public:
  Progress();
  ~Progress();  // on a terminal, ends a line left updating (an error comes next)
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void start(std::string label, std::uint64_t total);
  void update(std::uint64_t bytes);
  void done(const std::string& what, bool cached);
  void note(const std::string& line);
  // On a terminal: replaces the updating line by one summing up the layers.
  void finish();

 private:
  bool enabled_;
  StatusLine line_;
  std::size_t layers_ = 0, fetchedLayers_ = 0, cachedLayers_ = 0;
  std::uint64_t fetchedBytes_ = 0;
  std::string label_;
  std::uint64_t total_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

// A manifest or config: the body and the digest it was checked against.
struct FetchedDocument {
  std::string body;
  std::string mediaType;
  std::string digest;  // sha256 of body
};

// The distribution API (https://github.com/opencontainers/distribution-spec) for one
// repository: GET /v2/ challenges, bearer tokens, manifests, blobs into the cache.
class RegistryClient {
 public:
  RegistryClient(Reference ref, const PullOptions& options);
  ~RegistryClient();
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  // By tag or digest; a digest reference is checked against the body.
  FetchedDocument manifest(const std::string& tagOrDigest);
  // A small blob (the config) into memory, its digest checked.
  std::string smallBlob(const std::string& digest);
  // A layer into the cache (no download when it is there with the right size); returns its
  // path. The digest of a download is checked before it enters the cache.
  std::filesystem::path blobToCache(const std::string& digest, std::uint64_t size, Progress& progress,
                                    const std::string& label);
  // Pushing, to the registry itself (make the client with no mirrors): whether it has the
  // blob; a blob from `fd` (`size` bytes) or from memory; a manifest under `tag`. Each
  // throws ctr::Error naming the registry and the HTTP status it answered.
  bool hasBlob(const std::string& digest);
  void uploadBlob(const std::string& digest, int fd, std::uint64_t size, Progress& progress);
  void uploadBlob(const std::string& digest, const std::string& text);
  void putManifest(const std::string& tag, const std::string& mediaType, const std::string& body);
  // The cache entry of a blob, when it is there with the right size.
  [[nodiscard]] std::optional<std::filesystem::path> cachedBlob(const std::string& digest, std::uint64_t size) const;
  // Drops a cache entry whose content turned out wrong.
  void evict(const std::string& digest);
  // GET `url` (http or https, redirects within those) into `fd`, at most `limit` bytes;
  // returns the bytes written. Throws ctr::Error naming the URL (HTTP status, too large,
  // truncated, unreachable).
  static std::uint64_t download(const std::string& url, int fd, std::uint64_t limit, const PullOptions& options);

  [[nodiscard]] const Reference& reference() const { return ref_; }
  // Where the endpoint in use serves a blob, and the "Authorization: ..." header line that
  // reads it there ("" where none is needed): for a reader of its own (a lazy image's server).
  // Call after a request that authenticated (manifest, smallBlob).
  struct BlobAccess {
    std::string url;
    std::string authorization;
    std::string tokenUrl;            // where the bearer token came from (empty: none)
    std::string tokenAuthorization;  // how it was asked for ("Authorization: Basic ...", or empty)
  };
  [[nodiscard]] BlobAccess blobAccess(const std::string& digest) const;
  // GET /v2/ with the credentials (the registry's own check of them, as `docker login`):
  // the HTTP status after authentication. Throws ctr::Error when a token service refuses them.
  long ping();
  // "access denied by REG (HTTP N; credentials from SOURCE for REG)", or the hint to log in.
  [[nodiscard]] std::string accessDenied(long status) const;

 private:
  struct Impl;
  // `request` at the current endpoint; where a mirror fails, a warning and the next one.
  template <typename Request>
  auto viaEndpoints(Request&& request) -> decltype(request(std::declval<Impl&>()));
  FetchedDocument manifestFrom(Impl& endpoint, const std::string& tagOrDigest);
  void upload(const std::string& digest, std::uint64_t size, const std::function<void(Impl&)>& body);
  std::filesystem::path blobFrom(Impl& endpoint, const std::string& digest, std::uint64_t size, Progress& progress,
                                 const std::string& label);
  Reference ref_;
  std::filesystem::path cacheDir_;
  std::vector<std::unique_ptr<Impl>> endpoints_;  // registryEndpoints(): the mirrors, then the registry
  std::size_t current_ = 0;       // the one that serves now (a mirror that failed is not asked again)
};

// "HOST[:PORT]" of "SCHEME://HOST[:PORT]/PATH": what messages about a URL's server name.
std::string urlServer(const std::string& url);

// The cache root `root` (cacheRoot's), made 0700 where missing and refused (ctr::Error)
// where it or a directory above it is not the user's alone (ctr/user_dir.hpp's rule).
std::filesystem::path openCacheRoot(const std::filesystem::path& root);

// "blob sha256:... of name:tag: digest mismatch (got sha256:...)"
[[nodiscard]] std::string digestMismatch(const std::string& what, const std::string& expected,
                                         const std::string& got, const std::string& image);

// What an ORAS manifest names (oras://): its one SIF layer (limits checked) and its config
// (empty where it has none), and the manifest's own digest. Throws ctr::Error naming the
// image where it is not an ORAS SIF.
struct OrasManifest {
  std::string sifDigest;
  std::uint64_t sifSize = 0;
  std::string configDigest;
  std::uint64_t configSize = 0;
  std::string manifestDigest;
};
OrasManifest orasManifest(RegistryClient& client, const Reference& ref, const std::string& reference,
                          const PullOptions& options);

}  // namespace ctr::image::oci
