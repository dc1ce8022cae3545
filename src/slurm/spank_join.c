/* Each task of the step entering its container (task_init, as the user, right before
 * slurmstepd execs the task): the keeper's namespaces, the task's working directory, the
 * container's environment, no_new_privs, no capability and ctr's seccomp filter. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_internal.h"

/* The compiled filter ctr wrote beside the instance's record (`fd`, opened on the node:
 * the user's state directory is not in the container), loaded and closed. */
static int load_seccomp(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
      st.st_size > 65536 * (off_t)sizeof(struct sock_filter)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  struct sock_filter *filter = malloc((size_t)st.st_size);
  ssize_t n = filter ? read(fd, filter, (size_t)st.st_size) : -1;
  close(fd);
  if (n != st.st_size) {
    free(filter);
    errno = EIO;
    return -1;
  }
  struct sock_fprog prog = {(unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter)), filter};
  int rc = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
  free(filter);
  return rc;
}

/* A task that cannot run in the step's container: one line on its stderr (srun shows it)
 * and exit status 255, ctr's own for its failures, so that srun and sacct see a failed step. */
__attribute__((format(printf, 1, 2), noreturn)) static void fail_task(const char *format, ...) {
  char line[1200];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  fprintf(stderr, "%s\n", line);
  fflush(stderr);
  _exit(255);
}

/* --container-env=NAME,...: a variable named there that the task has keeps the task's value
 * (pyxis's rule); the container's changes apply to every other. */
static int job_keeps(spank_t sp, const char *name) {
  char value[1];
  if (!opt_env || !listed(opt_env, name)) return 0;
  spank_err_t rc = spank_getenv(sp, name, value, sizeof value);
  return rc == ESPANK_SUCCESS || rc == ESPANK_NOSPACE;
}

/* Whether the join information names the variable NAME (set or unset). */
static int join_names(const char *name) {
  const size_t n = strlen(name);
  for (int i = 0; i < join.info.nset; ++i)
    if (strncmp(join.info.set[i], name, n) == 0 && join.info.set[i][n] == '=') return 1;
  for (int i = 0; i < join.info.nunset; ++i)
    if (strcmp(join.info.unset[i], name) == 0) return 1;
  return 0;
}

/* ctr ran without the job's PATH, CTR_*, APPTAINER_*, SINGULARITY_* and LD_LIBRARY_PATH
 * (kept_from_ctr), none of which ctr passes into a container, and its join information is
 * relative to the environment it ran with: it says nothing of them where the container has
 * what ctr had (its PATH) or nothing. The task gets what the container has, as when ctr ran
 * with the job's environment. */
static void container_view_of_kept(spank_t sp) {
  char **env = NULL;
  if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) return;
  char names[64][128];
  int n = 0;
  for (char **e = env; *e && n < 64; ++e) {
    const char *eq = strchr(*e, '=');
    if (!eq || eq - *e >= 128) continue;
    if (strncmp(*e, "PATH=", 5) != 0 && strncmp(*e, "LD_LIBRARY_PATH=", 16) != 0 && strncmp(*e, "CTR_", 4) != 0 &&
        strncmp(*e, "APPTAINER_", 10) != 0 && strncmp(*e, "SINGULARITY_", 12) != 0)
      continue;
    snprintf(names[n], sizeof names[n], "%.*s", (int)(eq - *e), *e);
    ++n;
  }
  for (int i = 0; i < n; ++i) {
    if (join_names(names[i]) || job_keeps(sp, names[i])) continue;
    if (strcmp(names[i], "PATH") == 0) spank_setenv(sp, "PATH", CTR_PATH, 1);
    else spank_unsetenv(sp, names[i]);
  }
}

#define RUNSCRIPT "/.singularity.d/runscript"

/* --container-entrypoint, before the task enters the container (where the node's files are
 * not): ctr-slurm-entrypoint opened on the node. */
