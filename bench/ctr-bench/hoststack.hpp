// The default image of runtime-overhead mode: "host-stack", a skeleton root (merged-/usr
// links, empty mount points) into which the host's /usr, /etc and /opt are bound read-only,
// so the very binaries and libraries that run bare run in the container, through the whole
// of ctr's launch path (namespaces, image mount, binds, seccomp, environment).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ctr::bench {

// Builds WORKDIR/host-stack.sif with `ctr build` and returns its path. The image holds every
// mount target of `ctr exec EXEC_ARGS IMAGE ...` run with ENV (empty: this process's), as
// ctr's plan lists them, so that ctr never needs an overlay to create one.
std::filesystem::path buildHostStackImage(const std::string& ctr, const std::filesystem::path& workdir,
                                          const std::vector<std::string>& execArgs,
                                          const std::vector<std::string>& env);

// The binds that make the host's stack visible: /usr and /etc (and /opt when present)
// read-only, as `--bind` arguments.
std::vector<std::string> hostStackBindArgs();

// A --bind for `dir` unless it is already visible in the container (under a bound
// directory, or ctr's default binds: $HOME, the cwd, /tmp).
void addBindFor(std::vector<std::string>& args, const std::filesystem::path& dir);

}  // namespace ctr::bench
