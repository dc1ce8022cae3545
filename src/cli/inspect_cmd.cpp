// `ctr inspect IMAGE [--json]`: labels, definition file, environment, runscript, partitions.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "ctr/image.hpp"

namespace ctr::cli {

namespace {

void printSection(const std::string& title, const std::string& body) {
  std::cout << "== " << title << '\n';
  if (body.empty()) {
    std::cout << "(none)\n";
  } else {
    std::cout << body;
    if (body.back() != '\n') std::cout << '\n';
  }
}

void printText(const image::ImageMetadata& m) {
  std::cout << "Image: " << m.source.path.string() << " (" << image::toString(m.source.kind) << ")\n";
  if (m.source.kind != image::ImageKind::Directory) {
    std::cout << "Root filesystem: squashfs at offset " << m.source.offset << ", " << m.source.size
              << " bytes";
    if (!m.source.arch.empty()) std::cout << ", " << m.source.arch;
    std::cout << '\n';
  }
  std::string labels;
  for (const auto& [key, value] : m.labels.items()) {
    labels += key + ": " + (value.is_string() ? value.get<std::string>() : value.dump()) + '\n';
  }
  printSection("Labels", labels);
  printSection("Definition file", m.deffile);
  std::string env;
  for (const auto& [name, content] : m.environment) {
    env += "# " + name + '\n' + content;
    if (!content.empty() && content.back() != '\n') env += '\n';
  }
  printSection("Environment", env);
  printSection("Runscript", m.runscript);
  if (m.source.kind == image::ImageKind::Sif) {
    std::string objs;
    for (const auto& o : m.objects) {
      objs += std::to_string(o.id) + "  " + o.type + "  " + std::to_string(o.offset) + "-" +
              std::to_string(o.offset + o.size) + (o.name.empty() ? "" : "  " + o.name) + '\n';
    }
    printSection("SIF objects", objs);
  }
}

}  // namespace

void registerInspect(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("inspect", "Show an image's labels, definition file, environment and partitions");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("image", *path, "SIF, squashfs image or directory")->required();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([&ctx, path, json] {
    ctx.action = [path, json] {
      auto meta = image::inspectImage(*path);
      if (*json) {
        std::cout << meta.toJson().dump(2) << '\n';
      } else {
        printText(meta);
      }
      return 0;
    };
  });
}

}  // namespace ctr::cli
