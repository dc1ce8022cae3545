// Bootstrap agents: what fills a stage's empty rootfs from its `Bootstrap:` header. A table
// keyed by agent name, so that importers (docker, oci, ...) register beside these.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "ctr/build.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/hash.hpp"
#include "ctr/image.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/oci.hpp"
#include "ctr/strings.hpp"
#include "ctr/user_dir.hpp"

namespace ctr::builder {

namespace {

namespace fs = std::filesystem;

void runChecked(const std::function<int(const std::vector<std::string>&)>& run,
                const std::vector<std::string>& argv, const std::string& what) {
  const int status = run(argv);
  if (status != 0) throw Error(what + " failed (" + argv[0] + ": exit status " + std::to_string(status) + ")");
}

fs::path fromPath(const BootstrapContext& ctx) {
  const std::string from = ctx.stage->header.from();
  if (from.empty()) throw Error("Bootstrap: " + ctx.stage->header.bootstrap() + " needs a From: line");
  fs::path path(from);
  return path.is_absolute() ? path : ctx.recipeDir / path;
}

// Bootstrap: scratch — an empty root, filled by %setup and %files.
void scratchAgent(const BootstrapContext&) {}

// Bootstrap: localimage — From: a SIF, a squashfs file or a directory.
void localImageAgent(const BootstrapContext& ctx) {
  const fs::path from = fromPath(ctx);
  const image::ImageSource source = withContext("From: " + from.string(), [&] { return image::resolveImage(from); });
  ctx.note("unpacking " + source.path.string() + " (" + toString(source.kind) + ")");
  if (source.kind == image::ImageKind::Directory) {
    runChecked(ctx.runAsRoot, {"/bin/cp", "-a", "--", source.path.string() + "/.", ctx.rootfs.string()},
               "copying " + source.path.string());
    // An ordinary caller's build maps it to root: its own setuid files would become root's.
    if (::getuid() != 0) {
      if (const std::size_t n = image::clearSetidBitsOf(image::ImageTree(ctx.rootfs), ::getuid()); n > 0)
        ctx.note("cleared the setuid/setgid bits of " + std::to_string(n) + " of your files (they would be root's)");
    }
    return;
  }
  runChecked(ctx.runAsRoot, image::unsquashfsCommand(source, ctx.rootfs.string()), "unpacking " + source.path.string());
}

// Bootstrap: debootstrap — mmdebstrap (minbase) of From/OSVersion from MirrorURL (default:
// the host's apt source) with Include packages; the result is cached as a tarball per
// (suite, mirror, packages), so a second build costs one extraction.
void debootstrapAgent(const BootstrapContext& ctx) {
  std::string suite = ctx.stage->header.osVersion();
  if (suite.empty()) suite = ctx.stage->header.from();
  if (suite.empty()) throw Error("Bootstrap: debootstrap needs OSVersion: (or From:) naming the suite, e.g. bookworm");
  std::string mirror = ctx.stage->header.mirrorUrl();
  if (mirror.empty()) {
    std::vector<std::string> deb822;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/etc/apt/sources.list.d", ec))
      if (entry.path().extension() == ".sources") deb822.push_back(readFileIfPresent(entry.path().string()));
    std::sort(deb822.begin(), deb822.end());
    mirror = hostAptMirror(readFileIfPresent("/etc/apt/sources.list"), deb822);
    if (mirror.empty()) throw Error("Bootstrap: debootstrap without MirrorURL: and the host has no apt source to use");
  }
  std::string include = ctx.stage->header.include();
  std::replace(include.begin(), include.end(), ' ', ',');
  if (::access("/usr/bin/mmdebstrap", X_OK) != 0)
    throw Error("Bootstrap: debootstrap needs mmdebstrap (apt-get install mmdebstrap)");

  // The user's cache (root's: nobody else's symlink or directory on the way, ctr/user_dir.hpp).
  (void)openUserDir(ctx.cacheDir, "image cache", true, WhenTaken::Refuse);
  const fs::path cacheDir = ctx.cacheDir / "debootstrap";
  if (::mkdir(cacheDir.c_str(), 0700) != 0 && errno != EEXIST) throw sysError("cannot create the cache directory " + cacheDir.string());
  std::error_code ec;
  const fs::path tarball = cacheDir / (toHex16(fnv1a64(suite + '\n' + mirror + '\n' + include)) + ".tar");
  if (fs::exists(tarball, ec)) {
    ctx.note("debootstrap " + suite + " from " + mirror + ": cached base " + tarball.string());
  } else {
    ctx.note("debootstrap " + suite + " from " + mirror + " (mmdebstrap, minbase" +
             (include.empty() ? "" : ", include " + include) + ")");
    // Written under a temporary name in the cache, renamed when complete.
    const fs::path partial = ctx.tempDir / "base.tar";
    std::vector<std::string> argv{"/usr/bin/mmdebstrap", "--variant=minbase",
                                  ::getuid() == 0 ? "--mode=root" : "--mode=unshare"};
    if (!include.empty()) argv.push_back("--include=" + include);
    argv.insert(argv.end(), {suite, partial.string(), mirror});
    const int status = ctx.runAsUser(argv);
    if (status != 0)
      throw Error("mmdebstrap failed (exit status " + std::to_string(status) + ")" +
                  (::getuid() == 0 ? ""
                                   : "; as an ordinary user it needs ranges in /etc/subuid and /etc/subgid "
                                     "(its unshare mode)"));
    fs::copy_file(partial, tarball.string() + ".part", fs::copy_options::overwrite_existing, ec);
    if (ec || ::rename((tarball.string() + ".part").c_str(), tarball.c_str()) != 0)
      throw Error("cannot store the debootstrap base in " + cacheDir.string());
    fs::remove(partial, ec);
  }
  // Device nodes cannot be made in a user namespace; /dev is bound at run time anyway.
  runChecked(ctx.runAsRoot,
             {"/bin/tar", "-xpf", tarball.string(), "-C", ctx.rootfs.string(), "--numeric-owner",
              "--exclude=./dev/*"},
             "extracting " + tarball.string());
}

// Bootstrap: oras — From: REGISTRY/NAME:TAG, a SIF pushed to an OCI registry (ctr push or
// apptainer push oras://), fetched into the image cache (its digest checked) and unpacked.
void orasAgent(const BootstrapContext& ctx) {
  std::string reference = ctx.stage->header.from();
  if (reference.starts_with("oras://")) reference.erase(0, 7);
  if (reference.empty()) throw Error("Bootstrap: oras needs a From: line (REGISTRY/NAME:TAG)");
  image::oci::PullOptions options;
  if (!ctx.cacheDir.empty()) options.cacheDir = ctx.cacheDir;
  options.limits = ctx.pull;
  ctx.note("fetching oras://" + reference);
  const auto sif = withContext("From: oras://" + reference, [&] { return image::oci::orasSif(reference, options); });
  const image::ImageSource source = withContext("From: oras://" + reference, [&] { return image::resolveImage(sif); });
  runChecked(ctx.runAsRoot, image::unsquashfsCommand(source, ctx.rootfs.string()), "unpacking oras://" + reference);
}

// Bootstrap: docker (From: a registry reference), docker-archive (a `docker save` tar),
// oci-archive (a tar of an OCI layout, optional :tag) and oci (a layout directory, optional
// :tag): the image's layers and, as Apptainer maps them, its Env, Entrypoint/Cmd and labels
// (ctr/oci.hpp). A relative path starts at the recipe's directory.
BootstrapAgent ociAgent(std::string agent) {
  return [agent](const BootstrapContext& ctx) {
    std::string reference = ctx.stage->header.from();
    if (reference.empty()) throw Error("Bootstrap: " + agent + " needs a From: line");
    if (agent != "docker" && reference[0] != '/') reference = (ctx.recipeDir / reference).string();
    image::oci::PullOptions options;
    if (!ctx.cacheDir.empty()) options.cacheDir = ctx.cacheDir;
    options.limits = ctx.pull;
    ctx.note("importing " + agent + " " + reference);
    const image::oci::ImageConfig config = image::oci::unpackImage(agent, reference, ctx.rootfs, options);
    image::oci::writeApptainerMetadata(config, ctx.rootfs);
  };
}

std::map<std::string, BootstrapAgent, std::less<>>& agents() {
  static std::map<std::string, BootstrapAgent, std::less<>> table = {
      {"scratch", scratchAgent},          {"localimage", localImageAgent},          {"debootstrap", debootstrapAgent},
      {"docker", ociAgent("docker")},     {"docker-archive", ociAgent("docker-archive")},
      {"oci-archive", ociAgent("oci-archive")}, {"oci", ociAgent("oci")}, {"oras", orasAgent}};
  return table;
}

std::string_view trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

void registerBootstrapAgent(const std::string& name, BootstrapAgent agent) { agents()[name] = std::move(agent); }

const BootstrapAgent* findBootstrapAgent(std::string_view name) {
  auto it = agents().find(name);
  return it == agents().end() ? nullptr : &it->second;
}

std::vector<std::string> bootstrapAgentNames() {
  std::vector<std::string> names;
  for (const auto& [name, agent] : agents()) names.push_back(name);
  return names;
}

std::string hostAptMirror(std::string_view sourcesList, const std::vector<std::string>& deb822Sources) {
  auto lines = [](std::string_view text, auto&& each) {
    for (std::string_view line : splitLines(text))
      if (each(trimmed(line))) return true;
    return false;
  };
  std::string found;
  // One-line style: "deb [options] URI suite components".
  lines(sourcesList, [&](std::string_view line) {
    if (!line.starts_with("deb ") && !line.starts_with("deb\t")) return false;
    line = trimmed(line.substr(3));
    if (line.starts_with('[')) {
      auto close = line.find(']');
      if (close == std::string_view::npos) return false;
      line = trimmed(line.substr(close + 1));
    }
    found = std::string(line.substr(0, line.find_first_of(" \t")));
    return !found.empty();
  });
  if (!found.empty()) return found;
  // deb822: paragraphs with "Types: deb" and "URIs: ...", the first such one (not
  // -security: the suite of a definition is the distribution's own).
  for (const auto& text : deb822Sources) {
    std::string types, uris;
    auto paragraphEnd = [&] {
      if (types.find("deb") != std::string::npos && !uris.empty() && uris.find("security") == std::string::npos) {
        found = uris.substr(0, uris.find(' '));
        return true;
      }
      types.clear();
      uris.clear();
      return false;
    };
    const bool done = lines(text, [&](std::string_view line) {
      if (line.empty()) return paragraphEnd();
      if (line.starts_with("Types:")) types = std::string(trimmed(line.substr(6)));
      if (line.starts_with("URIs:")) uris = std::string(trimmed(line.substr(5)));
      return false;
    });
    if (done || paragraphEnd()) return found;
  }
  return found;
}

}  // namespace ctr::builder
