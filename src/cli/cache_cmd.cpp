// `ctr cache list [--json]`, `ctr cache clean [--days N] [--dry-run] [--force]`: the image
// cache that `exec docker://REF` and the Slurm plugin run from (ctr/image_cache.hpp) and the
// node's staged copies (ctr/stage.hpp); and
// resolveImageArgument, the IMAGE argument of a launch or of inspect.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/image_cache.hpp"
#include "ctr/lazy_blob.hpp"
#include "ctr/limits.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/stage.hpp"
#include "ctr/standard_streams.hpp"
#include "ctr/strings.hpp"
#include "ctr/user_dir.hpp"

namespace ctr::cli {

namespace {

// The user's node cache of lazily read images (ctr.conf 'lazy cache dir'; docs/design-io.md
// section 6): node-local, per user (the stage directory's rule: a name someone else took is
// not used).
std::filesystem::path lazyCacheDir(const config::PullPolicy& pull) {
  return chooseUserDir(expandUidPattern(pull.lazyCacheDir, ::geteuid(), "'lazy cache dir'"), "lazy image cache");
}
std::filesystem::path lazyCacheDir() { return lazyCacheDir(config::loadDefaultPolicy().pull); }

image::oci::PullOptions pullOptions(const config::PullPolicy& pull) {
  image::oci::PullOptions options;
  options.limits = pull;
  return options;
}

image::oci::PullOptions cacheOptions() { return pullOptions(config::loadDefaultPolicy().pull); }

// This user's stage directory on this node (ctr.conf 'stage dir'): node-local copies of images.
std::filesystem::path stageDir() {
  return chooseUserDir(expandUidPattern(config::loadDefaultPolicy().stageDir, ::geteuid(), "'stage dir'"),
                       "stage directory");
}

// Which of the cache's parts -T|--type names, with Apptainer's type names: "oci" the images
// run from docker:// (Apptainer's oci cache holds the same: SIFs made from OCI images),
// "blob" the layers and the SIFs of oras:// images (kept as the registry's blobs, so "oras"
// names them too), and ctr's own "stage" (this node's staged copies). library, shub and net
// are Apptainer's too: ctr keeps nothing of theirs, so they name nothing.
struct CacheTypes {
  bool images = false, blobs = false, stage = false, lazy = false;
};
CacheTypes parseCacheTypes(const std::vector<std::string>& given) {
  CacheTypes types;
  if (given.empty()) return {true, true, true, true};
  for (const auto& list : given)
    for (auto name : splitList(list)) {
      if (name == "all") return {true, true, true, true};
      if (name == "oci") types.images = true;
      else if (name == "blob" || name == "blobs" || name == "oras") types.blobs = true;
      else if (name == "stage") types.stage = true;
      else if (name == "lazy") types.lazy = true;
      else if (name != "library" && name != "shub" && name != "net")
        throw Error("cache: unknown type '" + std::string(name) +
                    "' (library, oci, shub, blob, net, oras, stage, lazy or all)")
            .withStatus(1);
    }
  return types;
}

// A size as Apptainer's cache commands print it: "12.34 MiB" (KiB below 1 MiB).
std::string apptainerSize(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && value >= 1024) {
    value /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  return text;
}

std::string localTime(std::int64_t seconds, const char* format) {
  const std::time_t t = seconds;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, format);
  return out.str();
}

// "12 of 40 chunks (30%)": how much of a lazily read image this node holds.
std::string fetchedText(const image::lazy::CacheEntry& e) {
  return std::to_string(e.cached) + " of " + std::to_string(e.chunks) + " chunks (" +
         std::to_string(e.chunks == 0 ? 100 : e.cached * 100 / e.chunks) + "%)";
}

int listJson(const image::cache::Listing& listing, const std::filesystem::path& stage,
             const std::vector<image::stage::Entry>& staged, const std::vector<image::lazy::CacheEntry>& lazy,
             const CacheTypes& types) {
  nlohmann::json j{{"root", listing.root.string()}, {"images", nlohmann::json::array()},
                   {"blobs", {{"count", listing.blobs}, {"bytes", listing.blobBytes}}},
                   {"stage", {{"dir", stage.string()}, {"copies", nlohmann::json::array()}}},
                   {"lazy", {{"dir", lazyCacheDir().string()}, {"images", nlohmann::json::array()}}}};
  for (const auto& e : lazy)
    j["lazy"]["images"].push_back({{"digest", e.digest},       {"name", e.name},         {"blob_bytes", e.blobBytes},
                                   {"disk_bytes", e.diskBytes}, {"chunks", e.chunks},     {"cached_chunks", e.cached},
                                   {"last_used", e.lastUsed},   {"in_use", e.inUse}});
  for (const auto& e : listing.images)
    j["images"].push_back({{"digest", e.digest}, {"references", e.references}, {"sif", e.sif.string()},
                           {"bytes", e.bytes}, {"last_used", e.lastUsed}});
  for (const auto& e : staged)
    j["stage"]["copies"].push_back({{"copy", e.copy.string()}, {"bytes", e.bytes}, {"last_used", e.lastUsed}});
  for (const auto& [key, wanted] : {std::pair{"images", types.images}, {"blobs", types.blobs}, {"stage", types.stage},
                                    {"lazy", types.lazy}})
    if (!wanted) j.erase(key);  // -T, as in the text output
  std::cout << j.dump(2) << '\n';
  return 0;
}

// Apptainer's layout: with -v a NAME / DATE CREATED / SIZE / TYPE row per entry, then "There
// are N container file(s) using S and M oci blob file(s) using S of space" and the total;
// ctr's staged copies on a line of their own.
int listCache(bool json, bool verbose, const CacheTypes& types) {
  const auto listing = image::cache::list(cacheOptions());
  const auto stage = stageDir();
  const auto staged = image::stage::list(stage);
  const auto lazy = image::lazy::listCache(lazyCacheDir());
  if (json) return listJson(listing, stage, staged, lazy, types);
  auto row = [](const std::string& name, std::int64_t when, std::uint64_t bytes, const char* type) {
    std::printf("%-24.22s %-22s %-16s %s\n", name.c_str(), localTime(when, "%Y-%m-%d %H:%M:%S").c_str(),
                apptainerSize(bytes).c_str(), type);
  };
  std::uint64_t imageBytes = 0, stagedBytes = 0;
  for (const auto& e : listing.images) imageBytes += e.bytes;
  for (const auto& e : staged) stagedBytes += e.bytes;
  if (verbose) {
    std::printf("%-24s %-22s %-16s %s\n", "NAME", "DATE CREATED", "SIZE", "TYPE");
    if (types.blobs)
      for (const auto& b : listing.blobList) row(b.name, b.modified, b.bytes, "blob");
    if (types.images)
      for (const auto& e : listing.images)
        row(e.digest.substr(e.digest.find(':') + 1), e.lastUsed, e.bytes, "oci");
    if (types.stage)
      for (const auto& e : staged) row(e.copy.filename().string(), e.lastUsed, e.bytes, "stage");
    if (types.lazy)
      for (const auto& e : lazy)
        row(e.digest.substr(7), e.lastUsed, e.diskBytes, ("lazy, " + fetchedText(e) + " of " + e.name).c_str());
    std::printf("\n");
  }
  std::uint64_t total = 0;
  if (types.images || types.blobs) {
    std::string line = "There are";
    if (types.images) line += " " + std::to_string(listing.images.size()) + " container file(s) using " + apptainerSize(imageBytes);
    if (types.images && types.blobs) line += " and";
    if (types.blobs)
      line += " " + std::to_string(listing.blobs) + " oci blob file(s) using " + apptainerSize(listing.blobBytes);
    std::printf("%s of space\n", line.c_str());
    total += (types.images ? imageBytes : 0) + (types.blobs ? listing.blobBytes : 0);
  }
  if (types.stage) {
    std::printf("There are %zu staged copies using %s in %s\n", staged.size(), apptainerSize(stagedBytes).c_str(),
                stage.string().c_str());
    total += stagedBytes;
  }
  if (types.lazy) {
    std::uint64_t lazyBytes = 0;
    for (const auto& e : lazy) lazyBytes += e.diskBytes;
    std::printf("There are %zu lazily read image(s) using %s in %s\n", lazy.size(), apptainerSize(lazyBytes).c_str(),
                lazyCacheDir().string().c_str());
    for (const auto& e : lazy)
      std::printf("  %s: %s%s\n", e.name.empty() ? e.digest.c_str() : e.name.c_str(), fetchedText(e).c_str(),
                  e.inUse ? ", in use" : "");
    total += lazyBytes;
  }
  std::printf("Total space used: %s\n", apptainerSize(total).c_str());
  return 0;
}

int cleanCache(int days, bool dryRun, const CacheTypes& types) {
  std::optional<std::chrono::seconds> unused;
  if (days >= 0) unused = std::chrono::seconds(std::int64_t{days} * 86400);
  image::cache::Cleaned cleaned;
  if (types.images || types.blobs) cleaned = image::cache::clean(cacheOptions(), unused, dryRun, {types.images, types.blobs});
  std::vector<image::stage::Entry> staged;
  if (types.stage) staged = image::stage::clean(stageDir(), unused, dryRun);
  std::vector<image::lazy::CacheEntry> lazy;
  if (types.lazy)
    lazy = image::lazy::cleanCache(lazyCacheDir(), unused ? std::optional<std::int64_t>(unused->count()) : std::nullopt,
                                   dryRun);
  std::uint64_t stagedBytes = 0, lazyBytes = 0;
  for (const auto& e : staged) stagedBytes += e.bytes;
  for (const auto& e : lazy) lazyBytes += e.diskBytes;
  std::cout << (dryRun ? "would remove " : "removed ") << cleaned.images << " image(s) and " << cleaned.blobs
            << " layer(s), " << limits::formatSize(cleaned.bytes) << "; " << staged.size() << " staged cop"
            << (staged.size() == 1 ? "y" : "ies") << ", " << limits::formatSize(stagedBytes) << "; " << lazy.size()
            << " lazily read image(s), " << limits::formatSize(lazyBytes) << '\n';
  return 0;
}

}  // namespace

