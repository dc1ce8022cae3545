// The pure parts of OCI image handling: references, image configs, platform choice,
// digests, and the /.singularity.d files Apptainer derives from an image config.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "ctr/digest.hpp"
#include "ctr/error.hpp"
#include "ctr/fd.hpp"
#include "ctr/oci.hpp"
#include "ctr/image_tree.hpp"
#include "ctr/sif.hpp"
#include "oci_libs.hpp"

namespace ctr::image::oci {

nlohmann::json ImageConfig::toJson() const {
  return {{"env", env},
          {"entrypoint", entrypoint},
          {"cmd", cmd},
          {"workingDir", workingDir},
          {"labels", labels},
          {"architecture", architecture},
          {"os", os}};
}

std::string Reference::shortName() const {
  return digest.empty() ? repository + ":" + tag : repository + "@" + digest;
}

std::string defaultPullName(std::string_view source) {
  // A transport as Apptainer tells one: "T://..." for any T, or a transport it knows
  // followed by ':' ("ubuntu:18.04.img" is a file name, not a transport).
  auto colon = source.find(':');
  if (colon == std::string_view::npos || colon == 0) return "";
  std::string_view transport = source.substr(0, colon), ref = source.substr(colon + 1);
  static constexpr std::string_view kKnown[] = {"library", "shub",  "docker", "docker-archive", "docker-daemon", "oci",
                                                "oci-archive", "http", "https", "oras", "ipfs"};
  if (!ref.starts_with("//") && std::find(std::begin(kKnown), std::end(kKnown), transport) == std::end(kKnown))
    return "";
  while (ref.starts_with('/')) ref.remove_prefix(1);
  if (auto slash = ref.rfind('/'); slash != std::string_view::npos) ref = ref.substr(slash + 1);
  // As Apptainer: the part before the first ':' is the name, up to the next ':' or ','
  // the tag (so NAME@sha256:HEX gives "NAME@sha256_HEX.sif", as there).
  std::string_view name = ref, tag = "latest";
  if (auto c = ref.find(':'); c != std::string_view::npos) {
    name = ref.substr(0, c);
    tag = ref.substr(c + 1);
    tag = tag.substr(0, std::min(tag.find(':'), tag.find(',')));
  }
  if (name.empty()) return "";
  return std::string(name) + "_" + std::string(tag) + ".sif";
}

std::filesystem::path pullOutputPath(const std::vector<std::string>& args, const std::string& name,
                                     const std::string& dir) {
  if (args.empty() || args.size() > 2) throw Error("pull: expected [OUTPUT] SOURCE").withStatus(1);
  std::string out = name;
  if (out.empty() && args.size() == 2) out = args[0];
  if (out.empty()) {
    out = defaultPullName(args.back());
    if (out.empty())
      throw Error("pull: '" + args.back() + "' names no transport (docker://, docker-archive:, oci-archive:, oci:), " +
                  "so there is no file name to make from it: give the output file or --name")
          .withStatus(1);
  }
  return dir.empty() ? std::filesystem::path(out) : std::filesystem::path(dir) / std::filesystem::path(out).relative_path();
}

Reference parseReference(std::string_view text) {
  if (text.starts_with("docker://")) text.remove_prefix(9);
  if (text.empty()) throw Error("empty image reference");
  Reference ref;
  std::string rest(text);
  if (auto at = rest.find('@'); at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest.resize(at);
    checkDigestSyntax(ref.digest, "reference " + std::string(text));
  }
  // A tag is what follows the last ':' after the last '/' (a ':' before it is a port).
  auto slash = rest.rfind('/');
  auto colon = rest.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    if (ref.digest.empty()) ref.tag = rest.substr(colon + 1);
    rest.resize(colon);
  }
  if (ref.digest.empty() && ref.tag.empty()) ref.tag = "latest";
  // Docker's rule: the first component names a registry if it has a '.' or ':' or is
  // "localhost"; otherwise the name is on Docker Hub, under library/ when it has no '/'.
  slash = rest.find('/');
  std::string first = rest.substr(0, slash);
  if (slash != std::string::npos &&
      (first.find_first_of(".:") != std::string::npos || first == "localhost")) {
    ref.registry = first;
    ref.repository = rest.substr(slash + 1);
    // Docker Hub by its other names: its registry host, and library/ for an official image.
    if (first == "docker.io" || first == "index.docker.io") {
      ref.registry = "registry-1.docker.io";
      if (ref.repository.find('/') == std::string::npos) ref.repository = "library/" + ref.repository;
    }
  } else {
    ref.registry = "registry-1.docker.io";
    ref.repository = slash == std::string::npos ? "library/" + rest : rest;
  }
  static const std::regex kName("[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*");
  if (!std::regex_match(ref.repository, kName))
    throw Error("invalid image name '" + ref.repository + "' in " + std::string(text));
  static const std::regex kTag("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
  if (!ref.tag.empty() && !std::regex_match(ref.tag, kTag))
    throw Error("invalid tag '" + ref.tag + "' in " + std::string(text));
  return ref;
}

namespace {

std::vector<std::string> stringList(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (auto it = j.find(key); it != j.end() && it->is_array()) {
    for (const auto& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string stringMember(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

}  // namespace

ImageConfig parseImageConfig(const nlohmann::json& blob) {
  if (!blob.is_object()) throw Error("image config is not a JSON object");
  ImageConfig c;
  c.architecture = stringMember(blob, "architecture");
  c.os = stringMember(blob, "os");
  auto it = blob.find("config");
  if (it == blob.end() || !it->is_object()) return c;  // a config may have no "config"
  const auto& cfg = *it;
  c.env = stringList(cfg, "Env");
  c.entrypoint = stringList(cfg, "Entrypoint");
  c.cmd = stringList(cfg, "Cmd");
  c.workingDir = stringMember(cfg, "WorkingDir");
  if (auto l = cfg.find("Labels"); l != cfg.end() && l->is_object()) {
    for (const auto& [k, v] : l->items())
      c.labels[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  return c;
}

Platform hostPlatform() {
  Platform p{"linux", sif::hostArch(), ""};
  if (p.architecture == "arm64") p.variant = "v8";
  return p;
}

std::size_t choosePlatform(const nlohmann::json& index, const Platform& want) {
  auto manifests = index.find("manifests");
  if (manifests == index.end() || !manifests->is_array() || manifests->empty())
    throw Error("the image index lists no manifests");
  std::optional<std::size_t> loose;
  std::string have;
  for (std::size_t i = 0; i < manifests->size(); ++i) {
    const auto& m = (*manifests)[i];
    auto p = m.find("platform");
    if (p == m.end() || !p->is_object()) continue;
    Platform got{stringMember(*p, "os"), stringMember(*p, "architecture"), stringMember(*p, "variant")};
    have += (have.empty() ? "" : ", ") + got.os + "/" + got.architecture +
            (got.variant.empty() ? "" : "/" + got.variant);
    if (got.os != want.os || got.architecture != want.architecture) continue;
    if (got.variant == want.variant) return i;
    // An index that gives no variant, or a host that asks for none, matches any.
    if ((got.variant.empty() || want.variant.empty()) && !loose) loose = i;
  }
  if (loose) return *loose;
  throw Error("no image for " + want.os + "/" + want.architecture +
              (want.variant.empty() ? "" : "/" + want.variant) + " in the index (it has: " +
              (have.empty() ? "no platforms" : have) + ")");
}

void checkDigestSyntax(const std::string& digest, const std::string& what) {
  if (!isSha256Digest(digest)) throw Error(what + ": unsupported or malformed digest '" + digest + "' (expected sha256:<64 hex digits>)");
}

// /.singularity.d

namespace {

// Inside double quotes: backslash, double quote, backtick and dollar lose their meaning.
std::string escapeDoubleQuoted(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"' || c == '`' || c == '$') out += '\\';
    out += c;
  }
  return out;
}

// For text that goes between single quotes: ' becomes '"'"'.
std::string escapeSingleQuoted(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\'') out += "'\"'\"'";
    else out += c;
  }
  return out;
}

// "a" "b c": each argument double-quoted, for the runscript's eval.
std::string quotedWords(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "\"" : " \"") + escapeDoubleQuoted(a) + "\"";
  return out;
}

// "set -- 'x' "$@"" lines that put `args` in front of the positional parameters.
std::string prependLines(const std::vector<std::string>& args, std::string_view indent) {
  std::string out;
  for (auto it = args.rbegin(); it != args.rend(); ++it)
    out += std::string(indent) + "set -- '" + escapeSingleQuoted(*it) + "' \"$@\"\n";
  return out;
}

bool validVariableName(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// The base files every Apptainer image carries. ctr reads the env scripts and the
// runscript itself; the actions are there for Apptainer, which runs the same image.
constexpr std::string_view kEnvBase = "#!/bin/sh\n# base environment of the image (ctr pull)\n";
constexpr std::string_view kEnvEnvironment = "#!/bin/sh\n# Custom environment shell code should follow\n\n";
constexpr std::string_view kEnvApps = R"(#!/bin/sh
# the app chosen with --app: its bin and lib first, its own environment
if [ -n "${SINGULARITY_APPNAME:-}" ] && [ -d "/scif/apps/$SINGULARITY_APPNAME" ]; then
    SCIF_APPROOT="/scif/apps/$SINGULARITY_APPNAME"
    PATH="$SCIF_APPROOT/bin:$PATH"
    LD_LIBRARY_PATH="$SCIF_APPROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export SCIF_APPROOT PATH LD_LIBRARY_PATH
    if [ -f "$SCIF_APPROOT/scif/env/90-environment.sh" ]; then
        . "$SCIF_APPROOT/scif/env/90-environment.sh"
    fi
fi
)";
constexpr std::string_view kEnvBase99 = R"(#!/bin/sh
# host libraries bound into /.singularity.d/libs come last in the library path
if [ -z "${LD_LIBRARY_PATH:-}" ]; then
    LD_LIBRARY_PATH=/.singularity.d/libs
else
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"
fi
PS1="${PS1:-Apptainer> }"
export LD_LIBRARY_PATH PS1
)";
constexpr std::string_view kEnvRuntimeVars = R"(#!/bin/sh
# PATH changes asked for at run time (--env PREPEND_PATH=..., APPEND_PATH=..., PATH=...)
if [ -n "${SING_USER_DEFINED_PREPEND_PATH:-}" ]; then
    PATH="$SING_USER_DEFINED_PREPEND_PATH:$PATH"
fi
if [ -n "${SING_USER_DEFINED_APPEND_PATH:-}" ]; then
    PATH="$PATH:$SING_USER_DEFINED_APPEND_PATH"
fi
if [ -n "${SING_USER_DEFINED_PATH:-}" ]; then
    PATH="$SING_USER_DEFINED_PATH"
fi
unset SING_USER_DEFINED_PREPEND_PATH SING_USER_DEFINED_APPEND_PATH SING_USER_DEFINED_PATH
export PATH
)";
constexpr std::string_view kSourceEnv = R"(for script in /.singularity.d/env/*.sh; do
    if [ -f "$script" ]; then
        . "$script"
    fi
done
)";

std::string action(std::string_view body) {
  return "#!/bin/sh\n" + std::string(kSourceEnv) + std::string(body);
}

std::string runscript(const ImageConfig& c) {
  std::string s = "#!/bin/sh\n";
  s += "OCI_ENTRYPOINT='" + escapeSingleQuoted(quotedWords(c.entrypoint)) + "'\n";
  s += "OCI_CMD='" + escapeSingleQuoted(quotedWords(c.cmd)) + "'\n";
  // SINGULARITY_NO_EVAL: arguments passed as they are, as an OCI runtime would.
  s += "if [ -n \"${SINGULARITY_NO_EVAL:-}\" ]; then\n";
  if (!c.cmd.empty()) s += "    if [ $# -eq 0 ]; then\n" + prependLines(c.cmd, "        ") + "    fi\n";
  s += prependLines(c.entrypoint, "    ");
  s += "    exec \"$@\"\nfi\n";
  // Otherwise, as Apptainer: ENTRYPOINT, then the arguments or else CMD, evaluated by the
  // shell (so "$HOME" in a CMD expands).
  s += R"(CMDLINE_ARGS=""
for arg in "$@"; do
    CMDLINE_ARGS="${CMDLINE_ARGS} \"$arg\""
done
if [ $# -gt 0 ]; then
    if [ -n "$OCI_ENTRYPOINT" ]; then
        SINGULARITY_OCI_RUN="${OCI_ENTRYPOINT} ${CMDLINE_ARGS}"
    else
        SINGULARITY_OCI_RUN="${CMDLINE_ARGS}"
    fi
else
    SINGULARITY_OCI_RUN="${OCI_ENTRYPOINT} ${OCI_CMD}"
fi
eval "set ${SINGULARITY_OCI_RUN}"
exec "$@"
)";
  return s;
}

std::string environmentScript(const ImageConfig& c) {
  std::string s = "#!/bin/sh\n";
  for (const auto& e : c.env) {
    auto eq = e.find('=');
    std::string name = e.substr(0, eq);
    if (!validVariableName(name)) continue;  // Apptainer skips these too
    if (eq == std::string::npos) {
      s += "export " + name + "=\"${" + name + ":-}\"\n";
    } else if (name == "PATH") {
      s += "export PATH=\"" + escapeDoubleQuoted(e.substr(eq + 1)) + "\"\n";
    } else {
      // The image's value is a default: a value the user passes in wins.
      s += "export " + name + "=\"${" + name + ":-\"" + escapeDoubleQuoted(e.substr(eq + 1)) + "\"}\"\n";
    }
  }
  return s;
}

}  // namespace

