// ctr-wl-custream: GPU memory bandwidth through the CUDA runtime's copies, one JSON line
// (wl_report.h): device-to-device (HBM read + write), host-to-device and device-to-host
// (pinned host memory, the PCIe/NVLink-C2C path a container must not slow down).
#include "cuda_device.hpp"
#include "wl_report.h"

#include <cuda_runtime.h>
#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

const char usage[] =
    "usage: ctr-wl-custream [--quick] [--bytes B] [--warmup N] [--reps N] [--device N]\n"
    "Times --reps cudaMemcpy calls of --bytes (default 1 GiB; --quick 256 MiB) after\n"
    "--warmup (default 5) with CUDA events; FOMs are the medians in GB/s (10^9 B/s):\n"
    "  d2d_GBps  device-to-device, counted as read + write (2 x bytes), as STREAM does\n"
    "  h2d_GBps  pinned host to device      d2h_GBps  device to pinned host\n"
    "--device defaults to the local MPI rank modulo the device count, else 0.\n"
    "Exit 77 with \"skip: ...\" when no CUDA device can be used.\n";

} // namespace

int main(int argc, char **argv) {
  static const option longopts[] = {{"quick", no_argument, nullptr, 'q'},     {"bytes", required_argument, nullptr, 'b'},
                                    {"warmup", required_argument, nullptr, 'w'}, {"reps", required_argument, nullptr, 'r'},
                                    {"device", required_argument, nullptr, 'd'}, {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  long long bytes = 0;
  int warmup = 5, reps = 20, device = -1;
  bool quick = false;
  for (int ch; (ch = getopt_long(argc, argv, "h", longopts, nullptr)) != -1;) {
    switch (ch) {
    case 'q': quick = true; break;
    case 'b': bytes = wl_parse_size("--bytes", optarg); break;
    case 'w': warmup = std::atoi(optarg); break;
    case 'r': reps = std::atoi(optarg); break;
    case 'd': device = std::atoi(optarg); break;
    case 'h': std::fputs(usage, stdout); return 0;
    default: std::fputs(usage, stderr); return 2;
    }
  }
  if (optind < argc)
    wl_die("custream: unexpected argument '%s'\n%s", argv[optind], usage);
  if (bytes == 0)
    bytes = quick ? 256LL << 20 : 1LL << 30;
  if (quick)
    reps = reps > 5 ? 5 : reps;
  if (reps < 1 || warmup < 0 || bytes < 4096)
    wl_die("custream: --reps >= 1, --warmup >= 0, --bytes >= 4096");
  if (device < 0) {
    const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    device = local ? std::atoi(local) : 0;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
    device %= count;
  cudaDeviceProp prop = ctr_wl::requireGpu(device);

  size_t n = static_cast<size_t>(bytes);
  void *src = nullptr, *dst = nullptr, *host = nullptr;
  ctr_wl::checkCuda(cudaMalloc(&src, n), "cudaMalloc");
  ctr_wl::checkCuda(cudaMalloc(&dst, n), "cudaMalloc");
  ctr_wl::checkCuda(cudaMallocHost(&host, n), "cudaMallocHost");
  std::memset(host, 0x5a, n);
  ctr_wl::checkCuda(cudaMemcpy(src, host, n, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaEvent_t start, stop;
  ctr_wl::checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  ctr_wl::checkCuda(cudaEventCreate(&stop), "cudaEventCreate");

  struct Copy {
    const char *name;
    void *to;
    const void *from;
    cudaMemcpyKind kind;
    double bytesMoved;
  };
  const Copy copies[] = {{"d2d", dst, src, cudaMemcpyDeviceToDevice, 2.0 * static_cast<double>(n)},
                         {"h2d", dst, host, cudaMemcpyHostToDevice, static_cast<double>(n)},
                         {"d2h", host, src, cudaMemcpyDeviceToHost, static_cast<double>(n)}};
  wl_report r;
  wl_report_init(&r, "custream");
  wl_buf detail{};
  wl_buf_append(&detail, "{");
  for (const Copy &c : copies) {
    std::vector<double> gbps;
    for (int i = -warmup; i < reps; ++i) {
      ctr_wl::checkCuda(cudaEventRecord(start), "cudaEventRecord");
      ctr_wl::checkCuda(cudaMemcpyAsync(c.to, c.from, n, c.kind), "cudaMemcpyAsync");
      ctr_wl::checkCuda(cudaEventRecord(stop), "cudaEventRecord");
      ctr_wl::checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      ctr_wl::checkCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      if (i >= 0)
        gbps.push_back(c.bytesMoved / (ms * 1e-3) * 1e-9);
    }
    double best = wl_max(gbps.data(), gbps.size()), median = wl_median(gbps.data(), gbps.size());
    char name[32];
    std::snprintf(name, sizeof name, "%s_GBps", c.name);
    wl_report_fom(&r, name, median, "GB/s (10^9 B)", "higher", 0.03);
    wl_buf_printf(&detail, "%s\"%s\":{\"median\":%.4g,\"best\":%.4g}", detail.len > 1 ? "," : "", name, median, best);
  }
  wl_buf_append(&detail, "}");
  // The last d2h copy brought src back: it must still hold the pattern written at the start.
  for (size_t i = 0; i < n; i += 4093)
    if (static_cast<unsigned char *>(host)[i] != 0x5a)
      wl_die("custream: byte %zu came back as 0x%02x", i, static_cast<unsigned char *>(host)[i]);
  ctr_wl::describeGpu(&r, prop, device);
  wl_info_int(&r, "bytes", bytes);
  wl_info_int(&r, "warmup", warmup);
  wl_info_int(&r, "reps", reps);
  wl_info_str(&r, "statistic", "median of reps; d2d counts read + write");
  wl_info_json(&r, "copies", detail.data);
  wl_report_print(&r);
  wl_buf_free(&detail);
  cudaFreeHost(host);
  cudaFree(src);
  cudaFree(dst);
  return 0;
}
