/* Processes and cgroups as the kernel shows them (spank_process.h). */
#define _GNU_SOURCE
#include "spank_process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

unsigned long long start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  p += 2;
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (!p) return 0;
    ++p;
  }
  return strtoull(p, NULL, 10);
}

int drop_capabilities(void) {
  for (int cap = 0; cap <= 63; ++cap)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return -1;
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  return (int)syscall(SYS_capset, &header, data);
}

int has_option(const char *list, const char *controller) {
  const size_t len = strlen(controller);
  for (const char *o = list; o && *o;) {
    const char *comma = strchr(o, ',');
    const size_t n = comma ? (size_t)(comma - o) : strlen(o);
    if (n == len && strncmp(o, controller, len) == 0) return 1;
    o = comma ? comma + 1 : NULL;
  }
  return 0;
}

int cgroup_v1_mounts_in(FILE *f, char mounts[][PATH_MAX], int max, const char *controller) {
  char line[4096];
  int n = 0;
  while (f && n < max && fgets(line, sizeof line, f)) {
    const char *dash = strstr(line, " - cgroup ");
    char point[PATH_MAX], super[1024];
    /* after the dash: the file system type, the source, the super options */
    if (!dash || sscanf(dash, " - %*s %*s %1023s", super) != 1) continue;
    if ((!controller || has_option(super, controller)) && sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1)
      snprintf(mounts[n++], PATH_MAX, "%s", point);
  }
  return n;
}

int cgroup_v1_mounts(char mounts[][PATH_MAX], int max, const char *controller) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  const int n = cgroup_v1_mounts_in(f, mounts, max, controller);
  if (f) fclose(f);
  return n;
}

int freezer_cgroup_in(FILE *f, char *path, size_t size) {
  char line[4096];
  while (f && fgets(line, sizeof line, f)) {
    /* "ID:CONTROLLER,...:PATH": freezer may share its hierarchy with others */
    char *controllers = strchr(line, ':');
    char *cgroup = controllers ? strchr(controllers + 1, ':') : NULL;
    if (!cgroup) continue;
    *cgroup = 0;
    if (!has_option(controllers + 1, "freezer")) continue;
    snprintf(path, size, "%s", cgroup + 1);
    path[strcspn(path, "\n")] = 0;
    return 1;
  }
  return 0;
}

int in_cgroup_in(FILE *f, const char *job_path) {
  char line[PATH_MAX + 64];
  const size_t n = strlen(job_path);
  int found = 0;
  while (!found && f && fgets(line, sizeof line, f)) {
    const char *path = strchr(line, ':');
    path = path ? strchr(path + 1, ':') : NULL;
    if (path && strncmp(path + 1, job_path, n) == 0 && (path[1 + n] == '/' || path[1 + n] == '\n')) found = 1;
  }
  return found;
}
