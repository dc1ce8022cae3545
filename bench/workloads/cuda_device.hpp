// Shared by the CUDA workloads: the skip rule and the device description for info.
#pragma once

#include "wl_report.h"

#include <cuda_runtime.h>

#include <string>

namespace ctr_wl {

// Any error from cudaGetDeviceCount means "no usable GPU": a machine without a driver
// answers 35 (cudaErrorInsufficientDriver), not 100 (cudaErrorNoDevice).
inline cudaDeviceProp requireGpu(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    wl_skip("no usable CUDA device: cudaGetDeviceCount returned %d (%s)", static_cast<int>(err),
            cudaGetErrorString(err));
  if (count == 0)
    wl_skip("no CUDA device (cudaGetDeviceCount returned 0)");
  if (device >= count)
    wl_die("--device %d: only %d CUDA devices", device, count);
  if ((err = cudaSetDevice(device)) != cudaSuccess)
    wl_die("cudaSetDevice(%d): %s", device, cudaGetErrorString(err));
  cudaDeviceProp prop{};
  if ((err = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
    wl_die("cudaGetDeviceProperties: %s", cudaGetErrorString(err));
  return prop;
}

inline void checkCuda(cudaError_t err, const char *what) {
  if (err != cudaSuccess)
    wl_die("%s: %s (%d)", what, cudaGetErrorString(err), static_cast<int>(err));
}

inline void describeGpu(wl_report *r, const cudaDeviceProp &prop, int device) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  wl_info_str(r, "gpu", prop.name);
  wl_info_int(r, "gpu_index", device);
  wl_info_int(r, "sm_count", prop.multiProcessorCount);
  wl_info_str(r, "compute_capability", (std::to_string(prop.major) + "." + std::to_string(prop.minor)).c_str());
  wl_info_int(r, "gpu_memory_bytes", static_cast<long long>(prop.totalGlobalMem));
  wl_info_int(r, "cuda_driver_version", driver);
  wl_info_int(r, "cuda_runtime_version", runtime);
}

} // namespace ctr_wl
