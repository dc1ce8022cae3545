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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(ctr, 1)

#ifndef CTR_DEFAULT_PROGRAM
#define CTR_DEFAULT_PROGRAM "/usr/bin/ctr"
#endif
#ifndef CTR_DEFAULT_ENTRYPOINT
#define CTR_DEFAULT_ENTRYPOINT "/usr/libexec/ctr/ctr-slurm-entrypoint"
#endif

enum {
  OPT_IMAGE = 1, OPT_MOUNTS, OPT_WORKDIR, OPT_NO_HOME, OPT_NV, OPT_NAME, OPT_WRITABLE, OPT_READONLY, OPT_ENV,
  OPT_MPI, OPT_MOUNT_HOME, OPT_ENTRYPOINT, OPT_NO_ENTRYPOINT, OPT_REMAP_ROOT, OPT_NO_REMAP_ROOT, OPT_END
};

static char *opt_image, *opt_mounts, *opt_workdir, *opt_name, *opt_env, *opt_mpi;
static int opt_no_home, opt_nv, opt_writable, opt_remap_root, opt_entrypoint;
/* pyxis's --container-name=NAME:FLAG: auto (join NAME if it runs, else start it), create (it
 * must not run yet), exec (it must run already); no_exec (a new container over NAME's files)
 * has no meaning here: a named container's files live in the running container. */
static enum { NAME_AUTO, NAME_CREATE, NAME_EXEC } opt_name_flag;
static char ctr_program[PATH_MAX] = CTR_DEFAULT_PROGRAM;
static char entrypoint_program[PATH_MAX] = CTR_DEFAULT_ENTRYPOINT;

/* The site's policy (plugstack.conf). */
static char image_dir[PATH_MAX];
/* How long the plugin (root) waits for what it runs as the user: a step's `ctr instance
 * start` (which may pull an image), and anything else (the epilog's list and stop, a
 * removal, a signal). Past it the child's session is killed and the plugin goes on, so that
 * nothing a user makes hang (a FIFO, a FUSE server that stops answering) holds a step or a
 * job's epilog, and with it the node, forever. */
static int start_timeout = 600, ctr_timeout = 30;
/* env=NAME=VALUE: the site's variables for ctr (CTR_CONFIG=, a proxy), over the job's. */
#define MAX_ADMIN_ENV 16
static char *admin_env[MAX_ADMIN_ENV];
static int nadmin_env;
static enum { REQUIRED_NO, REQUIRED_STEPS, REQUIRED_ALL } container_required;
static unsigned allowed = ~0u; /* bit 1 << OPT_x: users may set --OPT */
/* Remote: the first option the step may not have; user_init fails the step with it (a
 * callback's error there would fail the launch with Slurm's words, not ours). */
static char refused[512];

#define MAX_NS 8
static struct {
  int active;
  char failed[1024];  /* why the step's container could not start: each task says it and exits 255 */
  char name[96];
  char image[2 * PATH_MAX];
  pid_t keeper;
  unsigned long long keeper_start;
  int keeper_is_child; /* --stay: the keeper is the ctr this plugin started, a child of slurmstepd's */
  int nns;
  char ns_type[MAX_NS][8];
  unsigned long long ns_inode[MAX_NS];
  char *seccomp;
  char **set, **unset;
  int nset, nunset;
} join;

static int take_option(int val, const char *arg, int remote);

static struct spank_option options[] = {
    {"container-image", "IMAGE", "[ctr] run the step's tasks in a container of IMAGE (a SIF, squashfs or directory; "
     "docker://REF, REGISTRY#NAME:TAG or NAME:TAG through ctr's image cache)",
     1, OPT_IMAGE, take_option},
    {"container-mounts", "SRC[:DST[:ro|rw]],...", "[ctr] bind mounts into the container", 1, OPT_MOUNTS,
     take_option},
    {"container-workdir", "DIR", "[ctr] working directory of the tasks in the container", 1, OPT_WORKDIR,
     take_option},
    {"no-container-mount-home", NULL, "[ctr] do not mount the home directory", 0, OPT_NO_HOME, take_option},
    {"container-nv", NULL, "[ctr] the node's NVIDIA driver and GPUs in the container (the default for a step "
     "allocated GPUs)", 0, OPT_NV, take_option},
    {"container-name", "NAME[:auto|create|exec]", "[ctr] a named container: later steps of the job that name it on "
     "a node join it (without --container-image too); removed at the job's end. create: it must not run yet; exec: "
     "it must run already", 1, OPT_NAME, take_option},
    {"container-writable", NULL, "[ctr] a writable root (changes in memory, kept for the job in a named container)", 0,
     OPT_WRITABLE, take_option},
    {"container-readonly", NULL, "[ctr] a read-only root (the default)", 0, OPT_READONLY, take_option},
    {"container-env", "NAME,...", "[ctr] these variables keep the job's value where the image sets them too "
     "(by default the image's wins)", 1, OPT_ENV, take_option},
    {"container-mpi", "bind|hybrid", "[ctr] hybrid: the image's own MPI (the default); bind: the site's MPI "
     "replaces it (ctr's --mpi)", 1, OPT_MPI, take_option},
    /* pyxis's, so that its job scripts run unchanged. */
    {"container-mount-home", NULL, "[ctr] mount the home directory (the default)", 0, OPT_MOUNT_HOME, take_option},
    {"no-container-entrypoint", NULL, "[ctr] run the step's command as given (the default)", 0, OPT_NO_ENTRYPOINT,
     take_option},
    {"container-entrypoint", NULL, "[ctr] run the image's entrypoint (its runscript) with the step's command as its "
     "arguments", 0, OPT_ENTRYPOINT, take_option},
    {"no-container-remap-root", NULL, "[ctr] you stay yourself in the container (the default)", 0, OPT_NO_REMAP_ROOT,
     take_option},
    {"container-remap-root", NULL, "[ctr] root in the container (ctr's --fakeroot: your uid, and your /etc/subuid "
     "range if any; no privilege on the node)", 0, OPT_REMAP_ROOT, take_option},
    SPANK_OPTIONS_TABLE_END};

/* --OPT's name as the table spells it (allow= and the refusals too). */
static const char *option_name(int val) {
  for (const struct spank_option *o = options; o->name; ++o)
    if (o->val == val) return o->name;
  return "?";
}

/* "container-image,container-name": the options `mask` allows. */
static void allowed_list(unsigned mask, char *text, size_t size) {
  size_t used = 0;
  text[0] = 0;
  for (int val = 1; val < OPT_END; ++val) {
    if (!(mask & (1u << val))) continue;
    int n = snprintf(text + used, size - used, "%s%s", used ? "," : "", option_name(val));
    if (n < 0 || (size_t)n >= size - used) break;
    used += (size_t)n;
  }
}

/* Whether `name` is one of the comma-separated `list`. */
static int listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *item = list; item && *item;) {
    const char *end = strchrnul(item, ',');
    if ((size_t)(end - item) == n && strncmp(item, name, n) == 0) return 1;
    item = *end ? end + 1 : end;
  }
  return 0;
}