// Every path is resolved inside the image (ImageTree): a layer's symlink (etc -> /etc,
// .singularity.d -> /root) leads to the image's own directory, never the host's, and a
// symlink in a file's place is replaced, not written through.
void writeApptainerBaseFiles(const ImageTree& tree) {
  for (const char* dir : {"/.singularity.d/env", "/.singularity.d/actions", "/.singularity.d/libs"}) (void)tree.directory(dir, true);
  // Mount points the runtime binds onto.
  for (const char* dir : {"/etc", "/proc", "/sys", "/dev", "/tmp", "/home", "/root", "/var/tmp"})
    if (!tree.exists(dir)) (void)tree.directory(dir, true);
  for (const char* file : {"/etc/hosts", "/etc/resolv.conf"})
    if (tree.isDirectory("/etc")) tree.writeIfMissing(file, "", 0644);
  const std::string meta = "/.singularity.d/";
  tree.writeIfMissing(meta + "env/01-base.sh", kEnvBase);
  tree.writeIfMissing(meta + "env/90-environment.sh", kEnvEnvironment);
  tree.writeIfMissing(meta + "env/95-apps.sh", kEnvApps);
  tree.writeIfMissing(meta + "env/99-base.sh", kEnvBase99);
  tree.writeIfMissing(meta + "env/99-runtimevars.sh", kEnvRuntimeVars);
  tree.writeIfMissing(meta + "actions/exec", action("exec \"$@\"\n"));
  tree.writeIfMissing(meta + "actions/run", action(
      "if [ -x /.singularity.d/runscript ]; then\n    exec /.singularity.d/runscript \"$@\"\nfi\n"
      "echo \"There is no runscript in the container\" >&2\nexit 1\n"));
  tree.writeIfMissing(meta + "actions/shell", action("exec /bin/sh \"$@\"\n"));
  tree.writeIfMissing(meta + "actions/start", action(
      "if [ -x /.singularity.d/startscript ]; then\n    exec /.singularity.d/startscript \"$@\"\nfi\n"));
  tree.writeIfMissing(meta + "actions/test", action(
      "if [ -x /.singularity.d/test ]; then\n    exec /.singularity.d/test \"$@\"\nfi\n"
      "echo \"No test script found in the container, exiting\" >&2\nexit 0\n"));
  tree.writeIfMissing(meta + "startscript", "#!/bin/sh\n");
  tree.linkIfMissing("/singularity", ".singularity.d/runscript");
  tree.linkIfMissing("/environment", ".singularity.d/env/90-environment.sh");
  for (const char* a : {"exec", "run", "shell", "test"})
    tree.linkIfMissing(std::string("/.") + a, std::string(".singularity.d/actions/") + a);
}

void writeApptainerBaseFiles(const std::filesystem::path& rootfs) { writeApptainerBaseFiles(ImageTree(rootfs)); }

void writeApptainerMetadata(const ImageConfig& config, const std::filesystem::path& rootfs) {
  const ImageTree tree(rootfs);
  writeApptainerBaseFiles(tree);
  // What the image config says replaces what a layer may have brought.
  tree.writeFile("/.singularity.d/env/10-docker2singularity.sh", environmentScript(config), 0755);
  tree.writeFile("/.singularity.d/runscript", runscript(config), 0755);
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : config.labels) labels[k] = v;
  tree.writeFile("/.singularity.d/labels.json", labels.dump(1, '\t'), 0644);
  // Docker resolves a relative WorkingDir against the previous one when it builds, so a
  // config holds an absolute path; anything else (or a newline in it) is not recorded, and
  // a record a layer brought goes: the config is what the image says.
  const std::string& dir = config.workingDir;
  if (dir.starts_with('/') && dir.find_first_of(std::string_view("\n\0", 2)) == std::string::npos)
    tree.writeFile(kWorkdirFile, dir + "\n", 0644);
  else
    tree.remove(kWorkdirFile);
}

}  // namespace ctr::image::oci
