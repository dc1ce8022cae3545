/* The --container-* options (pyxis's, so that its job scripts run unchanged) and the site's
 * plugstack.conf arguments: what users may set, and what a step's options mean. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_internal.h"

#ifndef CTR_DEFAULT_PROGRAM
#define CTR_DEFAULT_PROGRAM "/usr/bin/ctr"
#endif
#ifndef CTR_DEFAULT_ENTRYPOINT
#define CTR_DEFAULT_ENTRYPOINT "/usr/libexec/ctr/ctr-slurm-entrypoint"
#endif

enum {
  OPT_IMAGE = 1, OPT_MOUNTS, OPT_WORKDIR, OPT_NO_HOME, OPT_NV, OPT_NAME, OPT_WRITABLE, OPT_READONLY, OPT_ENV,
  OPT_MPI, OPT_MOUNT_HOME, OPT_ENTRYPOINT, OPT_NO_ENTRYPOINT, OPT_REMAP_ROOT, OPT_NO_REMAP_ROOT, OPT_UNSHARE,
  OPT_ENTRYPOINT_LOG, OPT_SAVE, OPT_END
};

char *opt_image, *opt_mounts, *opt_workdir, *opt_name, *opt_env, *opt_mpi, *opt_unshare, *opt_save;
int opt_no_home, opt_nv, opt_remap_root, opt_entrypoint;
static int opt_writable = -1; /* --container-writable 1, --container-readonly 0, neither -1 */
enum name_flag opt_name_flag;
char ctr_program[PATH_MAX] = CTR_DEFAULT_PROGRAM;
char entrypoint_program[PATH_MAX] = CTR_DEFAULT_ENTRYPOINT;

/* The site's policy (plugstack.conf). */
static char image_dir[PATH_MAX];
static int writable_default = 1; /* writable=yes|no: pyxis's containers are writable */
static enum workdir_rule workdir_default = WORKDIR_AUTO; /* workdir=auto|image|submit */
int start_timeout = 600, ctr_timeout = 30;
char *admin_env[MAX_ADMIN_ENV];
int nadmin_env;
static enum { REQUIRED_NO, REQUIRED_STEPS, REQUIRED_ALL } container_required;
static unsigned allowed = ~0u; /* bit 1 << OPT_x: users may set --OPT */
/* Remote: the first option the step may not have; user_init fails the step with it (a
 * callback's error there would fail the launch with Slurm's words, not ours). */
static char refused[512];

static int take_option(int val, const char *arg, int remote);

/* The options that come in pairs (pyxis's --X and --no-X): which of the two was given, so
 * that both together are refused as pyxis refuses them. -1: neither. */
static const struct {
  int on, off;
} pairs[] = {{OPT_WRITABLE, OPT_READONLY}, {OPT_MOUNT_HOME, OPT_NO_HOME}, {OPT_REMAP_ROOT, OPT_NO_REMAP_ROOT},
             {OPT_ENTRYPOINT, OPT_NO_ENTRYPOINT}};
#define NPAIRS (sizeof pairs / sizeof pairs[0])
static int pair_given[NPAIRS] = {-1, -1, -1, -1};

/* The value options' current value, for "given twice" (Slurm may call a callback twice with
 * the same value: that is no conflict). */
static char **value_of(int val) {
  switch (val) {
    case OPT_IMAGE: return &opt_image;
    case OPT_MOUNTS: return &opt_mounts;
    case OPT_WORKDIR: return &opt_workdir;
    case OPT_ENV: return &opt_env;
    case OPT_MPI: return &opt_mpi;
    case OPT_UNSHARE: return &opt_unshare;
    case OPT_SAVE: return &opt_save;
    default: return NULL;
  }
}

