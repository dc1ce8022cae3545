// Docker and OCI images: fetching them (a registry over the OCI distribution API, a
// `docker save` tarball, an OCI layout or its tar), applying their layers to a directory,
// and the /.singularity.d metadata Apptainer derives from their config. `ctr pull` and the
// `docker`, `docker-archive`, `oci-archive` and `oci` bootstrap agents of `ctr build` use it.
//
// libcurl, libarchive and libcrypto are loaded with dlopen when an image is fetched, never
// linked: ctr runs once per MPI rank and its launch path loads only libc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctr/config.hpp"
#include "ctr/digest.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"

namespace ctr::image {
class ImageTree;
}

namespace ctr::image::oci {

// What Apptainer takes from an image config (the OCI image spec's "config" object).
struct ImageConfig {
  std::vector<std::string> env;  // "NAME=value"
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string workingDir;
  std::map<std::string, std::string> labels;
  std::string architecture;
  std::string os;

  [[nodiscard]] nlohmann::json toJson() const;
};

struct PullOptions {
  std::string username;  // registry credentials; else $CTR_DOCKER_USERNAME/PASSWORD, then
  std::string password;  // $APPTAINER_DOCKER_USERNAME/PASSWORD
  // pull --authfile: credentials from this file (Docker's format, as `ctr registry login
  // --authfile` writes it) in place of ctr's own auth file; the other places after it.
  std::filesystem::path authFile;
  std::filesystem::path cacheDir;  // empty: $CTR_CACHE_DIR, else ~/.cache/ctr
  bool noHttps = false;  // plain http for every registry (127.0.0.1 and localhost always)
  std::string platformOs;    // empty: "linux"
  std::string platformArch;  // empty: the host's (uname, as a Go name: amd64, arm64)
  // Size limits and token realm hosts: ctr.conf's ('pull max ...', 'pull token realm hosts');
  // the callers load the policy, the built-in defaults otherwise.
  config::PullPolicy limits;
};

// Fetches the image `reference` with `agent` ("docker": [host[:port]/]name[:tag|@digest];
// "docker-archive": PATH; "oci-archive": PATH[:tag]; "oci": DIR[:tag]) and applies its
// layers in order to the existing empty directory `rootfs`. Throws ctr::Error, one line
// naming the image, and the blob or layer path, on any failure.
ImageConfig unpackImage(std::string_view agent, const std::string& reference,
                        const std::filesystem::path& rootfs, const PullOptions& options);

// Writes /.singularity.d as Apptainer does for an OCI image: the base environment files
// and actions, env/10-docker2singularity.sh from Env, the runscript from Entrypoint and
// Cmd, labels.json; and, ctr's own, the WorkingDir in kWorkdirFile.
void writeApptainerMetadata(const ImageConfig& config, const std::filesystem::path& rootfs);

// Where ctr records an OCI image's WorkingDir (one absolute path and a newline), which
// Apptainer's layout has no place for: `--image-workdir` (the Slurm plugin's pyxis rule)
// starts there. Absent when the config names none.
inline constexpr const char* kWorkdirFile = "/.singularity.d/ctr-workdir";

// The part of that layout every Apptainer image has, whatever built it: env/01-base.sh,
// 90-environment.sh, 95-apps.sh, 99-base.sh, 99-runtimevars.sh, actions/*, startscript, the
// /singularity and /.exec-style links and the runtime's mount points; each only where the
// image lacks it. `ctr build` from a definition file writes it too. Paths are resolved
// inside the image (ctr/image_tree.hpp).
void writeApptainerBaseFiles(const std::filesystem::path& rootfs);
void writeApptainerBaseFiles(const ImageTree& tree);

// `ctr pull`: SOURCE is docker://REF, docker-archive:PATH, oci-archive:PATH[:tag] or
// oci:DIR[:tag]. Unpacks into a temporary directory next to `output`, writes the metadata
// and packs a SIF; on any error or SIGINT/SIGTERM/SIGHUP nothing is left behind and an
// existing output is untouched.
struct PullRequest {
  std::filesystem::path output;
  std::string source;
  bool force = false;
  bool deterministic = false;
  PullOptions options;
};
void pullToSif(const PullRequest& request);
// The bootstrap agent ("docker", "docker-archive", "oci-archive", "oci") and the reference of
// a pull SOURCE (Apptainer's docker-archive://PATH is docker-archive:PATH), or nullopt.
[[nodiscard]] std::optional<std::pair<std::string, std::string>> pullSource(std::string_view source);

// ORAS: a SIF pushed to an OCI registry as Apptainer's `push oras://` does (one layer of
// kSifLayerMediaType, config application/vnd.sylabs.sif.config.v1+json). orasSif fetches
// the SIF that oras://REFERENCE names into the blob cache, its digest checked, and returns
// its path there. Throws ctr::Error naming the image (not an ORAS SIF, limits, HTTP).
inline constexpr const char* kSifLayerMediaType = "application/vnd.sylabs.sif.layer.v1.sif";
inline constexpr const char* kSifConfigMediaType = "application/vnd.sylabs.sif.config.v1+json";
std::filesystem::path orasSif(const std::string& reference, const PullOptions& options);
// `ctr push SIF oras://REFERENCE` (a tag): the SIF as that layer, to the registry itself
// (never a mirror), with the registry's credentials; blobs it has already are not sent again.
void orasPush(const std::filesystem::path& sif, const std::string& reference, const PullOptions& options);
// `ctr exec --lazy oras://REFERENCE`: the image to read lazily, its blob's chunks fetched as
// they are read into the user's node cache at `cacheDir` (made 0700 where missing), checked
// against the chunk table `ctr push` put in the ORAS config. Writes the server's spec there,
// fetches the SIF's header, descriptors and small objects, and returns the image with
// ImageSource::lazy set. Where the image cannot be read lazily, no source and why: it has no
// chunk table (pushed by Apptainer), or the registry answers range requests with the whole
// blob; the caller pulls it whole. Throws ctr::Error as orasSif does, and where a chunk
// cannot be fetched or fails its digest. Makes room in the cache for the image within
// 'lazy cache max size' (lazy::makeRoom); where there is none, the image is not prefetched.
struct LazyOpened {
  std::optional<ImageSource> source;
  std::string whyNot;  // when there is no source: "has no chunk table", ...
};
LazyOpened orasLazy(const std::string& reference, const PullOptions& options, const std::filesystem::path& cacheDir);
// The same for an image on a web server or object store that answers range requests (ctr.conf
// 'lazy images = all'): its chunk table and digest from URL.chunks beside it (`ctr sif
// chunks`). No source, and why, where there is no table there or the server ignores ranges.
LazyOpened urlLazy(const std::string& url, const PullOptions& options, const std::filesystem::path& cacheDir);

// The digest ("sha256:...") of the image manifest that docker://REFERENCE names for this
// host's platform (options.platformOs/Arch): the manifest itself, or the one its index
// lists for the platform. One or two manifest requests; nothing is cached. Throws ctr::Error.
std::string manifestDigest(const std::string& reference, const PullOptions& options);

// Where pulled layers and images are cached (ctr pull, docker:// launches, ctr build's
// Bootstrap: docker and debootstrap bases): options.cacheDir, else $CTR_CACHE_DIR, else
// ctr.conf's 'image cache dir' (expanded), else
// ~/.cache/ctr (XDG_CACHE_HOME honoured). A per-user name of the last three that somebody
// else took is replaced by the user's own sibling (ctr/user_dir.hpp: chooseUserDir).
std::filesystem::path cacheRoot(const PullOptions& options);

// `ctr registry login`: whether `registry` (host[:port]) takes options.username and
// options.password, as `docker login` checks them (GET /v2/, through a token service when
// the registry names one). Throws ctr::Error naming the registry, never the password.
void checkLogin(const std::string& registry, const PullOptions& options);

// Where `pull [--name FILE] [--dir DIR] [OUTPUT] SOURCE` writes, as Apptainer decides it:
// --name, else OUTPUT, else (SOURCE alone) defaultPullName(SOURCE); --dir goes in front.
// `args` is OUTPUT SOURCE or SOURCE; one without a transport is refused (status 1).
std::filesystem::path pullOutputPath(const std::vector<std::string>& args, const std::string& name,
                                     const std::string& dir);
// Apptainer's default file name of a pull: the last path component of the reference and
// its tag, "NAME_TAG.sif" ("latest" without one): docker://host:5000/a/b:1.2 -> b_1.2.sif.
// Empty for a SOURCE without a transport.
std::string defaultPullName(std::string_view source);

// the pure parts, exposed for the unit tests

// "docker://host:5000/a/b:tag" split as the distribution API needs it.
struct Reference {
  std::string registry;  // "host:port"; "registry-1.docker.io" for Docker Hub names
  std::string repository;  // "library/busybox"
  std::string tag;         // empty when `digest` is set
  std::string digest;      // "sha256:..."
  // "name:tag" or "name@sha256:..." for messages
  [[nodiscard]] std::string shortName() const;
};
Reference parseReference(std::string_view text);

// Where a reference's manifests and blobs are fetched from, in order: ctr.conf's mirrors of
// its registry (options.limits.mirrors), then the registry itself unless one says `only`.
struct Endpoint {
  std::string scheme;  // "https", or "http" (said so, --nohttps, 127.0.0.1, localhost)
  std::string host;    // "host[:port]"
  std::string prefix;  // "" or "path/": in front of the repository
  bool mirror = false;
};
std::vector<Endpoint> registryEndpoints(const Reference& ref, const PullOptions& options);

// The config object of an image config blob.
ImageConfig parseImageConfig(const nlohmann::json& configBlob);

// One entry of a manifest list / OCI index.
struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;
};
// The index of the manifest in `index` ("manifests" array) that runs on `want`, or throws
// ctr::Error listing the platforms the image has.
std::size_t choosePlatform(const nlohmann::json& index, const Platform& want);
// The host's platform as Go names ("linux", "amd64"/"arm64"/..., variant "v8" etc.).
Platform hostPlatform();

