/* The step's container on a node (slurmstepd, once per step): `ctr instance start` run as the
 * job's user from init_post_opt, its join information taken in user_init; or a named
 * container of the job's earlier step found through its join file. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_internal.h"

struct step_container join;

/* The instance name of the step's container (step_instance_name). */
static int instance_name(spank_t sp, char *name, size_t size) {
  uint32_t job = 0, step = 0;
  char host[256] = "";
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
    return -1;
  node_name(host, sizeof host);
  return step_instance_name(name, size, job, step == SLURM_BATCH_SCRIPT ? NULL : &step, opt_name, host);
}

/* The step's `ctr instance start`, from init_post_opt (begin_container) to user_init
 * (finish_container): it runs while slurmstepd sets up the step (I/O, the MPI server,
 * PAM), not after. */
static struct {
  int begun;
  struct ctr_run run;
} starting;

/* What parse_join_info took, dropped (a join file that did not do), and the step's state. */
static void reset_join(void) {
  reset_join_info(&join.info);
  memset(&join, 0, sizeof join);
}

/* As the job's user (spawn_as_user's run): the directory `dir` as the kernel names it once
 * ctr has changed into it, written into `path` (the child shares the plugin's memory). */
struct resolved_dir {
  const char *dir;
  char path[PATH_MAX];
};

static int resolve_dir(void *arg) {
  struct resolved_dir *r = arg;
  if (chdir(r->dir) != 0) return 1;
  const long n = syscall(SYS_getcwd, r->path, sizeof r->path);
  return n > 1 && r->path[0] == '/' ? 0 : 1;
}

/* The absolute path ctr reads for `image` (run in the job's working directory), or "" for
 * a registry reference (its record names the cached copy). The working directory is
 * resolved as the user, not as root: a path the user cannot reach would make the plugin an
 * oracle of what exists there. */
static void image_as_ctr_reads_it(const struct job_user *user, char **env, const char *image, char *path,
                                  size_t size) {
  path[0] = 0;
  if (strstr(image, "://") || strchr(image, '#')) return;
  if (image[0] == '/') {
    snprintf(path, size, "%s", image);
    return;
  }
  struct resolved_dir r = {.dir = job_dir(env)};
  if (!r.dir) return; /* ctr would run in "/": leave it to ctr */
  struct as_user a = {.user = user, .out = -1, .err = -1, .run = resolve_dir, .arg = &r};
  const pid_t child = spawn_as_user(&a);
  if (child < 0 || wait_child(child, now_ms() + 1000LL * ctr_timeout, ctr_timeout, "resolving the working directory",
                              0) != 0 || r.path[0] != '/')
    return; /* the user cannot reach it, and nor would ctr: leave it to ctr */
  int n = snprintf(path, size, "%s%s%s", r.path, strcmp(r.path, "/") == 0 ? "" : "/", image);
  if (n < 0 || (size_t)n >= size) path[0] = 0;
}

/* The user's runtime directory for the plugin's ctr runs: its path into `path` (made when
 * missing). 0, or -1. */
static int runtime_dir(const struct job_user *user, char *path, size_t size) {
  const int fd = open_runtime_dir(RUNTIME_BASE, user->uid, user->gid, 1);
  if (fd < 0) return -1;
  close(fd);
  snprintf(path, size, "%s/%u", RUNTIME_BASE, (unsigned)user->uid);
  return 0;
}

/* The join file of the named container `name` (ctr writes it beside the instance's record,
 * STATE/instances/NAME.join), malloc'd, or NULL. */
static char *read_join_file(const struct job_user *user, const char *name) {
  const int state = open_user_state_dir(user->uid, user->gid);
  if (state < 0) return NULL;
  char *text = read_join_file_in(state, name, user->uid);
  close(state);
  return text;
}

/* A later step of the job on this node joins its named container without running ctr: the
 * join file, if the keeper it names still runs with the step's image (else ctr decides, as
 * `instance start --reuse`). `image` NULL: a step that names the container only, which
 * takes it with whatever image it runs. */
