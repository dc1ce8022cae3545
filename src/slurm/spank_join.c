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

/* LANG, LANGUAGE and LC_ALL, which pyxis drops from the job's environment (a node's locale
 * the image may not have): the task has the image's, or none (--container-env keeps the
 * job's). ctr runs without them (kept_from_ctr), so the join information sets the image's. */
static int locale_variable(const char *entry) {
  return strncmp(entry, "LANG=", 5) == 0 || strncmp(entry, "LANGUAGE=", 9) == 0 || strncmp(entry, "LC_ALL=", 7) == 0;
}

/* ctr ran without the job's PATH, CTR_*, APPTAINER_*, SINGULARITY_*, LD_LIBRARY_PATH and
 * locale (kept_from_ctr), none of which ctr passes into a container, and its join information is
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
        strncmp(*e, "APPTAINER_", 10) != 0 && strncmp(*e, "SINGULARITY_", 12) != 0 && !locale_variable(*e))
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

/* The task's value of `name` into `value` (empty when unset or too long): 1 when set. */
static int task_value(spank_t sp, const char *name, char *value, size_t size) {
  value[0] = 0;
  if (spank_getenv(sp, name, value, (int)size) == ESPANK_SUCCESS) return 1;
  value[0] = 0;
  return 0;
}

/* `name`=`value` unless the task has `name` already (the image set it, or --container-env
 * kept the job's). */
static void set_unless_set(spank_t sp, const char *name, const char *value) {
  char have[8];
  spank_err_t rc = spank_getenv(sp, name, have, sizeof have);
  if (rc != ESPANK_SUCCESS && rc != ESPANK_NOSPACE) spank_setenv(sp, name, value, 1);
}

/* What enroot's hooks and pyxis give a task, from Slurm's variables (after the container's
 * environment is the task's):
 *  - PMIx (50-slurm-pmi.sh), for a pmix step: PMIX_MCA_ptl, _psec and _gds from the server's
 *    PMIX_PTL_MODULE, PMIX_SECURITY_MODE and PMIX_GDS_MODULE, so that the image's PMIx
 *    client picks the modules Slurm's server speaks;
 *  - PyTorch (50-slurm-pytorch.sh and pyxis), for an image that declares it (PYTORCH_VERSION):
 *    RANK and LOCAL_RANK from SLURM_PROCID and SLURM_LOCALID, WORLD_SIZE from SLURM_NTASKS,
 *    MASTER_ADDR the step's first node, MASTER_PORT 61000 + JOBID % 4536, and
 *    OMP_NUM_THREADS=1 where a node runs several tasks, as torch.distributed.run sets them. */
static void hook_variables(spank_t sp) {
  char value[4096], mpi[64];
  task_value(sp, "SLURM_MPI_TYPE", mpi, sizeof mpi);
  if ((!mpi[0] || strncmp(mpi, "pmix", 4) == 0) && task_value(sp, "PMIX_RANK", value, sizeof value)) {
    static const char *const pmix[][2] = {{"PMIX_PTL_MODULE", "PMIX_MCA_ptl"},
                                          {"PMIX_SECURITY_MODE", "PMIX_MCA_psec"},
                                          {"PMIX_GDS_MODULE", "PMIX_MCA_gds"}};
    for (size_t i = 0; i < sizeof pmix / sizeof pmix[0]; ++i)
      if (task_value(sp, pmix[i][0], value, sizeof value) && value[0]) set_unless_set(sp, pmix[i][1], value);
  }
  if (!task_value(sp, "PYTORCH_VERSION", value, sizeof value)) return;
  if (task_value(sp, "SLURM_PROCID", value, sizeof value)) spank_setenv(sp, "RANK", value, 1);
  if (task_value(sp, "SLURM_LOCALID", value, sizeof value)) spank_setenv(sp, "LOCAL_RANK", value, 1);
  if (task_value(sp, "SLURM_NTASKS", value, sizeof value)) set_unless_set(sp, "WORLD_SIZE", value);
  if (task_value(sp, "SLURM_STEP_NODELIST", value, sizeof value)) {
    hostlist_t nodes = slurm_hostlist_create(value);
    char *first = nodes ? slurm_hostlist_shift(nodes) : NULL;
    if (first) set_unless_set(sp, "MASTER_ADDR", first);
    free(first);
    if (nodes) slurm_hostlist_destroy(nodes);
  }
  if (task_value(sp, "SLURM_JOB_ID", value, sizeof value)) {
    char port[16];
    snprintf(port, sizeof port, "%lu", 61000 + strtoul(value, NULL, 10) % 4536);
    set_unless_set(sp, "MASTER_PORT", port);
  }
  char nodes[32];
  if (task_value(sp, "SLURM_STEP_NUM_TASKS", value, sizeof value) &&
      task_value(sp, "SLURM_STEP_NUM_NODES", nodes, sizeof nodes) && strtol(value, NULL, 10) > strtol(nodes, NULL, 10))
    set_unless_set(sp, "OMP_NUM_THREADS", "1");
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

/* The keeper's working directory, as a path in the container (read once the task is in
 * its mount namespace): 0, or -1. */
static int keeper_cwd(char *dir, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/%d/cwd", (int)join.info.keeper);
  const ssize_t n = readlink(link, dir, size - 1);
  if (n <= 0 || dir[0] != '/') return -1;
  dir[n] = 0;
  return 0;
}

void enter_container(spank_t sp) {
  if (join.failed[0]) fail_task("%s", join.failed);
  if (!join.active) return;
  /* pyxis's lines, which job logs and their parsers expect of a registry image, once per
   * node and step (its first task), on the task's stderr: ctr imported it as the container
   * started (its image cache or store serving it where it had it). */
  uint32_t local = 1;
  const int first = spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS && local == 0;
  if (join.imported[0] && first)
    fprintf(stderr, "ctr: importing docker image: %s\nctr: imported docker image: %s\n", join.imported, join.imported);
  /* As pyxis: the running container has its mounts, and a step that attaches adds none. */
  if (join.attached && opt_mounts && *opt_mounts && first)
    fprintf(stderr, "ctr: ignoring --container-mounts when attaching to a running container\n");
  fflush(stderr);
  const int entrypoint = opt_entrypoint ? open_entrypoint() : -1;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
  const int seccomp = join.info.seccomp ? open(join.info.seccomp, O_RDONLY | O_CLOEXEC) : -1;
  if (join.info.seccomp && seccomp < 0)
    fail_task("ctr: cannot open the seccomp filter %s: %s", join.info.seccomp, strerror(errno));
  enter_namespaces();
  /* A step that attaches to another's container starts where that container's keeper is
   * (pyxis: the container's working directory); so does a new container's unless the site
   * says workdir=submit: its keeper started in the image's WORKDIR (--image-workdir), else
   * in the submit directory (auto) or / (image). With workdir=submit, the task's own. */
  char keeper_dir[PATH_MAX];
  const char *dir = container_workdir() ? container_workdir() : cwd;
  if (!container_workdir() && (join.attached || workdir_rule() != WORKDIR_SUBMIT) &&
      keeper_cwd(keeper_dir, sizeof keeper_dir) == 0)
    dir = keeper_dir;
  if (chdir(dir) != 0) {
    if (container_workdir()) {
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
  hook_variables(sp);
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
