// --mpi=bind: the site's MPI in place of the image's. Hybrid (the default) needs nothing:
// mpirun's variables pass with the environment, /dev/shm and /tmp are the host's.
#include "ctr/error.hpp"
#include "ctr/pathutil.hpp"
#include "plan_steps.hpp"

namespace ctr::launch {

namespace {

// The host MPI's dependencies (and its libraries, for lookups through LD_LIBRARY_PATH) into
// kContainerMpiDir, its configuration and the fabric's at their host paths; the replacement
// of the image's libraries is data for the runtime (MpiInjection).
MpiInjection planHostMpi(const host::HostMpi& mpi, bool strict, std::vector<Mount>& mounts) {
  MpiInjection injection;
  injection.family = mpi.family;
  injection.check = strict ? host::MpiAbiCheck::Strict : host::MpiAbiCheck::Relaxed;
  injection.needsGlibc = mpi.needsGlibc;
  injection.needsGlibcLibrary = mpi.needsGlibcLibrary;
  injection.notes = mpi.skipped;
  injection.dependencies = mpi.dependencies.size();
  injection.scanFromCache = mpi.fromCache;
  addMount(mounts, targetsTmpfs(std::string(kContainerMpiDir)));
  auto bindFile = [&](const host::MpiLibrary& lib) {
    Mount m = bindMount(lib.path, joinPath(kContainerMpiDir, lib.soname), true, MountOrigin::Host);
    m.recursive = false;
    m.required = true;
    m.from = lib.from;
    addMount(mounts, std::move(m));
  };
  for (const auto& lib : mpi.libraries) {
    injection.replace.push_back({lib.soname, lib.path, lib.from});
    bindFile(lib);
  }
  for (const auto& lib : mpi.dependencies) bindFile(lib);
  for (const auto& path : mpi.paths) {
    Mount m = bindMount(mpi.root == "/" ? path.path : joinPath(mpi.root, path.path), path.path, true, MountOrigin::Host);
    m.from = path.from;
    addMount(mounts, std::move(m));
  }
  return injection;
}

}  // namespace

std::vector<std::string> planMpi(LaunchPlan& plan, const LaunchOptions& options, const config::Policy& policy,
                                 const host::HostFacts& host) {
  if (options.mpi == "bind") {
    if (!host.mpi)
      throw Error("--mpi=bind: " + (host.mpiMissing.empty() ? std::string("the host MPI was not looked at") : host.mpiMissing));
    plan.mpi = planHostMpi(*host.mpi, policy.mpiAbiStrict, plan.mounts);
    return {std::string(kContainerMpiDir)};
  }
  if (!options.mpi.empty() && options.mpi != "hybrid")
    throw Error("bad --mpi '" + options.mpi + "': bind (the host's MPI replaces the image's) or hybrid (the image's own)")
        .withStatus(1);
  return {};
}

}  // namespace ctr::launch