static int join_named_container(const struct job_user *user, char **env, const char *name, const char *image) {
  char expected[2 * PATH_MAX] = "";
  if (image) {
    image_as_ctr_reads_it(user, env, image, expected, sizeof expected);
    if (!expected[0]) return -1;
  }
  char *text = read_join_file(user, name);
  if (!text) return -1;
  const int parsed = parse_join_info(text, &join.info);
  free(text);
  if (parsed != 0 || strcmp(join.info.name, name) != 0 || (image && strcmp(join.info.image, expected) != 0) ||
      start_time(join.info.keeper) != join.info.keeper_start) {
    reset_join();
    return -1;
  }
  return 0;
}


/* The step's container cannot start: why, for each task to say, and in slurmd's log. */
__attribute__((format(printf, 1, 2))) static void step_fails(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(join.failed, sizeof join.failed, format, args);
  va_end(args);
  slurm_info("%s", join.failed);
}

/* What begin_container knows of the step, and the command line it runs ctr with. */
struct step_start {
  char name[96]; /* the instance's */
  struct job_user user;
  char **env;
  int known; /* user and env read */
  int named;
  const char *image; /* image_path's, or NULL: no --container-image */
  char image_buf[2 * PATH_MAX];
  char script_bind[4 * PATH_MAX + 8];
  char binds[16384], scratch[4096]; /* --container-mounts as ctr's --bind and --scratch */
  char *argv[36];
};

/* Whether a process other than the keeper is in the container's mount namespace: a task of
 * a step that runs in it (pyxis's "running" container, which `NAME:exec` needs). Read as
 * root, in slurmstepd. */
static int container_in_use(const struct join_info *info) {
  unsigned long long mnt = 0;
  for (int i = 0; i < info->nns; ++i)
    if (strcmp(info->ns_type[i], "mnt") == 0) mnt = info->ns_inode[i];
  DIR *proc = mnt ? opendir("/proc") : NULL;
  if (!proc) return 0;
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(proc));) {
    char *end;
    const long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == info->keeper) continue;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld/ns/mnt", pid);
    found = stat(path, &st) == 0 && (unsigned long long)st.st_ino == mnt;
  }
  closedir(proc);
  return found;
}

/* pyxis's name of a step's unnamed container: "JOB.STEP" (or "JOB.batch") of this job. Its
 * instance name into `name`: 0, or -1 when `opt` is no such name. */
static int unnamed_step_name(spank_t sp, const char *opt, char *name, size_t size) {
  uint32_t job = 0;
  char host[256] = "";
  char *end;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || strtoul(opt, &end, 10) != job || *end != '.') return -1;
  const char *step_text = end + 1;
  const unsigned long step = strtoul(step_text, &end, 10);
  const int batch = strcmp(step_text, "batch") == 0;
  if (!batch && (end == step_text || *end || step >= SLURM_BATCH_SCRIPT)) return -1;
  const unsigned step32 = (unsigned)step;
  node_name(host, sizeof host);
  return step_instance_name(name, size, job, batch ? NULL : &step32, NULL, host);
}

/* A named container of the job's that runs on this node already (or pyxis's JOB.STEP, a
 * step's unnamed one): joined, or the step refused (its flag says it must not run yet, or
 * must run and does not, or no image is given to start it): 1; 0: the step starts its
 * container. */
static int found_named(spank_t sp, struct step_start *s) {
  int found = s->known && s->named && join_named_container(&s->user, s->env, s->name, s->image) == 0;
  char unnamed[96];
  if (!found && s->known && s->named && unnamed_step_name(sp, opt_name, unnamed, sizeof unnamed) == 0 &&
      join_named_container(&s->user, s->env, unnamed, NULL) == 0)
    found = 2; /* a step's own: it runs while that step does */
  if (found == 1 && opt_name_flag == NAME_EXEC && !container_in_use(&join.info)) {
    reset_join();
    found = 0; /* kept for the job, but no step runs in it: pyxis's container is not running */
  }
  if (found) {
    if (opt_name_flag == NAME_CREATE) {
      const pid_t keeper = join.info.keeper;
      reset_join();
      step_fails("ctr: --container-name=%.64s:create: the container already runs on this node (keeper pid %d)",
                 opt_name, (int)keeper);
      return 1;
    }
    join.active = 1;
    join.attached = 1;
    slurm_info("ctr: %s runs (keeper pid %d): joined through its join file", join.info.name, (int)join.info.keeper);
    return 1;
  }
  if (s->named && (opt_name_flag == NAME_EXEC || !s->image)) {
    step_fails("ctr: --container-name=%.64s%s: no container of that name runs on this node for this job%s", opt_name,
               opt_name_flag == NAME_EXEC ? ":exec" : "",
               opt_name_flag == NAME_EXEC ? " (in a step that still runs)"
               : s->image                 ? ""
                                          : ", and no --container-image was given to start one");
    return 1;
  }
  return 0;
}