/* Why the user may not give --OPT=ARG here, into `why`; 0 when they may. */
static int refuse_option(int val, const char *arg, char *why, size_t size) {
  if (!(allowed & (1u << val))) {
    char list[512];
    allowed_list(allowed, list, sizeof list);
    snprintf(why, size, "ctr: --%s is not allowed by this site's plugstack.conf (allow=%s)", option_name(val),
             list);
    return -1;
  }
  if (val == OPT_NAME) {
    const char *colon = strchr(arg, ':');
    if (colon == arg || !*arg) {
      snprintf(why, size, "ctr: --container-name=%.200s: an empty name", arg);
      return -1;
    }
    if (colon && strcmp(colon + 1, "auto") != 0 && strcmp(colon + 1, "create") != 0 && strcmp(colon + 1, "exec") != 0) {
      if (strcmp(colon + 1, "no_exec") == 0)
        snprintf(why, size, "ctr: --container-name=%.200s: no_exec is not supported: a named container's files "
                 "live in the running container, which a step joins (auto, exec) or starts (create)", arg);
      else
        snprintf(why, size, "ctr: --container-name=%.200s: the flag must be auto, create or exec", arg);
      return -1;
    }
  }
  if (val == OPT_MPI && strcmp(arg, "bind") != 0 && strcmp(arg, "hybrid") != 0) {
    snprintf(why, size, "ctr: --container-mpi=%.200s: unknown value (bind or hybrid)", arg);
    return -1;
  }
  if (val == OPT_ENV && (!*arg || strchr(arg, '=') || strstr(arg, ",,") || arg[0] == ',' ||
                         arg[strlen(arg) - 1] == ',')) {
    snprintf(why, size, "ctr: --container-env=%.200s: a list of variable names (NAME,NAME,...)", arg);
    return -1;
  }
  return 0;
}

static int take_option(int val, const char *arg, int remote) {
  if (val <= 0 || val >= OPT_END) return -1;
  if (!arg) arg = "";
  char why[sizeof refused];
  if (refuse_option(val, arg, why, sizeof why) != 0) {
    if (!remote) { /* srun, sbatch, salloc: refused before anything is allocated */
      slurm_error("%s", why);
      return -1;
    }
    if (!refused[0]) memcpy(refused, why, sizeof refused);
    return 0;
  }
  switch (val) {
    case OPT_IMAGE: free(opt_image); opt_image = strdup(arg); break;
    case OPT_MOUNTS: free(opt_mounts); opt_mounts = strdup(arg); break;
    case OPT_WORKDIR: free(opt_workdir); opt_workdir = strdup(arg); break;
    case OPT_NO_HOME: opt_no_home = 1; break;
    case OPT_NV: opt_nv = 1; break;
    case OPT_NAME: {
      const char *colon = strchr(arg, ':');
      free(opt_name);
      opt_name = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
      opt_name_flag = !colon || strcmp(colon + 1, "auto") == 0 ? NAME_AUTO
                      : strcmp(colon + 1, "create") == 0       ? NAME_CREATE
                                                               : NAME_EXEC;
      break;
    }
    case OPT_WRITABLE: opt_writable = 1; break;
    case OPT_READONLY: opt_writable = 0; break;
    case OPT_ENV: free(opt_env); opt_env = strdup(arg); break;
    case OPT_MPI: free(opt_mpi); opt_mpi = strdup(arg); break;
    case OPT_MOUNT_HOME: opt_no_home = 0; break;
    case OPT_REMAP_ROOT: opt_remap_root = 1; break;
    case OPT_NO_REMAP_ROOT: opt_remap_root = 0; break;
    case OPT_ENTRYPOINT: opt_entrypoint = 1; break;
    case OPT_NO_ENTRYPOINT: opt_entrypoint = 0; break;
    default: break;
  }
  return 0;
}

/* allow=OPT,...: the mask of the options named, or 0 (one named is not an option). */
static unsigned parse_allow(const char *list, char *unknown, size_t size) {
  unsigned mask = 0;
  for (const char *item = list; *item;) {
    const char *end = strchrnul(item, ',');
    int found = 0;
    for (int val = 1; val < OPT_END && !found; ++val)
      if (strlen(option_name(val)) == (size_t)(end - item) &&
          strncmp(item, option_name(val), (size_t)(end - item)) == 0) {
        mask |= 1u << val;
        found = 1;
      }
    if (!found) {
      snprintf(unknown, size, "%.*s", (int)(end - item), item);
      return 0;
    }
    item = *end ? end + 1 : end;
  }
  if (!mask) snprintf(unknown, size, "(none)");
  return mask;
}

/* VALUE when `arg` is "KEY=VALUE", else NULL. */
static const char *argument_value(const char *arg, const char *key) {
  size_t n = strlen(key);
  return strncmp(arg, key, n) == 0 && arg[n] == '=' ? arg + n + 1 : NULL;
}

/* One plugstack.conf argument into the settings above; 0, or -1 after the line that says why. */
static int parse_argument(const char *arg) {
  const char *value;
  if ((value = argument_value(arg, "ctr")) && strlen(value) < sizeof ctr_program) {
    strcpy(ctr_program, value);
  } else if ((value = argument_value(arg, "entrypoint"))) {
    if (value[0] != '/' || strlen(value) >= sizeof entrypoint_program) {
      slurm_error("ctr: plugstack.conf argument '%s': PATH must be an absolute path", arg);
      return -1;
    }
    strcpy(entrypoint_program, value);
  } else if ((value = argument_value(arg, "image_dir"))) {
    if (value[0] != '/' || strlen(value) >= sizeof image_dir - 256) { /* room for NAME */
      slurm_error("ctr: plugstack.conf argument '%s': DIR must be an absolute path", arg);
      return -1;
    }
    strcpy(image_dir, value);
  } else if ((value = argument_value(arg, "container_required"))) {
    if (strcmp(value, "no") == 0) {
      container_required = REQUIRED_NO;
    } else if (strcmp(value, "steps") == 0) {
      container_required = REQUIRED_STEPS;
    } else if (strcmp(value, "all") == 0) {
      container_required = REQUIRED_ALL;
    } else {
      slurm_error("ctr: plugstack.conf argument '%s': the value is no, steps or all", arg);
      return -1;
    }
  } else if ((value = argument_value(arg, "timeout")) || (value = argument_value(arg, "start_timeout"))) {
    char *end;
    const long seconds = strtol(value, &end, 10);
    if (!*value || *end || seconds < 1 || seconds > 86400) {
      slurm_error("ctr: plugstack.conf argument '%s': SECONDS must be 1 to 86400", arg);
      return -1;
    }
    *(arg[0] == 's' ? &start_timeout : &ctr_timeout) = (int)seconds;
  } else if ((value = argument_value(arg, "env"))) {
    const char *eq = strchr(value, '=');
    if (!eq || eq == value || nadmin_env == MAX_ADMIN_ENV) {
      slurm_error("ctr: plugstack.conf argument '%s': NAME=VALUE, at most %d of them", arg, MAX_ADMIN_ENV);
      return -1;
    }
    for (int i = 0; i < nadmin_env; ++i) /* every callback parses the arguments again */
      if (strcmp(admin_env[i], value) == 0) return 0;
    if (!(admin_env[nadmin_env] = strdup(value))) return -1;
    ++nadmin_env;
  } else if ((value = argument_value(arg, "allow"))) {
    char unknown[128], all[512];
    if (!(allowed = parse_allow(value, unknown, sizeof unknown))) {
      allowed_list(~0u, all, sizeof all);
      slurm_error("ctr: plugstack.conf argument '%s': '%s' is not an option of the plugin (%s)", arg, unknown, all);
      return -1;
    }
  } else {
    slurm_error("ctr: unknown plugstack.conf argument '%s' (known: ctr=PATH, entrypoint=PATH, image_dir=DIR, "
                "container_required=no|steps|all, allow=OPT,..., env=NAME=VALUE, timeout=SECONDS, "
                "start_timeout=SECONDS)", arg);
    return -1;
  }
  return 0;
}

/* plugstack.conf's arguments: every callback gets them (slurmd's job_epilog runs without
 * slurm_spank_init). */
