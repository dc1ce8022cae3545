/* ctr-wl-stream: STREAM-style Copy/Scale/Add/Triad memory bandwidth with OpenMP, one JSON
 * line (wl_report.h). Bytes are counted the STREAM way (no write-allocate traffic). */
#include "wl_report.h"

#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: ctr-wl-stream [--quick] [--elements N] [--passes N]\n"
    "Copy c=a, Scale b=s*c, Add c=a+b, Triad a=b+s*c over three arrays of doubles with\n"
    "OpenMP (static schedule, arrays first touched by the same threads). Each array is at\n"
    "least 4x the total last-level cache (read from /sys/devices/system/cpu/*/cache), so\n"
    "the caches cannot hold them. The FOMs (copy_GBps ... triad_GBps, 10^9 B/s) are the\n"
    "best pass of --passes, the first pass excluded. Thread count and pinning come from\n"
    "OMP_NUM_THREADS, OMP_PROC_BIND and OMP_PLACES (the descriptor sets spread/cores).\n"
    "  --elements N  elements per array instead of the 4x-LLC rule (K/M/G suffixes)\n"
    "  --passes N    passes including the discarded first (default 10; --quick: 4)\n"
    "Exit 0 with the JSON line, 1 on failure (including wrong array contents).\n";

static const double scalar = 3.0;

/* One line of /sys/devices/system/cpu/<cpu>/cache/index<idx>/<attr>, newline stripped. */
static int read_cache_attr(const char *cpu, int idx, const char *attr, char *buf, int len) {
  char path[512];
  snprintf(path, sizeof path, "/sys/devices/system/cpu/%.32s/cache/index%d/%.32s", cpu, idx, attr);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  int ok = fgets(buf, len, f) != NULL;
  fclose(f);
  buf[strcspn(buf, "\n")] = 0;
  return ok;
}

/* Total last-level cache: the largest cache level, each distinct cache counted once
 * (a multi-CCX EPYC has one L3 per CCX, all of which a parallel run can use). */
static long long last_level_cache_bytes(void) {
  enum { MAX_CACHES = 512 };
  static char seen[MAX_CACHES][64];
  int nseen = 0, best_level = 0;
  long long total = 0;
  DIR *cpus = opendir("/sys/devices/system/cpu");
  if (!cpus)
    return 0;
  for (struct dirent *e; (e = readdir(cpus));) {
    if (strncmp(e->d_name, "cpu", 3) || !e->d_name[3] || !strchr("0123456789", e->d_name[3]))
      continue;
    char type[64], level[16], size[32], shared[64];
    for (int idx = 0; read_cache_attr(e->d_name, idx, "type", type, sizeof type); ++idx) {
      if (!strcmp(type, "Instruction") || !read_cache_attr(e->d_name, idx, "level", level, sizeof level) ||
          !read_cache_attr(e->d_name, idx, "size", size, sizeof size) ||
          !read_cache_attr(e->d_name, idx, "shared_cpu_list", shared, sizeof shared))
        continue;
      char *unit = NULL;
      long long bytes = strtoll(size, &unit, 10);
      bytes *= *unit == 'K' ? 1024 : *unit == 'M' ? 1048576 : *unit == 'G' ? 1073741824 : 1;
      int lvl = atoi(level);
      if (lvl < best_level || bytes <= 0)
        continue;
      if (lvl > best_level) {
        best_level = lvl;
        total = 0;
        nseen = 0;
      }
      int dup = 0;
      for (int i = 0; i < nseen && !dup; ++i)
        dup = !strcmp(seen[i], shared);
      if (!dup && nseen < MAX_CACHES) {
        snprintf(seen[nseen++], sizeof seen[0], "%s", shared);
        total += bytes;
      }
    }
  }
  closedir(cpus);
  return total;
}

