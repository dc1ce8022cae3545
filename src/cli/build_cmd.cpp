// `ctr build [options] OUT INPUT`: INPUT a definition file (an image built by its stages,
// ctr/build.hpp), a directory (packed as it is), a SIF/squashfs image (unpacked, repacked;
// with --sandbox unpacked into a directory) or an image to pull (docker://REF, docker-archive:PATH, oci-archive:PATH, oci:DIR).
#include <algorithm>
#include <memory>
#include <sstream>

#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "ctr/build.hpp"
#include "ctr/config.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/image.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/oci.hpp"
#include "ctr/strings.hpp"

namespace ctr::cli {

namespace {

struct BuildArgs {
  builder::DefinitionBuildOptions def;
  std::string input;
  std::vector<std::string> buildArgs;
  std::string buildArgFile;
  bool fakeroot = false;  // -f/--fakeroot: what every build does already
  std::vector<std::string> sections;  // --section (comma lists)
  std::string mksquashfsArgs;         // --mksquashfs-args: split at blanks
};

// "K=V" into the map; a value may hold '='.
void addBuildArg(std::map<std::string, std::string>& into, const std::string& item, const std::string& where) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(where + ": '" + item + "' is not KEY=VALUE").withStatus(1);
  into[item.substr(0, eq)] = item.substr(eq + 1);
}

// `build OUT SOURCE` with a registry or archive SOURCE is a pull into OUT, as Apptainer's
// build does it (and cwltool's dockerLoad: `build OUT docker-archive://PATH`).
int buildFromPullSource(BuildArgs& args) {
  // The raw options: --build-arg's are read into the definition's only after this.
  if (args.def.sandbox || args.def.explain || args.def.noTest || !args.buildArgs.empty() ||
      !args.buildArgFile.empty() || args.def.keepPrivilegedFiles || args.def.update || !args.sections.empty() ||
      !args.mksquashfsArgs.empty())
    throw Error("--sandbox, --keep-privileged-files, --explain, --notest, --build-arg(-file), --update, --section and "
                "--mksquashfs-args apply to "
                "definition files; " +
                args.input + " is an image to pull");
  image::oci::PullRequest pull;
  pull.output = args.def.output;
  pull.source = args.input;
  pull.force = args.def.force;
  pull.deterministic = args.def.deterministic;
  pull.options.limits = config::loadDefaultPolicy().pull;
  image::oci::pullToSif(pull);
  return 0;
}

// --build-arg-file, then --build-arg: a later value of a KEY wins.
void readBuildArgs(BuildArgs& args) {
  if (!args.buildArgFile.empty()) {
    // One KEY=VALUE a line; blank lines and '#' comments skipped (Apptainer's format).
    const std::string text = readCheckedFile(args.buildArgFile, 1u << 20, args.buildArgFile);
    std::size_t line = 0;
    for (std::string_view item : splitLines(text)) {
      ++line;
      if (item.empty() || item[0] == '#') continue;
      addBuildArg(args.def.buildArgs, std::string(item), args.buildArgFile + ":" + std::to_string(line));
    }
  }
  for (const auto& item : args.buildArgs) addBuildArg(args.def.buildArgs, item, "--build-arg");
}

void readSections(BuildArgs& args) {
  for (const auto& list : args.sections)
    for (auto item : splitList(list)) {
      const std::string name(trim(item));
      const auto& known = builder::buildSectionNames();
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw Error("--section " + name + ": expected setup, post, files, environment, test, labels, none or all")
            .withStatus(1);
      args.def.sections.push_back(name);
    }
}

// A SIF or squashfs file; anything else is taken for a definition file.
bool isImageFile(const std::string& input) {
  try {
    return image::resolveImage(input).kind != image::ImageKind::Directory;
  } catch (const Error&) {
    return false;  // not an image: a definition file
  }
}


// `build --sandbox DIR IMAGE` unpacks the image into a directory, `build --update --sandbox
// DIR IMAGE` over the existing DIR; false when the options ask for more than that.
bool unpackedToSandbox(const BuildArgs& args) {
  if (args.def.sandbox && !args.def.explain && !args.def.noTest && args.def.buildArgs.empty() &&
      !args.def.update && args.def.sections.empty()) {
    warnDroppedFromSandbox(image::unpackToSandbox(args.input, args.def.output, args.def.force, args.def.keepPrivilegedFiles));
    return true;
  }
  if (args.def.sandbox && args.def.update && !args.def.explain && !args.def.noTest &&
      args.def.buildArgs.empty() && args.def.sections.empty()) {
    warnDroppedFromSandbox(image::unpackOverSandbox(args.input, args.def.output, args.def.keepPrivilegedFiles));
    return true;
  }
  return false;
}

// A directory packed as it is, or an image unpacked and repacked, into a SIF.
void packIntoSif(const BuildArgs& args, bool isDirectory) {
  if (args.def.sandbox || args.def.explain || args.def.noTest || !args.def.buildArgs.empty() ||
      args.def.keepPrivilegedFiles || args.def.update || !args.def.sections.empty())
    throw Error("--explain, --notest, --build-arg, --update and --section apply to definition files (--update "
                "--sandbox also to images), --sandbox and --keep-privileged-files to them and to images; " +
                args.input +
                " is " + (isDirectory ? "a directory" : "an image"));
  image::PackOptions options;
  options.output = args.def.output;
  options.force = args.def.force;
  options.deterministic = args.def.deterministic;
  options.mksquashfsArgs = args.def.mksquashfsArgs;
  if (isDirectory) {
    options.rootfs = args.input;
    (void)image::packSif(options);
  } else {
    image::repackImage(args.input, options);
  }
}

int runBuild(BuildArgs& args) {
  if (image::oci::pullSource(args.input)) return buildFromPullSource(args);
  std::error_code ec;
  if (!std::filesystem::exists(args.input, ec)) throw Error(args.input + ": no such file or directory");
  readBuildArgs(args);
  std::istringstream extra(args.mksquashfsArgs);
  for (std::string word; extra >> word;) args.def.mksquashfsArgs.push_back(word);
  readSections(args);

  const bool isDirectory = std::filesystem::is_directory(args.input, ec);
  const bool isImage = !isDirectory && isImageFile(args.input);
  // What shapes a SIF's squashfs; of a definition build, --deterministic also dates the labels.
  if (args.def.sandbox && !args.def.mksquashfsArgs.empty())
    spdlog::warn("--mksquashfs-args shapes a SIF's squashfs: a --sandbox directory has none (ignored)");
  if (args.def.sandbox && isImage && args.def.deterministic)
    spdlog::warn("--deterministic shapes a SIF: unpacking an image into a --sandbox directory takes nothing from it "
                 "(ignored)");
  if (isImage && unpackedToSandbox(args)) return 0;
  if (isDirectory || isImage) {
    packIntoSif(args, isDirectory);
    return 0;
  }
  if (args.def.keepPrivilegedFiles && !args.def.sandbox)
    throw Error("--keep-privileged-files applies to --sandbox builds (a SIF is mounted nosuid, nodev)").withStatus(1);
  args.def.recipe = args.input;
  builder::buildDefinition(args.def);
  return 0;
}

}  // namespace