static int parse_arguments(int ac, char **av) {
  for (int i = 0; i < ac; ++i)
    if (parse_argument(av[i]) != 0) return -1;
  if (container_required != REQUIRED_NO && !(allowed & (1u << OPT_IMAGE))) {
    slurm_error("ctr: plugstack.conf: container_required needs container-image in allow=");
    return -1;
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
  if (parse_arguments(ac, av) != 0) return -1;
  for (struct spank_option *o = options; o->name; ++o)
    if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
      slurm_error("ctr: cannot register --%s", o->name);
      return -1;
    }
  return 0;
}

/* The value of NAME in the environment `env`, or NULL. */
static const char *env_value(char **env, const char *name) {
  size_t n = strlen(name);
  for (; env && *env; ++env)
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  return NULL;
}

/* Percent-decoding in place (ctr's join information encodes '%' and control bytes). */
static void percent_decode(char *s) {
  char *out = s;
  for (; *s; ++s) {
    if (s[0] == '%' && s[1] && s[2]) {
      char hex[3] = {s[1], s[2], 0};
      *out++ = (char)strtol(hex, NULL, 16);
      s += 2;
    } else {
      *out++ = *s;
    }
  }
  *out = 0;
}

static int push(char ***list, int *n, const char *value) {
  char **grown = realloc(*list, sizeof(char *) * (size_t)(*n + 1));
  if (!grown) return -1;
  *list = grown;
  if (!(grown[*n] = strdup(value))) return -1;
  percent_decode(grown[*n]);
  ++*n;
  return 0;
}

/* `ctr instance start --join-info`'s output: one key=value per line. */
static int parse_join_info(char *text) {
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *eq = strchr(line, '=');
    if (!eq) return -1;
    *eq = 0;
    const char *key = line, *value = eq + 1;
    if (strcmp(key, "name") == 0) {
      snprintf(join.name, sizeof join.name, "%s", value);
    } else if (strcmp(key, "image") == 0) {
      snprintf(join.image, sizeof join.image, "%s", value);
      percent_decode(join.image);
    } else if (strcmp(key, "keeper") == 0) {
      join.keeper = (pid_t)atol(value);
    } else if (strcmp(key, "keeper_start") == 0) {
      join.keeper_start = strtoull(value, NULL, 10);
    } else if (strcmp(key, "ns") == 0) {
      const char *colon = strchr(value, ':');
      if (!colon || join.nns == MAX_NS || colon - value >= 8) return -1;
      memcpy(join.ns_type[join.nns], value, (size_t)(colon - value));
      join.ns_type[join.nns][colon - value] = 0;
      join.ns_inode[join.nns++] = strtoull(colon + 1, NULL, 10);
    } else if (strcmp(key, "seccomp") == 0) {
      if (!(join.seccomp = strdup(value))) return -1;
      percent_decode(join.seccomp);
    } else if (strcmp(key, "set") == 0) {
      if (push(&join.set, &join.nset, value) != 0) return -1;
    } else if (strcmp(key, "unset") == 0) {
      if (push(&join.unset, &join.nunset, value) != 0) return -1;
    }
  }
  return join.keeper > 1 && join.nns >= 2 && strcmp(join.ns_type[0], "user") == 0 ? 0 : -1;
}

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

/* The step's user, with slurmstepd's group list. 0, or -1. */
static int step_user(spank_t sp, struct job_user *u) {
  u->groups = NULL;
  u->ngroups = -1;
  if (spank_get_item(sp, S_JOB_UID, &u->uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &u->gid) != ESPANK_SUCCESS)
    return -1;
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &u->groups, &u->ngroups) != ESPANK_SUCCESS) u->ngroups = -1;
  return 0;
}

/* The directory the plugin's ctr runs in: the job's working directory, else its submit
 * directory (NULL: neither; ctr then runs in "/"). */
static const char *job_dir(char **env) {
  const char *dir = env_value(env, "PWD");
  return dir ? dir : env_value(env, "SLURM_SUBMIT_DIR");
}

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

/* Writes the strings to fd 2 (a child's message; no stdio in the shared memory). */
static void child_say(const char *a, const char *b, const char *c) {
  const char *parts[] = {a, b, c, "\n"};
  for (int i = 0; i < 4; ++i)
    if (parts[i]) (void)!write(2, parts[i], strlen(parts[i]));
}

/* How long the child may take before it has exec'd or exited: slurmstepd's thread is held
 * until then (CLONE_VFORK), and a chdir or unlink as the user can block for good on a FUSE
 * server of the user's that stops answering. */
static void arm_child_timer(int seconds) {
  struct itimerval t;
  memset(&t, 0, sizeof t);
  t.it_value.tv_sec = seconds;
  setitimer(ITIMER_REAL, &t, NULL);
}

static int as_user_child(void *p) {
  const struct as_user *a = p;
  /* slurmstepd's handlers must not run here: back to the default first, then unblock (the
   * parent blocked every signal across the clone). */
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) != 0 || sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
  }
  if (a->out >= 0) {
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) dup3(null, 0, 0);
    dup3(a->out, 1, 0);
    dup3(a->err, 2, 0);
  }
  const struct job_user *u = a->user;
  if ((syscall(SYS_setresuid, -1L, 0L, -1L) != 0 && syscall(SYS_geteuid) != 0) ||
      syscall(SYS_setgroups, (long)a->ngroups, a->groups) != 0 ||
      syscall(SYS_setresgid, (long)u->gid, (long)u->gid, (long)u->gid) != 0 ||
      syscall(SYS_setresuid, (long)u->uid, (long)u->uid, (long)u->uid) != 0 ||
      syscall(SYS_setresuid, 0L, 0L, 0L) == 0) { /* the way back must be shut */
    child_say("ctr: cannot become the job's user: ", strerrordesc_np(errno), NULL);
    return 255;
  }
  /* A session of its own: the plugin kills the whole of it when the child outlives its bound
   * (kill_session). */
  syscall(SYS_setsid);
  if (a->ignore_term) signal(SIGTERM, SIG_IGN);
  signal(SIGALRM, SIG_DFL); /* fatal, even in a wait only SIGKILL ends */
  arm_child_timer(ctr_timeout);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (a->dir && chdir(a->dir) != 0) (void)!chdir("/");
  return a->run(a->arg);
}

/* Starts a's child (as_user_child) and returns its pid once it has exec'd or exited, or -1.
 * The job's groups: slurmstepd's list, else the user database's, looked up here. */
static pid_t spawn_as_user(struct as_user *a) {
  gid_t *looked_up = NULL;
  a->groups = a->user->groups;
  a->ngroups = a->user->ngroups;
  if (a->ngroups < 0) {
    struct passwd *pw = getpwuid(a->user->uid);
    a->ngroups = 0; /* a user the database does not know: no supplementary group */
    for (int n = 64; pw;) { /* getgrouplist says how many when the array is short */
      gid_t *grown = realloc(looked_up, sizeof(gid_t) * (size_t)n);
      if (!grown) {
        free(looked_up);
        errno = ENOMEM;
        return -1;
      }
      looked_up = grown;
      if (getgrouplist(pw->pw_name, a->user->gid, looked_up, &n) >= 0) {
        a->groups = looked_up;
        a->ngroups = n;
        break;
      }
    }
  }
  const size_t stack_size = 64 * 1024;
  char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    free(looked_up);
    return -1;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t child = clone(as_user_child, stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
  const int saved = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  munmap(stack, stack_size);
  free(looked_up);
  errno = saved;
  return child;
}

/* CLOCK_MONOTONIC in milliseconds: the plugin's deadlines. */
static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The child `pid` of the plugin's and what it started in its session (as_user_child made it
 * a session leader), SIGKILLed. Only before the child is reaped: until then its pid, which
 * names the session and its process group, cannot be another process's. */