// Before anything is fetched: each layer's declared size against 'pull max blob size', their
// sum against 'pull max total size'. Throws ctr::Error naming the layer (or the image), the
// size, the limit and the ctr.conf key that sets it.
struct DeclaredBlob {
  std::string label;  // "layer 2/3 sha256:1234abcd of NAME:TAG"
  std::uint64_t size = 0;
};
void checkDeclaredSizes(const std::vector<DeclaredBlob>& blobs, const config::PullPolicy& limits,
                        const std::string& image);

// "the limit is 64 GiB: 'pull max total size' in /etc/ctr/ctr.conf", for refusals.
[[nodiscard]] std::string limitSetting(const config::PullPolicy& limits, std::uint64_t limit, std::string_view key);

// The realm of a registry's "WWW-Authenticate: Bearer realm=..." challenge, checked before a
// request (with the user's credentials) goes there: an http(s) URL without user info or
// control characters; https, or http only where the registry itself is reached over http and
// the realm is on its host; on the registry's host and port, or on one that
// `limits.tokenRealmHosts` lists ("host" for the scheme's default port, or "host:port").
// `registryScheme` is "http" or "https", `registry` "host[:port]". Throws ctr::Error, one line.
void checkTokenRealm(std::string_view realm, std::string_view registryScheme, std::string_view registry,
                     const config::PullPolicy& limits);

