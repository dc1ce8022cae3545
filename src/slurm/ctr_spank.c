/* ctr's Slurm SPANK plugin (docs/design-slurm.md, section 3): `srun --container-image=IMG`
 * runs each task of a step in one container per node, shared by the step's tasks.
 *
 * init_post_opt (slurmstepd, once per step and node) starts the step's instance as the job's
 * user: `ctr instance start --no-pid --join-info ... IMAGE slurm.JOB.STEP`, whose plan is
 * ctr's planner's, and user_init keeps the join information ctr prints (so the start runs
 * while slurmstepd sets up the step). A later step of a named container reads the join
 * file ctr wrote beside the instance's record instead of running ctr. task_init (each task, as the
 * user, right before slurmstepd execs it) joins the instance: setns into its user and
 * mount namespaces (checked against the recorded keeper), back to the task's working
 * directory, the container's environment changes, no_new_privs, every capability
 * dropped and ctr's compiled seccomp filter; slurmstepd then execs the task itself, so its
 * pid, signals and exit status are Slurm's as without a container. exit (slurmstepd, as
 * root) stops the instance as the user.
 *
 * --container-entrypoint runs the image's runscript (/.singularity.d/runscript, ctr's name
 * for an image's entrypoint) with the task's command line as its arguments. slurmstepd
 * resolves and execs the task's argv (job->argv, what S_JOB_ARGV gives) after task_init,
 * but that array cannot grow there: task_init opens ctr-slurm-entrypoint on the node before
 * it enters the container, puts "/proc/self/fd/N" in argv[0] and the task's own argv[0] in
 * CTR_ENTRYPOINT_ARG0, and that static program, exec'd in the container, execs the
 * runscript with ARG0 argv[1] ... (the fd is close-on-exec: the kernel has the file open
 * by then). Under srun --multi-prog each task's argv is an array of its own, which SPANK
 * does not give a plugin: there the option has no effect.
 *
 * C, and linked with nothing: slurmstepd loads it into every step. Options go through
 * spank_option_register (seen by srun, sbatch and salloc). plugstack.conf arguments (an
 * unknown one, or a bad value, fails the plugin's init with a line naming it):
 *   ctr=PATH                       the ctr program (default: the install's)
 *   entrypoint=PATH                ctr-slurm-entrypoint, for --container-entrypoint (default:
 *                                  the install's, in ctr's libexec directory)
 *   image_dir=DIR                  --container-image=NAME, a bare name (no '/', '#' or ':'
 *                                  tag, no docker: or other transport), is DIR/NAME
 *   container_required=no|steps|all  steps: every srun/salloc step must give
 *                                  --container-image; all: batch scripts too (default no)
 *   allow=OPT,...                  the --container-* options users may set, spelled without
 *                                  the dashes (default: all)
 *   env=NAME=VALUE                 a variable for the plugin's ctr runs (repeatable; e.g.
 *                                  CTR_CONFIG=PATH): ctr runs with the job's environment less
 *                                  what changes its configuration, programs or libraries
 *                                  (CTR_*, APPTAINER_*, SINGULARITY_*, LD_*, PATH, ...), which is
 *                                  the site's to set
 *   timeout=SECONDS                how long the plugin waits for a ctr run or a child of its own
 *                                  before it kills it (default 30); start_timeout=SECONDS: for
 *                                  a step's `ctr instance start`, which may pull (default 600)
 * Policy is enforced where the step runs (user_init: each task says why and exits 255);
 * srun, sbatch and salloc also refuse a forbidden option or a bad value at once, but their
 * plugstack.conf is the submit host's, so they are a courtesy, not the check. */
#define _GNU_SOURCE
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_internal.h"

SPANK_PLUGIN(ctr, 1)

int slurm_spank_init(spank_t sp, int ac, char **av) {
  if (parse_arguments(ac, av) != 0) return -1;
  return register_options(sp);
}

/* Remote: the step's container starts as soon as the step's options are known. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (apply_pyxis_variables(sp) != 0) return -1;
  if (spank_context() == S_CTX_LOCAL) warn_ignored_options();
  if (spank_context() == S_CTX_REMOTE) begin_container(sp);
  return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  if (!container_begun()) begin_container(sp);
  finish_container();
  return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  enter_container(sp);
  return 0;
}

static uint32_t tasks_exited;

/* slurmstepd, as each of the node's tasks of the step exits (root). */
int slurm_spank_task_exit(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  uint32_t tasks = 0;
  if (!spank_remote(sp) || spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS) return 0;
  if (++tasks_exited == tasks) {
    save_container(sp);
    end_step_holders(sp);
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  finish_container(); /* the step ended before user_init */
  stop_step_container(sp);
  return 0;
}

/* slurmd, at the job's end on each node where it ran: its named containers stopped, its
 * job store (job_store=DIR) removed, then what is left in its cgroups ended and they removed. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  if (parse_arguments(ac, av) != 0) return -1;
  uid_t uid;
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
    return 0;
  const struct passwd *pw = getpwuid(uid);
  if (pw) stop_named_containers(pw, job);
  if (pw) remove_job_store(pw, job);
  end_job_cgroups(uid, job);
  return 0;
}
