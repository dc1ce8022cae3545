// The host fingerprint of a result file: what an admin needs to tell two runs apart
// (kernel, CPU, cores, NUMA, memory, GPU, MPI, BLAS, governor, ctr and its image mode).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ctr::bench {

// `ctr check --host --json` when that ctr has it (kept under "ctr_check_host"); the rest is
// read directly. Memory comes from /proc/meminfo, never hwloc (its NUMA figure is low on
// kernels with deferred memory init).
nlohmann::json collectHostFingerprint(const std::string& ctr);

}  // namespace ctr::bench