/* The batch step's task is the script slurmd wrote to its spool directory: bound in at
 * its own path (read-only), so that `#SBATCH --container-image` runs it in the container.
 * Its --bind value into `bind`: 1, or 0 (no script path). */
static int batch_script_bind(spank_t sp, char *bind, size_t size) {
  int job_argc = 0;
  char **job_argv = NULL;
  if (spank_get_item(sp, S_JOB_ARGV, &job_argc, &job_argv) != ESPANK_SUCCESS || job_argc <= 0 || job_argv[0][0] != '/')
    return 0;
  char escaped[PATH_MAX * 2];
  size_t e = 0;
  for (const char *c = job_argv[0]; *c && e + 2 < sizeof escaped; ++c) {
    if (*c == ',' || *c == ':' || *c == '\\') escaped[e++] = '\\';
    escaped[e++] = *c;
  }
  escaped[e] = 0;
  snprintf(bind, size, "%s:%s:ro", escaped, escaped);
  return 1;
}

/* slurmstepd's configuration (libslurm's, which slurmstepd has loaded; the plugin is built
 * against the same Slurm's slurm.h, as every SPANK plugin must be). Weak: where it is not
 * there, nothing of it is used. */
extern slurm_conf_t slurm_conf __attribute__((weak));

/* slurmd's spool directory of this node (SlurmdSpoolDir, its %n and %h made the node's and
 * host's names) into `dir`: 0, or -1. */
static int slurmd_spool_dir(char **env, char *dir, size_t size) {
  if (&slurm_conf == NULL || !slurm_conf.slurmd_spooldir || slurm_conf.slurmd_spooldir[0] != '/') return -1;
  char host[256] = "";
  const char *node = env_value(env, "SLURMD_NODENAME");
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  size_t used = 0;
  for (const char *c = slurm_conf.slurmd_spooldir; *c && used + 1 < size; ++c) {
    const char *with = c[0] == '%' && c[1] == 'n' ? (node ? node : host) : c[0] == '%' && c[1] == 'h' ? host : NULL;
    if (!with) {
      dir[used++] = *c;
      continue;
    }
    used += (size_t)snprintf(dir + used, size - used, "%s", with);
    ++c;
  }
  if (used + 1 >= size) return -1;
  dir[used] = 0;
  return 0;
}

/* PMIx's server directory for the step's tasks: Slurm's pmix plugin makes the step's
 * PMIX_SERVER_TMPDIR (its server's files, which the image's PMIx client maps; without them
 * each rank prints gds_ds12 errors and falls back) in slurmd's spool directory, after the
 * container has started. So the spool directory is bound at its own path, read-write (the
 * user reaches there what the user reaches on the node, no more), for a pmix step and for
 * a named container (a later step of the job may be one); enroot's hook binds the step's
 * own directory, which does not exist yet here. Appended to `binds` (ctr's --bind list):
 * 1, or 0 (none). */
static int pmix_server_bind(char **env, int named, char *binds, size_t size) {
  const char *mpi = env_value(env, "SLURM_MPI_TYPE");
  if (!mpi && &slurm_conf != NULL) mpi = slurm_conf.mpi_default;
  char dir[PATH_MAX];
  struct stat st;
  if ((!named && (!mpi || strncmp(mpi, "pmix", 4) != 0)) || slurmd_spool_dir(env, dir, sizeof dir) != 0 ||
      stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || strcmp(dir, "/") == 0 || strpbrk(dir, ",:\\"))
    return 0;
  const size_t used = strlen(binds);
  const int n = snprintf(binds + used, size - used, "%s%s:%s", used ? "," : "", dir, dir);
  if (n < 0 || (size_t)n >= size - used) {
    binds[used] = 0;
    return 0;
  }
  return 1;
}

