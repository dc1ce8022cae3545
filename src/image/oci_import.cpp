// unpackImage for each agent, and `ctr pull`: fetch, apply layers, write the Apptainer
// metadata, pack a SIF, with nothing left behind on an error or a signal.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <cstdio>
#include <thread>

#include "ctr/chunk_table.hpp"
#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/log.hpp"
#include "ctr/oci.hpp"
#include "oci_internal.hpp"
#include "ctr/scratch.hpp"
#include "ctr/sif.hpp"

namespace ctr::image::oci {

namespace {

std::atomic<int> gCancelSignal{0};

constexpr std::string_view kIndexTypes[] = {"application/vnd.oci.image.index.v1+json",
                                            "application/vnd.docker.distribution.manifest.list.v2+json"};

bool isIndex(const nlohmann::json& doc, const std::string& contentType) {
  std::string type = doc.value("mediaType", contentType);
  for (auto t : kIndexTypes)
    if (type == t) return true;
  return !doc.contains("layers") && doc.contains("manifests");
}

nlohmann::json parseJson(const std::string& text, const std::string& what) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(what + ": not a JSON object");
  return j;
}

struct Descriptor {
  std::string digest;
  std::uint64_t size = 0;
};

Descriptor descriptor(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("digest") || !j["digest"].is_string())
    throw Error(what + ": descriptor without a digest");
  Descriptor d{j["digest"].get<std::string>(), 0};
  checkDigestSyntax(d.digest, what);
  if (j.contains("size") && j["size"].is_number_unsigned()) d.size = j["size"].get<std::uint64_t>();
  return d;
}

// The layers of an image manifest, checked before anything is fetched.
std::vector<Descriptor> layersOf(const nlohmann::json& manifest, const std::string& image) {
  if (manifest.value("schemaVersion", 0) != 2)
    throw Error(image + ": manifest schema version " + std::to_string(manifest.value("schemaVersion", 0)) +
                " is not supported (only version 2)");
  if (!manifest.contains("layers") || !manifest["layers"].is_array()) throw Error(image + ": manifest lists no layers");
  std::vector<Descriptor> out;
  for (const auto& l : manifest["layers"]) out.push_back(descriptor(l, image + " layer"));
  return out;
}

std::string layerLabel(std::size_t i, std::size_t n, const std::string& digest) {
  return "layer " + std::to_string(i + 1) + "/" + std::to_string(n) + " " + digest.substr(0, 19);
}

// A layer blob in the cache, ctr's own directory, opened without blocking: LayerApplier::apply
// refuses what is not a regular file (archive members go through openArchiveMember instead).
UniqueFd openLayerFile(const std::filesystem::path& path, const std::string& label) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) throw sysError(label + ": open " + path.string());
  return fd;
}

// Applies a layer blob whose digest must be `expected`. A damaged blob usually fails to
// decompress before its digest is known: then the digest decides which error is reported.
// Returns false (after `onMismatch`) where the digest is wrong.
void applyChecked(LayerApplier& applier, int fd, const std::string& label, const std::string& expected,
                  const std::string& image, const std::function<void()>& onMismatch = {}) {
  std::string got;
  try {
    got = applier.apply(fd, label).digest;
  } catch (const Error& e) {
    if (cancelled()) throw;
    got = digestFile(fd, label).digest;
    if (got == expected) throw;
  }
  if (got != expected) {
    if (onMismatch) onMismatch();
    throw Error(digestMismatch("blob", expected, got, image));
  }
}

void finishApplying(LayerApplier& applier) {
  applier.finish();
  if (applier.devicesSkipped() > 0)
    spdlog::warn("{} device file(s) in the layers were skipped: creating devices needs root (the runtime binds /dev)",
                 applier.devicesSkipped());
}

// docker://