void warnDroppedFromSandbox(const image::PrivilegedFiles& dropped) {
  if (dropped.total() > 0)
    spdlog::warn("dropped from the sandbox: {} setuid/setgid bits, {} file capabilities, {} device nodes "
                 "(build --sandbox --keep-privileged-files keeps them)",
                 dropped.setidBits, dropped.capabilities, dropped.deviceNodes);
}

void registerBuild(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("build", "Build an image from a definition file, a directory or an image");
  auto args = std::make_shared<BuildArgs>();
  cmd->add_option("output", args->def.output, "SIF image to write (a directory with --sandbox)")->required();
  cmd->add_option("input", args->input,
                  "Definition file, root filesystem directory, SIF/squashfs image, or an image to pull: docker://REF, "
                  "docker-archive:PATH, oci-archive:PATH[:TAG], oci:DIR[:TAG], oras://REF")
      ->required();
  cmd->add_flag("--force,-F", args->def.force, "Overwrite an existing output");
  cmd->add_flag("--sandbox,-s", args->def.sandbox, "Write a writable directory image instead of a SIF (from a "
                "definition file or a SIF/squashfs image; ctr pull --sandbox takes an image to pull)");
  cmd->add_flag("--fakeroot,-f", args->fakeroot,
                "Accepted for Apptainer's scripts: every ctr build runs %post as root of a user namespace (with "
                "your /etc/subuid range when you have one)");
  cmd->add_flag("--keep-privileged-files", args->def.keepPrivilegedFiles,
                "With --sandbox: keep the image's setuid/setgid bits, file capabilities and device nodes");
  cmd->add_flag("--notest,-T", args->def.noTest, "Do not run the %test section after the build");
  cmd->add_flag("--deterministic", args->def.deterministic,
                "Reproducible output: nil UUID, fixed times (SOURCE_DATE_EPOCH or 0), reproducible squashfs (SIF "
                "output)");
  cmd->add_option("--build-arg", args->buildArgs, "KEY=VALUE for {{ KEY }} in a definition file (repeatable)");
  cmd->add_option("--build-arg-file", args->buildArgFile, "File of KEY=VALUE lines for a definition file");
  cmd->add_flag("--warn-unused-build-args", args->def.warnUnusedBuildArgs,
                "Warn about --build-arg values no stage uses, instead of failing");
  cmd->add_flag("--explain", args->def.explain, "Print each stage's bootstrap, %files and %post plans and exit (%pre, %setup, "
                "%appinstall and %test are not shown)");
  cmd->add_flag("--writable-tmpfs", args->def.writableTmpfs,
                "Let %test write, into a tmpfs that vanishes after it (without: the tree is read-only during %test)");
  cmd->add_flag("-u,--update", args->def.update,
                "With --sandbox: run the definition over the existing directory OUT (no %pre, no bootstrap)");
  cmd->add_option("--mksquashfs-args", args->mksquashfsArgs,
                  "More mksquashfs options for the image's squashfs, e.g. '-comp lz4' or '-b 1M' (split at blanks; SIF "
                  "output)");
  cmd->add_option("--section", args->sections,
                  "Only these sections (comma lists): setup, post, files, environment, test, labels, none, all");
  cmd->callback([&ctx, args] {
    ctx.action = [args] { return runBuild(*args); };
  });
}

}  // namespace ctr::cli
