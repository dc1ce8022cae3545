/* ctr-wl-gemm: CBLAS DGEMM/SGEMM throughput (OpenBLAS), one JSON line (wl_report.h). */
#include "wl_report.h"

#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's own entry points, declared by its cblas.h; used for the info block. */
extern char *openblas_get_config(void);
extern char *openblas_get_corename(void);

static const char usage[] =
    "usage: ctr-wl-gemm [--quick] [--sizes N,N,...] [--precisions d,s] [--reps N]\n"
    "                   [--warmup N] [--stat median|best] [--threads N]\n"
    "Square row-major C = A*B through cblas_dgemm (d) and cblas_sgemm (s); FLOP = 2n^3.\n"
    "Each size runs --warmup discarded calls, then --reps timed calls in this process;\n"
    "the FOM (dgemm_nN, sgemm_nN, GFLOP/s) is their median (or best with --stat best).\n"
    "  --sizes      matrix orders (default 1024,2048,4096; the method's range is 1024-8192)\n"
    "  --reps       timed calls per size (default 5)\n"
    "  --warmup     discarded calls per size (default 1)\n"
    "  --threads    OpenBLAS threads; default: OPENBLAS_NUM_THREADS, else all cores\n"
    "  --quick      sizes 512,1024, 3 reps (a smoke test of about a second)\n"
    "Exit 0 with the JSON line, 1 on failure (including a wrong product).\n";

enum precision { DOUBLE, SINGLE };

struct options {
  long long *sizes;
  size_t nsizes;
  int do_double, do_single;
  int reps, warmup;
  int use_best;
  int threads;
};

/* Values in [-0.5, 0.5) from a fixed LCG, so every launch multiplies the same matrices. */
static void fill(double *d, float *s, size_t count, unsigned seed) {
  unsigned long long x = seed * 2654435761ULL + 1;
  for (size_t i = 0; i < count; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    double v = (double)(x >> 11) / 9007199254740992.0 - 0.5;
    if (d)
      d[i] = v;
    else
      s[i] = (float)v;
  }
}

/* A few entries of C recomputed by a plain dot product: a broken BLAS (or one that
 * silently skips work) must fail the run, not post a record. */
static void check_product(enum precision p, const void *a, const void *b, const void *c, size_t n) {
  const size_t probes[4][2] = {{0, 0}, {n - 1, n - 1}, {n / 2, n / 3}, {n / 3, n - 1}};
  for (int k = 0; k < 4; ++k) {
    size_t i = probes[k][0], j = probes[k][1];
    double ref = 0, got;
    for (size_t l = 0; l < n; ++l)
      ref += p == DOUBLE ? ((const double *)a)[i * n + l] * ((const double *)b)[l * n + j]
                         : (double)((const float *)a)[i * n + l] * (double)((const float *)b)[l * n + j];
    got = p == DOUBLE ? ((const double *)c)[i * n + j] : (double)((const float *)c)[i * n + j];
    double tol = (p == DOUBLE ? 1e-10 : 1e-3) * sqrt((double)n);
    if (fabs(got - ref) > tol)
      wl_die("gemm: %s product wrong at n=%zu (%zu,%zu): %g, expected %g",
             p == DOUBLE ? "dgemm" : "sgemm", n, i, j, got, ref);
  }
}

static void run_size(struct wl_report *r, struct wl_buf *all, const struct options *o,
                     enum precision p, size_t n) {
  size_t count = n * n, elem = p == DOUBLE ? sizeof(double) : sizeof(float);
  void *a = malloc(count * elem), *b = malloc(count * elem), *c = calloc(count, elem);
  if (!a || !b || !c)
    wl_die("gemm: cannot allocate three %zux%zu matrices", n, n);
  fill(p == DOUBLE ? a : NULL, p == SINGLE ? a : NULL, count, 1);
  fill(p == DOUBLE ? b : NULL, p == SINGLE ? b : NULL, count, 2);

  int ni = (int)n;
  double *gflops = malloc((size_t)o->reps * sizeof *gflops);
  if (!gflops)
    wl_die("out of memory");
  for (int it = -o->warmup; it < o->reps; ++it) {
    double t0 = wl_now();
    if (p == DOUBLE)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0, a, ni, b, ni, 0.0, c, ni);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c, ni);
    double t = wl_now() - t0;
    if (it >= 0)
      gflops[it] = 2.0 * (double)n * (double)n * (double)n / t * 1e-9;
  }
  check_product(p, a, b, c, n);

  const char *prefix = p == DOUBLE ? "dgemm" : "sgemm";
  char name[64];
  snprintf(name, sizeof name, "%s_n%zu", prefix, n);
  double best = wl_max(gflops, (size_t)o->reps);
  double median = wl_median(gflops, (size_t)o->reps);
  wl_report_fom(r, name, o->use_best ? best : median, "GFLOP/s", "higher", 0.02);
  fprintf(stderr, "%s: median %.1f best %.1f GFLOP/s\n", name, median, best);

  wl_buf_append(all, all->len > 1 ? "," : "");
  wl_buf_printf(all, "\"%s\":{\"median\":", name);
  wl_buf_json_num(all, median);
  wl_buf_append(all, ",\"best\":");
  wl_buf_json_num(all, best);
  wl_buf_append(all, ",\"reps\":[");
  for (int i = 0; i < o->reps; ++i) /* sorted by wl_median */
    wl_buf_printf(all, "%s%.4g", i ? "," : "", gflops[i]);
  wl_buf_append(all, "]}");
  free(gflops);
  free(a);
  free(b);
  free(c);
}