// The image manifest of `ref` for this host's platform (options.platformOs/Arch): through
// its index when the reference names one. `doc` is the manifest as fetched.
nlohmann::json platformManifest(RegistryClient& client, const Reference& ref, const PullOptions& options,
                                FetchedDocument& doc) {
  const std::string image = ref.shortName();
  doc = client.manifest(ref.digest.empty() ? ref.tag : ref.digest);
  auto manifest = parseJson(doc.body, "manifest of " + image);
  if (isIndex(manifest, doc.mediaType)) {
    Platform want = hostPlatform();
    if (!options.platformOs.empty()) want.os = options.platformOs;
    if (!options.platformArch.empty()) want = Platform{want.os, options.platformArch, ""};
    std::size_t chosen = withContext(image, [&] { return choosePlatform(manifest, want); });
    Descriptor d = descriptor(manifest["manifests"][chosen], "index of " + image);
    doc = client.manifest(d.digest);
    manifest = parseJson(doc.body, "manifest " + d.digest + " of " + image);
  }
  return manifest;
}

ImageConfig unpackFromRegistry(const std::string& reference, const std::filesystem::path& rootfs,
                               const PullOptions& options) {
  Reference ref = parseReference(reference);
  const std::string image = ref.shortName();
  RegistryClient client(ref, options);
  FetchedDocument doc;
  auto manifest = platformManifest(client, ref, options, doc);
  const auto layers = layersOf(manifest, image);
  std::vector<DeclaredBlob> declared;
  for (std::size_t i = 0; i < layers.size(); ++i)
    declared.push_back({layerLabel(i, layers.size(), layers[i].digest) + " of " + image, layers[i].size});
  checkDeclaredSizes(declared, options.limits, image);
  Descriptor configRef = descriptor(manifest.value("config", nlohmann::json{}), "config of " + image);
  ImageConfig config = parseImageConfig(parseJson(client.smallBlob(configRef.digest), "config of " + image));

  Progress progress;
  std::vector<std::filesystem::path> files;
  for (std::size_t i = 0; i < layers.size(); ++i)
    files.push_back(client.blobToCache(layers[i].digest, layers[i].size, progress, layerLabel(i, layers.size(), layers[i].digest)));
  progress.finish();
  LayerApplier applier(rootfs, options.limits);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string label = layerLabel(i, layers.size(), layers[i].digest) + " of " + image;
    log::StepTimer step("apply " + label);
    // A cached blob is checked as it is read: a cache damaged since is found here, and
    // the entry dropped so that the next pull fetches it again.
    UniqueFd fd = openLayerFile(files[i], label);
    applyChecked(applier, fd.get(), label, layers[i].digest, image, [&] { client.evict(layers[i].digest); });
  }
  finishApplying(applier);
  return config;
}

// OCI layouts (oci:DIR, and oci-archive: once unpacked)

std::string blobPath(const std::string& digest) { return "blobs/sha256/" + digest.substr(7); }

std::string readBlob(int layoutFd, const Descriptor& d, const std::string& image) {
  const std::string what = image + ": blob " + d.digest;
  std::string text = readCheckedFile(openArchiveMember(layoutFd, blobPath(d.digest), what).get(), 16u << 20, what);
  Digester digester;
  digester.update(text.data(), text.size());
  std::string got = digester.digest();
  if (got != d.digest) throw Error(digestMismatch("blob", d.digest, got, image));
  return text;
}

