/* kill_hunter UID COMM STOPFILE: while STOPFILE exists (5 minutes at most), scans /proc and
 * SIGKILLs every process whose real uid is UID and whose comm is COMM (the kernel's 15-byte
 * name), after a random delay of 0-2 ms so that kills land at different points of its run.
 * Prints how many kills landed. The setuid helper lives a few milliseconds: pkill, which reads
 * every process's cmdline and status, is too slow to catch it. Used by the SIGKILL storm test. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Real uid of PID from /proc/PID/status ("Uid:\treal\teffective..."), or -1 (also for a
 * zombie, which a kill would not hurt). */
static long real_uid(const char *pid) {
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%s/status", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  if (strstr(buf, "\nState:\tZ")) return -1;
  char *line = strstr(buf, "\nUid:");
  return line ? strtol(line + 5, NULL, 10) : -1;
}

/* Whether /proc/PID/comm is COMM. */
static int has_comm(const char *pid, const char *comm) {
  char path[64], name[32] = {0};
  snprintf(path, sizeof path, "/proc/%s/comm", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, name, sizeof name - 1);
  close(fd);
  if (n <= 0) return 0;
  if (name[n - 1] == '\n') name[n - 1] = 0;
  return strcmp(name, comm) == 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: kill_hunter UID COMM STOPFILE\n");
    return 2;
  }
  const long uid = strtol(argv[1], NULL, 10);
  const char *comm = argv[2];
  const char *stop = argv[3];
  const long long end = now_ms() + 300000;
  srand((unsigned)getpid());
  int kills = 0;
  while (access(stop, F_OK) == 0 && now_ms() < end) {
    DIR *proc = opendir("/proc");
    if (!proc) return 1;
    struct dirent *e;
    while ((e = readdir(proc)) != NULL) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      if (!has_comm(e->d_name, comm) || real_uid(e->d_name) != uid) continue;
      usleep((useconds_t)(rand() % 2000));
      if (!has_comm(e->d_name, comm)) continue; /* it exec'd something else meanwhile */
      if (kill((pid_t)atoi(e->d_name), SIGKILL) == 0) kills++;
    }
    closedir(proc);
  }
  printf("%d\n", kills);
  return 0;
}