static void parse(int argc, char **argv, struct options *o) {
  static const struct option longopts[] = {
      {"quick", no_argument, NULL, 'q'},       {"sizes", required_argument, NULL, 'n'},
      {"precisions", required_argument, NULL, 'p'}, {"reps", required_argument, NULL, 'r'},
      {"warmup", required_argument, NULL, 'w'},    {"stat", required_argument, NULL, 's'},
      {"threads", required_argument, NULL, 't'},   {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *sizes = "1024,2048,4096";
  int quick = 0, reps = -1;
  *o = (struct options){.do_double = 1, .do_single = 1, .warmup = 1};
  for (int ch; (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
    switch (ch) {
    case 'q': quick = 1; break;
    case 'n': sizes = optarg; break;
    case 'p':
      o->do_double = strchr(optarg, 'd') != NULL;
      o->do_single = strchr(optarg, 's') != NULL;
      if (!o->do_double && !o->do_single)
        wl_die("--precisions: give d, s or d,s");
      break;
    case 'r': reps = atoi(optarg); break;
    case 'w': o->warmup = atoi(optarg); break;
    case 's':
      if (strcmp(optarg, "best") && strcmp(optarg, "median"))
        wl_die("--stat: median or best");
      o->use_best = !strcmp(optarg, "best");
      break;
    case 't': o->threads = atoi(optarg); break;
    case 'h': fputs(usage, stdout); exit(0);
    default: fputs(usage, stderr); exit(2);
    }
  }
  if (optind < argc)
    wl_die("gemm: unexpected argument '%s'\n%s", argv[optind], usage);
  if (quick && !strcmp(sizes, "1024,2048,4096"))
    sizes = "512,1024";
  o->reps = reps > 0 ? reps : quick ? 3 : 5;
  if (o->warmup < 0)
    wl_die("--warmup: must be >= 0");
  o->nsizes = wl_parse_size_list("--sizes", sizes, &o->sizes);
  for (size_t i = 0; i < o->nsizes; ++i)
    if (o->sizes[i] < 16 || o->sizes[i] > 65536)
      wl_die("--sizes: %lld is outside 16..65536", o->sizes[i]);
}

int main(int argc, char **argv) {
  struct options o;
  parse(argc, argv, &o);
  if (o.threads > 0)
    openblas_set_num_threads(o.threads);

  struct wl_report r;
  struct wl_buf all = {0}, sizes = {0};
  wl_report_init(&r, "gemm");
  wl_buf_append(&all, "{"); /* per-FOM details, by name */
  for (int pass = 0; pass < 2; ++pass) {
    enum precision p = pass == 0 ? DOUBLE : SINGLE;
    if ((p == DOUBLE && !o.do_double) || (p == SINGLE && !o.do_single))
      continue;
    for (size_t i = 0; i < o.nsizes; ++i)
      run_size(&r, &all, &o, p, (size_t)o.sizes[i]);
  }
  for (size_t i = 0; i < o.nsizes; ++i)
    wl_buf_printf(&sizes, "%s%lld", i ? "," : "[", o.sizes[i]);
  wl_buf_append(&sizes, "]");
  wl_buf_append(&all, "}");

  wl_info_str(&r, "blas", "OpenBLAS");
  wl_info_str(&r, "openblas_config", openblas_get_config());
  wl_info_str(&r, "openblas_core", openblas_get_corename());
  wl_info_int(&r, "threads", openblas_get_num_threads());
  const char *env = getenv("OPENBLAS_NUM_THREADS");
  wl_info_str(&r, "OPENBLAS_NUM_THREADS", env ? env : "");
  wl_info_json(&r, "sizes", sizes.data);
  wl_info_int(&r, "warmup", o.warmup);
  wl_info_int(&r, "reps", o.reps);
  wl_info_str(&r, "statistic", o.use_best ? "best" : "median");
  wl_info_str(&r, "layout", "row-major, no transpose, alpha 1, beta 0");
  wl_info_json(&r, "gflops", all.data);
  wl_report_print(&r);
  wl_buf_free(&all);
  wl_buf_free(&sizes);
  free(o.sizes);
  return 0;
}
