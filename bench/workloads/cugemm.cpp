// ctr-wl-cugemm: cuBLAS GEMM throughput in FP64, FP32, TF32, FP16 and BF16, one JSON line
// (wl_report.h). Built only where the CUDA toolkit with cuBLAS is found.
#include "cuda_device.hpp"
#include "wl_report.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <getopt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char usage[] =
    "usage: ctr-wl-cugemm [--quick] [--sizes N,N] [--precisions fp64,fp32,tf32,fp16,bf16]\n"
    "                     [--warmup N] [--reps N] [--device N]\n"
    "Square column-major C = A*B with cublasGemmEx; FLOP = 2n^3. Per precision and size:\n"
    "--warmup discarded GEMMs (at least 10), then --reps GEMMs timed one by one with CUDA\n"
    "events; the FOM <precision>_n<N> (TFLOP/s) is their median, the best goes in info.\n"
    "  fp64  double in/out, CUBLAS_COMPUTE_64F          fp32  float, CUBLAS_COMPUTE_32F (no TF32)\n"
    "  tf32  float, CUBLAS_COMPUTE_32F_FAST_TF32        fp16/bf16  16-bit in/out, FP32 accumulate\n"
    "  --sizes    default 8192,16384 (the method's range)   --quick  4096, 10 warm-ups, 5 reps\n"
    "  --device   CUDA device (default: the local MPI rank modulo the device count, else 0)\n"
    "On an H100/H200-class GPU a result above the dense peak (FP16/BF16 989, TF32 495,\n"
    "FP64 67, FP32 67 TFLOP/s) is a measurement bug: exit 1. Products are spot-checked.\n"
    "Exit 77 with \"skip: ...\" when no CUDA device can be used (any cudaGetDeviceCount error).\n";

struct Precision {
  const char *name;
  cudaDataType_t type;
  cublasComputeType_t compute;
  size_t bytes;
  double h100Ceiling; // dense TFLOP/s, H100/H200 SXM
  double relTolerance; // of a spot-checked entry of C
};