image::ImageSource resolveImageArgument(const std::string& argument, const config::PullPolicy& pull, bool lazy) {
  if (argument.starts_with("https://") || argument.starts_with("http://")) {
    // Run only lazily: a SIF on a web server or object store, its chunk table beside it.
    const std::string where = pull.configFile.empty() ? "ctr.conf" : pull.configFile;
    if (!lazy)
      throw Error(argument + ": a URL runs only with --lazy (or pull it first: ctr pull IMAGE.sif " + argument + ")");
    if (pull.lazyImages != config::LazyImages::All)
      throw Error("--lazy " + argument + ": images from a URL are read lazily only with 'lazy images = all' in " + where +
                  " (pull it first: ctr pull IMAGE.sif " + argument + ")");
    auto opened = image::oci::urlLazy(argument, pullOptions(pull), lazyCacheDir(pull));
    if (!opened.source) throw Error("--lazy " + argument + " " + opened.whyNot);
    return *opened.source;
  }
  if (lazy && !argument.starts_with("oras://"))
    spdlog::warn("--lazy: {} is not an oras:// image: read as without --lazy", argument);
  if (lazy && argument.starts_with("oras://") && pull.lazyImages == config::LazyImages::No)
    spdlog::warn("--lazy: images are not read lazily on this node ('lazy images = no' in {}): {} is pulled whole",
                 pull.configFile.empty() ? "ctr.conf" : pull.configFile, argument);
  else if (lazy && argument.starts_with("oras://")) {
    auto opened = image::oci::orasLazy(argument.substr(7), pullOptions(pull), lazyCacheDir(pull));
    if (opened.source) return *opened.source;
    spdlog::warn("--lazy: {} {}: pulled whole", argument, opened.whyNot);
  }
  if (argument.starts_with("oras://")) {
    // The SIF as pushed, run from the blob cache, where it entered with its digest checked.
    auto source = image::resolveImage(image::oci::orasSif(argument.substr(7), pullOptions(pull)));
    source.reference = argument;
    return source;
  }
  if (!image::cache::isRegistryReference(argument)) {
    if (auto scheme = argument.find("://"); scheme != std::string::npos && argument.find('/') == scheme + 1)
      throw Error(argument + ": ctr runs docker://REF, oras://REF, instance://NAME, or a SIF, squashfs or directory path")
          .withStatus(1);
    return image::resolveImage(argument);
  }
  const auto got = image::cache::acquire(argument, pullOptions(pull));
  auto source = image::resolveImage(got.sif);
  source.reference = got.reference;
  source.digest = got.digest;
  source.via = got.via;
  return source;
}