// `layoutFd`: the layout directory (oci:DIR) or the unpacked oci-archive; every file of it is
// opened relative to it (openArchiveMember).
ImageConfig unpackLayout(int layoutFd, const std::string& tag, const std::string& image,
                         const std::filesystem::path& rootfs, const PullOptions& options) {
  const std::string indexWhat = image + ": index.json";
  auto index = parseJson(readCheckedFile(openArchiveMember(layoutFd, "index.json", indexWhat).get(), 16u << 20, indexWhat),
                         indexWhat);
  if (!index.contains("manifests") || !index["manifests"].is_array() || index["manifests"].empty())
    throw Error(image + ": index.json lists no images");
  nlohmann::json chosen;
  std::string names;
  for (const auto& m : index["manifests"]) {
    std::string name;
    if (m.contains("annotations") && m["annotations"].is_object())
      name = m["annotations"].value("org.opencontainers.image.ref.name", "");
    names += (names.empty() ? "" : ", ") + (name.empty() ? std::string("(untagged)") : name);
    if (tag.empty() || name == tag) {
      if (!chosen.is_null() && tag.empty())
        throw Error(image + ": the layout holds several images; name one with :TAG");
      if (chosen.is_null()) chosen = m;
    }
  }
  if (chosen.is_null()) throw Error("manifest unknown: " + image + " (the layout has: " + names + ")");
  Descriptor d = descriptor(chosen, image);
  auto manifest = parseJson(readBlob(layoutFd, d, image), "manifest of " + image);
  if (isIndex(manifest, chosen.value("mediaType", ""))) {
    Platform want = hostPlatform();
    if (!options.platformArch.empty()) want = Platform{"linux", options.platformArch, ""};
    d = descriptor(manifest["manifests"][withContext(image, [&] { return choosePlatform(manifest, want); })], image);
    manifest = parseJson(readBlob(layoutFd, d, image), "manifest of " + image);
  }
  const auto layers = layersOf(manifest, image);
  ImageConfig config = parseImageConfig(
      parseJson(readBlob(layoutFd, descriptor(manifest.value("config", nlohmann::json{}), image), image), "config of " + image));
  LayerApplier applier(rootfs, options.limits);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string label = layerLabel(i, layers.size(), layers[i].digest) + " of " + image;
    UniqueFd fd = openArchiveMember(layoutFd, blobPath(layers[i].digest), label);
    applyChecked(applier, fd.get(), label, layers[i].digest, image);
  }
  finishApplying(applier);
  return config;
}

// An archive's members into `dir`, through the layer code: the same refusal of paths
// that leave the directory and the same size limits; a device or FIFO member is refused.
// Returns `dir` open: the members are read relative to it (openArchiveMember), so that a
// member that is a link to a host file (/etc/shadow, /dev/zero) is never followed.
UniqueFd extractArchive(const std::filesystem::path& archivePath, const std::filesystem::path& dir, const std::string& image,
                        const config::PullPolicy& limits) {
  UniqueFd dirFd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirFd) throw sysError("open " + dir.string());
  LayerApplier applier(dir, limits, LayerApplier::Members::ArchiveFiles);
  applier.apply(archivePath, image);
  applier.finish();
  return dirFd;
}

// "PATH:TAG" or "PATH": the tag only if PATH alone does not exist.
std::pair<std::string, std::string> splitTag(const std::string& reference) {
  std::error_code ec;
  if (std::filesystem::exists(reference, ec)) return {reference, ""};
  auto colon = reference.rfind(':');
  if (colon == std::string::npos || reference.find('/', colon) != std::string::npos) return {reference, ""};
  return {reference.substr(0, colon), reference.substr(colon + 1)};
}

bool isHexDigest(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

ImageConfig unpackDockerArchive(const std::string& path, const std::filesystem::path& rootfs, const PullOptions& options) {
  ScratchDir scratch(rootfs, "docker-archive");
  const UniqueFd dir = extractArchive(path, scratch.path(), "docker-archive " + path, options.limits);
  auto readMember = [&](const std::string& rel, const std::string& what) {
    return readCheckedFile(openArchiveMember(dir.get(), rel, what).get(), 16u << 20, what);
  };
  auto top = nlohmann::json::parse(readMember("manifest.json", path + ": manifest.json"), nullptr, false);
  if (!top.is_array() || top.empty() || !top[0].is_object()) throw Error(path + ": manifest.json lists no image");
  const auto& m = top[0];
  if (top.size() > 1) spdlog::warn("{}: holds {} images, importing the first", path, top.size());
  auto inside = [&](const nlohmann::json& v, const std::string& what) {
    if (!v.is_string()) throw Error(path + ": manifest.json: " + what + " is not a path");
    std::string p = v.get<std::string>();
    if (p.starts_with('/') || p.find("..") != std::string::npos) throw Error(path + ": manifest.json: " + what + " " + p + " leaves the archive");
    return p;
  };
  ImageConfig config = parseImageConfig(
      parseJson(readMember(inside(m.value("Config", nlohmann::json{}), "Config"), path + ": config"), path + ": config"));
  if (!m.contains("Layers") || !m["Layers"].is_array()) throw Error(path + ": manifest.json lists no layers");
  LayerApplier applier(rootfs, options.limits);
  const std::size_t n = m["Layers"].size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::string rel = inside(m["Layers"][i], "layer");
    const std::string label = "layer " + std::to_string(i + 1) + "/" + std::to_string(n) + " " + rel + " of " + path;
    // `docker save` and skopeo name layers by their digest (blobs/sha256/HEX, HEX.tar,
    // HEX/layer.tar is an ID instead): where a name is one, it is checked.
    std::filesystem::path p(rel);
    std::string stem = p.filename() == "layer.tar" ? "" : p.stem().string();
    if (p.parent_path().filename() == "sha256") stem = p.filename().string();
    UniqueFd fd = openArchiveMember(dir.get(), rel, label);
    if (isHexDigest(stem)) applyChecked(applier, fd.get(), label, "sha256:" + stem, path);
    else applier.apply(fd.get(), label);
  }
  finishApplying(applier);
  return config;
}

