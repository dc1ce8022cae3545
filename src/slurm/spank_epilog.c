/* The ends, as root: a step's container stopped at the step's exit and its image holders at
 * its last task's, and at the job's end on the node (slurmd's job_epilog) its named
 * containers stopped and what is left in its cgroups ended. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_internal.h"

/* the job's cgroups at its end (process tracking by cgroup, v1)
 *
 * slurmstepd runs in the job's cgroup (uid_U/job_J in each v1 hierarchy, its steps below),
 * and so does what it starts: the ctr that keeps a named container, and the image holder it
 * started (its key names that cgroup, so only this job's launches use it). Slurm removes a
 * job's cgroups as its last step ends, and cannot while those still run: the named keeper
 * until the epilog stops it, the holder until its linger ends. So the epilog ends what is
 * left of the user's in the job's cgroups (nothing of the job runs any more on this node)
 * and removes them, as Slurm would have; a linuxproc cluster has none. */

#define CGROUP_WAIT_MS 3000

/* What each_cgroup calls for a cgroup: `dir` open, `name` its entry in `parent`. */
typedef void cgroup_fn(int parent, const char *name, int dir, void *arg);

/* The names of the cgroups in the directory `dir` (malloc'd, NULL-ended), or NULL. */
static char **child_cgroups(int dir) {
  const int listing = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = listing >= 0 ? fdopendir(listing) : NULL;
  if (!d) {
    if (listing >= 0) close(listing);
    return NULL;
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char **grown = realloc(names, sizeof(char *) * (n + 2));
    if (!grown || !(grown[n] = strdup(e->d_name))) {
      names = grown ? grown : names;
      break;
    }
    names = grown;
    names[++n] = NULL;
  }
  closedir(d);
  if (names) names[n] = NULL;
  return names;
}

/* Calls fn for the cgroup `name` in `parent` and every cgroup below it, deepest first. The
 * whole tree: the user owns a step's cgroup and may nest others in it as deep as they
 * like, and whatever runs there must not outlive the job. Walked through directory file
 * descriptors, so that no path grows too long; one open per level, so a tree deeper than
 * this process's file limit is said in the log, not passed over in silence. */
static void each_cgroup(int parent, const char *name, cgroup_fn *fn, void *arg) {
  const int dir = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    if (errno != ENOENT) slurm_error("ctr: cannot open the cgroup %s: %s: what is below it is left", name, strerror(errno));
    return;
  }
  char **children = child_cgroups(dir);
  for (size_t i = 0; children && children[i]; ++i) {
    each_cgroup(dir, children[i], fn, arg);
    free(children[i]);
  }
  free(children);
  fn(parent, name, dir, arg);
  close(dir);
}

struct cgroup_sweep {
  uid_t uid;
  const char *job_path; /* "/slurm_n1/uid_1001/job_7": a process's cgroup line must name it */
  const char *comm;     /* only processes of this name (NULL: all) */
  int sig;
  int left; /* processes found */
};

/* A process that has ended and waits to be reaped (this machine's init reaps late): it
 * holds nothing, and no signal ends it. */