std::string imagePathArgument(const std::string& argument) {
  if (argument.starts_with("oras://")) return image::oci::orasSif(argument.substr(7), cacheOptions()).string();
  if (!image::cache::isRegistryReference(argument)) return argument;
  return image::cache::acquire(argument, cacheOptions()).sif.string();
}

void registerCache(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("cache", "The image cache of docker:// images (ctr.conf 'image cache dir') and "
                                          "this node's staged copies (ctr.conf 'stage dir') and lazily read images");
  cmd->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  auto verbose = std::make_shared<bool>(false);
  auto listTypes = std::make_shared<std::vector<std::string>>();
  auto* list = cmd->add_subcommand("list", "The cached images, layers and staged copies: how many and their size");
  list->add_flag("--json", *json, "One JSON object (digests, references, sizes, last use)");
  list->add_flag("-v,--verbose", *verbose, "A line for each entry (name, date, size, type)");
  list->add_option("-T,--type", *listTypes, "Types to list (comma lists): oci, blob, stage, lazy, all (Apptainer's library, "
                                            "shub and net name nothing ctr keeps; oras SIFs are blobs)");
  list->callback([&ctx, json, verbose, listTypes] {
    ctx.action = [json, verbose, listTypes] { return listCache(*json, *verbose, parseCacheTypes(*listTypes)); };
  });

  auto days = std::make_shared<int>(-1);
  auto dryRun = std::make_shared<bool>(false);
  auto* clean = cmd->add_subcommand("clean", "Remove the cached images, layers, staged copies and lazily read images (all, or those unused for --days)");
  clean->add_option("-D,--days", *days, "Only what was not used for N days")->check(CLI::NonNegativeNumber);
  clean->add_flag("-n,--dry-run", *dryRun, "Only say what would be removed");
  auto force = std::make_shared<bool>(false);  // ctr never asks; the flag is Apptainer's
  clean->add_flag("-f,--force", *force, "Accepted for Apptainer's scripts (ctr never asks)");
  auto cleanTypes = std::make_shared<std::vector<std::string>>();
  clean->add_option("-T,--type", *cleanTypes, "Types to clean (comma lists): oci, blob, stage, lazy, all (the default)");
  clean->callback([&ctx, days, dryRun, cleanTypes] {
    ctx.action = [days, dryRun, cleanTypes] { return cleanCache(*days, *dryRun, parseCacheTypes(*cleanTypes)); };
  });
}

}  // namespace ctr::cli
