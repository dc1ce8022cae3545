/* What the plugin's files share. ctr_spank.c has the SPANK entry points (and says what each
 * callback does); the others are its parts, one per Slurm context:
 *   spank_options.c    the --container-* options and the site's plugstack.conf arguments
 *   spank_run_ctr.c    children as the job's user: ctr runs, their output, their bounds
 *   spank_step.c       the step's container: started (or found, named) and its join information
 *   spank_join.c       each task entering the container (task_init)
 *   spank_epilog.c     the ends: a step's container and holders, the job's named containers
 *                      and cgroups
 *   spank_job_store.c  the job's image store (job_store=DIR): made for a step, removed at the end
 * and the parts with twins in ctr, libc only: spank_join_info.c, spank_state_dir.c,
 * spank_process.c. Nothing here is seen outside the plugin (hidden): slurmstepd loads it
 * beside other plugins and its own symbols. */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#include "spank_image_name.h"
#include "spank_join_info.h"
#include "spank_mounts.h"
#include "spank_process.h"
#include "spank_state_dir.h"

#pragma GCC visibility push(hidden)

/* spank_options.c */

extern char *opt_image, *opt_mounts, *opt_workdir, *opt_name, *opt_env, *opt_mpi, *opt_unshare, *opt_save;
extern int opt_no_home, opt_nv, opt_remap_root, opt_entrypoint;
/* pyxis's --container-name=NAME:FLAG: auto (join NAME if it runs, else start it), create (it
 * must not run yet), exec (it must run already); no_exec (a new container over NAME's files)
 * has no meaning here: a named container's files live in the running container. */
enum name_flag { NAME_AUTO, NAME_CREATE, NAME_EXEC };
extern enum name_flag opt_name_flag;
extern char ctr_program[PATH_MAX];
extern char entrypoint_program[PATH_MAX];
/* How long the plugin (root) waits for what it runs as the user: a step's `ctr instance
 * start` (which may pull an image), and anything else (the epilog's list and stop, a
 * removal, a signal). Past it the child's session is killed and the plugin goes on, so that
 * nothing a user makes hang (a FIFO, a FUSE server that stops answering) holds a step or a
 * job's epilog, and with it the node, forever. */
extern int start_timeout, ctr_timeout;
/* env=NAME=VALUE: the site's variables for ctr (CTR_CONFIG=, a proxy), over the job's. */
#define MAX_ADMIN_ENV 16
extern char *admin_env[MAX_ADMIN_ENV];
extern int nadmin_env;

/* plugstack.conf's arguments: every callback gets them (slurmd's job_epilog runs without
 * slurm_spank_init). 0, or -1 after the line that says why. */
int parse_arguments(int ac, char **av);
/* The options, registered with Slurm (srun, sbatch, salloc show and parse them). */
int register_options(spank_t sp);
/* pyxis's PYXIS_CONTAINER_* variables, for the options the command line did not give. 0,
 * or -1 after the line that says why. */
int apply_pyxis_variables(spank_t sp);
/* srun: pyxis's "ignoring --container-X" for options given without a container. */
void warn_ignored_options(void);
/* Whether `name` is one of the comma-separated `list`. */
int listed(const char *list, const char *name);
/* Why the site's plugstack.conf does not let this step run as it was asked, or NULL. */
const char *step_refused(spank_t sp);
/* Whether the root is writable: --container-writable/--container-readonly, else the site's
 * writable=yes|no (yes, pyxis's default). */
int container_writable(void);
/* --container-workdir as an absolute path in the container, or NULL. */
const char *container_workdir(void);
/* Where the tasks start without --container-workdir, plugstack.conf's workdir=: the image's
 * WORKDIR, else the submit directory (auto, the default); the image's WORKDIR, else /
 * (image: pyxis's and Docker's rule); the submit directory (submit: Apptainer's). */
enum workdir_rule { WORKDIR_AUTO, WORKDIR_IMAGE, WORKDIR_SUBMIT };
enum workdir_rule workdir_rule(void);
/* The image ctr gets for --container-image (buf holds it when it is not opt_image). */
const char *image_path(char *buf, size_t size);

/* spank_run_ctr.c */

/* Who a ctr of the plugin runs as: the job's uid and gid, and its supplementary groups:
 * slurmstepd's list (from the job's credential, what the tasks get), or with ngroups -1
 * the user database's (slurmd's epilog has no list; NSS lookups cost milliseconds, so the
 * list is taken where there is one). */
struct job_user {
  uid_t uid;
  gid_t gid;
  gid_t *groups;
  int ngroups;
};

