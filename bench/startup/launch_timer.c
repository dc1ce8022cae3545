/* launch-timer: times process launches, case against case, in randomized interleaved
 * blocks (bench-method.md: the unit of replication is one launch; interleave so drift on a
 * shared machine hits every case alike).
 *
 *   launch-timer [-b BLOCKS] [-r REPS] [-c CONCURRENCY] [-j OUT.json] NAME=COMMAND...
 *
 * COMMAND is split on spaces (no quoting); leading NAME=VALUE words set variables in that
 * case's environment (as env(1) would, without env's own exec). With -c 1 a sample is one launch's wall time;
 * with -c N it is the wall time from starting N copies at once until the last one exits.
 * Every launch must exit 0, or the run is aborted (a failing case measures nothing).
 * The first case is the reference: each case is reported as median and min in ms and as a
 * ratio of its median to the reference's, with a 90% bootstrap interval over blocks. */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { kMaxCases = 32, kMaxArgs = 64 };

struct bench_case {
  char *name;
  char *argv[kMaxArgs];
  char **env; /* environ with the case's NAME=VALUE words */
  double *samples; /* ms, blocks*reps */
  double *block_medians;
  size_t n;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, size_t n) {
  double *tmp = malloc(n * sizeof *tmp);
  if (!tmp) { perror("malloc"); exit(2); }
  memcpy(tmp, v, n * sizeof *tmp);
  qsort(tmp, n, sizeof *tmp, cmp_double);
  double m = n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
  free(tmp);
  return m;
}

/* One sample: start `conc` copies, wait for all; returns wall ms. */
static double run_once(struct bench_case *c, int conc) {
  pid_t pids[1024];
  double t0 = now_ms();
  for (int i = 0; i < conc; i++) {
    int rc = posix_spawn(&pids[i], c->argv[0], NULL, NULL, c->argv, c->env);
    if (rc != 0) {
      fprintf(stderr, "launch-timer: %s: cannot start %s: %s\n", c->name, c->argv[0], strerror(rc));
      exit(2);
    }
  }
  for (int i = 0; i < conc; i++) {
    int st;
    while (waitpid(pids[i], &st, 0) < 0) {
      if (errno != EINTR) { perror("waitpid"); exit(2); }
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "launch-timer: %s: launch failed (status 0x%x): %s\n", c->name, st, c->argv[0]);
      exit(2);
    }
  }
  return now_ms() - t0;
}