static void kill_session(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

/* Waits for the plugin's child `pid` until `deadline` (now_ms): 1 once it has ended (its
 * wait status in *status; 0 if it was reaped elsewhere), 0 at the deadline. */
static int wait_until(pid_t pid, long long deadline, int *status) {
  const int pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* readable once it has ended */
  int ended = 0;
  for (;;) {
    *status = 0;
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) { /* ECHILD: reaped elsewhere */
      if (r < 0) *status = 0;
      ended = 1;
      break;
    }
    const long long left = deadline - now_ms();
    if (left <= 0) break;
    if (pidfd >= 0) {
      struct pollfd p = {pidfd, POLLIN, 0};
      poll(&p, 1, left > 1000 ? 1000 : (int)left);
    } else {
      usleep(left > 10 ? 10000 : (useconds_t)left * 1000);
    }
  }
  if (pidfd >= 0) close(pidfd);
  return ended;
}

/* How long a killed child may take to go: a process in a wait that SIGKILL does not end
 * is left behind (with a line), not waited for. */
#define KILL_WAIT_MS 5000

/* The wait status of the plugin's child `pid`, waited for until `deadline`; then its session
 * is killed (one line naming `what` and the bound, `seconds`, in slurmd's log). -1 if it
 * does not end even then. `killed`: it was killed already (read_ctr). */
static int wait_child(pid_t pid, long long deadline, int seconds, const char *what, int killed) {
  int status;
  if (wait_until(pid, deadline, &status)) return status;
  if (!killed) {
    slurm_error("ctr: %s (pid %d, as the job's user) did not end within %d s: killed", what, (int)pid, seconds);
    kill_session(pid);
  }
  if (wait_until(pid, now_ms() + KILL_WAIT_MS, &status)) return status;
  slurm_error("ctr: %s (pid %d) did not end after SIGKILL: left behind", what, (int)pid);
  return -1;
}

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

/* The child's exec of ctr (spawn_as_user's run). */
struct exec_ctr {
  char **argv, **env;
  const char *why; /* "ctr: cannot run PATH (" */
};

static int exec_ctr(void *p) {
  const struct exec_ctr *e = p;
  arm_child_timer(0); /* ctr's own time is bounded by the plugin's wait (read_ctr, wait_ctr) */
  execve(ctr_program, e->argv, e->env);
  child_say(e->why, strerrordesc_np(errno), "): set ctr=PATH in plugstack.conf");
  return 255;
}

/* The PATH ctr runs with: the system's programs, not those the user's PATH would find. */
#define CTR_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Whether NAME is one of the credentials for registries ctr reads from the environment:
 * the user's to give. */
static int registry_credential(const char *entry) {
  static const char *const names[] = {"CTR_DOCKER_USERNAME=", "CTR_DOCKER_PASSWORD=", "APPTAINER_DOCKER_USERNAME=",
                                      "APPTAINER_DOCKER_PASSWORD=", "SINGULARITY_DOCKER_USERNAME=",
                                      "SINGULARITY_DOCKER_PASSWORD=", NULL};
  for (const char *const *n = names; *n; ++n)
    if (strncmp(entry, *n, strlen(*n)) == 0) return 1;
  return 0;
}

/* Whether the job's variable `entry` (NAME=VALUE) stays out of the environment of the
 * plugin's ctr: what decides ctr's configuration (CTR_CONFIG, CTR_CACHE_DIR, ...), its
 * options (APPTAINER_BIND, ... would give what allow= refuses), the programs it finds
 * (PATH) and the libraries and locale data loaded into it (the dynamic loader's and
 * glibc's variables) is the site's, not the user's. What the container's task gets is not
 * changed by it (task_init). */
static int kept_from_ctr(const char *entry) {
  static const char *const prefixes[] = {"CTR_", "APPTAINER_", "SINGULARITY_", "LD_", NULL};
  static const char *const names[] = {"PATH=", "XDG_RUNTIME_DIR=", "GCONV_PATH=", "GLIBC_TUNABLES=", "LOCPATH=",
                                      "NLSPATH=", "HOSTALIASES=", "RES_OPTIONS=", "LOCALDOMAIN=", "MALLOC_TRACE=",
                                      NULL};
  if (registry_credential(entry)) return 0;
  for (const char *const *p = prefixes; *p; ++p)
    if (strncmp(entry, *p, strlen(*p)) == 0) return 1;
  for (const char *const *n = names; *n; ++n)
    if (strncmp(entry, *n, strlen(*n)) == 0) return 1;
  for (int i = 0; i < nadmin_env; ++i) /* the site's value replaces the job's */
    if (strncmp(entry, admin_env[i], (size_t)(strchr(admin_env[i], '=') - admin_env[i]) + 1) == 0) return 1;
  return 0;
}

/* Starts `ctr ARGV...` as the job's user in the job's working directory, with the job's
 * environment less what kept_from_ctr keeps out, plus the site's env= variables, PATH and
 * XDG_RUNTIME_DIR=`runtime_dir` (the user's /run/ctr/UID: every ctr of the plugin keeps
 * the user's instances in RUNTIME/ctr, where the epilog finds them and no other user can
 * take the name first). 0, or -1. `ignore_term`: the SIGTERM with which slurmstepd ends
 * what is left of the step does not stop it (the instance's stop must finish). `seconds`:
 * how long the plugin waits for it. */
static int start_ctr_as(const struct job_user *user, char **env, const char *runtime_dir, char **argv,
                        int ignore_term, int seconds, struct ctr_run *run) {
  int nenv = 0;
  while (env && env[nenv]) ++nenv;
  char **kept = calloc((size_t)nenv + MAX_ADMIN_ENV + 3, sizeof(char *));
  char xdg[PATH_MAX + 32];
  if (!kept) return -1;
  int k = 0;
  for (int i = 0; i < nenv; ++i)
    if (!kept_from_ctr(env[i])) kept[k++] = env[i];
  for (int i = 0; i < nadmin_env; ++i) kept[k++] = admin_env[i];
  kept[k++] = "PATH=" CTR_PATH;
  snprintf(xdg, sizeof xdg, "XDG_RUNTIME_DIR=%s", runtime_dir);
  kept[k++] = xdg;
  char why[PATH_MAX + 32];
  snprintf(why, sizeof why, "ctr: cannot run %s (", ctr_program);
  struct exec_ctr exec = {argv, kept, why};
  int outp[2], errp[2];
  if (pipe2(outp, O_CLOEXEC) != 0) {
    free(kept);
    return -1;
  }
  if (pipe2(errp, O_CLOEXEC) != 0) {
    close(outp[0]);
    close(outp[1]);
    free(kept);
    return -1;
  }
  struct as_user a = {.user = user, .dir = job_dir(env), .out = outp[1], .err = errp[1],
                      .ignore_term = ignore_term, .run = exec_ctr, .arg = &exec};
  if (!a.dir) a.dir = "/";
  const pid_t child = spawn_as_user(&a);
  const int saved = errno;
  free(kept);
  close(outp[1]);
  close(errp[1]);
  if (child < 0) {
    close(outp[0]);
    close(errp[0]);
    errno = saved;
    return -1;
  }
  run->pid = child;
  run->out = outp[0];
  run->err = errp[0];
  run->seconds = seconds;
  run->deadline = now_ms() + 1000LL * seconds;
  run->killed = 0;
  snprintf(run->what, sizeof run->what, "ctr %s %s", argv[1] ? argv[1] : "", argv[1] && argv[2] ? argv[2] : "");
  return 0;
}

/* The exit status of the ctr `run` (read_ctr first), waited for until its deadline: 0 if it
 * was reaped elsewhere (then what it printed decides), 128 + the signal that ended it, or -1
 * (it outlived its bound and SIGKILL). */