static int open_entrypoint(void) {
  int fd = open(entrypoint_program, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail_task("ctr: --container-entrypoint: cannot open %s (%s): set entrypoint=PATH in plugstack.conf",
              entrypoint_program, strerror(errno));
  return fd;
}

/* --container-entrypoint, in the container: the task's argv[0] becomes the program `fd`
 * (slurmstepd execs job->argv after task_init, and takes an absolute argv[0] as it is), the
 * task's own argv[0] goes in CTR_ENTRYPOINT_ARG0, and that program execs the image's
 * runscript with ARG0 argv[1] ... */
static void run_through_entrypoint(spank_t sp, int fd) {
  static char path[32];
  int argc = 0;
  char **argv = NULL;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv || !argv[0])
    fail_task("ctr: --container-entrypoint: cannot read the task's command line");
  if (access(RUNSCRIPT, X_OK) != 0) {
    if (errno == ENOENT) fail_task("ctr: --container-entrypoint: the image has no " RUNSCRIPT);
    fail_task("ctr: --container-entrypoint: cannot run " RUNSCRIPT ": %s", strerror(errno));
  }
  if (spank_setenv(sp, "CTR_ENTRYPOINT_ARG0", argv[0], 1) != ESPANK_SUCCESS)
    fail_task("ctr: --container-entrypoint: cannot set CTR_ENTRYPOINT_ARG0 in the task's environment");
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  argv[0] = path;
}


/* The keeper's namespaces entered, once they are checked to be still its. */
static void enter_namespaces(void) {
  int fds[JOIN_MAX_NS];
  int pidfd = (int)syscall(SYS_pidfd_open, join.info.keeper, 0);
  if (pidfd < 0 || start_time(join.info.keeper) != join.info.keeper_start) {
    fail_task("ctr: the step's container %s has ended (keeper pid %d)", join.info.name, (int)join.info.keeper);
  }
  for (int i = 0; i < join.info.nns; ++i) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)join.info.keeper, join.info.ns_type[i]);
    fds[i] = open(path, O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0 || fstat(fds[i], &st) != 0 || (unsigned long long)st.st_ino != join.info.ns_inode[i]) {
      fail_task("ctr: the step's container %s has ended (its %s namespace is gone)", join.info.name, join.info.ns_type[i]);
    }
  }
  for (int i = 0; i < join.info.nns; ++i) {
    if (setns(fds[i], 0) != 0) {
      fail_task("ctr: cannot enter the %s namespace of %s: %s", join.info.ns_type[i], join.info.name, strerror(errno));
    }
    close(fds[i]);
  }
  close(pidfd);
}

void enter_container(spank_t sp) {
  if (join.failed[0]) fail_task("%s", join.failed);
  if (!join.active) return;
  /* pyxis's lines, which job logs and their parsers expect of a registry image, once per
   * node and step (its first task), on the task's stderr: ctr imported it as the container
   * started (its image cache or store serving it where it had it). */
  uint32_t local = 1;
  if (join.imported[0] && spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS && local == 0) {
    fprintf(stderr, "ctr: importing docker image: %s\nctr: imported docker image: %s\n", join.imported, join.imported);
    fflush(stderr);
  }
  const int entrypoint = opt_entrypoint ? open_entrypoint() : -1;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
  const int seccomp = join.info.seccomp ? open(join.info.seccomp, O_RDONLY | O_CLOEXEC) : -1;
  if (join.info.seccomp && seccomp < 0)
    fail_task("ctr: cannot open the seccomp filter %s: %s", join.info.seccomp, strerror(errno));
  enter_namespaces();
  const char *dir = opt_workdir && *opt_workdir ? opt_workdir : cwd;
  if (chdir(dir) != 0) {
    if (opt_workdir && *opt_workdir) {
      fail_task("ctr: --container-workdir %s: %s in the container", dir, strerror(errno));
    }
    slurm_info("ctr: working directory %s is not in the container: using /", dir);
    (void)!chdir("/");
  }
  for (int i = 0; i < join.info.nset; ++i) {
    char *eq = strchr(join.info.set[i], '=');
    if (!eq) continue;
    *eq = 0;
    if (!job_keeps(sp, join.info.set[i])) spank_setenv(sp, join.info.set[i], eq + 1, 1);
    *eq = '=';
  }
  for (int i = 0; i < join.info.nunset; ++i)
    if (!job_keeps(sp, join.info.unset[i])) spank_unsetenv(sp, join.info.unset[i]);
  container_view_of_kept(sp);
  if (entrypoint >= 0) run_through_entrypoint(sp, entrypoint);
  /* A --container-remap-root container (ctr's --fakeroot) keeps the capabilities setns gave
   * the task in its user namespace, as ctr's own launches into it do: apt-get, chown and a
   * tmpfs mount work as root there, with no privilege on the node. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || (!join.info.keep_capabilities && drop_capabilities() != 0)) {
    fail_task("ctr: cannot drop privileges in %s: %s", join.info.name, strerror(errno));
  }
  if (seccomp >= 0 && load_seccomp(seccomp) != 0) {
    fail_task("ctr: cannot load the seccomp filter %s: %s", join.info.seccomp, strerror(errno));
  }
}