static struct spank_option options[] = {
    {"container-image", "IMAGE", "[ctr] run the step's tasks in a container of IMAGE (a path: starting with / or ., or "
     "ending in .sif, .sqsh, .squashfs or .simg; a bare NAME from the site's image_dir=; docker://REF, "
     "[USER@]REGISTRY#NAME:TAG or NAME:TAG through ctr's image cache)",
     1, OPT_IMAGE, take_option},
    {"container-mounts", "SRC[:DST[:FLAGS]][,...]", "[ctr] bind mounts into the container (pyxis's form: SRC a "
     "path or tmpfs, FLAGS joined with '+', e.g. ro+rbind)", 1, OPT_MOUNTS, take_option},
    {"container-workdir", "DIR", "[ctr] working directory of the tasks in the container", 1, OPT_WORKDIR,
     take_option},
    {"no-container-mount-home", NULL, "[ctr] do not mount the home directory", 0, OPT_NO_HOME, take_option},
    {"container-nv", NULL, "[ctr] the node's NVIDIA driver and GPUs in the container (the default for a step "
     "allocated GPUs)", 0, OPT_NV, take_option},
    {"container-name", "NAME[:auto|create|exec]", "[ctr] a named container (NAME: at most 32 characters, no '/'; "
     "characters other than A-Z a-z 0-9 _ - count as '_'): later steps of the job that name it on a node join it "
     "(without --container-image too); removed at the job's end. create: it must not run yet; exec: a step of the "
     "job must still run in it; empty: auto", 1, OPT_NAME, take_option},
    {"container-writable", NULL, "[ctr] a writable root (the default unless the site's plugstack.conf says "
     "writable=no; pyxis follows enroot.conf's ENROOT_ROOTFS_WRITABLE; changes in memory, kept for the job in a "
     "named container)", 0, OPT_WRITABLE, take_option},
    {"container-readonly", NULL, "[ctr] a read-only root", 0, OPT_READONLY, take_option},
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
    {"container-unshare", "net,ipc,uts", "[ctr] namespaces of the container's own: net (loopback only), ipc, uts",
     1, OPT_UNSHARE, take_option},
    {"container-entrypoint-log", NULL, "[ctr] accepted: the entrypoint's output is always the task's", 0,
     OPT_ENTRYPOINT_LOG, take_option},
    {"container-remap-root", NULL, "[ctr] root in the container (ctr's --fakeroot: your uid, and your /etc/subuid "
     "range if any; no privilege on the node)", 0, OPT_REMAP_ROOT, take_option},
    {"container-save", "PATH", "[ctr] after the step, save the container's root (the image and what the step wrote "
     "to it) as a squashfs image at PATH on each node", 1, OPT_SAVE, take_option},
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
int listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *item = list; item && *item;) {
    const char *end = strchrnul(item, ',');
    if ((size_t)(end - item) == n && strncmp(item, name, n) == 0) return 1;
    item = *end ? end + 1 : end;
  }
  return 0;
}

static int refuse_value(int val, const char *arg, char *why, size_t size);

/* Why the user may not give --OPT=ARG here, into `why`; 0 when they may. */
static int refuse_option(int val, const char *arg, char *why, size_t size) {
  if (!(allowed & (1u << val))) {
    char list[512];
    allowed_list(allowed, list, sizeof list);
    snprintf(why, size, "ctr: --%s is not allowed by this site's plugstack.conf (allow=%s)", option_name(val),
             list);
    return -1;
  }
  char **value = value_of(val);
  if ((value || val == OPT_NAME) && !*arg) { /* an empty IMAGE would run the step outside any container */
    snprintf(why, size, "ctr: --%s: an argument is required", option_name(val));
    return -1;
  }
  if (value && *value && strcmp(*value, arg) != 0) {
    snprintf(why, size, "ctr: --%s was given twice (%.200s, then %.200s)", option_name(val), *value, arg);
    return -1;
  }
  for (size_t i = 0; i < NPAIRS; ++i) {
    const int mine = val == pairs[i].on ? 1 : val == pairs[i].off ? 0 : -1;
    if (mine >= 0 && pair_given[i] >= 0 && pair_given[i] != mine) {
      snprintf(why, size, "ctr: both --%s and --%s were given", option_name(pairs[i].on), option_name(pairs[i].off));
      return -1;
    }
  }
  if (val == OPT_NAME) {
    const char *colon = strchr(arg, ':');
    const size_t length = colon ? (size_t)(colon - arg) : strlen(arg);
    if (colon == arg) {
      snprintf(why, size, "ctr: --container-name=%.200s: an empty name", arg);
      return -1;
    }
    /* The name is part of the container's instance name (slurm.JOB.n-NAME.HOST): a longer
     * one, or a '/', would make two names one. */
    if (length > 32 || memchr(arg, '/', length)) {
      snprintf(why, size, "ctr: --container-name=%.200s: a name is at most 32 characters, without '/'", arg);
      return -1;
    }
    if (opt_name && (strlen(opt_name) != length || strncmp(opt_name, arg, length) != 0)) {
      snprintf(why, size, "ctr: --container-name was given twice (%.200s, then %.200s)", opt_name, arg);
      return -1;
    }
    /* An empty flag (NAME:) is auto, as pyxis reads it. */
    if (colon && colon[1] != '\0' && strcmp(colon + 1, "auto") != 0 && strcmp(colon + 1, "create") != 0 &&
        strcmp(colon + 1, "exec") != 0) {
      if (strcmp(colon + 1, "no_exec") == 0)
        snprintf(why, size, "ctr: --container-name=%.200s: no_exec is not supported: a named container's files "
                 "live in the running container, which a step joins (auto, exec) or starts (create)", arg);
      else
        snprintf(why, size, "ctr: --container-name=%.200s: the flag must be auto, create or exec", arg);
      return -1;
    }
  }
  return refuse_value(val, arg, why, size);
}

