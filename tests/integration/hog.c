/* hog mem MIB: touches MIB MiB, one page at a time, then prints "touched".
 * hog cpu SECONDS: spins for SECONDS of wall time, then prints the CPU seconds it got.
 * hog fork N: starts N sleeping children, prints how many it got. For the limits tests:
 * built static, so it runs in any image. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: hog mem MIB | cpu SECONDS | fork N\n");
    return 2;
  }
  long n = atol(argv[2]);
  if (strcmp(argv[1], "mem") == 0) {
    for (long i = 0; i < n; ++i) {
      char *block = malloc(1 << 20);
      if (!block) return 3;
      for (long j = 0; j < (1 << 20); j += 4096) block[j] = 1;
    }
    printf("touched %ld MiB\n", n);
    return 0;
  }
  if (strcmp(argv[1], "cpu") == 0) {
    const double end = now(CLOCK_MONOTONIC) + (double)n;
    volatile unsigned long spin = 0;
    while (now(CLOCK_MONOTONIC) < end) ++spin;
    printf("%.2f\n", now(CLOCK_PROCESS_CPUTIME_ID));
    return 0;
  }
  if (strcmp(argv[1], "fork") == 0) {
    long started = 0;
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    for (long i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid < 0) break;
      if (pid == 0) {
        pause();
        _exit(0);
      }
      pids[started++] = pid;
    }
    for (long i = 0; i < started; ++i) kill(pids[i], SIGKILL);
    while (wait(NULL) > 0) {
    }
    printf("%ld\n", started);
    return 0;
  }
  return 2;
}