/* `ctr instance start ... IMAGE NAME` for the step, into s->argv. */
static void instance_start_argv(spank_t sp, struct step_start *s) {
  char **argv = s->argv;
  int n = 0;
  argv[n++] = ctr_program;
  argv[n++] = "instance";
  argv[n++] = "start";
  argv[n++] = "--no-pid";
  argv[n++] = "--join-info";
  argv[n++] = "--no-startscript"; /* the step's tasks are the work, not the image's startscript */
  /* An unnamed step's container: the ctr started here keeps it itself (no forked keeper;
   * slurmstepd ends it with the step's other processes, and exit removes its files). A
   * named one must outlive the step: its keeper is a process of its own. */
  if (!s->named) argv[n++] = "--stay";
  if (s->binds[0]) {
    argv[n++] = "--bind";
    argv[n++] = s->binds;
  }
  if (s->scratch[0]) {
    argv[n++] = "--scratch";
    argv[n++] = s->scratch;
  }
  if (container_workdir()) {
    argv[n++] = "--pwd";
    argv[n++] = (char *)container_workdir();
  } else if (workdir_rule() != WORKDIR_SUBMIT) {
    argv[n++] = "--image-workdir"; /* where `ctr pull` recorded the image's WORKDIR */
    if (workdir_rule() == WORKDIR_IMAGE) {
      argv[n++] = "--pwd"; /* an image that records none: pyxis's / */
      argv[n++] = "/";
    }
  }
  if (opt_no_home) argv[n++] = "--no-home";
  if (opt_unshare && listed(opt_unshare, "net")) argv[n++] = "--net";
  if (opt_unshare && listed(opt_unshare, "ipc")) argv[n++] = "--ipc";
  if (opt_unshare && listed(opt_unshare, "uts")) argv[n++] = "--uts";
  if (container_writable()) argv[n++] = "--writable-tmpfs";
  if (s->named && opt_name_flag == NAME_AUTO) argv[n++] = "--reuse"; /* the job's earlier step on this node started it */
  argv[n++] = "--image-env-first"; /* pyxis's rule: the image's variables win over the job's */
  if (opt_remap_root) argv[n++] = "--fakeroot";
  uint32_t step = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_BATCH_SCRIPT &&
      batch_script_bind(sp, s->script_bind, sizeof s->script_bind)) {
    argv[n++] = "--bind";
    argv[n++] = s->script_bind;
  }
  /* The step's GPUs (slurmstepd put SLURM_STEP_GPUS, or SLURM_JOB_GPUS for the batch step,
   * in the job's environment): --nv by default, as --container-nv asks; Slurm's own
   * CUDA_VISIBLE_DEVICES and device cgroup keep the tasks to those GPUs, as without a
   * container. */
  const char *gpus = env_value(s->env, step == SLURM_BATCH_SCRIPT ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
  if (opt_nv || (gpus && *gpus)) argv[n++] = "--nv";
  if (opt_mpi && *opt_mpi) {
    argv[n++] = "--mpi";
    argv[n++] = opt_mpi;
  }
  /* A SIF in a registry that ctr push gave a chunk table is read lazily (the node fetches the
   * chunks its tasks read, each checked), where the node's ctr.conf 'lazy images' allows; ctr
   * pulls any other oras:// image whole. An http(s):// SIF runs only so ('lazy images = all'). */
  if (s->image && (strncmp(s->image, "oras://", 7) == 0 || strncmp(s->image, "https://", 8) == 0 ||
                   strncmp(s->image, "http://", 7) == 0))
    argv[n++] = "--lazy";
  argv[n++] = (char *)s->image;
  argv[n++] = s->name;
  argv[n] = NULL;
}