/* Why ARG is no value of --OPT (refuse_option's last part), into `why`; 0 when it is. */
static int refuse_value(int val, const char *arg, char *why, size_t size) {
  if (val == OPT_MOUNTS) { /* pyxis's form, checked where it is given (srun refuses it at once) */
    static char binds[16384], scratch[4096];
    if (container_mounts(arg, binds, sizeof binds, scratch, sizeof scratch, why, size) != 0) return -1;
  }
  if (val == OPT_UNSHARE) {
    for (const char *item = arg; *item;) {
      const char *end = strchrnul(item, ',');
      const size_t n = (size_t)(end - item);
      if (!((n == 3 && (strncmp(item, "net", 3) == 0 || strncmp(item, "ipc", 3) == 0 || strncmp(item, "uts", 3) == 0)))) {
        snprintf(why, size, "ctr: --container-unshare=%.200s: '%.*s' is not one of net, ipc, uts%s", arg, (int)n, item,
                 n == 3 && strncmp(item, "pid", 3) == 0 ? " (a PID namespace would hide the step's tasks from Slurm)" : "");
        return -1;
      }
      item = *end ? end + 1 : end;
    }
  }
  if (val == OPT_SAVE && arg[strlen(arg) - 1] == '/') {
    snprintf(why, size, "ctr: --container-save=%.200s: the target is a directory: give the image file's path", arg);
    return -1;
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
  for (size_t i = 0; i < NPAIRS; ++i)
    if (val == pairs[i].on || val == pairs[i].off) pair_given[i] = val == pairs[i].on;
  switch (val) {
    case OPT_IMAGE: free(opt_image); opt_image = strdup(arg); break;
    case OPT_MOUNTS: free(opt_mounts); opt_mounts = strdup(arg); break;
    case OPT_WORKDIR: free(opt_workdir); opt_workdir = strdup(arg); break;
    case OPT_SAVE: free(opt_save); opt_save = strdup(arg); break;
    case OPT_NO_HOME: opt_no_home = 1; break;
    case OPT_NV: opt_nv = 1; break;
    case OPT_NAME: {
      const char *colon = strchr(arg, ':');
      free(opt_name);
      opt_name = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
      opt_name_flag = !colon || colon[1] == '\0' || strcmp(colon + 1, "auto") == 0 ? NAME_AUTO
                      : strcmp(colon + 1, "create") == 0       ? NAME_CREATE
                                                               : NAME_EXEC;
      break;
    }
    case OPT_WRITABLE: opt_writable = 1; break;
    case OPT_READONLY: opt_writable = 0; break;
    case OPT_ENV: free(opt_env); opt_env = strdup(arg); break;
    case OPT_MPI: free(opt_mpi); opt_mpi = strdup(arg); break;
    case OPT_UNSHARE: free(opt_unshare); opt_unshare = strdup(arg); break;
    case OPT_MOUNT_HOME: opt_no_home = 0; break;
    case OPT_REMAP_ROOT: opt_remap_root = 1; break;
    case OPT_NO_REMAP_ROOT: opt_remap_root = 0; break;
    case OPT_ENTRYPOINT: opt_entrypoint = 1; break;
    case OPT_NO_ENTRYPOINT: opt_entrypoint = 0; break;
    default: break;
  }
  return 0;
}

/* pyxis's "1", "true", "yes", "y", "on" or their opposites, as 1 or 0; -1 otherwise. */
static int parse_bool(const char *text) {
  static const char *const yes[] = {"1", "true", "yes", "y", "on", NULL}, *const no[] = {"0", "false", "no", "n", "off", NULL};
  for (int i = 0; yes[i]; ++i) {
    if (strcasecmp(text, yes[i]) == 0) return 1;
    if (strcasecmp(text, no[i]) == 0) return 0;
  }
  return -1;
}

/* A PYXIS_CONTAINER_* variable of the job (srun's environment, or the step's in slurmstepd). */
static const char *job_variable(spank_t sp, const char *name, char *buf, size_t size) {
  if (spank_context() != S_CTX_REMOTE) return getenv(name);
  return spank_getenv(sp, name, buf, (int)size) == ESPANK_SUCCESS ? buf : NULL;
}

/* pyxis's variables: each sets its option where the command line did not (a job script's
 * `export PYXIS_CONTAINER_IMAGE=...` before its sruns). A variable of an option ctr does
 * not have is said once, not ignored silently. 0, or -1 (a value refused). */
int apply_pyxis_variables(spank_t sp) {
  static const struct {
    const char *name;
    int val, inverse; /* a value option, or a boolean that gives `val` (true) or its pair's other (false) */
  } variables[] = {{"PYXIS_CONTAINER_IMAGE", OPT_IMAGE, 0},       {"PYXIS_CONTAINER_MOUNTS", OPT_MOUNTS, 0},
                   {"PYXIS_CONTAINER_WORKDIR", OPT_WORKDIR, 0},   {"PYXIS_CONTAINER_NAME", OPT_NAME, 0},
                   {"PYXIS_CONTAINER_ENV", OPT_ENV, 0},           {"PYXIS_CONTAINER_MOUNT_HOME", OPT_MOUNT_HOME, 0},
                   {"PYXIS_CONTAINER_REMAP_ROOT", OPT_REMAP_ROOT, 0}, {"PYXIS_CONTAINER_ENTRYPOINT", OPT_ENTRYPOINT, 0},
                   {"PYXIS_CONTAINER_WRITABLE", OPT_WRITABLE, 0}, {"PYXIS_CONTAINER_READONLY", OPT_WRITABLE, 1},
                   {"PYXIS_CONTAINER_UNSHARE", OPT_UNSHARE, 0},   {"PYXIS_CONTAINER_SAVE", OPT_SAVE, 0}};
  /* ENTRYPOINT_LOG is accepted as the option is: the entrypoint's output is the task's. */
  const int remote = spank_context() == S_CTX_REMOTE;
  char buf[PATH_MAX];
  for (size_t i = 0; i < sizeof variables / sizeof variables[0]; ++i) {
    const char *value = job_variable(sp, variables[i].name, buf, sizeof buf);
    if (!value) continue;
    const int val = variables[i].val;
    char **current = value_of(val);
    if (current || val == OPT_NAME) {
      if ((current && *current) || (val == OPT_NAME && opt_name)) continue; /* the command line's wins */
      if (take_option(val, value, remote) != 0) return -1;
      continue;
    }
    int yes = parse_bool(value);
    if (yes < 0) {
      slurm_error("ctr: %s=%.100s: expected 1 or 0 (true, false, yes, no): ignored", variables[i].name, value);
      continue;
    }
    if (variables[i].inverse) yes = !yes;
    for (size_t p = 0; p < NPAIRS; ++p)
      if ((val == pairs[p].on || val == pairs[p].off) && pair_given[p] < 0 &&
          take_option(yes ? pairs[p].on : pairs[p].off, "", remote) != 0)
        return -1;
  }
  return 0;
}

/* What pyxis says of container options given without a container (srun's stderr). */
void warn_ignored_options(void) {
  if ((opt_image && *opt_image) || (opt_name && *opt_name)) return;
  static const int vals[] = {OPT_MOUNTS, OPT_WORKDIR, OPT_ENV, OPT_MPI, OPT_UNSHARE, OPT_SAVE};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; ++i)
    if (*value_of(vals[i]))
      slurm_error("ctr: ignoring --%s: neither --container-image nor --container-name was given", option_name(vals[i]));
  for (size_t p = 0; p < NPAIRS; ++p)
    if (pair_given[p] >= 0)
      slurm_error("ctr: ignoring --%s: neither --container-image nor --container-name was given",
                  option_name(pair_given[p] ? pairs[p].on : pairs[p].off));
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

/* Which of `names` (NULL-terminated) the argument `arg`'s `value` is; -1 after the line
 * that lists them ("the value is yes or no"). */
static int choice(const char *arg, const char *value, const char *const *names) {
  char list[128] = "";
  int n = 0;
  for (; names[n]; ++n)
    if (strcmp(value, names[n]) == 0) return n;
  for (int i = 0; i < n; ++i) {
    const size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
  }
  slurm_error("ctr: plugstack.conf argument '%s': the value is %s", arg, list);
  return -1;
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
  } else if ((value = argument_value(arg, "job_store"))) {
    if (value[0] != '/' || strlen(value) >= sizeof job_store - 16) { /* room for /JOBID */
      slurm_error("ctr: plugstack.conf argument '%s': DIR must be an absolute path", arg);
      return -1;
    }
    strcpy(job_store, value);
  } else if ((value = argument_value(arg, "writable"))) {
    static const char *const names[] = {"yes", "no", NULL};
    const int i = choice(arg, value, names);
    if (i < 0) return -1;
    writable_default = i == 0;
  } else if ((value = argument_value(arg, "workdir"))) {
    static const char *const names[] = {"auto", "image", "submit", NULL}; /* enum workdir_rule's order */
    const int i = choice(arg, value, names);
    if (i < 0) return -1;
    workdir_default = (enum workdir_rule)i;
  } else if ((value = argument_value(arg, "container_required"))) {
    static const char *const names[] = {"no", "steps", "all", NULL}; /* REQUIRED_NO, _STEPS, _ALL */
    const int i = choice(arg, value, names);
    if (i < 0) return -1;
    container_required = i == 0 ? REQUIRED_NO : i == 1 ? REQUIRED_STEPS : REQUIRED_ALL;
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
    slurm_error("ctr: unknown plugstack.conf argument '%s' (known: ctr=PATH, entrypoint=PATH, image_dir=DIR, job_store=DIR, "
                "container_required=no|steps|all, writable=yes|no, workdir=auto|image|submit, allow=OPT,..., "
                "env=NAME=VALUE, timeout=SECONDS, start_timeout=SECONDS)", arg);
    return -1;
  }
  return 0;
}

