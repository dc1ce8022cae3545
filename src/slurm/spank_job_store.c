/* The job's image store (plugstack.conf job_store=DIR): where the site has no image store
 * ('image store dir'), DIR/JOBID on a file system every node sees serves as one for the
 * job's steps, so that a registry image is fetched once per job, not once per node (one
 * node's ctr fills it, the others wait for the entry: docs/admin-guide.md, "The site image
 * store"). slurmstepd makes DIR/JOBID (as root, owned by the job's user, 0700) before the
 * step's ctr runs and gives ctr CTR_IMAGE_STORE=DIR/JOBID, which ctr uses where ctr.conf
 * names no store; the job's epilog has the user's ctr empty it (`ctr store clean --all`)
 * and removes it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spank_internal.h"

char job_store[PATH_MAX];
char job_store_env[PATH_MAX + 32];

/* DIR/JOBID, made owned by `user` (0700) where missing: under a name of its own, chowned,
 * then renamed into place, so that no node sees it root's while another node's step makes
 * it. 0 when it is the user's private directory, -1 with the reason logged. */
static int make_job_store(const struct job_user *user, uint32_t job) {
  char name[16], temp[64];
  snprintf(name, sizeof name, "%u", (unsigned)job);
  snprintf(temp, sizeof temp, ".%u.%ld", (unsigned)job, (long)getpid());
  const int base = open(job_store, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (base < 0) {
    slurm_error("ctr: job_store=%s: %s", job_store, strerror(errno));
    return -1;
  }
  if (mkdirat(base, temp, 0700) == 0) {
    if (fchownat(base, temp, user->uid, user->gid, AT_SYMLINK_NOFOLLOW) != 0 ||
        renameat2(base, temp, base, name, RENAME_NOREPLACE) != 0) /* EEXIST: another node's step was first */
      unlinkat(base, temp, AT_REMOVEDIR);
  }
  const int dir = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(base);
  struct stat st;
  const int ok = dir >= 0 && fstat(dir, &st) == 0 && st.st_uid == user->uid && (st.st_mode & 077) == 0;
  if (!ok) slurm_error("ctr: job_store: %s/%s is not a private directory of uid %u: not used", job_store, name,
                       (unsigned)user->uid);
  if (dir >= 0) close(dir);
  return ok ? 0 : -1;
}

void prepare_job_store(spank_t sp, const struct job_user *user) {
  job_store_env[0] = 0;
  uint32_t job = 0;
  if (!job_store[0] || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || make_job_store(user, job) != 0) return;
  snprintf(job_store_env, sizeof job_store_env, "CTR_IMAGE_STORE=%s/%u", job_store, (unsigned)job);
}

void remove_job_store(const struct passwd *pw, uint32_t job) {
  char path[PATH_MAX + 16];
  struct stat st;
  snprintf(path, sizeof path, "%s/%u", job_store, (unsigned)job);
  if (!job_store[0] || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != pw->pw_uid) return;
  struct login_env login;
  login_env(&login, pw);
  snprintf(job_store_env, sizeof job_store_env, "CTR_IMAGE_STORE=%s", path); /* start_ctr_as adds it */
  char runtime[64];
  snprintf(runtime, sizeof runtime, "%s/%u", RUNTIME_BASE, (unsigned)pw->pw_uid);
  const struct job_user user = {pw->pw_uid, pw->pw_gid, NULL, -1};
  /* As the user: what is in it is the user's. Then the directory, empty, as root. */
  char *clean[] = {ctr_program, "-q", "store", "clean", "--all", NULL};
  char *out = NULL, err[1024] = "";
  const int status = run_ctr_as(&user, login.env, runtime, clean, &out, err, sizeof err, 1);
  free(out);
  if (status != 0) slurm_error("ctr: emptying the job store %s: %s (exit status %d)", path, err, status);
  if (rmdir(path) != 0 && errno != ENOENT)
    slurm_error("ctr: removing the job store %s: %s", path, strerror(errno));
}
