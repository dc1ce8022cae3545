// `ctr cache list [--json]`, `ctr cache clean [--days N] [--dry-run] [--force]`: the image
// cache that `exec docker://REF` and the Slurm plugin run from (ctr/image_cache.hpp) and the
// node's staged copies (ctr/stage.hpp); and
// resolveImageArgument, the IMAGE argument of a launch or of inspect.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/image_cache.hpp"
#include "ctr/limits.hpp"
#include "ctr/pathutil.hpp"
#include "ctr/stage.hpp"
#include "ctr/user_dir.hpp"

namespace ctr::cli {

namespace {

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

std::string localTime(std::int64_t seconds) {
  const std::time_t t = seconds;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%d %H:%M");
  return out.str();
}

int listCache(bool json) {
  const auto listing = image::cache::list(cacheOptions());
  const auto stage = stageDir();
  const auto staged = image::stage::list(stage);
  if (json) {
    nlohmann::json j{{"root", listing.root.string()}, {"images", nlohmann::json::array()},
                     {"blobs", {{"count", listing.blobs}, {"bytes", listing.blobBytes}}},
                     {"stage", {{"dir", stage.string()}, {"copies", nlohmann::json::array()}}}};
    for (const auto& e : listing.images)
      j["images"].push_back({{"digest", e.digest}, {"references", e.references}, {"sif", e.sif.string()},
                             {"bytes", e.bytes}, {"last_used", e.lastUsed}});
    for (const auto& e : staged)
      j["stage"]["copies"].push_back({{"copy", e.copy.string()}, {"bytes", e.bytes}, {"last_used", e.lastUsed}});
    std::cout << j.dump(2) << '\n';
    return 0;
  }
  std::cout << "image cache " << listing.root.string() << ": " << listing.images.size() << " image(s), "
            << listing.blobs << " layer(s) (" << limits::formatSize(listing.blobBytes) << ")\n";
  for (const auto& e : listing.images) {
    std::string refs;
    for (const auto& r : e.references) refs += (refs.empty() ? "" : ", ") + r;
    std::cout << "  " << e.digest.substr(0, 19) << "  " << std::setw(8) << limits::formatSize(e.bytes) << "  "
              << localTime(e.lastUsed) << "  " << refs << '\n';
  }
  std::cout << "stage directory " << stage.string() << ": " << staged.size() << " staged cop"
            << (staged.size() == 1 ? "y" : "ies") << '\n';
  for (const auto& e : staged)
    std::cout << "  " << std::setw(8) << limits::formatSize(e.bytes) << "  " << localTime(e.lastUsed) << "  "
              << e.copy.filename().string() << '\n';
  return 0;
}

int cleanCache(int days, bool dryRun) {
  std::optional<std::chrono::seconds> unused;
  if (days >= 0) unused = std::chrono::seconds(std::int64_t{days} * 86400);
  const auto cleaned = image::cache::clean(cacheOptions(), unused, dryRun);
  const auto staged = image::stage::clean(stageDir(), unused, dryRun);
  std::uint64_t stagedBytes = 0;
  for (const auto& e : staged) stagedBytes += e.bytes;
  std::cout << (dryRun ? "would remove " : "removed ") << cleaned.images << " image(s) and " << cleaned.blobs
            << " layer(s), " << limits::formatSize(cleaned.bytes) << "; " << staged.size() << " staged cop"
            << (staged.size() == 1 ? "y" : "ies") << ", " << limits::formatSize(stagedBytes) << '\n';
  return 0;
}

}  // namespace

image::ImageSource resolveImageArgument(const std::string& argument, const config::PullPolicy& pull) {
  if (!image::cache::isRegistryReference(argument)) {
    if (auto scheme = argument.find("://"); scheme != std::string::npos && argument.find('/') == scheme + 1)
      throw Error(argument + ": ctr runs docker://REF, instance://NAME, or a SIF, squashfs or directory path")
          .withStatus(1);
    return image::resolveImage(argument);
  }
  const auto got = image::cache::acquire(argument, pullOptions(pull));
  auto source = image::resolveImage(got.sif);
  source.reference = got.reference;
  source.digest = got.digest;
  return source;
}

std::string imagePathArgument(const std::string& argument) {
  if (!image::cache::isRegistryReference(argument)) return argument;
  return image::cache::acquire(argument, cacheOptions()).sif.string();
}

void registerCache(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("cache", "The image cache of docker:// images (ctr.conf 'image cache dir') and "
                                          "this node's staged copies (ctr.conf 'stage dir')");
  cmd->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  auto* list = cmd->add_subcommand("list", "The cached images (digest, size, last use, references), layers and staged copies");
  list->add_flag("--json", *json, "One JSON object");
  list->callback([&ctx, json] { ctx.action = [json] { return listCache(*json); }; });

  auto days = std::make_shared<int>(-1);
  auto dryRun = std::make_shared<bool>(false);
  auto* clean = cmd->add_subcommand("clean", "Remove the cached images, layers and staged copies (all, or those unused for --days)");
  clean->add_option("-D,--days", *days, "Only what was not used for N days")->check(CLI::NonNegativeNumber);
  clean->add_flag("-n,--dry-run", *dryRun, "Only say what would be removed");
  auto force = std::make_shared<bool>(false);  // ctr never asks; the flag is Apptainer's
  clean->add_flag("-f,--force", *force, "Accepted for Apptainer's scripts (ctr never asks)");
  clean->callback([&ctx, days, dryRun] { ctx.action = [days, dryRun] { return cleanCache(*days, *dryRun); }; });
}

}  // namespace ctr::cli
