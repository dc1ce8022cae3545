// Registry credentials where users already keep them (issue 53, item 1): ctr's own file
// (`ctr registry login`), Docker's config.json (auths, credHelpers, credsStore through
// `docker-credential-NAME get`), the containers tools' auth.json (podman, skopeo,
// buildah), enroot's netrc, then the environment (CTR_/APPTAINER_/SINGULARITY_DOCKER_
// USERNAME/PASSWORD). A secret is kept in memory only: never logged, never in an error
// message, never written anywhere but the file `ctr registry login` writes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctr::image::credentials {

struct Credential {
  std::string username;
  std::string password;
  std::string source;  // where it came from, for messages: a file, a helper, a variable
};

// The files and variables looked at, in this order (defaultPlaces fills them from the
// environment; an empty path is skipped).
struct Places {
  std::filesystem::path ctrFile;            // $XDG_CONFIG_HOME/ctr/auth.json, ~/.config/ctr/auth.json
  std::filesystem::path dockerConfig;       // $DOCKER_CONFIG/config.json, ~/.docker/config.json
  std::vector<std::filesystem::path> containersAuth;  // $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
                                                      // ~/.config/containers/auth.json
  std::filesystem::path enrootCredentials;  // $ENROOT_CONFIG_PATH/.credentials, ~/.config/enroot/.credentials
  std::string envUsername, envPassword;     // CTR_DOCKER_*, APPTAINER_DOCKER_*, SINGULARITY_DOCKER_*
};
[[nodiscard]] Places defaultPlaces();

// "host[:port]" of a registry as credential files name it, whatever their spelling:
// "https://reg.site:5000/v2/" and "REG.site:5000" are "reg.site:5000"; Docker Hub's names
// (docker.io, index.docker.io, registry-1.docker.io, https://index.docker.io/v1/) are
// "docker.io".
[[nodiscard]] std::string registryKey(std::string_view registry);

// The first credential for `registry` in `places`. A credential helper that fails or is
// missing is passed over with a warning; one that does not answer within 10 s, or a file
// that is not what its format says, is an error naming it (never the secret).
[[nodiscard]] std::optional<Credential> lookup(std::string_view registry, const Places& places);

// `ctr registry login|logout|list` on an auth file in Docker's format
// ({"auths": {"REGISTRY": {"auth": base64("USER:PASSWORD")}}}), kept 0600 in a 0700
// directory and replaced whole (a temporary file renamed over it).
void store(const std::filesystem::path& file, std::string_view registry, const std::string& username,
           const std::string& password);
// Whether there was an entry to remove.
bool remove(const std::filesystem::path& file, std::string_view registry);
struct Entry {
  std::string registry, username;
};
[[nodiscard]] std::vector<Entry> list(const std::filesystem::path& file);

// Pure parts, for the unit tests: an entry of a Docker/containers auth file
// ({"auth": base64} or {"username", "password"}), and a netrc text's login for `host`.
[[nodiscard]] std::optional<std::pair<std::string, std::string>> fromAuthEntry(std::string_view json,
                                                                               std::string_view registry);
[[nodiscard]] std::optional<std::pair<std::string, std::string>> fromNetrc(std::string_view text,
                                                                           std::string_view registry);

}  // namespace ctr::image::credentials