/* The value every element must hold after `passes` rounds of the four kernels. */
static void expected_values(int passes, double *ea, double *eb, double *ec) {
  double a = 1.0, b = 2.0, c = 0.0;
  for (int k = 0; k < passes; ++k) {
    c = a;
    b = scalar * c;
    c = a + b;
    a = b + scalar * c;
  }
  *ea = a, *eb = b, *ec = c;
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"quick", no_argument, NULL, 'q'},
                                           {"elements", required_argument, NULL, 'n'},
                                           {"passes", required_argument, NULL, 'p'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  int quick = 0, passes = 0;
  long long elements = 0;
  for (int ch; (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
    switch (ch) {
    case 'q': quick = 1; break;
    case 'n': elements = wl_parse_size("--elements", optarg); break;
    case 'p': passes = atoi(optarg); break;
    case 'h': fputs(usage, stdout); return 0;
    default: fputs(usage, stderr); return 2;
    }
  }
  if (optind < argc)
    wl_die("stream: unexpected argument '%s'\n%s", argv[optind], usage);
  if (passes == 0)
    passes = quick ? 4 : 10;
  if (passes < 2)
    wl_die("--passes: at least 2 (the first is discarded)");

  long long llc = last_level_cache_bytes();
  const char *size_rule = "4x last-level cache";
  if (elements == 0) {
    if (llc <= 0) {
      llc = 64LL << 20;
      size_rule = "4x an assumed 64 MiB last-level cache (sysfs cache info unreadable)";
    }
    elements = 4 * llc / (long long)sizeof(double);
    if (elements < (1 << 20))
      elements = 1 << 20;
  } else {
    size_rule = "--elements";
  }
  size_t n = (size_t)elements;
  size_t bytes = n * sizeof(double);
  double *a = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  double *b = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  double *c = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!a || !b || !c)
    wl_die("stream: cannot allocate three arrays of %zu bytes", bytes);

  /* First touch by the threads that run the kernels, with the same static schedule, so
   * each page lands on the NUMA node of the thread that streams it. */
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < n; ++j) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }

  enum { COPY, SCALE, ADD, TRIAD, KERNELS };
  static const char *names[KERNELS] = {"copy", "scale", "add", "triad"};
  const double moved[KERNELS] = {2.0 * (double)bytes, 2.0 * (double)bytes, 3.0 * (double)bytes,
                                 3.0 * (double)bytes};
  double best[KERNELS], sum[KERNELS] = {0}, worst[KERNELS] = {0};
  for (int k = 0; k < KERNELS; ++k)
    best[k] = INFINITY;

  for (int pass = 0; pass < passes; ++pass) {
    double t[KERNELS];
    t[COPY] = wl_now();
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; ++j)
      c[j] = a[j];
    t[COPY] = wl_now() - t[COPY];
    t[SCALE] = wl_now();
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; ++j)
      b[j] = scalar * c[j];
    t[SCALE] = wl_now() - t[SCALE];
    t[ADD] = wl_now();
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; ++j)
      c[j] = a[j] + b[j];
    t[ADD] = wl_now() - t[ADD];
    t[TRIAD] = wl_now();
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; ++j)
      a[j] = b[j] + scalar * c[j];
    t[TRIAD] = wl_now() - t[TRIAD];
    if (pass == 0)
      continue; /* page faults, frequency ramp, thread start-up */
    for (int k = 0; k < KERNELS; ++k) {
      best[k] = fmin(best[k], t[k]);
      worst[k] = fmax(worst[k], t[k]);
      sum[k] += t[k];
    }
  }

  double ea, eb, ec;
  expected_values(passes, &ea, &eb, &ec);
  size_t wrong = 0;
#pragma omp parallel for schedule(static) reduction(+ : wrong)
  for (size_t j = 0; j < n; ++j)
    wrong += fabs(a[j] - ea) > 1e-12 * fabs(ea) || fabs(b[j] - eb) > 1e-12 * fabs(eb) ||
             fabs(c[j] - ec) > 1e-12 * fabs(ec);
  if (wrong)
    wl_die("stream: %zu elements hold wrong values after %d passes", wrong, passes);

  struct wl_report r;
  wl_report_init(&r, "stream");
  struct wl_buf detail = {0};
  wl_buf_append(&detail, "{");
  for (int k = 0; k < KERNELS; ++k) {
    char name[32];
    snprintf(name, sizeof name, "%s_GBps", names[k]);
    wl_report_fom(&r, name, moved[k] / best[k] * 1e-9, "GB/s (10^9 B)", "higher", 0.03);
    wl_buf_printf(&detail, "%s\"%s\":{\"best_GBps\":%.4g,\"avg_GBps\":%.4g,\"worst_GBps\":%.4g}",
                  k ? "," : "", names[k], moved[k] / best[k] * 1e-9,
                  moved[k] / (sum[k] / (passes - 1)) * 1e-9, moved[k] / worst[k] * 1e-9);
  }
  wl_buf_append(&detail, "}");

  static const char *binds[] = {"false", "true", "master", "close", "spread"};
  omp_proc_bind_t bind = omp_get_proc_bind();
  const char *env_bind = getenv("OMP_PROC_BIND"), *env_places = getenv("OMP_PLACES");
  wl_info_int(&r, "threads", omp_get_max_threads());
  wl_info_str(&r, "proc_bind", (unsigned)bind < 5 ? binds[bind] : "unknown");
  wl_info_int(&r, "places", omp_get_num_places());
  wl_info_str(&r, "OMP_PROC_BIND", env_bind ? env_bind : "");
  wl_info_str(&r, "OMP_PLACES", env_places ? env_places : "");
  wl_info_int(&r, "llc_bytes", llc);
  wl_info_str(&r, "array_size_rule", size_rule);
  wl_info_int(&r, "elements", (long long)n);
  wl_info_int(&r, "array_bytes", (long long)bytes);
  wl_info_int(&r, "passes", passes);
  wl_info_str(&r, "statistic", "best of passes 2..N");
  wl_info_str(&r, "byte_counting", "STREAM: copy/scale 16 B, add/triad 24 B per element");
  wl_info_json(&r, "kernels", detail.data);
  if (n * sizeof(double) < (size_t)(4 * llc))
    fprintf(stderr, "stream: warning: arrays (%zu B) are smaller than 4x the LLC (%lld B)\n", bytes, llc);
  wl_report_print(&r);
  wl_buf_free(&detail);
  free(a);
  free(b);
  free(c);
  return 0;
}
