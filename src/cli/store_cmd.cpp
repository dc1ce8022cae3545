// `ctr store list|size|clean|verify|pull`: the site image store (ctr.conf 'image store dir',
// ctr/image_store.hpp), for the admin who keeps it and the users whose jobs fill it.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/image_cache.hpp"
#include "ctr/image_store.hpp"
#include "ctr/limits.hpp"
#include "ctr/standard_streams.hpp"

namespace ctr::cli {

namespace {

namespace store = image::store;

// ctr.conf's pull policy, its storeDir the store in use (store::rootOf).
config::PullPolicy storePolicy() {
  auto pull = config::loadDefaultPolicy().pull;
  pull.storeDir = store::rootOf(pull);
  if (pull.storeDir.empty())
    throw Error("no site image store: ctr.conf" + (pull.configFile.empty() ? std::string() : " (" + pull.configFile + ")") +
                " sets no 'image store dir' (nor CTR_IMAGE_STORE)")
        .withStatus(1);
  return pull;
}

std::string date(std::int64_t seconds) {
  const std::time_t t = seconds;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%d %H:%M");
  return out.str();
}

nlohmann::json toJson(const store::Entry& e) {
  return {{"digest", e.digest}, {"references", e.references}, {"sif", e.sif.string()},   {"sif_digest", e.sifDigest},
          {"bytes", e.bytes},   {"writer", e.writer},         {"created", e.created}, {"last_used", e.lastUsed}};
}

int listStore(bool json) {
  const auto pull = storePolicy();
  const auto entries = store::list(pull.storeDir);
  if (json) {
    auto all = nlohmann::json::array();
    for (const auto& e : entries) all.push_back(toJson(e));
    std::cout << nlohmann::json{{"store", pull.storeDir}, {"images", all}}.dump(2) << '\n';
    return 0;
  }
  std::uint64_t total = 0;
  std::cout << std::left << std::setw(8) << "WRITER" << std::setw(21) << "DIGEST" << std::setw(11) << "SIZE"
            << std::setw(18) << "LAST USE" << "REFERENCES\n";
  for (const auto& e : entries) {
    total += e.bytes;
    std::string refs;
    for (const auto& r : e.references) refs += (refs.empty() ? "" : ", ") + r;
    std::cout << std::setw(8) << e.writer << std::setw(21) << e.digest.substr(0, 19) << std::setw(11)
              << limits::formatSize(e.bytes) << std::setw(18) << date(e.lastUsed) << refs << '\n';
  }
  std::cout << entries.size() << " image(s), " << limits::formatSize(total) << " in " << pull.storeDir << '\n';
  return 0;
}

int sizeStore() {
  const auto pull = storePolicy();
  std::map<uid_t, std::pair<std::size_t, std::uint64_t>> byWriter;
  std::uint64_t total = 0;
  const auto entries = store::list(pull.storeDir);
  for (const auto& e : entries) {
    ++byWriter[e.writer].first;
    byWriter[e.writer].second += e.bytes;
    total += e.bytes;
  }
  std::cout << pull.storeDir << ": " << entries.size() << " image(s), " << limits::formatSize(total) << '\n';
  for (const auto& [writer, count] : byWriter)
    std::cout << "  uid " << writer << ": " << count.first << " image(s), " << limits::formatSize(count.second) << '\n';
  return 0;
}

struct CleanArgs {
  int days = -1;
  std::string maxSize;
  std::string reference;
  bool all = false;
  bool dryRun = false;
};

int cleanStore(const CleanArgs& args) {
  const auto pull = storePolicy();
  store::CleanOptions options;
  if (args.days >= 0) options.unusedFor = std::chrono::seconds(std::int64_t{args.days} * 86400);
  if (!args.maxSize.empty()) options.maxBytes = limits::parseSize(args.maxSize, "--max-size");
  options.reference = args.reference;
  options.dryRun = args.dryRun;
  options.all = args.all;
  if (!args.all && !options.unusedFor && !options.maxBytes && options.reference.empty())
    throw Error("store clean: say what to remove: --days N, --max-size SIZE, --reference REF or --all").withStatus(1);
  const auto cleaned = store::clean(pull.storeDir, options);
  for (const auto& e : cleaned.entries)
    std::cout << (args.dryRun ? "would remove " : "removed ") << e.sif.string() << " ("
              << (e.references.empty() ? e.digest : e.references.front()) << ", " << limits::formatSize(e.bytes) << ")\n";
  std::cout << (args.dryRun ? "would remove " : "removed ") << cleaned.entries.size() << " image(s) and "
            << cleaned.leftovers << " leftover(s) of stopped writers, " << limits::formatSize(cleaned.bytes) << '\n';
  return 0;
}

// Reads every entry against its sha256; drops the corrupt ones the caller may. Status 1
// when any is corrupt.
int verifyStore() {
  const auto pull = storePolicy();
  const auto entries = store::list(pull.storeDir);
  std::size_t corrupt = 0, removed = 0;
  for (const auto& e : entries) {
    if (store::verify(e)) continue;
    ++corrupt;
    if (store::discard(e, ::geteuid())) ++removed;
  }
  std::cout << "checked " << entries.size() << " image(s) in " << pull.storeDir << ": " << corrupt << " corrupt ("
            << removed << " removed)\n";
  return corrupt == 0 ? 0 : 1;
}

}  // namespace

void registerStore(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("store", "The site image store (ctr.conf 'image store dir'): registry images "
                                          "packed once for every node");
  cmd->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  auto* list = cmd->add_subcommand("list", "The images in the store: writer, digest, size, last use, references");
  list->add_flag("--json", *json, "One JSON object");
  list->callback([&ctx, json] { ctx.action = [json] { return listStore(*json); }; });

  auto* size = cmd->add_subcommand("size", "How many images the store holds and their size, by writer");
  size->callback([&ctx] { ctx.action = [] { return sizeStore(); }; });

  auto args = std::make_shared<CleanArgs>();
  auto* clean = cmd->add_subcommand("clean", "Remove images from the store (those you may remove; root: all), "
                                             "and what stopped writers left");
  clean->add_option("-D,--days", args->days, "Those not used for N days")->check(CLI::NonNegativeNumber);
  clean->add_option("--max-size", args->maxSize, "The least recently used until the rest fit in SIZE (e.g. 500G)");
  clean->add_option("--reference", args->reference, "Those filled for this docker:// reference");
  clean->add_flag("--all", args->all, "All of them, and every leftover whatever its age");
  clean->add_flag("-n,--dry-run", args->dryRun, "Only say what would be removed");
  clean->callback([&ctx, args] { ctx.action = [args] { return cleanStore(*args); }; });

  auto* verify = cmd->add_subcommand("verify", "Read every image against its sha256 and remove the corrupt ones "
                                               "you may (status 1 when any is corrupt)");
  verify->callback([&ctx] { ctx.action = [] { return verifyStore(); }; });

  auto reference = std::make_shared<std::string>();
  auto* pull = cmd->add_subcommand("pull", "Put docker://REF in the store (as you: run it as the store's owner "
                                           "for an image every user runs)");
  pull->add_option("reference", *reference, "docker://REGISTRY/NAME:TAG")->required();
  pull->callback([&ctx, reference] {
    ctx.action = [reference] {
      image::oci::PullOptions options;
      options.limits = storePolicy();
      options.limits.storeCopy = config::StoreCopy::Never;  // what is in the store stays there
      const auto got = image::cache::acquire(*reference, options);
      // The launch path fills the store only on a miss in this node's cache: here it must.
      auto entry = store::find(options.limits.storeDir, got.digest, ::geteuid());
      if (!entry) {
        auto claim = store::claim(options.limits.storeDir, got.digest, ::geteuid(),
                                  std::chrono::seconds(options.limits.storeWaitSeconds));
        if (claim.fill && claim.fill->publish(got.sif, *reference)) entry = store::find(options.limits.storeDir, got.digest, ::geteuid());
        else entry = std::move(claim.entry);
      }
      if (!entry)
        throw Error("store pull: " + *reference + " is not in " + options.limits.storeDir +
                    ": you cannot write there (the store's owner fills it)");
      std::cout << *reference << " (" << got.digest << "): " << entry->sif.string() << '\n';
      return 0;
    };
  });
}

}  // namespace ctr::cli