static int is_zombie(pid_t pid) {
  char file[64], text[512];
  snprintf(file, sizeof file, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(file, "re");
  if (!f) return 1;
  const size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *end = strrchr(text, ')'); /* after the name, which may hold anything */
  return !end || end[1] != ' ' || end[2] == 'Z' || end[2] == 'X';
}

static int has_comm(pid_t pid, const char *comm) {
  char file[64], name[32] = "";
  snprintf(file, sizeof file, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(file, "re");
  if (!f) return 0;
  const int ok = fgets(name, sizeof name, f) != NULL;
  fclose(f);
  name[strcspn(name, "\n")] = 0;
  return ok && strcmp(name, comm) == 0;
}

/* Whether PID's cgroup (in any hierarchy) is JOB_PATH or below it. */
static int in_job_cgroup(pid_t pid, const char *job_path) {
  char file[64];
  snprintf(file, sizeof file, "/proc/%d/cgroup", (int)pid);
  FILE *f = fopen(file, "re");
  if (!f) return 0;
  const int found = in_cgroup_in(f, job_path);
  fclose(f);
  return found;
}


static uid_t real_uid(pid_t pid) {
  char file[64], line[256];
  snprintf(file, sizeof file, "/proc/%d/status", (int)pid);
  FILE *f = fopen(file, "re");
  unsigned long uid = (unsigned long)-1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Uid: %lu", &uid) == 1) break;
  if (f) fclose(f);
  return (uid_t)uid;
}

/* Signals the user's processes in one cgroup. The pidfd holds the process: it is signalled
 * only if, held, it is still the user's and in the job's cgroup (not a reused pid). */
static void signal_cgroup(int parent, const char *name, int dir, void *arg) {
  (void)parent;
  (void)name;
  struct cgroup_sweep *sw = arg;
  if (sw->sig) { /* a frozen process (the user may freeze a cgroup of theirs) ends only once thawed */
    const int state = openat(dir, "freezer.state", O_WRONLY | O_CLOEXEC);
    if (state >= 0) {
      (void)!write(state, "THAWED", 6);
      close(state);
    }
  }
  const int procs = openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  FILE *f = procs >= 0 ? fdopen(procs, "r") : NULL;
  if (!f && procs >= 0) close(procs);
  long pid;
  while (f && fscanf(f, "%ld", &pid) == 1) {
    const int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (pidfd < 0) continue;
    if (real_uid((pid_t)pid) == sw->uid && !is_zombie((pid_t)pid) && in_job_cgroup((pid_t)pid, sw->job_path) &&
        (!sw->comm || has_comm((pid_t)pid, sw->comm))) {
      sw->left++;
      if (sw->sig) syscall(SYS_pidfd_send_signal, pidfd, sw->sig, NULL, 0);
    }
    close(pidfd);
  }
  if (f) fclose(f);
}

static void remove_cgroup(int parent, const char *name, int dir, void *arg) {
  (void)dir;
  (void)arg;
  if (unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
    slurm_debug("ctr: cannot remove the cgroup %s: %s", name, strerror(errno));
}

/* flock(fd, LOCK_EX), tried until `seconds` have passed: 0, or -1. Anyone may open a
 * hierarchy's root and hold its lock, so the epilog does not wait for it without end. */
static int lock_within(int fd, int seconds) {
  const long long deadline = now_ms() + 1000LL * seconds;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || now_ms() >= deadline) return -1;
    usleep(20 * 1000);
  }
  return 0;
}

void end_job_cgroups(uid_t uid, uint32_t job) {
  char mounts[16][PATH_MAX], node[256] = "", jobs[16][PATH_MAX], job_path[PATH_MAX] = "";
  int job_mount[16];
  const int nmounts = cgroup_v1_mounts(mounts, 16, NULL);
  const char *env_node = getenv("SLURMD_NODENAME");
  if (env_node) snprintf(node, sizeof node, "%s", env_node);
  else node_name(node, sizeof node);
  int njobs = 0;
  for (int m = 0; m < nmounts; m++) {
    /* slurm_NODE with Slurm's multiple-slurmd build (Debian's), else slurm */
    for (int named = 1; named >= 0; named--) {
      char rel[PATH_MAX], dir[PATH_MAX * 2];
      snprintf(rel, sizeof rel, "/slurm%s%s/uid_%u/job_%u", named ? "_" : "", named ? node : "", (unsigned)uid,
               (unsigned)job);
      snprintf(dir, sizeof dir, "%.4095s%.4095s", mounts[m], rel);
      struct stat st;
      if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || strlen(dir) >= PATH_MAX) continue;
      job_mount[njobs] = m;
      snprintf(jobs[njobs++], PATH_MAX, "%s", dir);
      snprintf(job_path, sizeof job_path, "%s", rel);
      break;
    }
  }
  if (!njobs) return;
  /* Through every hierarchy: the user may move a process of theirs in one of them only. */
  struct cgroup_sweep sw = {uid, job_path, NULL, SIGTERM, 0};
  for (int waited = 0, sig = SIGTERM;; waited += 50) {
    sw.sig = sig;
    sw.left = 0;
    for (int j = 0; j < njobs; j++) each_cgroup(AT_FDCWD, jobs[j], signal_cgroup, &sw);
    if (!sw.left || waited >= 2 * CGROUP_WAIT_MS) break;
    sig = waited >= CGROUP_WAIT_MS ? SIGKILL : 0; /* what SIGTERM did not end */
    usleep(50 * 1000);
  }
  if (sw.left) slurm_error("ctr: %d processes of job %u did not end: its cgroups are left", sw.left, (unsigned)job);
  /* Under Slurm's own lock (flock on the hierarchy's root), so that no step of another job
   * of the user is being created beside them; the user's cgroup too once it is empty. */
  for (int j = 0; j < njobs; j++) {
    const int root = open(mounts[job_mount[j]], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 || lock_within(root, ctr_timeout) != 0) {
      if (root >= 0) slurm_error("ctr: no lock on %s within %d s: job %u's cgroups are left", mounts[job_mount[j]],
                                 ctr_timeout, (unsigned)job);
      if (root >= 0) close(root);
      continue;
    }
    each_cgroup(AT_FDCWD, jobs[j], remove_cgroup, NULL);
    char *slash = strrchr(jobs[j], '/');
    *slash = 0;
    if (rmdir(jobs[j]) != 0 && errno != EBUSY && errno != ENOTEMPTY && errno != ENOENT)
      slurm_debug("ctr: cannot remove the cgroup %s: %s", jobs[j], strerror(errno));
    close(root); /* the lock with it */
  }
}