void killChildren() {
  char file[64];
  std::snprintf(file, sizeof file, "/proc/self/task/%d/children", static_cast<int>(::getpid()));
  std::string text = readFileIfPresent(file);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    int pid = std::atoi(text.substr(pos, end - pos).c_str());
    if (pid > 0) ::kill(pid, SIGKILL);
    pos = end + 1;
  }
}

// SIGINT/SIGTERM/SIGHUP while a pull runs: blocked in every thread and taken by this
// watcher, which records it (curl, the layer loop and the pull poll cancelled()) and kills
// our children (mksquashfs); the pull then unwinds and its destructors remove every
// temporary file. A handler could not remove a directory tree safely.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, sig);
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] {
      const timespec tick{0, 100'000'000};
      while (!stop_.load()) {
        int sig = ::sigtimedwait(&set_, nullptr, &tick);
        if (sig > 0) {
          gCancelSignal.store(sig);
          killChildren();
        }
      }
    });
  }
  ~SignalWatcher() {
    stop_.store(true);
    thread_.join();
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  sigset_t set_{}, old_{};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

bool cancelled() { return gCancelSignal.load(std::memory_order_relaxed) != 0; }

ImageConfig unpackImage(std::string_view agent, const std::string& reference, const std::filesystem::path& rootfs,
                        const PullOptions& options) {
  log::StepTimer step("unpack " + std::string(agent) + ":" + reference);
  if (agent == "docker") return unpackFromRegistry(reference, rootfs, options);
  if (agent == "oci") {
    auto [dir, tag] = splitTag(reference);
    UniqueFd layout(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!layout) throw Error("oci:" + dir + ": not an OCI layout directory");
    return unpackLayout(layout.get(), tag, "oci:" + reference, rootfs, options);
  }
  if (agent == "oci-archive") {
    auto [path, tag] = splitTag(reference);
    ScratchDir scratch(rootfs, "oci-archive");
    const UniqueFd layout = extractArchive(path, scratch.path(), "oci-archive " + path, options.limits);
    return unpackLayout(layout.get(), tag, "oci-archive:" + reference, rootfs, options);
  }
  if (agent == "docker-archive") return unpackDockerArchive(splitTag(reference).first, rootfs, options);
  throw Error("unknown image source '" + std::string(agent) + "' (docker, docker-archive, oci-archive, oci)");
}

std::string manifestDigest(const std::string& reference, const PullOptions& options) {
  const Reference ref = parseReference(reference);
  RegistryClient client(ref, options);
  FetchedDocument doc;
  (void)platformManifest(client, ref, options, doc);
  return doc.digest;
}

// oras://

OrasManifest orasManifest(RegistryClient& client, const Reference& ref, const std::string& reference,
                          const PullOptions& options) {
  const std::string image = ref.shortName();
  const auto doc = client.manifest(ref.digest.empty() ? ref.tag : ref.digest);
  const auto manifest = parseJson(doc.body, "manifest of " + image);
  std::optional<Descriptor> sif;
  const auto layers = manifest.value("layers", nlohmann::json::array());
  for (const auto& layer : layers.is_array() ? layers : nlohmann::json::array()) {
    if (!layer.is_object() || layer.value("mediaType", "") != kSifLayerMediaType) continue;
    if (sif) throw Error(image + ": more than one SIF layer (" + std::string(kSifLayerMediaType) + ")");
    sif = descriptor(layer, "SIF layer of " + image);
  }
  if (!sif)
    throw Error(image + ": not a SIF pushed to an OCI registry (no layer of type " + std::string(kSifLayerMediaType) +
                "): pull it as docker://" + reference);
  checkDeclaredSizes({{"the SIF " + sif->digest.substr(0, 19) + " of " + image, sif->size}}, options.limits, image);
  OrasManifest out{sif->digest, sif->size, "", 0, doc.digest};
  if (manifest.contains("config")) {
    const Descriptor config = descriptor(manifest["config"], "config of " + image);
    out.configDigest = config.digest;
    out.configSize = config.size;
  }
  return out;
}

std::filesystem::path orasSif(const std::string& reference, const PullOptions& options) {
  Reference ref = parseReference(reference);
  RegistryClient client(ref, options);
  const OrasManifest oras = orasManifest(client, ref, reference, options);
  if (auto cached = client.cachedBlob(oras.sifDigest, oras.sifSize)) return *cached;  // a launch says nothing then
  Progress progress;
  auto path = client.blobToCache(oras.sifDigest, oras.sifSize, progress, "SIF " + oras.sifDigest.substr(0, 19));
  progress.finish();
  return path;
}

void orasPush(const std::filesystem::path& sifPath, const std::string& reference, const PullOptions& options) {
  Reference ref = parseReference(reference);
  if (ref.tag.empty()) throw Error("oras://" + reference + ": a push names a tag (NAME:TAG)").withStatus(1);
  withContext(sifPath.string(), [&] { (void)sif::Image::open(sifPath, false); });  // only a SIF goes out as one
  UniqueFd fd(::open(sifPath.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw sysError("open " + sifPath.string());
  // One read gives the blob's digest and the chunk table a lazy reader checks each chunk by.
  const auto [digest, table] = digestAndChunks(fd.get(), sifPath.string());
  const std::uint64_t size = table.size;
  PullOptions origin = options;  // pushed to the registry itself, never to a mirror
  origin.limits.mirrors.clear();
  RegistryClient client(ref, origin);
  // Apptainer pushes "{}" here and never checks or fetches the config on a pull
  // (internal/pkg/client/oras/oras.go, DownloadImage), so ctr's table fits where Apptainer
  // leaves nothing: the manifest's digest of it authenticates the table, the table each chunk.
  const std::string config = chunkTableConfig(table);
  Digester configDigester;
  configDigester.update(config.data(), config.size());
  const std::string configDigest = configDigester.digest();
  if (!client.hasBlob(configDigest)) client.uploadBlob(configDigest, config);
  Progress progress;
  progress.start("SIF " + digest.substr(0, 19), size);
  if (client.hasBlob(digest)) {
    progress.done("already in " + ref.registry, true);
  } else {
    client.uploadBlob(digest, fd.get(), size, progress);
    progress.done("pushed (" + std::to_string(size) + " bytes)", false);
  }
  // Apptainer's layout (internal/pkg/client/oras/image.go): a config of its media type (ours
  // carries the chunk table, not "{}"), one SIF layer.
  const nlohmann::json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", {{"mediaType", kSifConfigMediaType}, {"digest", configDigest}, {"size", config.size()}}},
      {"layers",
       {{{"mediaType", kSifLayerMediaType},
         {"digest", digest},
         {"size", size},
         {"annotations", {{"org.opencontainers.image.title", sifPath.filename().string()}}}}}}};
  client.putManifest(ref.tag, "application/vnd.oci.image.manifest.v1+json", manifest.dump());
  spdlog::info("pushed {} to oras://{}", sifPath.string(), reference);
}

std::optional<std::pair<std::string, std::string>> pullSource(std::string_view source) {
  for (std::string_view prefix : {"docker://", "oras://", "docker-archive:", "oci-archive:", "oci:"}) {
    if (!source.starts_with(prefix)) continue;
    std::string_view reference = source.substr(prefix.size());
    // Apptainer also spells the archives docker-archive://PATH and oci-archive://PATH.
    if (prefix.ends_with("archive:") && reference.starts_with("//")) reference.remove_prefix(2);
    return std::pair{std::string(prefix.substr(0, prefix.find(':'))), std::string(reference)};
  }
  return std::nullopt;
}

namespace {

// The output, absolute; refused where it exists (without --force) or is a directory.
std::filesystem::path checkedOutput(const PullRequest& request) {
  const auto output = std::filesystem::absolute(request.output);
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(output, ec)) && !request.force)
    throw Error(request.output.string() + ": already exists (use --force to overwrite)");
  if (std::filesystem::is_directory(output, ec)) throw Error(request.output.string() + ": is a directory");
  return output;
}

// An http(s) URL: the file as the server has it (Apptainer's pull of a SIF from a web
// server), written beside the output and renamed into place, executable as a SIF is.
void pullUrl(const PullRequest& request) {
  const auto output = checkedOutput(request);
  SignalWatcher watcher;
  ScratchDir work(output, "pull");
  const auto file = work.path() / "download";
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw sysError("create " + file.string());
  RegistryClient::download(request.source, fd.get(), request.options.limits.maxBlobBytes, request.options);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd.get(), 0777 & ~mask) != 0 || ::fsync(fd.get()) != 0) throw sysError("write " + file.string());
  fd.reset();
  moveIntoPlace(file, output, request.force);
}

