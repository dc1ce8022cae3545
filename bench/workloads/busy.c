/* ctr-wl-busy: a busy loop that does a known amount MORE work when it runs in a container
 * (issue 23, `ctr-bench calibrate`): the placebo and known-overhead workload that proves
 * ctr-bench's decision rule through the real harness. In a container (ctr sets
 * CTR_CONTAINER) it runs iterations * (1 + extra); bare it runs iterations. FOMs: the loop's
 * wall time and its CPU time (CPU time is blind to preemption by other jobs on the node).
 *
 *   ctr-wl-busy [--iterations N] [--extra FRACTION]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wl_report.h"

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A dependent chain (xorshift): the compiler cannot fold or vectorise it away, and each
 * iteration costs the same few cycles everywhere. */
static uint64_t spin(uint64_t n) {
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

int main(int argc, char **argv) {
  long long iterations = 20000000;
  double extra = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = wl_parse_size("--iterations", argv[++i]);
    } else if (strcmp(argv[i], "--extra") == 0 && i + 1 < argc) {
      char *end = NULL;
      extra = strtod(argv[++i], &end);
      if (!end || *end || extra < 0 || extra > 100) wl_die("--extra %s: expected a fraction >= 0", argv[i]);
    } else {
      wl_die("usage: ctr-wl-busy [--iterations N] [--extra FRACTION]");
    }
  }
  if (iterations <= 0) wl_die("--iterations must be positive");
  const char *in = getenv("CTR_CONTAINER");
  int contained = in && *in;
  uint64_t n = (uint64_t)((double)iterations * (contained ? 1 + extra : 1));
  /* A quarter of the bare loop first, untimed, on both sides: the CPU reaches its running
   * clock before the timed part. Without it a bare run started from idle while a contained
   * one came right after ctr's launch had warmed the core: on a 30 ms loop the bare side
   * was a few percent slower and an injected +50% read as +44%. */
  volatile uint64_t warm = spin((uint64_t)iterations / 4);
  (void)warm;
  double w0 = wl_now(), c0 = cpu_now();
  volatile uint64_t sink = spin(n);
  (void)sink;
  double wall = wl_now() - w0, cpu = cpu_now() - c0;
  struct wl_report r;
  wl_report_init(&r, "busy");
  wl_report_fom(&r, "busy_time", wall, "s", "lower", 0.02);
  wl_report_fom(&r, "busy_cpu_time", cpu, "s", "lower", 0.02);
  wl_info_int(&r, "iterations", (long long)n);
  wl_info_num(&r, "extra", contained ? extra : 0);
  wl_info_bool(&r, "in_container", contained);
  wl_report_print(&r);
  return 0;
}
