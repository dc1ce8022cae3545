// Runtime-internal: the image's environment scripts (/.singularity.d/env/*.sh, or a legacy
// /environment) as a launch reads them, and the copy the holder keeps of them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ctr::runtime {

// One script: its path in the container and, once read, its text (nullopt: cannot be read,
// as a shell's `[ -r ]` would say).
struct EnvScript {
  std::string path;
  std::optional<std::string> text;
};

// The scripts of the root this process is in ("/"), in the order they are sourced.
std::vector<std::string> listEnvScripts();

// Reads one script as a launch does: a FIFO, a device or a script over 1 MiB is refused by
// name (ctr::Error), since it could hang or balloon the launch.
std::optional<std::string> readEnvScript(const std::string& path);

// Holder side, inside its ready namespace (the prepared root is "/"): every script, read.
// Launches that join the ready namespace take them from here instead of opening each file
// again (through squashfuse every open and close is a round trip to the server).
std::vector<EnvScript> readAllEnvScripts();

// The holder's copy in a file of its tmpfs, and back. read returns nullopt for a file that
// is missing or not in this format (the launch then reads the image's files).
void writeEnvScriptCopy(const std::string& file, const std::vector<EnvScript>& scripts);
std::optional<std::vector<EnvScript>> readEnvScriptCopy(const std::string& file);

}  // namespace ctr::runtime
