/* Children of slurmstepd (and slurmd) as the job's user: the plugin's ctr runs, with the
 * job's environment less what is the site's, their output read and their time bounded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "spank_internal.h"

/* The value of NAME in the environment `env`, or NULL. */
void login_env(struct login_env *e, const struct passwd *pw) {
  snprintf(e->home, sizeof e->home, "HOME=%s", pw->pw_dir);
  snprintf(e->user, sizeof e->user, "USER=%s", pw->pw_name);
  snprintf(e->logname, sizeof e->logname, "LOGNAME=%s", pw->pw_name);
  e->env[0] = e->home;
  e->env[1] = e->user;
  e->env[2] = e->logname;
  e->env[3] = NULL;
}

const char *env_value(char **env, const char *name) {
  size_t n = strlen(name);
  for (; env && *env; ++env)
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  return NULL;
}

/* The step's user, with slurmstepd's group list. 0, or -1. */
int step_user(spank_t sp, struct job_user *u) {
  u->groups = NULL;
  u->ngroups = -1;
  if (spank_get_item(sp, S_JOB_UID, &u->uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &u->gid) != ESPANK_SUCCESS)
    return -1;
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &u->groups, &u->ngroups) != ESPANK_SUCCESS) u->ngroups = -1;
  return 0;
}

/* The directory the plugin's ctr runs in: the job's working directory, else its submit
 * directory (NULL: neither; ctr then runs in "/"). */