/* Remote, once per step and node: the step's container starts (or, named, is found). */
void begin_container(spank_t sp) {
  starting.begun = 1;
  const char *why = step_refused(sp);
  if (why) { /* told by each task, as a container that cannot start */
    step_fails("%s", why);
    return;
  }
  struct step_start s = {.named = opt_name && *opt_name};
  if ((!opt_image || !*opt_image) && !s.named) return;
  if (instance_name(sp, s.name, sizeof s.name) != 0) {
    snprintf(join.failed, sizeof join.failed, "ctr: cannot read the job and step ids");
    slurm_error("%s", join.failed);
    return;
  }
  s.known = step_user(sp, &s.user) == 0 && spank_get_item(sp, S_JOB_ENV, &s.env) == ESPANK_SUCCESS;
  s.image = opt_image && *opt_image ? image_path(s.image_buf, sizeof s.image_buf) : NULL;
  if (found_named(sp, &s)) return;
  if (s.image && strncmp(s.image, "docker://", 9) == 0)
    snprintf(join.imported, sizeof join.imported, "%s", opt_image);
  char bad_mounts[1024];
  if (opt_mounts && *opt_mounts &&
      container_mounts(opt_mounts, s.binds, sizeof s.binds, s.scratch, sizeof s.scratch, bad_mounts,
                       sizeof bad_mounts) != 0) {
    step_fails("%s", bad_mounts);
    return;
  }
  if (s.known) pmix_server_bind(s.env, s.named, s.binds, sizeof s.binds);
  instance_start_argv(sp, &s);
  char runtime[PATH_MAX];
  if (s.known && runtime_dir(&s.user, runtime, sizeof runtime) != 0) {
    step_fails("ctr: --container-image=%s: no state directory for ctr in %s (slurmd's log says why)", opt_image,
               RUNTIME_BASE);
    return;
  }
  if (s.known && s.image) prepare_job_store(sp, &s.user);
  if (!s.known || start_ctr_as(&s.user, s.env, runtime, s.argv, 0, start_timeout, &starting.run) != 0)
    step_fails("ctr: --container-image=%s: cannot run ctr as the job's user: %s", opt_image, strerror(errno));
}

int container_begun(void) {
  return starting.begun;
}

/* The started ctr's join information taken (user_init; exit, if the step ended first). */
void finish_container(void) {
  if (!starting.run.pid) return;
  char *out = NULL, err[1024] = "";
  read_ctr(&starting.run, &out, err, sizeof err);
  const int parsed = out && parse_join_info(out, &join.info) == 0;
  int status = 0;
  if (parsed && join.info.keeper == starting.run.pid) {
    join.keeper_is_child = 1; /* --stay: ctr closed its output once ready and stays as the keeper */
    starting.run.pid = 0;
  } else {
    status = wait_ctr(&starting.run); /* a forked keeper's (a named container's), or a failure */
  }
  free(out);
  if (!parsed || status != 0) {
    reset_join();
    /* Told by each task, which then exits 255: a user_init failure is a launch failure,
     * after which srun exits 0. */
    /* ctr's own line ("ctr: error: WHY") says WHY after the plugin's prefix. */
    const char *why = strncmp(err, "ctr: error: ", 12) == 0 ? err + 12 : err;
    snprintf(join.failed, sizeof join.failed, "ctr: --container-image=%s: %.900s", opt_image,
             *why ? why : status == 0 ? "ctr printed no join information" : "ctr instance start failed");
    slurm_info("%s", join.failed);
    return;
  }
  join.active = 1;
}

/* pyxis's --container-save=PATH: the container's root (its image and what was written to
 * it) saved as a squashfs image at PATH (the job's working directory's when relative) by
 * `ctr instance save`, as the user, once the node's last task of the step has exited: the
 * keeper still runs then (slurmstepd ends what is left of the step after its tasks). */
void save_container(spank_t sp) {
  if (!opt_save || !*opt_save || !join.active) return;
  struct job_user user;
  char **env = NULL, runtime[PATH_MAX], *out = NULL, err[1024] = "";
  char *argv[] = {ctr_program, "instance", "save", join.info.name, opt_save, NULL};
  struct ctr_run run;
  if (step_user(sp, &user) != 0 || spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS ||
      runtime_dir(&user, runtime, sizeof runtime) != 0 ||
      start_ctr_as(&user, env, runtime, argv, 1, start_timeout, &run) != 0) {
    slurm_error("ctr: --container-save=%s: cannot run ctr as the job's user", opt_save);
    return;
  }
  read_ctr(&run, &out, err, sizeof err);
  free(out);
  if (wait_ctr(&run) != 0) {
    slurm_error("ctr: --container-save=%s: %s", opt_save, *err ? err : "ctr instance save failed");
    return;
  }
  slurm_spank_log("ctr: exported container %s to %s", opt_name && *opt_name ? opt_name : join.info.name, opt_save);
}