/* A child of slurmstepd as the job's user (spawn_as_user): started with
 * clone(CLONE_VM | CLONE_VFORK), as posix_spawn starts its children, not with fork.
 * slurmstepd's memory is not copied: a fork copied its page tables, both processes then
 * took a copy-on-write fault for every page either wrote, and the exec tore the copy down,
 * which made the plugin's slurmstepd about 30 ms of CPU dearer per step of two nodes than
 * a bare step's on the 2-core VM (perf record -a; docs/benchmark-guide.md). slurmstepd's
 * thread waits until the child has exec'd or exited. The child shares that memory, so it
 * makes system calls only: no malloc, no stdio, and no glibc set*id (whose process-wide
 * broadcast would reach slurmstepd's threads): the raw calls change this task alone. */
struct as_user {
  const struct job_user *user;
  const gid_t *groups;
  int ngroups;
  const char *dir;   /* chdir there, else to "/"; NULL: stay */
  int out, err;      /* dup2'd onto 1 and 2 (stdin /dev/null); -1: left as they are */
  int ignore_term;   /* SIGTERM ignored (slurmstepd's end of the step must not stop it) */
  int (*run)(void *); /* what the child does as the user: exec, or return an exit status */
  void *arg;
};

/* A ctr started as the job's user and not yet waited for: its pid, the read ends of its
 * stdout and stderr, and when the plugin stops waiting for it. */
struct ctr_run {
  pid_t pid;
  int out, err;
  long long deadline;
  int seconds; /* the bound the deadline was set with */
  int killed;  /* at the deadline, by read_ctr */
  char what[48]; /* "ctr instance start", for the log */
};

/* The PATH ctr runs with: the system's programs, not those the user's PATH would find. */
#define CTR_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

const char *env_value(char **env, const char *name);
/* The environment the epilog's ctr runs with (slurmd's epilog has no job environment): the
 * user's HOME, USER and LOGNAME; `env` points into the struct. */
struct passwd;
struct login_env {
  char home[PATH_MAX + 8], user[300], logname[310];
  char *env[4];
};
void login_env(struct login_env *e, const struct passwd *pw);
int step_user(spank_t sp, struct job_user *u);
const char *job_dir(char **env);
pid_t spawn_as_user(struct as_user *a);
long long now_ms(void);
int wait_child(pid_t pid, long long deadline, int seconds, const char *what, int killed);
int start_ctr_as(const struct job_user *user, char **env, const char *runtime_dir, char **argv, int ignore_term,
                 int seconds, struct ctr_run *run);
void read_ctr(struct ctr_run *run, char **out, char *err, size_t errsize);
int wait_ctr(struct ctr_run *run);
int run_ctr_as(const struct job_user *user, char **env, const char *runtime_dir, char **argv, char **out, char *err,
               size_t errsize, int ignore_term);

/* spank_step.c */

/* The step's container on this node, as the tasks join it. */
struct step_container {
  int active;
  char failed[1024]; /* why the step's container could not start: each task says it and exits 255 */
  int keeper_is_child; /* --stay: the keeper is the ctr this plugin started, a child of slurmstepd's */
  char imported[2 * PATH_MAX]; /* the registry image this step's container was started from, for pyxis's lines */
  int attached; /* a container another step started (named, or JOB.STEP): its working directory, not the step's mounts */
  struct join_info info;
};
extern struct step_container join;

void begin_container(spank_t sp);
int container_begun(void);
void finish_container(void);
/* --container-save=PATH, once the node's last task of the step has exited. */
void save_container(spank_t sp);

/* spank_join.c */

void enter_container(spank_t sp);

/* spank_job_store.c */

/* job_store=DIR (empty: none); "CTR_IMAGE_STORE=DIR/JOBID" for the step's ctr once
 * prepare_job_store made it (empty: no job store for this step). */
extern char job_store[PATH_MAX];
extern char job_store_env[PATH_MAX + 32];
/* Remote, as root, before the step's ctr runs: DIR/JOBID, the user's (0700). */
void prepare_job_store(spank_t sp, const struct job_user *user);
/* The job's epilog: DIR/JOBID emptied by the user's ctr, then removed. */
struct passwd;
void remove_job_store(const struct passwd *pw, uint32_t job);

/* spank_epilog.c */

void stop_step_container(spank_t sp);
void end_step_holders(spank_t sp);
struct passwd;
void stop_named_containers(const struct passwd *pw, uint32_t job);
void end_job_cgroups(uid_t uid, uint32_t job);

#pragma GCC visibility pop