/* the step's image holders at its end (process tracking by cgroup, v1)
 *
 * A `ctr exec` in a task starts the image's holder in the step's cgroup (its key names that
 * cgroup: only the step's tasks share it), where it lingers after the last launch. Slurm
 * ends a step by killing its cgroup once the tasks have exited, and if anything is left it
 * waits a whole second before it looks again (proctrack/cgroup's wait): each `srun ctr
 * exec` step took 1 s longer. When the step's last task has exited, the plugin (root, in
 * slurmstepd, before that kill) ends the step's holders with SIGTERM, on which a holder
 * tears down at once, its files removed, and waits for them to go. */

#define HOLDER_WAIT_MS 2000

/* The freezer hierarchy's mount point and slurmstepd's (the job's) cgroup in it. */
static int own_freezer(char mount[PATH_MAX], char *path, size_t path_size) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  const int found = freezer_cgroup_in(f, path, path_size);
  if (f) fclose(f);
  char mounts[1][PATH_MAX];
  if (!found || cgroup_v1_mounts(mounts, 1, "freezer") != 1) return 0;
  memcpy(mount, mounts[0], PATH_MAX);
  return 1;
}

void end_step_holders(spank_t sp) {
  uint32_t step = 0;
  uid_t uid;
  if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      step == SLURM_EXTERN_CONT)
    return;
  char mount[PATH_MAX], job[PATH_MAX], name[32], rel[PATH_MAX], dir[PATH_MAX * 2];
  if (!own_freezer(mount, job, sizeof job) || !strstr(job, "/job_")) return;
  if (step == SLURM_BATCH_SCRIPT) snprintf(name, sizeof name, "step_batch");
  else if (step == SLURM_INTERACTIVE_STEP) snprintf(name, sizeof name, "step_interactive");
  else snprintf(name, sizeof name, "step_%u", (unsigned)step);
  snprintf(rel, sizeof rel, "%.2048s/%s", job, name);
  snprintf(dir, sizeof dir, "%.4095s%.4095s", mount, rel);
  struct cgroup_sweep sw = {uid, rel, "ctr-holder", SIGTERM, 0};
  for (int waited = 0;; waited += 10) {
    sw.left = 0;
    each_cgroup(AT_FDCWD, dir, signal_cgroup, &sw);
    if (!sw.left || waited >= HOLDER_WAIT_MS) break;
    sw.sig = 0;
    usleep(10 * 1000);
  }
}

/* The job's named containers stopped, as the job's user (slurm_spank_exit stopped each
 * step's unnamed one). Every node's (where nodes share a state directory, the first epilog
 * stops them all: the job has ended everywhere by then). */
void stop_named_containers(const struct passwd *pw, uint32_t job) {
  char pattern[64];
  struct login_env login;
  login_env(&login, pw);
  char **env = login.env;
  snprintf(pattern, sizeof pattern, "slurm.%u.n-*", job);
  const struct job_user user = {pw->pw_uid, pw->pw_gid, NULL, -1};
  /* No state directory, no instance: nothing to run ctr for. */
  const int state = open_user_state_dir(user.uid, user.gid);
  if (state < 0) return;
  close(state);
  char runtime[64];
  snprintf(runtime, sizeof runtime, "%s/%u", RUNTIME_BASE, (unsigned)user.uid);
  /* Only when one is there: `instance stop` with no match says so and exits non-zero. */
  char *list[] = {ctr_program, "instance", "list", pattern, NULL};
  char *out = NULL, err[1024] = "";
  if (run_ctr_as(&user, env, runtime, list, &out, err, sizeof err, 1) != 0 || !out || !strstr(out, "slurm.")) {
    free(out);
    return;
  }
  free(out);
  out = NULL;
  char *stop[] = {ctr_program, "instance", "stop", "-t", "5", pattern, NULL};
  int status = run_ctr_as(&user, env, runtime, stop, &out, err, sizeof err, 1);
  free(out);
  if (status != 0) slurm_error("ctr: stopping the named containers of job %u: %s (exit status %d)", job, err, status);
}