int parse_arguments(int ac, char **av) {
  for (int i = 0; i < ac; ++i)
    if (parse_argument(av[i]) != 0) return -1;
  if (container_required != REQUIRED_NO && !(allowed & (1u << OPT_IMAGE))) {
    slurm_error("ctr: plugstack.conf: container_required needs container-image in allow=");
    return -1;
  }
  return 0;
}

int register_options(spank_t sp) {
  for (struct spank_option *o = options; o->name; ++o)
    if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
      slurm_error("ctr: cannot register --%s", o->name);
      return -1;
    }
  return 0;
}

/* Why the site's plugstack.conf does not let this step run as it was asked (an option it
 * does not allow, a container it requires), or NULL. */
const char *step_refused(spank_t sp) {
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

int container_writable(void) { return opt_writable >= 0 ? opt_writable : writable_default; }

enum workdir_rule workdir_rule(void) { return workdir_default; }

/* --container-workdir as a path in the container (container_path: pyxis's relative forms are
 * the root's), or NULL when not given. */
const char *container_workdir(void) {
  static char path[PATH_MAX];
  if (!opt_workdir || !*opt_workdir) return NULL;
  return container_path(opt_workdir, path, sizeof path) == 0 ? path : opt_workdir;
}

/* The image ctr gets. pyxis's registry forms become docker:// references, which ctr runs
 * through its image cache (node-local where ctr.conf's 'image cache dir' says so):
 * "REGISTRY#NAME[:TAG]" is docker://REGISTRY/NAME[:TAG], and a bare NAME:TAG (no '/', no
 * transport) is Docker Hub's. With image_dir=DIR, another bare name is DIR/NAME. Any other
 * value is ctr's to read (a relative path is relative to the submit directory). */
const char *image_path(char *buf, size_t size) { return container_image_argument(opt_image, image_dir, buf, size); }
