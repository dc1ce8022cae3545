// `ctr inspect IMAGE`: Apptainer's flags and output (labels by default, -r, -d, -e, ...,
// --json in Apptainer's shape), and ctr's own overview of an image (--ctr-summary,
// --ctr-json): labels, definition file, environment, runscript, partitions.
#include <algorithm>
#include <memory>

#include "commands.hpp"
#include "ctr/image.hpp"
#include "ctr/standard_streams.hpp"

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

void printSummary(const image::ImageMetadata& m) {
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

// Apptainer's text layout: app names, definition file, runscript, startscript, test, help,
// environment files ("=== PATH ===") and labels ("KEY: VALUE"), each part only when it has
// content. With --app, the app's parts stand where the image's would.
void printApptainerText(const image::ApptainerMetadata& m, const std::string& app, bool listApps) {
  const auto found = m.apps.find(app);
  const auto& own = app.empty() || found == m.apps.end() ? m.image : found->second;
  if (listApps) {
    for (const auto& [name, attributes] : m.apps) std::cout << name << '\n';
  }
  for (const auto* text : {&m.deffile, &own.runscript, &own.startscript, &own.test, &own.helpfile}) {
    if (!text->empty()) std::cout << *text << '\n';
  }
  for (const auto& [path, content] : own.environment) std::cout << "=== " << path << " ===\n" << content << "\n\n";
  for (const auto& [key, value] : own.labels) std::cout << key << ": " << value << '\n';
}

// Go's encoder, which Apptainer's --json uses, escapes <, > and & (and U+2028, U+2029)
// even inside strings; doing the same keeps the output byte for byte what scripts compare.
std::string goStyleJson(const nlohmann::ordered_json& j) {
  const std::string text = j.dump(1, '\t', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    switch (text[i]) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (text.compare(i, 3, "\xe2\x80\xa8") == 0 || text.compare(i, 3, "\xe2\x80\xa9") == 0) {
          out += text[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
          i += 2;
        } else {
          out += text[i];
        }
    }
  }
  return out;
}

}  // namespace

void registerInspect(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("inspect", "Show an image's labels, scripts, definition file and environment");
  auto path = std::make_shared<std::string>();
  auto query = std::make_shared<image::ApptainerQuery>();
  auto json = std::make_shared<bool>(false);
  auto summary = std::make_shared<bool>(false);
  auto ctrJson = std::make_shared<bool>(false);
  cmd->add_option("image", *path, "SIF, squashfs image or directory, or docker://REF or oras://REF (through the image cache)")->required();
  std::vector<CLI::Option*> apptainerFlags{
      cmd->add_flag("-l,--labels", query->labels, "Show the labels (the default)"),
      cmd->add_flag("-d,--deffile", query->deffile, "Show the definition file the image was built from"),
      cmd->add_flag("-r,--runscript", query->runscript, "Show the runscript"),
      cmd->add_flag("-s,--startscript", query->startscript, "Show the startscript"),
      cmd->add_flag("-t,--test", query->test, "Show the test script"),
      cmd->add_flag("-e,--environment", query->environment, "Show the environment scripts"),
      cmd->add_flag("-H,--helpfile", query->helpfile, "Show the runscript's help"),
      cmd->add_flag("--list-apps", query->listApps, "List the SCIF apps"),
      cmd->add_flag("--all", query->all, "Show everything, as JSON (--app is ignored)"),
      cmd->add_option("--app", query->app, "Show the parts of this SCIF app"),
      cmd->add_flag("-j,--json", *json, "Print Apptainer's JSON instead of text"),
  };
  auto* summaryFlag = cmd->add_flag("--ctr-summary", *summary,
                                    "ctr's overview: labels, definition file, environment, runscript, SIF objects");
  auto* ctrJsonFlag = cmd->add_flag("--ctr-json", *ctrJson, "ctr's overview as one JSON object");
  cmd->callback([&ctx, path, query, json, summary, ctrJson, apptainerFlags, summaryFlag, ctrJsonFlag] {
    // ctr's overview shows everything at once: a selection flag beside it is a mistake.
    const bool selects = std::any_of(apptainerFlags.begin(), apptainerFlags.end(),
                                     [](const CLI::Option* flag) { return flag->count() > 0; });
    if ((*summary || *ctrJson) && (selects || (*summary && *ctrJson))) {
      throw CLI::ValidationError((*summary ? summaryFlag : ctrJsonFlag)->get_name() +
                                 " takes no other flag of inspect (they select parts of Apptainer's output)");
    }
    ctx.action = [path, query, json, summary, ctrJson] {
      *path = imagePathArgument(*path);
      if (*summary || *ctrJson) {
        auto meta = image::inspectImage(*path);
        if (*ctrJson) {
          std::cout << meta.toJson().dump(2) << '\n';
        } else {
          printSummary(meta);
        }
        return 0;
      }
      auto meta = image::inspectLikeApptainer(*path, *query);
      if (*json || query->all) {
        std::cout << goStyleJson(meta.toJson()) << '\n';
      } else {
        printApptainerText(meta, query->app, query->listApps);
      }
      return 0;
    };
  });
}

// `run-help [--app NAME] IMAGE`: the image's %help (or the app's), as Apptainer prints it.
void registerRunHelp(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("run-help", "Show the help of an image (its %help), or of one of its SCIF apps");
  auto path = std::make_shared<std::string>();
  auto query = std::make_shared<image::ApptainerQuery>();
  cmd->add_option("image", *path, "SIF, squashfs image or directory, or docker://REF or oras://REF (through the image cache)")
      ->required();
  cmd->add_option("--app", query->app, "Show the help of this SCIF app");
  cmd->callback([&ctx, path, query] {
    ctx.action = [path, query] {
      *path = imagePathArgument(*path);
      query->helpfile = true;
      const auto meta = image::inspectLikeApptainer(*path, *query);
      const auto found = meta.apps.find(query->app);
      const auto& own = query->app.empty() || found == meta.apps.end() ? meta.image : found->second;
      std::cout << (own.helpfile.empty() ? std::string("No help sections were defined for this image") : own.helpfile)
                << '\n';
      return 0;
    };
  });
}

}  // namespace ctr::cli