int main(int argc, char **argv) {
  int blocks = 20, reps = 10, conc = 1;
  const char *json = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "b:r:c:j:")) != -1) {
    switch (opt) {
      case 'b': blocks = atoi(optarg); break;
      case 'r': reps = atoi(optarg); break;
      case 'c': conc = atoi(optarg); break;
      case 'j': json = optarg; break;
      default:
        fprintf(stderr, "usage: launch-timer [-b BLOCKS] [-r REPS] [-c CONC] [-j OUT.json] NAME=COMMAND...\n");
        return 2;
    }
  }
  int ncases = argc - optind;
  if (ncases < 1 || ncases > kMaxCases || blocks < 2 || reps < 1 || conc < 1 || conc > 1024) {
    fprintf(stderr, "launch-timer: need 1..%d cases, blocks >= 2, reps >= 1, 1 <= concurrency <= 1024\n", kMaxCases);
    return 2;
  }
  struct bench_case cases[kMaxCases];
  for (int i = 0; i < ncases; i++) {
    char *spec = strdup(argv[optind + i]);
    char *eq = strchr(spec, '=');
    if (!eq) { fprintf(stderr, "launch-timer: case '%s' is not NAME=COMMAND\n", spec); return 2; }
    *eq = '\0';
    cases[i].name = spec;
    int k = 0;
    char *sets[kMaxArgs];
    int nsets = 0;
    for (char *save = NULL, *tok = strtok_r(eq + 1, " ", &save); tok && k < kMaxArgs - 1;
         tok = strtok_r(NULL, " ", &save)) {
      if (k == 0 && tok[0] != '/' && strchr(tok, '=')) {
        sets[nsets++] = tok;
        continue;
      }
      cases[i].argv[k++] = tok;
    }
    cases[i].argv[k] = NULL;
    if (k == 0) { fprintf(stderr, "launch-timer: case '%s' has no command\n", spec); return 2; }
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    cases[i].env = calloc(nenv + (size_t)nsets + 1, sizeof(char *));
    if (!cases[i].env) { perror("calloc"); return 2; }
    size_t e = 0;
    for (size_t j = 0; j < nenv; j++) {
      int replaced = 0;
      for (int v = 0; v < nsets && !replaced; v++) {
        size_t len = (size_t)(strchr(sets[v], '=') - sets[v]) + 1;
        replaced = strncmp(environ[j], sets[v], len) == 0;
      }
      if (!replaced) cases[i].env[e++] = environ[j];
    }
    for (int v = 0; v < nsets; v++) cases[i].env[e++] = sets[v];
    cases[i].samples = calloc((size_t)blocks * (size_t)reps, sizeof(double));
    cases[i].block_medians = calloc((size_t)blocks, sizeof(double));
    cases[i].n = 0;
  }

  srand48((long)time(NULL));
  int order[kMaxCases];
  for (int i = 0; i < ncases; i++) { run_once(&cases[i], conc); } /* warm-up, discarded */
  for (int b = 0; b < blocks; b++) {
    for (int i = 0; i < ncases; i++) order[i] = i;
    for (int i = ncases - 1; i > 0; i--) { /* Fisher-Yates */
      int j = (int)(drand48() * (i + 1));
      int t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (int oi = 0; oi < ncases; oi++) {
      struct bench_case *c = &cases[order[oi]];
      double *start = c->samples + c->n;
      for (int r = 0; r < reps; r++) c->samples[c->n++] = run_once(c, conc);
      c->block_medians[b] = median(start, (size_t)reps);
    }
  }

  /* Ratio to the reference: median over blocks of per-block median ratios, with a 90%
   * bootstrap interval (resampling blocks). */
  FILE *js = json ? fopen(json, "w") : NULL;
  if (json && !js) { perror(json); return 2; }
  if (js) fprintf(js, "{\"concurrency\":%d,\"blocks\":%d,\"reps\":%d,\"cases\":[", conc, blocks, reps);
  printf("%-28s %10s %10s %8s %17s\n", "case", "median ms", "min ms", "ratio", "90% CI");
  double *ratios = malloc((size_t)blocks * sizeof(double));
  double *boot = malloc(2000 * sizeof(double));
  double *resample = malloc((size_t)blocks * sizeof(double));
  for (int i = 0; i < ncases; i++) {
    struct bench_case *c = &cases[i];
    for (int b = 0; b < blocks; b++) ratios[b] = c->block_medians[b] / cases[0].block_medians[b];
    for (int k = 0; k < 2000; k++) {
      for (int b = 0; b < blocks; b++) resample[b] = ratios[(int)(drand48() * blocks)];
      boot[k] = median(resample, (size_t)blocks);
    }
    qsort(boot, 2000, sizeof(double), cmp_double);
    double med = median(c->samples, c->n), ratio = median(ratios, (size_t)blocks);
    double mn = c->samples[0];
    for (size_t k = 1; k < c->n; k++) if (c->samples[k] < mn) mn = c->samples[k];
    printf("%-28s %10.3f %10.3f %8.2f   [%5.2f, %5.2f]\n", c->name, med, mn, ratio, boot[100], boot[1899]);
    if (js) {
      fprintf(js, "%s{\"name\":\"%s\",\"median_ms\":%.4f,\"min_ms\":%.4f,\"ratio\":%.4f,\"ci90\":[%.4f,%.4f],\"samples_ms\":[",
              i ? "," : "", c->name, med, mn, ratio, boot[100], boot[1899]);
      for (size_t k = 0; k < c->n; k++) fprintf(js, "%s%.4f", k ? "," : "", c->samples[k]);
      fprintf(js, "]}");
    }
  }
  if (js) { fprintf(js, "]}\n"); fclose(js); }
  return 0;
}
