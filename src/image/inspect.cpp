// `ctr inspect`: an image's metadata, read without mounting it. SIF objects come from the
// descriptors; files of /.singularity.d inside a squashfs come from `unsquashfs -cat`
// (with -o for the partition's offset inside a SIF).
#include <fnmatch.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "ctr/install_paths.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/log.hpp"
#include "ctr/run_process.hpp"
#include "ctr/sif.hpp"

namespace ctr::image {

namespace {

constexpr const char* kMetaDir = ".singularity.d";
constexpr std::size_t kMaxMetaFile = 16u << 20;  // one metadata file (or listing) of an image

// Reads files of the image's metadata directories (/.singularity.d, /scif/apps) from
// wherever the image keeps them.
class MetaFiles {
 public:
  explicit MetaFiles(const ImageSource& source) : source_(source) {
    // A directory's paths are resolved inside it: its symlinks (.singularity.d/runscript ->
    // /etc/shadow) lead to its own files, never the host's.
    if (source_.kind == ImageKind::Directory) {
      tree_.emplace(source_.path);
      return;
    }
    // One listing tells which files exist, so that absent ones cost no process.
    auto r = unsquashfs({"-lls", "-d", "", source_.path.string(), std::string("/") + kMetaDir, "/scif/apps"});
    std::istringstream lines(r.capturedStdout);
    for (std::string line; std::getline(lines, line);) {
      if (auto entry = parseListing(line)) listed_.insert(*entry);
    }
  }