// A value from a registry that goes into a request (a token, a challenge's service or scope):
// refused, naming `what`, when it holds a control character, so that it cannot add a header.
// A token must moreover be printable ASCII without spaces (RFC 6750's b64token, and JWTs).
void checkNoControlCharacters(std::string_view value, const std::string& what);
void checkTokenText(std::string_view token, const std::string& what);

// Checks "sha256:<64 hex>" syntax; throws ctr::Error naming `what` otherwise. Other
// algorithms are refused (every registry and tool writes sha256).
void checkDigestSyntax(const std::string& digest, const std::string& what);

// Applies layer tars (any compression libarchive reads) to `rootfs`, in order: whiteouts
// and opaque directories remove what earlier layers made; paths that leave the root (`..`,
// absolute names, a parent that is a symlink) are refused with an error naming the layer
// and the path. Directories stay owner-writable until finish(), which sets their modes.
struct LayerStats {
  std::string digest;  // "sha256:..." of the bytes read, for the caller to compare
  std::uint64_t compressedBytes = 0;
};
//
// What the layers unpack to is bounded by `limits.maxUnpackedBytes` for the applier's whole
// life (all the layers of one image): the decompressed tar stream and the apparent size of
// the files (a sparse file counts whole, before anything is written), refused naming the
// layer, the limit and its ctr.conf key. With Members::ArchiveFiles (an image archive's own
// files, not a layer) a device or FIFO member is refused too.
class LayerApplier {
 public:
  enum class Members { ImageLayer, ArchiveFiles };
  explicit LayerApplier(const std::filesystem::path& rootfs, const config::PullPolicy& limits = {},
                        Members members = Members::ImageLayer);
  ~LayerApplier();
  LayerApplier(const LayerApplier&) = delete;
  LayerApplier& operator=(const LayerApplier&) = delete;

  // `onBytes` (may be empty) is told the compressed bytes read so far.
  // The file must be a regular file (not a FIFO or a device that never ends).
  LayerStats apply(const std::filesystem::path& layerFile, const std::string& layerName,
                   const std::function<void(std::uint64_t)>& onBytes = {});
  // The same from an open regular file (an archive member opened with openArchiveMember).
  LayerStats apply(int layerFd, const std::string& layerName, const std::function<void(std::uint64_t)>& onBytes = {});
  LayerStats applyFromMemory(std::string_view layer, const std::string& layerName);
  void finish();
  [[nodiscard]] std::size_t devicesSkipped() const;

 private:
  struct State;
  State* state_;
};

// Opens the file `relative` of an unpacked image archive or OCI layout open at `dirFd` for
// reading: a link among its members is followed only while it stays inside the directory
// (openat2 RESOLVE_BENEATH: an absolute link or one through "..", a /proc magic link, are
// refused), and the result must be a regular file (a FIFO cannot block the open, a device
// is never read). Throws ctr::Error naming `what`.
[[nodiscard]] UniqueFd openArchiveMember(int dirFd, const std::string& relative, const std::string& what);

// Removes a tree even where its directories are not writable by their owner.
void removeTree(const std::filesystem::path& path) noexcept;

// Set by the SIGINT/SIGTERM/SIGHUP watcher of pullToSif; long loops poll it.
bool cancelled();

}  // namespace ctr::image::oci