const Precision precisions[] = {
    {"fp64", CUDA_R_64F, CUBLAS_COMPUTE_64F, 8, 67, 1e-12},
    {"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 67, 1e-4},
    {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 495, 1e-4},
    {"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 989, 2e-3},
    {"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 989, 1e-2},
};

// Values k/64 for k in -64..64: exact in every precision here (TF32 included), so the
// spot check can recompute C in double precision on the host.
double element(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + index * 0xbf58476d1ce4e5b9ULL + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(static_cast<int>(z % 129) - 64) / 64.0;
}

uint16_t toHalf(float f) { // exact for the values above: no rounding needed
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  if ((x & 0x7fffffff) == 0)
    return sign;
  int exponent = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | (exponent << 10) | ((x >> 13) & 0x3ff));
}

uint16_t toBfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>(x >> 16);
}

double fromDevice(const Precision &p, const void *v) {
  switch (p.type) {
  case CUDA_R_64F: return *static_cast<const double *>(v);
  case CUDA_R_32F: return *static_cast<const float *>(v);
  case CUDA_R_16BF: {
    uint32_t x = static_cast<uint32_t>(*static_cast<const uint16_t *>(v)) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  default: { // IEEE half
    uint16_t h = *static_cast<const uint16_t *>(v);
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -mag : mag;
  }
  }
}

void fillDevice(const Precision &p, void *dev, size_t count, uint64_t seed) {
  const size_t chunk = size_t{1} << 24;
  std::vector<unsigned char> host(chunk * p.bytes);
  for (size_t start = 0; start < count; start += chunk) {
    size_t n = std::min(chunk, count - start);
    for (size_t i = 0; i < n; ++i) {
      double v = element(seed, start + i);
      unsigned char *out = host.data() + i * p.bytes;
      if (p.type == CUDA_R_64F) {
        std::memcpy(out, &v, 8);
      } else if (p.type == CUDA_R_32F) {
        float f = static_cast<float>(v);
        std::memcpy(out, &f, 4);
      } else {
        uint16_t h = p.type == CUDA_R_16F ? toHalf(static_cast<float>(v)) : toBfloat16(static_cast<float>(v));
        std::memcpy(out, &h, 2);
      }
    }
    ctr_wl::checkCuda(cudaMemcpy(static_cast<unsigned char *>(dev) + start * p.bytes, host.data(),
                                 n * p.bytes, cudaMemcpyHostToDevice),
                      "cudaMemcpy to device");
  }
}

void checkCublas(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    wl_die("%s: cuBLAS status %d", what, static_cast<int>(s));
}

struct Options {
  std::vector<long long> sizes{8192, 16384};
  std::vector<const Precision *> precisions;
  int warmup = 10, reps = 20, device = -1;
};

Options parse(int argc, char **argv) {
  static const option longopts[] = {
      {"quick", no_argument, nullptr, 'q'},          {"sizes", required_argument, nullptr, 'n'},
      {"precisions", required_argument, nullptr, 'p'}, {"warmup", required_argument, nullptr, 'w'},
      {"reps", required_argument, nullptr, 'r'},     {"device", required_argument, nullptr, 'd'},
      {"help", no_argument, nullptr, 'h'},           {nullptr, 0, nullptr, 0}};
  Options o;
  bool quick = false, sizesGiven = false, repsGiven = false;
  std::string wanted = "fp64,fp32,tf32,fp16,bf16";
  for (int ch; (ch = getopt_long(argc, argv, "h", longopts, nullptr)) != -1;) {
    switch (ch) {
    case 'q': quick = true; break;
    case 'n': {
      long long *v = nullptr;
      size_t n = wl_parse_size_list("--sizes", optarg, &v);
      o.sizes.assign(v, v + n);
      std::free(v);
      sizesGiven = true;
      break;
    }
    case 'p': wanted = optarg; break;
    case 'w': o.warmup = std::atoi(optarg); break;
    case 'r': o.reps = std::atoi(optarg); repsGiven = true; break;
    case 'd': o.device = std::atoi(optarg); break;
    case 'h': std::fputs(usage, stdout); std::exit(0);
    default: std::fputs(usage, stderr); std::exit(2);
    }
  }
  if (optind < argc)
    wl_die("cugemm: unexpected argument '%s'\n%s", argv[optind], usage);
  if (quick && !sizesGiven)
    o.sizes = {4096};
  if (quick && !repsGiven)
    o.reps = 5;
  if (o.warmup < 10)
    wl_die("--warmup: at least 10 (GPU clocks and cuBLAS heuristics settle first)");
  if (o.reps < 1)
    wl_die("--reps: at least 1");
  for (long long n : o.sizes)
    if (n < 64 || n > 65536)
      wl_die("--sizes: %lld is outside 64..65536", n);
  std::string list = wanted + ",";
  for (size_t pos; (pos = list.find(',')) != std::string::npos; list.erase(0, pos + 1)) {
    std::string name = list.substr(0, pos);
    if (name.empty())
      continue;
    auto it = std::find_if(std::begin(precisions), std::end(precisions),
                           [&](const Precision &p) { return name == p.name; });
    if (it == std::end(precisions))
      wl_die("--precisions: unknown '%s' (fp64, fp32, tf32, fp16, bf16)", name.c_str());
    o.precisions.push_back(&*it);
  }
  if (o.device < 0) {
    const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local)
      local = std::getenv("SLURM_LOCALID");
    o.device = local ? std::atoi(local) : 0;
  }
  return o;
}

bool isH100Class(const cudaDeviceProp &prop) {
  std::string name = prop.name;
  return prop.major == 9 && (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
                             name.find("H800") != std::string::npos);
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
    o.device %= count;
  cudaDeviceProp prop = ctr_wl::requireGpu(o.device);
  bool ceilingApplies = isH100Class(prop);

  cublasHandle_t handle;
  checkCublas(cublasCreate(&handle), "cublasCreate");
  // CUBLAS_COMPUTE_32F is exact FP32 only with the default math mode; TF32 is asked for by
  // its own compute type. NVIDIA_TF32_OVERRIDE=0 would silently turn TF32 off: recorded.
  checkCublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  cudaEvent_t start, stop;
  ctr_wl::checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  ctr_wl::checkCuda(cudaEventCreate(&stop), "cudaEventCreate");

  wl_report r;
  wl_report_init(&r, "cugemm");
  wl_buf detail{};
  wl_buf_append(&detail, "{");
  for (const Precision *p : o.precisions) {
    for (long long nl : o.sizes) {
      int n = static_cast<int>(nl);
      size_t count_elems = static_cast<size_t>(n) * static_cast<size_t>(n);
      void *a = nullptr, *b = nullptr, *c = nullptr;
      ctr_wl::checkCuda(cudaMalloc(&a, count_elems * p->bytes), "cudaMalloc A");
      ctr_wl::checkCuda(cudaMalloc(&b, count_elems * p->bytes), "cudaMalloc B");
      ctr_wl::checkCuda(cudaMalloc(&c, count_elems * p->bytes), "cudaMalloc C");
      fillDevice(*p, a, count_elems, 1);
      fillDevice(*p, b, count_elems, 2);
      double alpha64 = 1, beta64 = 0;
      float alpha32 = 1, beta32 = 0;
      const void *alpha = p->compute == CUBLAS_COMPUTE_64F ? static_cast<const void *>(&alpha64) : &alpha32;
      const void *beta = p->compute == CUBLAS_COMPUTE_64F ? static_cast<const void *>(&beta64) : &beta32;
      auto gemm = [&] {
        checkCublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, alpha, a, p->type, n, b, p->type,
                                 n, beta, c, p->type, n, p->compute, CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx");
      };
      for (int i = 0; i < o.warmup; ++i)
        gemm();
      std::vector<double> tflops;
      for (int i = 0; i < o.reps; ++i) {
        ctr_wl::checkCuda(cudaEventRecord(start), "cudaEventRecord");
        gemm();
        ctr_wl::checkCuda(cudaEventRecord(stop), "cudaEventRecord");
        ctr_wl::checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        ctr_wl::checkCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        tflops.push_back(2.0 * static_cast<double>(nl) * static_cast<double>(nl) * static_cast<double>(nl) / (ms * 1e-3) * 1e-12);
      }

      // Spot check: a few entries of C (column-major) against a host dot product.
      const size_t probes[3][2] = {{0, 0}, {static_cast<size_t>(n) - 1, static_cast<size_t>(n) / 2},
                                   {static_cast<size_t>(n) / 3, static_cast<size_t>(n) - 1}};
      for (const auto &ij : probes) {
        size_t i = ij[0], j = ij[1];
        double ref = 0, scale = 0;
        for (size_t l = 0; l < static_cast<size_t>(n); ++l) {
          double t = element(1, i + l * static_cast<size_t>(n)) * element(2, l + j * static_cast<size_t>(n));
          ref += t;
          scale += std::fabs(t);
        }
        unsigned char got[8];
        ctr_wl::checkCuda(cudaMemcpy(got, static_cast<unsigned char *>(c) + (i + j * static_cast<size_t>(n)) * p->bytes,
                                     p->bytes, cudaMemcpyDeviceToHost),
                          "cudaMemcpy from device");
        double v = fromDevice(*p, got);
        if (std::fabs(v - ref) > p->relTolerance * scale + 1e-6)
          wl_die("cugemm: %s n=%d: C(%zu,%zu) = %g, expected %g", p->name, n, i, j, v, ref);
      }
      cudaFree(a);
      cudaFree(b);
      cudaFree(c);

      double best = wl_max(tflops.data(), tflops.size());
      double median = wl_median(tflops.data(), tflops.size());
      char name[64];
      std::snprintf(name, sizeof name, "%s_n%d", p->name, n);
      std::fprintf(stderr, "%s: median %.1f best %.1f TFLOP/s\n", name, median, best);
      if (ceilingApplies && best > p->h100Ceiling)
        wl_die("cugemm: %s reached %.1f TFLOP/s, above the %s dense peak of %.0f: the timing is wrong", name,
               best, prop.name, p->h100Ceiling);
      wl_report_fom(&r, name, median, "TFLOP/s", "higher", 0.02);
      wl_buf_printf(&detail, "%s\"%s\":{\"median\":%.4g,\"best\":%.4g}", detail.len > 1 ? "," : "", name, median,
                    best);
    }
  }
  wl_buf_append(&detail, "}");

  int cublasMajor = 0, cublasMinor = 0, cublasPatch = 0;
  cublasGetProperty(MAJOR_VERSION, &cublasMajor);
  cublasGetProperty(MINOR_VERSION, &cublasMinor);
  cublasGetProperty(PATCH_LEVEL, &cublasPatch);
  ctr_wl::describeGpu(&r, prop, o.device);
  wl_info_str(&r, "cublas", (std::to_string(cublasMajor) + "." + std::to_string(cublasMinor) + "." +
                             std::to_string(cublasPatch)).c_str());
  wl_info_str(&r, "tf32", "only the tf32 FOMs (CUBLAS_COMPUTE_32F_FAST_TF32); fp32 is exact FP32");
  const char *override = std::getenv("NVIDIA_TF32_OVERRIDE");
  wl_info_str(&r, "NVIDIA_TF32_OVERRIDE", override ? override : "");
  wl_info_bool(&r, "ceiling_checked", ceilingApplies);
  wl_info_int(&r, "warmup", o.warmup);
  wl_info_int(&r, "reps", o.reps);
  wl_info_json(&r, "tflops", detail.data);
  wl_report_print(&r);
  wl_buf_free(&detail);
  cublasDestroy(handle);
  return 0;
}
