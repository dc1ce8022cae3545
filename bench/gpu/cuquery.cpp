// ctr-gpu-query: what CUDA sees, as one JSON object on stdout: the number of devices and,
// per device, its name, memory, compute capability, PCI bus id and UUID; the driver's and
// the runtime's CUDA versions; CUDA_VISIBLE_DEVICES. The device query of the GPU
// acceptance (bench/gpu/acceptance.sh), run bare and in a container to show that both see
// the same GPU. Exit 77 with "skip: <reason>" where no CUDA device can be used.
//
// Linked with the static CUDA runtime, so that the only CUDA library it needs at run time
// is the driver's libcuda.so.1: in a container that is exactly what `ctr exec --nv` has to
// provide, and the image needs no CUDA library of its own.
#include "cuda_device.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string uuidText(const cudaUUID_t& u) {
  static const char hex[] = "0123456789abcdef";
  std::string s = "GPU-";
  for (int k = 0; k < 16; ++k) {
    auto byte = static_cast<unsigned char>(u.bytes[k]);
    s += hex[byte >> 4];
    s += hex[byte & 15];
    if (k == 3 || k == 5 || k == 7 || k == 9) s += '-';
  }
  return s;
}

void appendDevice(wl_buf* out, int index) {
  cudaDeviceProp p{};
  ctr_wl::checkCuda(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  char bus[32] = "";
  ctr_wl::checkCuda(cudaDeviceGetPCIBusId(bus, sizeof bus, index), "cudaDeviceGetPCIBusId");
  wl_buf_printf(out, "%s{\"index\":%d,\"name\":", index ? "," : "", index);
  wl_buf_json_string(out, p.name);
  wl_buf_printf(out, ",\"memory_bytes\":%zu,\"compute_capability\":\"%d.%d\",\"sm_count\":%d,\"pci_bus_id\":",
                p.totalGlobalMem, p.major, p.minor, p.multiProcessorCount);
  wl_buf_json_string(out, bus);
  wl_buf_append(out, ",\"uuid\":");
  wl_buf_json_string(out, uuidText(p.uuid).c_str());
  wl_buf_append(out, "}");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fputs("usage: ctr-gpu-query\n  Prints the CUDA devices this process sees (one JSON object).\n",
               help ? stdout : stderr);
    return help ? 0 : 2;
  }
  ctr_wl::requireGpu(0);
  int count = 0, driver = 0, runtime = 0;
  ctr_wl::checkCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  ctr_wl::checkCuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  ctr_wl::checkCuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  wl_buf out{};
  wl_buf_printf(&out, "{\"cuda_driver_version\":%d,\"cuda_runtime_version\":%d,\"cuda_visible_devices\":", driver,
                runtime);
  if (visible)
    wl_buf_json_string(&out, visible);
  else
    wl_buf_append(&out, "null");
  wl_buf_printf(&out, ",\"device_count\":%d,\"devices\":[", count);
  for (int i = 0; i < count; ++i) appendDevice(&out, i);
  wl_buf_append(&out, "]}");
  std::puts(out.data);
  wl_buf_free(&out);
  return 0;
}