  // Paths (relative to the root) of the regular files (kind '-') or directories ('d')
  // directly in `dir`, sorted.
  [[nodiscard]] std::vector<std::string> list(const std::string& dir, char kind) const {
    std::vector<std::string> out;
    if (tree_) {
      for (const auto& name : tree_->entries(dir)) {
        const std::string rel = dir + "/" + name;
        if (kind == '-' ? tree_->isRegularFile(rel) : tree_->isDirectory(rel)) out.push_back(rel);
      }
    } else {
      for (const auto& [path, k] : listed_) {
        if (k == kind && path.starts_with(dir + "/") && path.find('/', dir.size() + 1) == std::string::npos) {
          out.push_back(path);
        }
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  [[nodiscard]] bool isDirectory(const std::string& rel) const {
    if (!tree_) return listed_.contains(rel) && listed_.at(rel) == 'd';
    return tree_->isDirectory(rel);
  }

  // Content of `rel`, or nullopt when the image has no such file.
  [[nodiscard]] std::optional<std::string> read(const std::string& rel) const {
    if (tree_) {
      if (!tree_->isRegularFile(rel)) return std::nullopt;
      try {
        return tree_->readFile(rel, kMaxMetaFile);
      } catch (const Error& e) {
        spdlog::warn("{}: ignored", e.what());
        return std::nullopt;
      }
    }
    auto entry = listed_.find(rel);
    if (entry == listed_.end() || entry->second != '-') return std::nullopt;
    auto r = unsquashfs({"-cat", source_.path.string(), "/" + rel});
    if (r.overflowed) spdlog::warn("the image's /{} is larger than {} bytes: ignored", rel, kMaxMetaFile);
    if (!r.ok() || r.overflowed) return std::nullopt;
    return r.capturedStdout;
  }

 private:
  std::optional<ImageTree> tree_;
  // One line of `unsquashfs -lls`: "drwxr-xr-x root/root 3 2024-01-01 08:22 /path" (a
  // link adds " -> target") -> {"path", 'd'}. The path is what follows the fifth field.
  static std::optional<std::pair<std::string, char>> parseListing(const std::string& line) {
    std::size_t pos = 0;
    for (int field = 0; field < 5 && pos != std::string::npos; ++field) {
      pos = line.find(' ', line.find_first_not_of(' ', pos));
    }
    if (pos == std::string::npos) return std::nullopt;
    pos = line.find_first_not_of(' ', pos);
    if (pos == std::string::npos || line[pos] != '/') return std::nullopt;
    auto path = line.substr(pos + 1);
    if (line[0] == 'l') path = path.substr(0, path.find(" -> "));
    return std::pair{path, line[0]};
  }

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
  std::map<std::string, char> listed_;  // path relative to the root -> '-', 'd', 'l', ...
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

// Apptainer's inspect shows a file without its trailing newlines.
std::string withoutTrailingNewlines(std::string text) {
  text.erase(text.find_last_not_of('\n') + 1);
  return text;
}

// A JSON object as Apptainer's string maps hold it; other values keep their JSON text.
std::map<std::string, std::string> stringMap(const nlohmann::json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [key, value] : j.items()) out[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return out;
}

// The environment scripts Apptainer's inspect shows: the %environment ones (9*-environment.sh)
// and, for the image, those converted from a Docker image (10-docker*.sh).
bool isShownEnvironment(const std::string& name, bool imageScope) {
  return fnmatch("9*-environment.sh", name.c_str(), 0) == 0 ||
         (imageScope && fnmatch("10-docker*.sh", name.c_str(), 0) == 0);
}

// The parts of one scope (`dir`: .singularity.d or scif/apps/NAME/scif) that `query` asks for.
ScopeAttributes readScope(const MetaFiles& files, const std::string& dir, const ApptainerQuery& query) {
  ScopeAttributes a;
  auto text = [&](bool wanted, const char* name) {
    auto content = wanted || query.all ? files.read(dir + "/" + name) : std::nullopt;
    return content ? withoutTrailingNewlines(*content) : std::string();
  };
  if (query.wantsLabels()) {
    if (auto labels = files.read(dir + "/labels.json")) a.labels = stringMap(parseJsonOr(*labels, "/" + dir + "/labels.json"));
  }
  a.runscript = text(query.runscript, "runscript");
  a.startscript = text(query.startscript, "startscript");
  a.test = text(query.test, "test");
  a.helpfile = text(query.helpfile, "runscript.help");
  if (query.environment || query.all) {
    for (const auto& f : files.list(dir + "/env", '-')) {
      if (!isShownEnvironment(std::filesystem::path(f).filename().string(), dir == kMetaDir)) continue;
      if (auto content = files.read(f)) a.environment["/" + f] = withoutTrailingNewlines(*content);
    }
  }
  return a;
}

// One scope of an inspect-metadata.json (recorded at build time), reduced to what `query` asks for.
ScopeAttributes recordedScope(const nlohmann::json& j, const ApptainerQuery& query) {
  ScopeAttributes a;
  if (!j.is_object()) return a;
  auto text = [&](bool wanted, const char* key) {
    auto it = j.find(key);
    return (wanted || query.all) && it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (query.wantsLabels()) a.labels = stringMap(j.value("labels", nlohmann::json::object()));
  a.runscript = text(query.runscript, "runscript");
  a.startscript = text(query.startscript, "startscript");
  a.test = text(query.test, "test");
  a.helpfile = text(query.helpfile, "helpfile");
  if (query.environment || query.all) a.environment = stringMap(j.value("environment", nlohmann::json::object()));
  return a;
}

nlohmann::ordered_json appJson(const ScopeAttributes& a) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  auto put = [&j](const char* key, const auto& value) {
    if (!value.empty()) j[key] = value;
  };
  put("environment", a.environment);
  put("labels", a.labels);
  put("runscript", a.runscript);
  put("startscript", a.startscript);
  put("test", a.test);
  put("helpfile", a.helpfile);
  return j;
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
  for (const auto& f : files.list(dir + "/env", '-')) {
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

ApptainerMetadata inspectLikeApptainer(const std::filesystem::path& path, const ApptainerQuery& query) {
  log::StepTimer timer("inspect " + path.string());
  // A SIF's objects first: Def.FILE wins over the file in the image, and a recorded
  // inspect-metadata.json replaces reading the image, as in Apptainer.
  ImageMetadata sif;
  sif.source = resolveImage(path);
  if (sif.source.kind == ImageKind::Sif) withContext(path.string(), [&] { readSifObjects(sif); });
  const auto& recorded = sif.sifInspectMetadata;
  const bool fromRecord = recorded.is_object() && recorded.contains("data") && recorded["data"].is_object() &&
                          recorded["data"].value("attributes", nlohmann::json()).is_object();
  const std::string app = query.all ? "" : query.app;

  ApptainerMetadata out;
  std::vector<std::string> apps;
  std::optional<MetaFiles> files;
  if (fromRecord) {
    const auto& attributes = recorded["data"]["attributes"];
    auto recordedApps = attributes.value("apps", nlohmann::json::object());
    if (!recordedApps.is_object()) recordedApps = nlohmann::json::object();
    for (const auto& [name, value] : recordedApps.items()) apps.push_back(name);
    if (app.empty()) out.image = recordedScope(attributes, query);
    for (const auto& name : apps) {
      if (query.all || name == app) out.apps[name] = recordedScope(recordedApps[name], query);
    }
    auto deffile = attributes.find("deffile");
    if (sif.deffile.empty() && deffile != attributes.end() && deffile->is_string()) sif.deffile = deffile->get<std::string>();
  } else {
    files.emplace(sif.source);
    for (const auto& dir : files->list("scif/apps", 'd')) {
      if (files->isDirectory(dir + "/scif")) apps.push_back(dir.substr(dir.rfind('/') + 1));
    }
    if (app.empty()) out.image = readScope(*files, kMetaDir, query);
    for (const auto& name : apps) {
      if (query.all || name == app) out.apps[name] = readScope(*files, "scif/apps/" + name + "/scif", query);
    }
  }
  if (!app.empty() && std::find(apps.begin(), apps.end(), app) == apps.end()) {
    throw Error(path.string() + ": no app '" + app + "' in the image (--list-apps lists its apps)");
  }
  if (query.listApps) {
    for (const auto& name : apps) out.apps.try_emplace(name);
  }
  if (query.deffile || query.all) {
    out.deffile = sif.deffile;
    if (out.deffile.empty() && files) {
      out.deffile = withoutTrailingNewlines(files->read(std::string(kMetaDir) + "/Singularity").value_or(""));
    }
  }
  return out;
}

nlohmann::ordered_json ApptainerMetadata::toJson() const {
  nlohmann::ordered_json attributes = nlohmann::ordered_json::object();
  if (!apps.empty()) {
    attributes["apps"] = nlohmann::ordered_json::object();
    for (const auto& [name, app] : apps) attributes["apps"][name] = appJson(app);
  }
  // The image's own parts, in the order Apptainer writes them.
  auto own = appJson(image);
  for (const char* key : {"environment", "labels", "runscript", "test", "helpfile"}) {
    if (own.contains(key)) attributes[key] = own[key];
  }
  if (!deffile.empty()) attributes["deffile"] = deffile;
  if (own.contains("startscript")) attributes["startscript"] = own["startscript"];
  nlohmann::ordered_json j;
  j["data"]["attributes"] = attributes;
  j["type"] = "container";
  return j;
}

}  // namespace ctr::image