const char *job_dir(char **env) {
  const char *dir = env_value(env, "PWD");
  return dir ? dir : env_value(env, "SLURM_SUBMIT_DIR");
}

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
pid_t spawn_as_user(struct as_user *a) {
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
long long now_ms(void) {
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
int wait_child(pid_t pid, long long deadline, int seconds, const char *what, int killed) {
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
 * glibc's variables) is the site's, not the user's. The job's LANG, LANGUAGE and LC_ALL
 * stay out too, so that the join information sets the image's (pyxis drops the job's).
 * What the container's task gets is not changed by the rest (task_init). */
static int kept_from_ctr(const char *entry) {
  static const char *const prefixes[] = {"CTR_", "APPTAINER_", "SINGULARITY_", "LD_", NULL};
  static const char *const names[] = {"PATH=", "XDG_RUNTIME_DIR=", "GCONV_PATH=", "GLIBC_TUNABLES=", "LOCPATH=",
                                      "NLSPATH=", "HOSTALIASES=", "RES_OPTIONS=", "LOCALDOMAIN=", "MALLOC_TRACE=",
                                      "LANG=", "LANGUAGE=", "LC_ALL=", NULL};
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
 * the job store's CTR_IMAGE_STORE where there is one, and XDG_RUNTIME_DIR=`runtime_dir` (the user's /run/ctr/UID: every ctr of the plugin keeps
 * the user's instances in RUNTIME/ctr, where the epilog finds them and no other user can
 * take the name first). 0, or -1. `ignore_term`: the SIGTERM with which slurmstepd ends
 * what is left of the step does not stop it (the instance's stop must finish). `seconds`:
 * how long the plugin waits for it. */
int start_ctr_as(const struct job_user *user, char **env, const char *runtime_dir, char **argv,
                        int ignore_term, int seconds, struct ctr_run *run) {
  int nenv = 0;
  while (env && env[nenv]) ++nenv;
  char **kept = calloc((size_t)nenv + MAX_ADMIN_ENV + 4, sizeof(char *));
  char xdg[PATH_MAX + 32];
  if (!kept) return -1;
  int k = 0;
  for (int i = 0; i < nenv; ++i)
    if (!kept_from_ctr(env[i])) kept[k++] = env[i];
  for (int i = 0; i < nadmin_env; ++i) kept[k++] = admin_env[i];
  if (job_store_env[0]) kept[k++] = job_store_env;
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
int wait_ctr(struct ctr_run *run) {
  const int status = wait_child(run->pid, run->deadline, run->seconds, run->what, run->killed);
  run->pid = 0;
  if (status < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* What read_ctr has read of a ctr's output so far. */
struct ctr_output {
  int out, err; /* the read ends still open, else -1 */
  char *buf;    /* stdout */
  size_t len, cap;
  int overflow;
  char ebuf[4096]; /* the tail of stderr */
  size_t elen;
};

/* One read of ctr's stdout: 0, or -1 when no more memory is to be had. */
static int read_stdout(struct ctr_output *o) {
  /* ctr's join information is a few KiB: more than 1 MiB is not ctr's, and is read and
   * dropped (the child must not block on a full pipe), not kept. */
  char drop[4096];
  if (o->len + 1024 >= o->cap && o->cap < (1u << 20)) {
    char *grown = realloc(o->buf, o->cap *= 2);
    if (!grown) return -1;
    o->buf = grown;
  }
  const int full = o->len + 1024 >= o->cap;
  ssize_t n = full ? read(o->out, drop, sizeof drop) : read(o->out, o->buf + o->len, o->cap - o->len - 1);
  if (n > 0 && full) {
    o->overflow = 1;
  } else if (n <= 0) {
    close(o->out);
    o->out = -1;
  } else {
    o->len += (size_t)n;
  }
  return 0;
}

/* One read of ctr's stderr, of which the tail is kept. */
static void read_stderr(struct ctr_output *o) {
  ssize_t n = read(o->err, o->ebuf + o->elen, sizeof o->ebuf - o->elen - 1);
  if (n <= 0) {
    close(o->err);
    o->err = -1;
  } else {
    o->elen += (size_t)n;
    if (o->elen >= sizeof o->ebuf - 256) o->elen = 0; /* keep the tail */
  }
}

/* What read_ctr gives: stdout (NULL: too much of it, or the run was killed) and stderr's
 * last line, or why there is no output, into `err`. */
static char *ctr_output_taken(struct ctr_output *o, const struct ctr_run *run, char *err, size_t errsize) {
  if (o->buf) o->buf[o->len] = 0;
  o->ebuf[o->elen] = 0;
  while (o->elen > 0 && o->ebuf[o->elen - 1] == '\n') o->ebuf[--o->elen] = 0;
  const char *last = strrchr(o->ebuf, '\n');
  const char *tail = last ? last + 1 : o->ebuf;
  size_t tail_len = strlen(tail) < errsize ? strlen(tail) : errsize - 1;
  memcpy(err, tail, tail_len);
  err[tail_len] = 0;
  if (o->overflow) {
    free(o->buf);
    o->buf = NULL;
    snprintf(err, errsize, "ctr printed more than 1 MiB");
  }
  if (run->killed) {
    free(o->buf);
    o->buf = NULL;
    snprintf(err, errsize, "%s did not end within %d s", run->what, run->seconds);
  }
  return o->buf;
}

/* Reads the ctr `run` until it has closed its output, or until its deadline (then its
 * session is killed): its stdout into `out` (malloc'd), its last stderr line into `err`.
 * Not waited for (wait_ctr). */
void read_ctr(struct ctr_run *run, char **out, char *err, size_t errsize) {
  struct ctr_output o = {.out = run->out, .err = run->err, .cap = 4096};
  run->out = run->err = -1;
  o.buf = malloc(o.cap);
  while (o.buf && (o.out >= 0 || o.err >= 0)) {
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
    if (o.out >= 0) FD_SET(o.out, &rd);
    if (o.err >= 0) FD_SET(o.err, &rd);
    const int ready = select((o.out > o.err ? o.out : o.err) + 1, &rd, NULL, NULL, &timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (o.out >= 0 && FD_ISSET(o.out, &rd) && read_stdout(&o) != 0) break;
    if (o.err >= 0 && FD_ISSET(o.err, &rd)) read_stderr(&o);
  }
  if (o.out >= 0) close(o.out);
  if (o.err >= 0) close(o.err);
  *out = ctr_output_taken(&o, run, err, errsize);
}

/* Waits for the ctr `run` (read_ctr, then its exit). Returns its exit status, or -1. */
static int finish_ctr(struct ctr_run *run, char **out, char *err, size_t errsize) {
  read_ctr(run, out, err, errsize);
  return wait_ctr(run);
}

/* Runs `ctr ARGV...` as start_ctr_as does and waits for it, as finish_ctr does, for the
 * plugin's ordinary bound (timeout=). */
int run_ctr_as(const struct job_user *user, char **env, const char *runtime_dir, char **argv, char **out,
                      char *err, size_t errsize, int ignore_term) {
  struct ctr_run run;
  *out = NULL;
  if (start_ctr_as(user, env, runtime_dir, argv, ignore_term, ctr_timeout, &run) != 0) return -1;
  return finish_ctr(&run, out, err, errsize);
}
