// The metadata a definition build writes into the image: Apptainer's /.singularity.d and
// /scif layout (internal/pkg/build/metadata.go, internal/pkg/build/apps). Pure.
#include <ctime>

#include "ctr/build.hpp"
#include "ctr/configured.hpp"
#include "ctr/strings.hpp"

namespace ctr::builder {

namespace {

// A section's text as Apptainer keeps a script: the body without its trailing newlines.
std::string scriptText(const deffile::Section& section) {
  std::string text = section.body;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::string rfc3339(std::int64_t epoch) {
  std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::vector<MetadataFile> metadataFiles(const deffile::Definition& stage, std::string_view storedText) {
  std::vector<MetadataFile> files;
  const std::string meta = ".singularity.d/";
  if (stage.help.present()) files.push_back({meta + "runscript.help", scriptText(stage.help) + "\n", 0644});
  files.push_back({meta + "Singularity", std::string(storedText), 0644});
  if (stage.environment.present())
    files.push_back({meta + "env/90-environment.sh", "#!/bin/sh\n\n" + scriptText(stage.environment) + "\n", 0755, true});
  if (stage.startscript.present()) files.push_back({meta + "startscript", deffile::shebangScript(stage.startscript), 0755});
  if (stage.runscript.present()) files.push_back({meta + "runscript", deffile::shebangScript(stage.runscript), 0755});
  if (stage.test.present()) files.push_back({meta + "test", deffile::shebangScript(stage.test), 0755});

  // SCIF apps: /scif/apps/NAME/{bin,lib,scif/...}, the global 94-appsbase.sh that names
  // them, and each app's base environment.
  std::string appsBase;
  for (const auto& app : stage.apps) {
    const std::string& n = app.name;
    const std::string root = "scif/apps/" + n, scif = root + "/scif/";
    files.push_back({scif + "env/01-base.sh",
                     "#!/bin/sh\n\nSCIF_APPNAME=" + n + "\nSCIF_APPROOT=\"/scif/apps/" + n +
                         "\"\nSCIF_APPMETA=\"/scif/apps/" + n + "/scif\"\nSCIF_DATA=\"/scif/data\"\n"
                         "SCIF_APPDATA=\"/scif/data/" + n + "\"\nSCIF_APPINPUT=\"/scif/data/" + n +
                         "/input\"\nSCIF_APPOUTPUT=\"/scif/data/" + n + "/output\"\n"
                         "export SCIF_APPDATA SCIF_APPNAME SCIF_APPROOT SCIF_APPMETA SCIF_APPINPUT "
                         "SCIF_APPOUTPUT SCIF_DATA\n",
                     0755});
    appsBase += "## App Global Exports For: " + n + "\n\nSCIF_APPDATA_" + n + "=/scif/data/" + n +
                "\nSCIF_APPMETA_" + n + "=/scif/apps/" + n + "/scif\nSCIF_APPROOT_" + n + "=/scif/apps/" + n +
                "\nSCIF_APPBIN_" + n + "=/scif/apps/" + n + "/bin\nSCIF_APPLIB_" + n + "=/scif/apps/" + n +
                "/lib\n\nexport SCIF_APPDATA_" + n + " SCIF_APPROOT_" + n + " SCIF_APPMETA_" + n +
                " SCIF_APPBIN_" + n + " SCIF_APPLIB_" + n + "\n";
    if (app.env.present()) {
      files.push_back({scif + "env/90-environment.sh", app.env.body, 0755});
      appsBase += "export SCIF_APPENV_" + n + "=\"/scif/apps/" + n + "/scif/env/90-environment.sh\"\n";
    }
    if (!app.labelEntries.empty()) {
      nlohmann::json labels = nlohmann::json::object();
      for (const auto& l : app.labelEntries) labels[l.key] = l.value;
      files.push_back({scif + "labels.json", labels.dump(1, '\t'), 0644});
      appsBase += "export SCIF_APPLABELS_" + n + "=\"/scif/apps/" + n + "/scif/labels.json\"\n";
    }
    if (app.run.present()) {
      files.push_back({scif + "runscript", "#!/bin/sh\n\n" + app.run.body + "\n", 0755});
      appsBase += "export SCIF_APPRUN_" + n + "=\"/scif/apps/" + n + "/scif/runscript\"\n";
    }
    if (app.start.present()) {
      files.push_back({scif + "startscript", "#!/bin/sh\n\n" + app.start.body + "\n", 0755});
      appsBase += "export SCIF_APPSTART_" + n + "=\"/scif/apps/" + n + "/scif/startscript\"\n";
    }
    if (app.test.present()) files.push_back({scif + "test", "#!/bin/sh\n\n" + app.test.body + "\n", 0755});
    if (app.help.present()) files.push_back({scif + "runscript.help", app.help.body, 0644});
    appsBase += "\n";
  }
  if (!stage.apps.empty()) files.push_back({meta + "env/94-appsbase.sh", appsBase, 0755});
  return files;
}

std::string labelsJson(const nlohmann::json& existing, std::string_view buildLabels,
                       const deffile::Definition& stage, std::int64_t epoch, std::string_view arch) {
  // std::map keeps the keys sorted, as Go's encoding/json writes a map.
  std::map<std::string, std::string> labels;
  if (existing.is_object())
    for (const auto& [key, value] : existing.items())
      labels[key] = value.is_string() ? value.get<std::string>() : value.dump();
  // $APPTAINER_LABELS: "KEY VALUE" lines written by %post.
  for (std::string_view text : splitLines(buildLabels)) {
    std::string line(text);
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    line = line.substr(first);
    const auto gap = line.find_first_of(" \t");
    if (gap == std::string::npos) continue;
    const auto value = line.find_first_not_of(" \t", gap);
    labels[line.substr(0, gap)] = value == std::string::npos ? "" : line.substr(value);
  }
  labels["org.label-schema.schema-version"] = "1.0";
  labels["org.opencontainers.image.created"] = rfc3339(epoch);
  labels["org.label-schema.build-date"] = rfc3339(epoch);
  labels["org.label-schema.usage.ctr.version"] = ctr::configured::kVersion;
  if (stage.help.present()) {
    labels["org.label-schema.usage"] = "/.singularity.d/runscript.help";
    labels["org.label-schema.usage.apptainer.runscript.help"] = "/.singularity.d/runscript.help";
  }
  for (const auto& field : stage.header.fields)
    labels["org.label-schema.usage.singularity.deffile." + field.keyword] = field.value;
  labels["org.opencontainers.image.architecture"] = std::string(arch);
  labels["org.label-schema.build-arch"] = std::string(arch);
  for (const auto& l : stage.labels) labels[l.key] = l.value;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : labels) j[key] = value;
  return j.dump(1, '\t');
}

}  // namespace ctr::builder