/* As the job's user: the files of an instance in the directory `dir`, then the directory
 * from `state` once it is empty (what a keeper removes as it ends). */
struct instance_files {
  int state, dir;
  char names[INSTANCE_FILES][128];
};

static int unlink_instance_files(void *arg) {
  const struct instance_files *f = arg;
  for (int i = 0; i < INSTANCE_FILES; ++i) unlinkat(f->dir, f->names[i], 0);
  unlinkat(f->state, "instances", AT_REMOVEDIR);
  return 0;
}

/* The files of the step's instance `name` (STATE/instances/NAME.*), whose keeper was
 * killed, removed as the user. */
static void remove_instance_files(const struct job_user *user, const char *name) {
  struct instance_files f;
  f.state = open_user_state_dir(user->uid, user->gid);
  f.dir = f.state >= 0 ? open_owned(f.state, "instances", O_RDONLY | O_DIRECTORY, user->uid) : -1;
  if (f.dir >= 0) {
    for (int i = 0; i < INSTANCE_FILES; ++i)
      snprintf(f.names[i], sizeof f.names[i], "%s.%s", name, instance_file_suffixes[i]);
    struct as_user a = {.user = user, .out = -1, .err = -1, .run = unlink_instance_files, .arg = &f};
    const pid_t child = spawn_as_user(&a);
    if (child < 0) slurm_error("ctr: removing the files of %s: %s", name, strerror(errno));
    else wait_child(child, now_ms() + 1000LL * ctr_timeout, ctr_timeout, "removing an instance's files", 0);
  }
  if (f.dir >= 0) close(f.dir);
  if (f.state >= 0) close(f.state);
}

/* As the job's user: SIGTERM through the pidfd at `arg`. */
static int send_term(void *arg) {
  return syscall(SYS_pidfd_send_signal, *(const int *)arg, SIGTERM, NULL, 0) == 0 ? 0 : 2;
}

/* The step's unnamed container stopped (a named one lives until the job's end: job_epilog). */
void stop_step_container(spank_t sp) {
  if (!join.active || (opt_name && *opt_name)) return;
  /* The step's container ends when its keeper gets SIGTERM: the keeper removes its own
   * files as it ends, so nothing here waits for it (`ctr instance stop` would, in series
   * with the step's end). The start time tells the keeper from a process that took its pid.
   * The signal is sent as the job's user, never as root: the keeper's pid came from what a
   * ctr run as the user printed (with the user's environment), so it is the user's word. */
  struct job_user user;
  if (step_user(sp, &user) != 0) {
    slurm_error("ctr: stopping %s: cannot read the job's user", join.info.name);
    return;
  }
  user.ngroups = 0; /* a signal needs no groups */
  join.active = 0;
  if (join.keeper_is_child) {
    /* --stay: slurmstepd has killed what was left of the step, the keeper with it (it is a
     * child of slurmstepd), before this hook: its files are removed here, as the user. */
    int status;
    const pid_t ended = waitpid(join.info.keeper, &status, WNOHANG);
    if (ended == join.info.keeper || (ended < 0 && errno == ECHILD)) {
      remove_instance_files(&user, join.info.name);
      return;
    }
    /* Still there (a process tracking that left it): SIGTERM, and it removes them itself. */
  }
  /* The pidfd first, then the start time: if it is still the keeper's, the pidfd is. */
  int pidfd = (int)syscall(SYS_pidfd_open, join.info.keeper, 0);
  if (pidfd < 0 || start_time(join.info.keeper) != join.info.keeper_start) { /* ended already */
    if (pidfd >= 0) close(pidfd);
    return;
  }
  struct as_user a = {.user = &user, .out = -1, .err = -1, .run = send_term, .arg = &pidfd};
  const pid_t child = spawn_as_user(&a);
  close(pidfd);
  const int status =
      child < 0 ? -1 : wait_child(child, now_ms() + 1000LL * ctr_timeout, ctr_timeout, "signalling a keeper", 0);
  if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    slurm_error("ctr: stopping %s (keeper pid %d) failed", join.info.name, (int)join.info.keeper);
}
