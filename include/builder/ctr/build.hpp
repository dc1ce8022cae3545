// `ctr build OUT RECIPE.def`: an image from an Apptainer definition file (issue 9). The
// stages run in order (bootstrap agent, %files from, %setup, %files, %post, metadata,
// %test); the last one is packed into a SIF (or kept as a --sandbox directory). See
// docs/architecture.md, "Builds", and docs/user-guide-images.md.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctr/config.hpp"
#include "ctr/deffile.hpp"
#include "ctr/image_tree.hpp"

namespace ctr::builder {

struct DefinitionBuildOptions {
  std::filesystem::path output;  // the SIF, or the directory with `sandbox`
  std::filesystem::path recipe;  // the definition file
  bool force = false;
  bool sandbox = false;
  bool noTest = false;
  bool deterministic = false;
  bool explain = false;  // print each step's plan, run nothing
  // A --sandbox keeps the image's setuid/setgid bits, file capabilities and device nodes
  // (dropped by default: the directory stays on the host, where they would work).
  bool keepPrivilegedFiles = false;
  bool warnUnusedBuildArgs = false;
  std::map<std::string, std::string> buildArgs;  // --build-arg and --build-arg-file
  std::filesystem::path cacheDir;                // empty: $CTR_CACHE_DIR or ~/.cache/ctr
  // --update: the definition runs over the existing sandbox directory `output` (no header:
  // no %pre, no bootstrap), in place (Apptainer's `build --update --sandbox`).
  bool update = false;
  // --writable-tmpfs: %test may write, into a tmpfs that vanishes (else its root is read-only).
  bool writableTmpfs = false;
  std::vector<std::string> mksquashfsArgs;  // --mksquashfs-args: more mksquashfs options
  // --section: only these sections run (buildSectionNames(); empty = all). The metadata
  // other than %environment and %labels is written whatever the list.
  std::vector<std::string> sections;
};

// The names --section takes, in Apptainer's words: setup, post, files, environment, test,
// labels, none, all.
[[nodiscard]] const std::vector<std::string>& buildSectionNames();

// Builds the image; nothing but OUT and OUT.build.log remains, and OUT only on success.
// Throws ctr::Error naming the log (with the exit status of a failed section and the last
// lines of its output).
void buildDefinition(const DefinitionBuildOptions& options);

// One file the metadata step writes into a stage's rootfs (paths relative to it).
struct MetadataFile {
  std::string path;
  std::string content;
  unsigned mode = 0644;
  bool appendIfPresent = false;  // %environment onto an image's existing 90-environment.sh
  friend bool operator==(const MetadataFile&, const MetadataFile&) = default;
};

// The /.singularity.d and /scif files Apptainer writes for a definition (internal/pkg/build/
// metadata.go and its apps plugin): help, definition, environment, start, run and test
// scripts, and per app its scif/ files. Labels are separate (labelsJson): they also
// depend on the image and on what %post wrote. Pure.
[[nodiscard]] std::vector<MetadataFile> metadataFiles(const deffile::Definition& stage,
                                                      std::string_view storedText);

// The labels Apptainer stores in labels.json and the SIF's JSON.Generic object: the image's
// existing labels, those %post appended to $APPTAINER_LABELS (`buildLabels`, "KEY VALUE"
// lines), the build's own (schema, build date from `epoch`, architecture, deffile header),
// then the definition's %labels. Keys sorted, tab-indented as Go's json.MarshalIndent.
[[nodiscard]] std::string labelsJson(const nlohmann::json& existing, std::string_view buildLabels,
                                     const deffile::Definition& stage, std::int64_t epoch,
                                     std::string_view arch);

// %files and %appfiles sources as glob patterns, as Apptainer expands them: `*`, `?` and
// `[...]` within a path component, `**` (a whole component) for any depth of directories,
// a leading `.` only matched by a pattern that starts with one, `\` quoting the next
// character. `base` is where the pattern's paths lie on this machine (the current
// directory for the host's relative sources, "/" for its absolute ones, a stage's rootfs
// for `%files from`); the matches are written as the pattern is (relative or absolute),
// sorted, directories with a trailing '/' when the pattern ends in one. A source without
// glob characters is returned as it is (whether it exists is the copy's check). Throws
// ctr::Error "'PATTERN' matches nothing" when a pattern matches no path.
[[nodiscard]] bool isFilesPattern(std::string_view source);
[[nodiscard]] std::vector<std::string> expandFilesSource(std::string_view pattern,
                                                         const std::filesystem::path& base);
// expandFilesSource (ctr/build.hpp) for `%files from STAGE`: the pattern's paths looked up
// inside the earlier stage's image, never through its symlinks to the host.
[[nodiscard]] std::vector<std::string> expandFilesSourceInImage(std::string_view pattern, const image::ImageTree& tree);


// Bootstrap agents, keyed by the `Bootstrap:` value. An agent fills `rootfs` (an empty
// directory) from the stage's header.
struct BootstrapContext {
  const deffile::Definition* stage = nullptr;
  std::filesystem::path rootfs;
  std::filesystem::path recipeDir;  // relative `From:` paths start here
  std::filesystem::path tempDir;    // the build's private temporary directory
  std::filesystem::path cacheDir;   // bases worth keeping between builds: the image cache's root
  config::PullPolicy pull;          // ctr.conf's pull limits (read once per build)
  // Runs a program as root of the build's user namespace (same ids as %post), its output
  // into the build log; returns its exit status.
  std::function<int(const std::vector<std::string>&)> runAsRoot;
  // Runs a program as the caller, output into the build log; returns its exit status.
  std::function<int(const std::vector<std::string>&)> runAsUser;
  std::function<void(const std::string&)> note;  // a line on the terminal and in the log
};
using BootstrapAgent = std::function<void(const BootstrapContext&)>;

void registerBootstrapAgent(const std::string& name, BootstrapAgent agent);
// nullptr when no agent has that name.
[[nodiscard]] const BootstrapAgent* findBootstrapAgent(std::string_view name);
// The registered names, sorted (for the error that lists them).
[[nodiscard]] std::vector<std::string> bootstrapAgentNames();

// The mirror of the host's apt sources: the first deb URI of /etc/apt/sources.list and of
// the deb822 files in /etc/apt/sources.list.d/*.sources; "" when there is none.
[[nodiscard]] std::string hostAptMirror(std::string_view sourcesList,
                                        const std::vector<std::string>& deb822Sources);

}  // namespace ctr::builder
