// `ctr inspect`: an image's metadata, read without mounting it. SIF objects come from the
// descriptors; files of /.singularity.d inside a squashfs come from `unsquashfs -cat`
// (with -o for the partition's offset inside a SIF).
#include <algorithm>
#include <optional>
#include <sstream>

#include "ctr/programs.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/log.hpp"
#include "ctr/process.hpp"
#include "ctr/sif.hpp"

namespace ctr::image {

namespace {

constexpr const char* kMetaDir = ".singularity.d";
constexpr std::size_t kMaxMetaFile = 16u << 20;  // one metadata file (or listing) of an image

// Reads files of /.singularity.d from wherever the image keeps them.
class MetaFiles {
 public:
  explicit MetaFiles(const ImageSource& source) : source_(source) {
    if (source_.kind == ImageKind::Directory) return;
    // One listing tells which files exist, so that absent ones cost no process.
    auto r = unsquashfs({"-lc", "-d", "", source_.path.string(), std::string("/") + kMetaDir});
    std::istringstream lines(r.capturedStdout);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("/")) listed_.push_back(line.substr(1));
    }
  }

  // Files whose path (relative to the root) starts with `prefix`.
  [[nodiscard]] std::vector<std::string> list(const std::string& prefix) const {
    std::vector<std::string> out;
    if (source_.kind == ImageKind::Directory) {
      std::error_code ec;
      auto dir = source_.path / prefix;
      for (auto it = std::filesystem::directory_iterator(dir, ec);
           !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec)) out.push_back(prefix + "/" + it->path().filename().string());
      }
    } else {
      for (const auto& f : listed_) {
        if (f.starts_with(prefix + "/")) out.push_back(f);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Content of `rel`, or nullopt when the image has no such file.
  [[nodiscard]] std::optional<std::string> read(const std::string& rel) const {
    if (source_.kind == ImageKind::Directory) {
      std::error_code ec;
      auto p = source_.path / rel;
      if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
      try {
        return readCheckedFile(p.string(), kMaxMetaFile, "the image's /" + rel);
      } catch (const Error& e) {
        spdlog::warn("{}: ignored", e.what());
        return std::nullopt;
      }
    }
    if (std::find(listed_.begin(), listed_.end(), rel) == listed_.end()) return std::nullopt;
    auto r = unsquashfs({"-cat", source_.path.string(), "/" + rel});
    if (r.overflowed) spdlog::warn("the image's /{} is larger than {} bytes: ignored", rel, kMaxMetaFile);
    if (!r.ok() || r.overflowed) return std::nullopt;
    return r.capturedStdout;
  }

 private:
  [[nodiscard]] ProcessResult unsquashfs(std::vector<std::string> args) const {
    std::vector<std::string> argv{findProgram(Program::Unsquashfs)};
    if (source_.offset != 0) {
      argv.insert(argv.end(), {"-o", std::to_string(source_.offset)});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions po;
    po.captureStdout = true;
    po.captureStderr = true;
    po.captureLimit = kMaxMetaFile;  // a hostile image's metadata cannot balloon `ctr inspect`
    auto r = runProcess(argv, po);
    if (!r.ok()) spdlog::debug("unsquashfs {}: {}: {}", args.front(), r.describe(), r.capturedStderr);
    return r;
  }

  const ImageSource& source_;
  std::vector<std::string> listed_;
};

nlohmann::json parseJsonOr(const std::string& text, const std::string& what) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    spdlog::warn("{}: not valid JSON, ignored", what);
    return nlohmann::json::object();
  }
  return j;
}

void readSifObjects(ImageMetadata& meta) {
  auto image = sif::Image::open(meta.source.path);
  for (const auto& d : image.slots()) {
    if (!d.used) continue;
    std::string type = sif::dataTypeName(d.dataType);
    if (d.isPartition()) {
      type += " (" + sif::fsTypeName(d.fsType()) + "/" + sif::partTypeName(d.partType()) + "/" +
              sif::archName(d.partArch()) + ")";
    }
    meta.objects.push_back({d.id, type, d.nameText(), static_cast<std::uint64_t>(d.offset),
                            static_cast<std::uint64_t>(d.size)});
    auto text = [&] {
      auto bytes = image.readObject(d);
      return std::string(bytes.begin(), bytes.end());
    };
    // Metadata objects are small; a huge one is not metadata we want to print.
    if (d.size > (16 << 20)) continue;
    switch (static_cast<sif::DataType>(d.dataType)) {
      case sif::DataType::Deffile:
        if (meta.deffile.empty()) meta.deffile = text();
        break;
      case sif::DataType::Labels: {
        auto j = parseJsonOr(text(), "SIF labels object " + std::to_string(d.id));
        if (j.is_object()) meta.labels.update(j);
        break;
      }
      case sif::DataType::EnvVar:
        meta.environment["sif-object-" + std::to_string(d.id)] = text();
        break;
      case sif::DataType::GenericJson:
        if (d.nameText() == "inspect-metadata.json") {
          meta.sifInspectMetadata = parseJsonOr(text(), "inspect-metadata.json");
        }
        break;
      default: break;
    }
  }
}

}  // namespace

ImageMetadata inspectImage(const std::filesystem::path& path) {
  log::StepTimer timer("inspect " + path.string());
  ImageMetadata meta;
  meta.source = resolveImage(path);
  if (meta.source.kind == ImageKind::Sif) withContext(path.string(), [&] { readSifObjects(meta); });

  MetaFiles files(meta.source);
  const std::string dir = kMetaDir;
  if (auto labels = files.read(dir + "/labels.json")) {
    auto j = parseJsonOr(*labels, path.string() + ": labels.json");
    if (j.is_object()) meta.labels.update(j);
  }
  if (meta.deffile.empty()) {
    if (auto def = files.read(dir + "/Singularity")) meta.deffile = *def;
  }
  if (auto run = files.read(dir + "/runscript")) meta.runscript = *run;
  for (const auto& f : files.list(dir + "/env")) {
    if (!f.ends_with(".sh")) continue;
    if (auto content = files.read(f)) meta.environment[std::filesystem::path(f).filename().string()] = *content;
  }
  return meta;
}

nlohmann::json ImageMetadata::toJson() const {
  nlohmann::json j;
  j["path"] = source.path.string();
  j["kind"] = toString(source.kind);
  if (source.kind != ImageKind::Directory) {
    j["rootfs"] = {{"offset", source.offset}, {"size", source.size}};
    if (!source.arch.empty()) j["rootfs"]["arch"] = source.arch;
  }
  j["labels"] = labels;
  j["deffile"] = deffile;
  j["runscript"] = runscript;
  j["environment"] = environment;
  if (source.kind == ImageKind::Sif) {
    nlohmann::json objs = nlohmann::json::array();
    for (const auto& o : objects) {
      objs.push_back({{"id", o.id}, {"type", o.type}, {"name", o.name}, {"offset", o.offset}, {"size", o.size}});
    }
    j["objects"] = objs;
  }
  if (!sifInspectMetadata.is_null()) j["inspectMetadata"] = sifInspectMetadata;
  return j;
}

}  // namespace ctr::image