// oras://REF: the SIF as pushed, from the blob cache (its digest checked on the way in),
// copied beside the output and renamed into place; refused unless it reads as a SIF.
void pullOras(const PullRequest& request, const std::string& reference) {
  const auto output = checkedOutput(request);
  SignalWatcher watcher;
  const auto blob = orasSif(reference, request.options);
  ScratchDir work(output, "pull");
  const auto file = work.path() / "image.sif";
  std::error_code ec;
  std::filesystem::copy_file(blob, file, ec);
  if (ec) throw Error("copy " + blob.string() + " to " + file.string() + ": " + ec.message());
  withContext(request.source, [&] { (void)sif::Image::open(file, false); });
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::chmod(file.c_str(), 0777 & ~mask) != 0) throw sysError("chmod " + file.string());
  moveIntoPlace(file, output, request.force);
  spdlog::info("pulled {} to {}", request.source, output.string());
}

}  // namespace

void pullToSif(const PullRequest& request) {
  if (request.source.starts_with("http://") || request.source.starts_with("https://")) return pullUrl(request);
  if (request.source.starts_with("oras://")) return pullOras(request, request.source.substr(7));
  log::StepTimer timer("pull " + request.source);
  const auto parsed = pullSource(request.source);
  const std::string agent = parsed ? parsed->first : "", reference = parsed ? parsed->second : "";
  if (agent.empty() || reference.empty())
    throw Error("unsupported source '" + request.source +
                "' (docker://REF, oras://REF, docker-archive:PATH, oci-archive:PATH[:TAG], oci:DIR[:TAG], http(s)://URL)").withStatus(1);
  const auto output = checkedOutput(request);

  SignalWatcher watcher;
  ScratchDir work(output, "pull");
  const auto rootfs = work.path() / "rootfs";
  if (::mkdir(rootfs.c_str(), 0755) != 0) throw sysError("mkdir " + rootfs.string());
  auto check = [] {
    if (int sig = gCancelSignal.load(); sig != 0) throw Error("interrupted").withStatus(128 + sig);
  };
  try {
    ImageConfig config = unpackImage(agent, reference, rootfs, request.options);
    check();
    writeApptainerMetadata(config, rootfs);
    PackOptions build;
    build.output = work.path() / "image.sif";
    build.rootfs = rootfs;
    build.force = true;
    build.deterministic = request.deterministic;
    // The image's own architecture, which pull --arch may make another than the host's.
    if (sif::archCode(config.architecture)) build.arch = config.architecture;
    else if (!config.architecture.empty())
      spdlog::warn("{}: architecture '{}' has no SIF code: the SIF says the host's", request.source,
                   config.architecture);
    (void)packSif(build);
    check();
    // Without --force, an output that appeared meanwhile is not replaced.
    moveIntoPlace(build.output, output, request.force);
  } catch (const Error& e) {
    check();
    throw;
  }
  spdlog::info("pulled {} to {}", request.source, output.string());
}

}  // namespace ctr::image::oci