static int wait_ctr(struct ctr_run *run) {
  const int status = wait_child(run->pid, run->deadline, run->seconds, run->what, run->killed);
  run->pid = 0;
  if (status < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reads the ctr `run` until it has closed its output, or until its deadline (then its
 * session is killed): its stdout into `out` (malloc'd), its last stderr line into `err`.
 * Not waited for (wait_ctr). */
static void read_ctr(struct ctr_run *run, char **out, char *err, size_t errsize) {
  int outp[2] = {run->out, -1}, errp[2] = {run->err, -1};
  run->out = run->err = -1;
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  char ebuf[4096];
  size_t elen = 0;
  int open_fds = 2, overflow = 0;
  while (buf && open_fds > 0) {
    const long long left = run->deadline - now_ms();
    if (left <= 0) {
      slurm_error("ctr: %s (pid %d, as the job's user) did not end within %d s: killed", run->what, (int)run->pid,
                  run->seconds);
      kill_session(run->pid);
      run->killed = 1;
      break;
    }
    struct timeval timeout = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
    fd_set rd;
    FD_ZERO(&rd);
    if (outp[0] >= 0) FD_SET(outp[0], &rd);
    if (errp[0] >= 0) FD_SET(errp[0], &rd);
    const int ready = select((outp[0] > errp[0] ? outp[0] : errp[0]) + 1, &rd, NULL, NULL, &timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (outp[0] >= 0 && FD_ISSET(outp[0], &rd)) {
      /* ctr's join information is a few KiB: more than 1 MiB is not ctr's, and is read and
       * dropped (the child must not block on a full pipe), not kept. */
      char drop[4096];
      if (len + 1024 >= cap && cap < (1u << 20)) {
        char *grown = realloc(buf, cap *= 2);
        if (!grown) break;
        buf = grown;
      }
      const int full = len + 1024 >= cap;
      ssize_t n = full ? read(outp[0], drop, sizeof drop) : read(outp[0], buf + len, cap - len - 1);
      if (n > 0 && full) {
        overflow = 1;
      } else if (n <= 0) {
        close(outp[0]);
        outp[0] = -1;
        --open_fds;
      } else {
        len += (size_t)n;
      }
    }
    if (errp[0] >= 0 && FD_ISSET(errp[0], &rd)) {
      ssize_t n = read(errp[0], ebuf + elen, sizeof ebuf - elen - 1);
      if (n <= 0) {
        close(errp[0]);
        errp[0] = -1;
        --open_fds;
      } else {
        elen += (size_t)n;
        if (elen >= sizeof ebuf - 256) elen = 0; /* keep the tail */
      }
    }
  }
  if (outp[0] >= 0) close(outp[0]);
  if (errp[0] >= 0) close(errp[0]);
  if (buf) buf[len] = 0;
  ebuf[elen] = 0;
  while (elen > 0 && ebuf[elen - 1] == '\n') ebuf[--elen] = 0;
  const char *last = strrchr(ebuf, '\n');
  const char *tail = last ? last + 1 : ebuf;
  size_t tail_len = strlen(tail) < errsize ? strlen(tail) : errsize - 1;
  memcpy(err, tail, tail_len);
  err[tail_len] = 0;
  if (overflow) {
    free(buf);
    buf = NULL;
    snprintf(err, errsize, "ctr printed more than 1 MiB");
  }
  if (run->killed) {
    free(buf);
    buf = NULL;
    snprintf(err, errsize, "%s did not end within %d s", run->what, run->seconds);
  }
  *out = buf;
}

/* Waits for the ctr `run` (read_ctr, then its exit). Returns its exit status, or -1. */
static int finish_ctr(struct ctr_run *run, char **out, char *err, size_t errsize) {
  read_ctr(run, out, err, errsize);
  return wait_ctr(run);
}

/* Runs `ctr ARGV...` as start_ctr_as does and waits for it, as finish_ctr does, for the
 * plugin's ordinary bound (timeout=). */
static int run_ctr_as(const struct job_user *user, char **env, const char *runtime_dir, char **argv, char **out,
                      char *err, size_t errsize, int ignore_term) {
  struct ctr_run run;
  *out = NULL;
  if (start_ctr_as(user, env, runtime_dir, argv, ignore_term, ctr_timeout, &run) != 0) return -1;
  return finish_ctr(&run, out, err, errsize);
}

/* In place: '_' for each character an instance name may not have. */
static void name_characters(char *text) {
  for (char *c = text; *c; ++c)
    if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9') && *c != '-' && *c != '_')
      *c = '_';
}

/* The node's name, with only characters an instance name may have. */
static void node_name(char *host, size_t size) {
  if (gethostname(host, size - 1) != 0) snprintf(host, size, "node");
  host[size - 1] = 0;
  name_characters(host);
}

/* "slurm.JOB.STEP.NODE" (the batch step: "slurm.JOB.batch.NODE"), or for a named container
 * "slurm.JOB.n-NAME.NODE": the node's name too, for nodes that share the user's state
 * directory (a shared /tmp). At most 64 characters, the node's name cut to fit. */
static int instance_name(spank_t sp, char *name, size_t size) {
  uint32_t job = 0, step = 0;
  char host[256] = "";
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
    return -1;
  node_name(host, sizeof host);
  char stepText[40];
  if (opt_name && *opt_name) {
    snprintf(stepText, sizeof stepText, "n-%.32s", opt_name);
    name_characters(stepText);
  } else if (step == SLURM_BATCH_SCRIPT) {
    snprintf(stepText, sizeof stepText, "batch");
  } else {
    snprintf(stepText, sizeof stepText, "%u", step);
  }
  int used = snprintf(name, size, "slurm.%u.%s.", job, stepText);
  if (used < 0 || (size_t)used >= size || used >= 64) return -1;
  snprintf(name + used, size - (size_t)used, "%.*s", 64 - used, host);
  return 0;
}

/* Why the site's plugstack.conf does not let this step run as it was asked (an option it
 * does not allow, a container it requires), or NULL. */
static const char *step_refused(spank_t sp) {
  if (refused[0]) return refused;
  if ((opt_image && *opt_image) || (opt_name && *opt_name) || container_required == REQUIRED_NO) return NULL;
  uint32_t step = 0; /* unknown: a step like any other */
  spank_get_item(sp, S_JOB_STEPID, &step);
  if (step == SLURM_EXTERN_CONT) return NULL; /* slurmstepd's own, no task of the user's */
  if (step != SLURM_BATCH_SCRIPT)
    return "ctr: this cluster runs every job step in a container: give --container-image=IMAGE";
  if (container_required == REQUIRED_ALL)
    return "ctr: this cluster runs every batch script in a container: give #SBATCH --container-image=IMAGE";
  return NULL;
}

/* The image ctr gets. pyxis's registry forms become docker:// references, which ctr runs
 * through its image cache (node-local where ctr.conf's 'image cache dir' says so):
 * "REGISTRY#NAME[:TAG]" is docker://REGISTRY/NAME[:TAG], and a bare NAME:TAG (no '/', no
 * transport) is Docker Hub's. With image_dir=DIR, another bare name is DIR/NAME. Any other
 * value is ctr's to read (a relative path is relative to the submit directory). */
static const char *image_path(char *buf, size_t size) {
  static const char *const transports[] = {"docker:", "docker-archive:", "docker-daemon:", "oci:", "oci-archive:",
                                           "library:", "oras:", "shub:", "http:", "https:", "instance:", NULL};
  for (const char *const *t = transports; *t; ++t)
    if (strncmp(opt_image, *t, strlen(*t)) == 0) return opt_image;
  const char *hash = strchr(opt_image, '#'), *slash = strchr(opt_image, '/');
  if (hash && hash != opt_image && (!slash || hash < slash)) {
    int n = snprintf(buf, size, "docker://%.*s/%s", (int)(hash - opt_image), opt_image, hash + 1);
    return n > 0 && (size_t)n < size ? buf : opt_image;
  }
  if (strpbrk(opt_image, "/#") || strcmp(opt_image, ".") == 0 || strcmp(opt_image, "..") == 0) return opt_image;
  if (strchr(opt_image, ':')) {
    int n = snprintf(buf, size, "docker://%s", opt_image);
    return n > 0 && (size_t)n < size ? buf : opt_image;
  }
  if (!image_dir[0]) return opt_image;
  int n = snprintf(buf, size, "%s/%s", image_dir, opt_image);
  return n > 0 && (size_t)n < size ? buf : opt_image;
}

/* The step's `ctr instance start`, from init_post_opt (begin_container) to user_init
 * (finish_container): it runs while slurmstepd sets up the step (I/O, the MPI server,
 * PAM), not after. */
static struct {
  int begun;
  struct ctr_run run;
} starting;

/* What parse_join_info took, dropped (a join file that did not do). */
static void reset_join(void) {
  free(join.seccomp);
  for (int i = 0; i < join.nset; ++i) free(join.set[i]);
  for (int i = 0; i < join.nunset; ++i) free(join.unset[i]);
  free(join.set);
  free(join.unset);
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

/* the user's state place on the node
 *
 * Every ctr the plugin runs for a user gets XDG_RUNTIME_DIR=/run/ctr/UID, a directory root
 * makes and gives to the user: ctr keeps its state in RUNTIME/ctr (host::chooseStateDir), so
 * the plugin's steps and the epilog find the same instances there, and no other user can
 * take its name first (as they can /tmp/ctr-UID and each name after it). Opened and checked
 * through file descriptors, never following a link. */
#define RUNTIME_BASE "/run/ctr"

/* /run/ctr, root's and writable by root alone (made 0755 when `create` and missing), opened;
 * -1 (with a line unless it is just missing). */
static int open_runtime_base(int create) {
  int made = create && mkdir(RUNTIME_BASE, 0755) == 0;
  if (create && !made && errno != EEXIST) {
    slurm_error("ctr: cannot make %s: %s", RUNTIME_BASE, strerror(errno));
    return -1;
  }
  const int fd = open(RUNTIME_BASE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    else if (errno != ENOENT) slurm_error("ctr: cannot open %s: %s", RUNTIME_BASE, strerror(errno));
    return -1;
  }
  if (made) fchmod(fd, 0755); /* whatever slurmd's umask */
  else if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    slurm_error("ctr: %s is not a directory of root's that only root may write: not used", RUNTIME_BASE);
    close(fd);
    return -1;
  }
  return fd;
}

/* /run/ctr/UID, the user's (made 0700 and given to the user when `create` and missing),
 * opened; -1. */
static int open_runtime_dir(const struct job_user *user, int create) {
  const int base = open_runtime_base(create);
  if (base < 0) return -1;
  char name[32];
  snprintf(name, sizeof name, "%u", (unsigned)user->uid);
  if (create && mkdirat(base, name, 0700) != 0 && errno != EEXIST)
    slurm_error("ctr: cannot make %s/%s: %s", RUNTIME_BASE, name, strerror(errno));
  const int fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(base);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  /* Root's: made here (or by a run stopped before it gave it away), so closed first. */
  if (create && st.st_uid == 0 && user->uid != 0 &&
      (fchmod(fd, 0700) != 0 || fchown(fd, user->uid, user->gid) != 0 || fstat(fd, &st) != 0))
    slurm_error("ctr: cannot give %s/%s to uid %u: %s", RUNTIME_BASE, name, (unsigned)user->uid, strerror(errno));
  if (st.st_uid != user->uid) {
    slurm_error("ctr: %s/%s is not uid %u's: not used", RUNTIME_BASE, name, (unsigned)user->uid);
    close(fd);
    return -1;
  }
  return fd;
}

/* The user's runtime directory for the plugin's ctr runs: its path into `path` (made when
 * missing). 0, or -1. */
static int runtime_dir(const struct job_user *user, char *path, size_t size) {
  const int fd = open_runtime_dir(user, 1);
  if (fd < 0) return -1;
  close(fd);
  snprintf(path, size, "%s/%u", RUNTIME_BASE, (unsigned)user->uid);
  return 0;
}

/* A file the user owns, at `name` in the directory `dir`, opened without following a link. */
static int open_owned(int dir, const char *name, int flags, uid_t uid) {
  int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != uid)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The user's state directory, where the plugin's ctr runs keep their instances
 * (STATE/instances/NAME.*), opened, or -1: /run/ctr/UID/ctr (host::chooseStateDir with the
 * XDG_RUNTIME_DIR start_ctr_as gives). Opened as root: no link followed, owned by the user. */
static int open_state_dir(const struct job_user *user) {
  const int runtime = open_runtime_dir(user, 0);
  if (runtime < 0) return -1;
  const int state = open_owned(runtime, "ctr", O_RDONLY | O_DIRECTORY, user->uid);
  close(runtime);
  return state;
}

/* The join file of the named container `name` (ctr writes it beside the instance's record,
 * STATE/instances/NAME.join), malloc'd, or NULL. Read as root: no link followed, every
 * step owned by the user (so nothing the user could not read anyway). */
static char *read_join_file(const struct job_user *user, const char *name) {
  const uid_t uid = user->uid;
  int state = open_state_dir(user);
  if (state < 0) return NULL;
  int dir = open_owned(state, "instances", O_RDONLY | O_DIRECTORY, uid);
  close(state);
  if (dir < 0) return NULL;
  char file[128];
  snprintf(file, sizeof file, "%s.join", name);
  int fd = open_owned(dir, file, O_RDONLY, uid);
  close(dir);
  struct stat st;
  char *text = NULL;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size < (1 << 20) &&
      (text = malloc((size_t)st.st_size + 1))) {
    if (read(fd, text, (size_t)st.st_size) == st.st_size) {
      text[st.st_size] = 0;
    } else {
      free(text);
      text = NULL;
    }
  }
  if (fd >= 0) close(fd);
  return text;
}

static unsigned long long start_time(pid_t pid);

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
  const int parsed = parse_join_info(text);
  free(text);
  if (parsed != 0 || strcmp(join.name, name) != 0 || (image && strcmp(join.image, expected) != 0) ||
      start_time(join.keeper) != join.keeper_start) {
    reset_join();
    return -1;
  }
  return 0;
}

/* Remote, once per step and node: the step's container starts (or, named, is found). */
static void begin_container(spank_t sp) {
  starting.begun = 1;
  const char *why = step_refused(sp);
  if (why) { /* told by each task, as a container that cannot start */
    snprintf(join.failed, sizeof join.failed, "%s", why);
    slurm_info("%s", join.failed);
    return;
  }
  const int named = opt_name && *opt_name;
  if ((!opt_image || !*opt_image) && !named) return;
  char name[96];
  if (instance_name(sp, name, sizeof name) != 0) {
    snprintf(join.failed, sizeof join.failed, "ctr: cannot read the job and step ids");
    slurm_error("%s", join.failed);
    return;
  }
  struct job_user user;
  char **env = NULL;
  const int known = step_user(sp, &user) == 0 && spank_get_item(sp, S_JOB_ENV, &env) == ESPANK_SUCCESS;
  char image[2 * PATH_MAX];
  const char *image_arg = opt_image && *opt_image ? image_path(image, sizeof image) : NULL;
  if (known && named && join_named_container(&user, env, name, image_arg) == 0) {
    if (opt_name_flag == NAME_CREATE) {
      const pid_t keeper = join.keeper;
      reset_join();
      snprintf(join.failed, sizeof join.failed, "ctr: --container-name=%.64s:create: the container already runs on "
               "this node (keeper pid %d)", opt_name, (int)keeper);
      slurm_info("%s", join.failed);
      return;
    }
    join.active = 1;
    slurm_info("ctr: %s runs (keeper pid %d): joined through its join file", name, (int)join.keeper);
    return;
  }
  if (named && (opt_name_flag == NAME_EXEC || !image_arg)) {
    snprintf(join.failed, sizeof join.failed, "ctr: --container-name=%.64s%s: no container of that name runs on this "
             "node for this job%s", opt_name, opt_name_flag == NAME_EXEC ? ":exec" : "",
             image_arg ? "" : ", and no --container-image was given to start one");
    slurm_info("%s", join.failed);
    return;
  }
  char *argv[32];
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
  if (!named) argv[n++] = "--stay";
  if (opt_mounts && *opt_mounts) {
    argv[n++] = "--bind";
    argv[n++] = opt_mounts;
  }
  if (opt_workdir && *opt_workdir) {
    argv[n++] = "--pwd";
    argv[n++] = opt_workdir;
  }
  if (opt_no_home) argv[n++] = "--no-home";
  if (opt_writable) argv[n++] = "--writable-tmpfs";
  if (named && opt_name_flag == NAME_AUTO) argv[n++] = "--reuse"; /* the job's earlier step on this node started it */
  if (opt_remap_root) argv[n++] = "--fakeroot";
  /* The batch step's task is the script slurmd wrote to its spool directory: bound in at
   * its own path (read-only), so that `#SBATCH --container-image` runs it in the container. */
  char script_bind[4 * PATH_MAX + 8];
  uint32_t step = 0;
  int job_argc = 0;
  char **job_argv = NULL;
  if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_BATCH_SCRIPT &&
      spank_get_item(sp, S_JOB_ARGV, &job_argc, &job_argv) == ESPANK_SUCCESS && job_argc > 0 && job_argv[0][0] == '/') {
    char escaped[PATH_MAX * 2];
    size_t e = 0;
    for (const char *c = job_argv[0]; *c && e + 2 < sizeof escaped; ++c) {
      if (*c == ',' || *c == ':' || *c == '\\') escaped[e++] = '\\';
      escaped[e++] = *c;
    }
    escaped[e] = 0;
    snprintf(script_bind, sizeof script_bind, "%s:%s:ro", escaped, escaped);
    argv[n++] = "--bind";
    argv[n++] = script_bind;
  }
  /* The step's GPUs (slurmstepd put SLURM_STEP_GPUS, or SLURM_JOB_GPUS for the batch step,
   * in the job's environment): --nv by default, as --container-nv asks; Slurm's own
   * CUDA_VISIBLE_DEVICES and device cgroup keep the tasks to those GPUs, as without a
   * container. */
  const char *gpus = env_value(env, step == SLURM_BATCH_SCRIPT ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
  if (opt_nv || (gpus && *gpus)) argv[n++] = "--nv";
  if (opt_mpi && *opt_mpi) {
    argv[n++] = "--mpi";
    argv[n++] = opt_mpi;
  }
  argv[n++] = (char *)image_arg;
  argv[n++] = name;
  argv[n] = NULL;
  char runtime[PATH_MAX];
  if (known && runtime_dir(&user, runtime, sizeof runtime) != 0) {
    snprintf(join.failed, sizeof join.failed, "ctr: --container-image=%s: no state directory for ctr in %s "
             "(slurmd's log says why)", opt_image, RUNTIME_BASE);
    slurm_info("%s", join.failed);
    return;
  }
  if (!known || start_ctr_as(&user, env, runtime, argv, 0, start_timeout, &starting.run) != 0) {
    snprintf(join.failed, sizeof join.failed, "ctr: --container-image=%s: cannot run ctr as the job's user: %s",
             opt_image, strerror(errno));
    slurm_info("%s", join.failed);
  }
}

/* The started ctr's join information taken (user_init; exit, if the step ended first). */
static void finish_container(void) {
  if (!starting.run.pid) return;
  char *out = NULL, err[1024] = "";
  read_ctr(&starting.run, &out, err, sizeof err);
  const int parsed = out && parse_join_info(out) == 0;
  int status = 0;
  if (parsed && join.keeper == starting.run.pid) {
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
    snprintf(join.failed, sizeof join.failed, "ctr: --container-image=%s: %.900s", opt_image,
             *err ? err : status == 0 ? "ctr printed no join information" : "ctr instance start failed");
    slurm_info("%s", join.failed);
    return;
  }
  join.active = 1;
}

/* Remote: the step's container starts as soon as the step's options are known. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (spank_context() == S_CTX_REMOTE) begin_container(sp);
  return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  if (!starting.begun) begin_container(sp);
  finish_container();
  return 0;
}

static unsigned long long start_time(pid_t pid) {
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

static int drop_capabilities(void) {
  for (int cap = 0; cap <= 63; ++cap)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return -1;
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  return (int)syscall(SYS_capset, &header, data);
}

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
  for (int i = 0; i < join.nset; ++i)
    if (strncmp(join.set[i], name, n) == 0 && join.set[i][n] == '=') return 1;
  for (int i = 0; i < join.nunset; ++i)
    if (strcmp(join.unset[i], name) == 0) return 1;
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

int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (join.failed[0]) fail_task("%s", join.failed);
  if (!join.active) return 0;
  const int entrypoint = opt_entrypoint ? open_entrypoint() : -1;
  int fds[MAX_NS];
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "/");
  const int seccomp = join.seccomp ? open(join.seccomp, O_RDONLY | O_CLOEXEC) : -1;
  if (join.seccomp && seccomp < 0)
    fail_task("ctr: cannot open the seccomp filter %s: %s", join.seccomp, strerror(errno));
  int pidfd = (int)syscall(SYS_pidfd_open, join.keeper, 0);
  if (pidfd < 0 || start_time(join.keeper) != join.keeper_start) {
    fail_task("ctr: the step's container %s has ended (keeper pid %d)", join.name, (int)join.keeper);
  }
  for (int i = 0; i < join.nns; ++i) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)join.keeper, join.ns_type[i]);
    fds[i] = open(path, O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0 || fstat(fds[i], &st) != 0 || (unsigned long long)st.st_ino != join.ns_inode[i]) {
      fail_task("ctr: the step's container %s has ended (its %s namespace is gone)", join.name, join.ns_type[i]);
    }
  }
  for (int i = 0; i < join.nns; ++i) {
    if (setns(fds[i], 0) != 0) {
      fail_task("ctr: cannot enter the %s namespace of %s: %s", join.ns_type[i], join.name, strerror(errno));
    }
    close(fds[i]);
  }
  close(pidfd);
  const char *dir = opt_workdir && *opt_workdir ? opt_workdir : cwd;
  if (chdir(dir) != 0) {
    if (opt_workdir && *opt_workdir) {
      fail_task("ctr: --container-workdir %s: %s in the container", dir, strerror(errno));
    }
    slurm_info("ctr: working directory %s is not in the container: using /", dir);
    (void)!chdir("/");
  }
  for (int i = 0; i < join.nset; ++i) {
    char *eq = strchr(join.set[i], '=');
    if (!eq) continue;
    *eq = 0;
    if (!job_keeps(sp, join.set[i])) spank_setenv(sp, join.set[i], eq + 1, 1);
    *eq = '=';
  }
  for (int i = 0; i < join.nunset; ++i)
    if (!job_keeps(sp, join.unset[i])) spank_unsetenv(sp, join.unset[i]);
  container_view_of_kept(sp);
  if (entrypoint >= 0) run_through_entrypoint(sp, entrypoint);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || drop_capabilities() != 0) {
    fail_task("ctr: cannot drop privileges in %s: %s", join.name, strerror(errno));
  }
  if (seccomp >= 0 && load_seccomp(seccomp) != 0) {
    fail_task("ctr: cannot load the seccomp filter %s: %s", join.seccomp, strerror(errno));
  }
  return 0;
}

/* As the job's user: the files of an instance in the directory `dir`, then the directory
 * from `state` once it is empty (what a keeper removes as it ends). */
struct instance_files {
  int state, dir;
  char names[6][128];
};

static int unlink_instance_files(void *arg) {
  const struct instance_files *f = arg;
  for (int i = 0; i < 6; ++i) unlinkat(f->dir, f->names[i], 0);
  unlinkat(f->state, "instances", AT_REMOVEDIR);
  return 0;
}

/* The files of the step's instance `name` (STATE/instances/NAME.*), whose keeper was
 * killed, removed as the user. */
static void remove_instance_files(const struct job_user *user, const char *name) {
  struct instance_files f;
  static const char *const suffixes[6] = {"json", "join", "bpf", "out", "err", "lock"};
  f.state = open_state_dir(user);
  f.dir = f.state >= 0 ? open_owned(f.state, "instances", O_RDONLY | O_DIRECTORY, user->uid) : -1;
  if (f.dir >= 0) {
    for (int i = 0; i < 6; ++i) snprintf(f.names[i], sizeof f.names[i], "%s.%s", name, suffixes[i]);
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

int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  finish_container(); /* the step ended before user_init */
  if (!join.active) return 0;
  if (opt_name && *opt_name) return 0; /* a named container lives until the job's end (job_epilog) */
  /* The step's container ends when its keeper gets SIGTERM: the keeper removes its own
   * files as it ends, so nothing here waits for it (`ctr instance stop` would, in series
   * with the step's end). The start time tells the keeper from a process that took its pid.
   * The signal is sent as the job's user, never as root: the keeper's pid came from what a
   * ctr run as the user printed (with the user's environment), so it is the user's word. */
  struct job_user user;
  if (step_user(sp, &user) != 0) {
    slurm_error("ctr: stopping %s: cannot read the job's user", join.name);
    return 0;
  }
  user.ngroups = 0; /* a signal needs no groups */
  join.active = 0;
  if (join.keeper_is_child) {
    /* --stay: slurmstepd has killed what was left of the step, the keeper with it (it is a
     * child of slurmstepd), before this hook: its files are removed here, as the user. */
    int status;
    const pid_t ended = waitpid(join.keeper, &status, WNOHANG);
    if (ended == join.keeper || (ended < 0 && errno == ECHILD)) {
      remove_instance_files(&user, join.name);
      return 0;
    }
    /* Still there (a process tracking that left it): SIGTERM, and it removes them itself. */
  }
  /* The pidfd first, then the start time: if it is still the keeper's, the pidfd is. */
  int pidfd = (int)syscall(SYS_pidfd_open, join.keeper, 0);
  if (pidfd < 0 || start_time(join.keeper) != join.keeper_start) { /* ended already */
    if (pidfd >= 0) close(pidfd);
    return 0;
  }
  struct as_user a = {.user = &user, .out = -1, .err = -1, .run = send_term, .arg = &pidfd};
  const pid_t child = spawn_as_user(&a);
  close(pidfd);
  const int status =
      child < 0 ? -1 : wait_child(child, now_ms() + 1000LL * ctr_timeout, ctr_timeout, "signalling a keeper", 0);
  if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    slurm_error("ctr: stopping %s (keeper pid %d) failed", join.name, (int)join.keeper);
  return 0;
}

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
  char file[64], line[PATH_MAX + 64];
  snprintf(file, sizeof file, "/proc/%d/cgroup", (int)pid);
  FILE *f = fopen(file, "re");
  if (!f) return 0;
  const size_t n = strlen(job_path);
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    const char *path = strchr(line, ':');
    path = path ? strchr(path + 1, ':') : NULL;
    if (path && strncmp(path + 1, job_path, n) == 0 && (path[1 + n] == '/' || path[1 + n] == '\n')) found = 1;
  }
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

/* Whether the comma-separated LIST names CONTROLLER as a whole word ("cpu" is not in
 * "cpuset,cpuacct"). */
static int has_option(const char *list, const char *controller) {
  const size_t len = strlen(controller);
  for (const char *o = list; o && *o;) {
    const char *comma = strchr(o, ',');
    const size_t n = comma ? (size_t)(comma - o) : strlen(o);
    if (n == len && strncmp(o, controller, len) == 0) return 1;
    o = comma ? comma + 1 : NULL;
  }
  return 0;
}

/* The v1 hierarchies' mount points (mountinfo's field 5 where the file system is cgroup),
 * only the one of CONTROLLER (one of its super options) unless it is NULL. */
static int cgroup_v1_mounts(char mounts[][PATH_MAX], int max, const char *controller) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
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
  if (f) fclose(f);
  return n;
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

static void end_job_cgroups(uid_t uid, uint32_t job) {
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
  char line[4096];
  int found = 0;
  FILE *f = fopen("/proc/self/cgroup", "re");
  while (f && !found && fgets(line, sizeof line, f)) {
    const char *c = strstr(line, ":freezer:");
    if (!c) continue;
    snprintf(path, path_size, "%s", c + strlen(":freezer:"));
    path[strcspn(path, "\n")] = 0;
    found = 1;
  }
  if (f) fclose(f);
  char mounts[1][PATH_MAX];
  if (!found || cgroup_v1_mounts(mounts, 1, "freezer") != 1) return 0;
  memcpy(mount, mounts[0], PATH_MAX);
  return 1;
}

static void end_step_holders(spank_t sp) {
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

static uint32_t tasks_exited;

/* slurmstepd, as each of the node's tasks of the step exits (root). */
int slurm_spank_task_exit(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  uint32_t tasks = 0;
  if (!spank_remote(sp) || spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS) return 0;
  if (++tasks_exited == tasks) end_step_holders(sp);
  return 0;
}

/* The job's named containers stopped, as the job's user (slurm_spank_exit stopped each
 * step's unnamed one). Every node's (where nodes share a state directory, the first epilog
 * stops them all: the job has ended everywhere by then). */
static void stop_named_containers(const struct passwd *pw, uint32_t job) {
  char home[PATH_MAX + 8], user_name[300], logname[310], pattern[64];
  snprintf(home, sizeof home, "HOME=%s", pw->pw_dir);
  snprintf(user_name, sizeof user_name, "USER=%s", pw->pw_name);
  snprintf(logname, sizeof logname, "LOGNAME=%s", pw->pw_name);
  char *env[] = {home, user_name, logname, NULL};
  snprintf(pattern, sizeof pattern, "slurm.%u.n-*", job);
  const struct job_user user = {pw->pw_uid, pw->pw_gid, NULL, -1};
  /* No state directory, no instance: nothing to run ctr for. */
  const int state = open_state_dir(&user);
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

/* slurmd, at the job's end on each node where it ran: its named containers stopped, then
 * what is left in its cgroups ended and they removed. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  if (parse_arguments(ac, av) != 0) return -1;
  uid_t uid;
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
    return 0;
  const struct passwd *pw = getpwuid(uid);
  if (pw) stop_named_containers(pw, job);
  end_job_cgroups(uid, job);
  return 0;
}
