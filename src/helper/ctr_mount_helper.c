/* ctr-mount-helper: the one privileged step of ctr (docs/admin-guide.md, "Security model").
 *
 *   ctr-mount-helper [--dataset FILE]... IMAGE [HOLDER-ARG...]
 *
 * Installed setuid root. Opens IMAGE, and each dataset image FILE, as the invoking user,
 * checks each against the admin's policy in ctr.conf, attaches (or reuses) a read-only
 * autoclear loop device per file, mounts their squashfs in a new private mount namespace
 * (the image at CTR_HELPER_RUNDIR/mnt, the i-th dataset at CTR_HELPER_RUNDIR/data/i), drops
 * every privilege for good and execs `CTR_BIN_PATH __holder HOLDER-ARG...`. The launch names
 * those mount points in HOLDER-ARG itself (runtime::startHolder): nothing here reads them.
 *
 * Nothing here outlives a SIGKILL: the mount lives only in this process's mount namespace,
 * and the loop device clears itself when its last opener (our fd, then the mount) is gone.
 * Nothing a caller can stop holds a lock another user needs: each user has their own loop
 * index and lock. libc and kernel API only; every step is checked and a failure names the
 * step and errno. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helper_parse.h"
#include "untrusted_fs.h"

#if !defined(CTR_SYSCONF_PATH) || !defined(CTR_BIN_PATH) || !defined(CTR_HELPER_RUNDIR) || !defined(LOCK_TIMEOUT_S) || \
    !defined(CHECK_USER)
#error "CTR_SYSCONF_PATH, CTR_BIN_PATH, CTR_HELPER_RUNDIR, LOCK_TIMEOUT_S and CHECK_USER are set by src/helper/CMakeLists.txt"
#endif
#define MOUNT_POINT CTR_HELPER_RUNDIR "/mnt"
#define DATA_DIR CTR_HELPER_RUNDIR "/data" /* DATA_DIR/<i>: the i-th --dataset image */
#define INDEX_DIR CTR_HELPER_RUNDIR "/loop"
#define LOOP_PREFIX "/dev/loop"
#define LOOP_FLAGS (LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR)
#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) /* an index directory, not a symlink */

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dprintf(STDERR_FILENO, "ctr-mount-helper: %s\n", msg);
  _exit(255);
}

#define die_errno(step) die("%s: %s", (step), strerror(errno))

/* Identity of the caller, taken before anything changes it. */
static uid_t real_uid;
static gid_t real_gid, groups[NGROUPS_MAX];
static int n_groups;

/* 0, 1 and 2 must be open before we open anything, or a config/image fd could become the
 * caller's stdout (the classic setuid fd trick). */
static void ensure_std_fds(void) {
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (open("/dev/null", O_RDWR) != fd) _exit(255); /* cannot even report it */
  }
}

/* Reads exactly len bytes at off (callback for hp_locate_fs). */
static int pread_all(void *ctx, void *buf, size_t len, uint64_t off) {
  int fd = *(int *)ctx;
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

/* Why an unprivileged user could alter the directory `path`, or NULL: it must be a directory
 * (not a symlink), owned by root and not writable by group or others, except where
 * `sticky_ok` a root-owned sticky one such as /tmp, where others cannot rename root's entries. */
static const char *alterable_dir(const char *path, int sticky_ok) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? "missing" : strerror(errno);
  if (S_ISLNK(st.st_mode)) return "a symlink";
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (st.st_uid != 0) return "not owned by root";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_ok && (st.st_mode & S_ISVTX) != 0))
    return "writable by group or others";
  return NULL;
}

/* Why a user could alter what `path` names through a directory above it, or NULL: "/" and
 * every directory down to its parent pass alterable_dir, sticky ones allowed. `why` (the
 * return value) names the directory. */
static const char *alterable_parent(char *path, char why[PATH_MAX + 64]) {
  for (size_t i = 1; path[i] != '\0'; i++) {
    if (i > 1 && path[i] != '/') continue; /* the parents "/", "/a", "/a/b", ... */
    const char saved = path[i];
    path[i] = '\0';
    const char *problem = alterable_dir(path, 1);
    if (problem != NULL) snprintf(why, PATH_MAX + 64, "%s is %s", path, problem);
    path[i] = saved;
    if (problem != NULL) return why;
  }
  return NULL;
}

static void ensure_root_dir(const char *path, mode_t mode) {
  if (mkdir(path, mode) != 0 && errno != EEXIST) die("mkdir %s: %s", path, strerror(errno));
  const char *problem = alterable_dir(path, 1);
  if (problem != NULL) die("%s is %s", path, problem);
}

static void load_config(struct hp_config *cfg, char *buf, size_t bufsize) {
  char err[HP_ERR_LEN], path[] = CTR_SYSCONF_PATH, why[PATH_MAX + 64];
  if (alterable_parent(path, why) != NULL) die("%s", why);
  int fd = open(CTR_SYSCONF_PATH, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) die("open config %s: %s", CTR_SYSCONF_PATH, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) die_errno("fstat config");
  if (!S_ISREG(st.st_mode)) die("config %s is not a regular file", CTR_SYSCONF_PATH);
  if (st.st_uid != 0) die("config %s is not owned by root: refusing", CTR_SYSCONF_PATH);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    die("config %s is writable by group or others: refusing", CTR_SYSCONF_PATH);
  if (st.st_size >= (off_t)bufsize) die("config %s is too large", CTR_SYSCONF_PATH);
  if (pread_all(&fd, buf, (size_t)st.st_size, 0) != 0) die("read config %s: %s", CTR_SYSCONF_PATH, strerror(errno));
  buf[st.st_size] = '\0';
  if (close(fd) != 0) die_errno("close config");
  if (hp_parse_config(buf, (size_t)st.st_size, cfg, err, sizeof err) != 0) die("config %s: %s", CTR_SYSCONF_PATH, err);
  if (!cfg->allow_setuid) die("%s says 'allow setuid = no': kernel squashfs mounts are disabled", CTR_SYSCONF_PATH);
}

/* setfsuid/setfsgid report the previous id, not errors: confirm by asking again. */
static void set_fs_ids(uid_t uid, gid_t gid) {
  setfsgid(gid);
  setfsuid(uid);
  if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
    die("setfsuid/setfsgid to %u/%u did not take effect", (unsigned)uid, (unsigned)gid);
}

/* capget, or capset of `caps` (the raw syscalls: libc has no wrapper, libcap is not used). */
static void capabilities(int set, struct __user_cap_data_struct caps[2]) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  if (syscall(set ? SYS_capset : SYS_capget, &hdr, caps) != 0) die_errno(set ? "capset" : "capget");
}

/* Becomes uid/gid with the n supplementary groups of `list`, for good: groups first, then
 * gid, then uid (the other order would lose the right to change groups); then proves none of
 * it can be undone, and that nothing exec'd from here on can gain privileges (setuid files,
 * file capabilities). */
static void become(uid_t uid, gid_t gid, int n, const gid_t *list) {
  if (setgroups((size_t)n, list) != 0) die_errno("setgroups");
  if (setresgid(gid, gid, gid) != 0) die_errno("setresgid");
  if (setresuid(uid, uid, uid) != 0) die_errno("setresuid");
  uid_t r, e, s;
  gid_t rg, eg, sg;
  if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0 || r != uid || e != uid || s != uid || rg != gid ||
      eg != gid || sg != gid)
    die("uids/gids are not all %u/%u after setresuid/setresgid", (unsigned)uid, (unsigned)gid);
  if (uid != 0 && (setuid(0) != -1 || seteuid(0) != -1)) die("root could be regained after setresuid");
  if (gid != 0 && (setgid(0) != -1 || setegid(0) != -1)) die("gid 0 could be regained after setresgid");
  /* The ambient set is always a subset of the permitted one (capabilities(7)). */
  struct __user_cap_data_struct caps[2];
  capabilities(0, caps);
  if ((caps[0].effective | caps[1].effective | caps[0].permitted | caps[1].permitted) != 0)
    die("capabilities remain after setresuid");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die_errno("PR_SET_NO_NEW_PRIVS");
}

/* An image file opened as the caller and checked against the policy, not yet attached. */
struct checked {
  const char *what, *path;
  int fd;
  struct stat st;
  struct hp_fs fs;
};

/* The file is opened once, exactly as the caller would open it: their fsuid/fsgid and their
 * own supplementary groups (which setuid leaves untouched), with no effective capability, so
 * that neither DAC override nor CAP_SYS_PTRACE (which guards /proc/PID/{cwd,root,fd}) helps;
 * and /proc magic links are refused outright (openat2 RESOLVE_NO_MAGICLINKS). An unreadable
 * file therefore gives the caller the error their own open(2) would: nothing new is learnt.
 * Everything after this uses the fd, never the path again. */
static void open_image_as_user(struct checked *c) {
  struct __user_cap_data_struct all[2], none[2];
  capabilities(0, all);
  memcpy(none, all, sizeof none);
  none[0].effective = none[1].effective = 0;
  set_fs_ids(real_uid, real_gid);
  capabilities(1, none);
  struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, .resolve = RESOLVE_NO_MAGICLINKS};
  c->fd = (int)syscall(SYS_openat2, AT_FDCWD, c->path, &how, sizeof how);
  /* Before Linux 5.6: magic links are then followed with the caller's own rights only. */
  if (c->fd < 0 && errno == ENOSYS) c->fd = open(c->path, (int)how.flags);
  int saved = errno;
  capabilities(1, all);
  set_fs_ids(0, 0);
  if (c->fd < 0)
    die("open %s %s as uid %u: %s%s", c->what, c->path, (unsigned)real_uid, strerror(saved),
        saved == ELOOP ? " (paths through /proc magic links are refused)" : "");
  /* Before anything else is read from it: on these file systems the owner (and the data) is
   * whatever a user says, so the owner policy below would mean nothing (untrusted_fs.h). */
  struct statfs fs;
  if (fstatfs(c->fd, &fs) != 0) die_errno("fstatfs image");
  const char *untrusted = ctr_untrusted_fs_name((unsigned long)fs.f_type);
  if (untrusted != NULL)
    die("%s %s is on a %s file system, whose owner and content users control: refused (copy it to a "
        "local or site file system)", c->what, c->path, untrusted);
  if (fstat(c->fd, &c->st) != 0) die_errno("fstat image");
  if (!S_ISREG(c->st.st_mode)) die("%s %s is not a regular file", c->what, c->path);
  /* Another name could lie outside 'setuid image directories' (fs.protected_hardlinks=0, or
   * a root-owned file the user may write): only the name opened is checked. 0: deleted. */
  if (c->st.st_nlink != 1)
    die("%s %s has %ju hard links (1 is allowed): refused", c->what, c->path, (uintmax_t)c->st.st_nlink);
  /* Nor may anyone on this node have it open for writing: chown and chmod do not take back a
   * descriptor opened while the file was a user's or writable, through which it could change
   * under the mount after every check here. A read lease is refused (EAGAIN) exactly then
   * (fcntl(2)); NFSv4 also refuses one without a delegation, and file systems without leases
   * say EINVAL: there it cannot be told. */
  const int leased = fcntl(c->fd, F_SETLEASE, F_RDLCK) == 0, why = errno;
  if (leased && fcntl(c->fd, F_SETLEASE, F_UNLCK) != 0) die_errno("F_SETLEASE F_UNLCK image");
  if (!leased && why == EAGAIN && fs.f_type != NFS_SUPER_MAGIC)
    die("%s %s: a process on this node has it open for writing: refused", c->what, c->path);
  if (!leased && why != EAGAIN && why != EINVAL) die("F_SETLEASE image: %s", strerror(why));
}

static int owner_allowed(const struct hp_config *cfg, uid_t owner) {
  for (int i = 0; i < cfg->n_owners; i++) {
    const char *name = cfg->owners[i];
    if (strcmp(name, "root") == 0 && owner == 0) return 1;
    if (strcmp(name, "self") == 0 && owner == real_uid) return 1;
    struct passwd *pw = getpwnam(name);
    if (pw != NULL && pw->pw_uid == owner) return 1;
  }
  return 0;
}

/* Why a 'setuid image directories' entry allows nothing, or NULL where only root can have
 * made it what it is: / and every directory down to it pass alterable_parent's test (by lstat:
 * no symlink anywhere, give the real path), and the entry itself is writable by root alone,
 * sticky or not (what others may put in it would be under it). So a user cannot plant the
 * directory, or a symlink, at a name the admin has not created yet, nor swap one above it,
 * and no one but root can change what `dir` (the entry less a trailing '/') names. */
static const char *untrusted_image_dir(const char *entry, char dir[PATH_MAX], char why[PATH_MAX + 64]) {
  size_t len = strlen(entry);
  while (len > 1 && entry[len - 1] == '/') len--;
  if (len + 2 > PATH_MAX) return "too long";
  memcpy(dir, entry, len);
  memcpy(dir + len, "/", 2); /* for the next test only */
  if ((len > 1 && strstr(dir, "//") != NULL) || strstr(dir, "/./") != NULL || strstr(dir, "/../") != NULL)
    return "not a canonical path ('//', '.' or '..' in it)";
  dir[len] = '\0';
  const char *problem = alterable_parent(dir, why);
  return problem != NULL ? problem : alterable_dir(dir, 0);
}

/* Where the file open on `fd` really is (after symlinks and renames), not what a path said. */
static void real_path(int fd, char real[PATH_MAX]) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, real, PATH_MAX - 1);
  if (n < 0 || n >= PATH_MAX - 1) die("readlink %s: %s", link, strerror(errno));
  real[n] = '\0';
}

static void check_policy(const struct hp_config *cfg, const struct checked *c) {
  if ((cfg->formats & c->fs.format) == 0)
    die("%s %s: format %s is not in 'setuid formats'", c->what, c->path,
        c->fs.format == HP_FORMAT_SIF ? "sif" : "squashfs");
  if (!owner_allowed(cfg, c->st.st_uid))
    die("%s %s: owner uid %u is not in 'setuid image owners'", c->what, c->path, (unsigned)c->st.st_uid);
  if (cfg->n_dirs == 0) return;
  char real[PATH_MAX], dir[PATH_MAX], ignored[768] = "", why[PATH_MAX + 64];
  real_path(c->fd, real);
  for (int i = 0; i < cfg->n_dirs; i++) {
    const char *problem = untrusted_image_dir(cfg->dirs[i], dir, why);
    if (problem != NULL) { /* the admin learns why from the user's message */
      const size_t used = strlen(ignored);
      snprintf(ignored + used, sizeof ignored - used, "%s%.200s allows nothing: %.200s", used ? "; " : " (",
               cfg->dirs[i], problem);
      continue;
    }
    const size_t len = strlen(dir);
    if (len == 1 || (strncmp(real, dir, len) == 0 && real[len] == '/')) return; /* len 1: "/" */
  }
  die("%s %s (%s) is not under any 'setuid image directories'%s%s", c->what, c->path, real, ignored,
      ignored[0] ? ")" : "");
}

/* ctr.conf's execution control on the very file about to be mounted (docs/design-signing.md,
 * section 3). ctr itself judges (`ctr __verify-fd REALPATH`, with the file on fd 3), as user
 * CHECK_USER (CMake's CTR_HELPER_CHECK_USER: the package's own system user, else nobody): it
 * parses what the image's owner wrote, so it runs with no privilege, and as neither the caller
 * nor root, so the caller can neither trace nor signal it into a verdict.
 * Its "allow" is kept in VERIFIED_DIR (root's alone) for this file as it is (identity()) and
 * the files the verdict read as they are: the next launch on the node stats them instead. */
#define VERIFIED_DIR CTR_HELPER_RUNDIR "/verified" /* VERIFIED_DIR/<dev>-<ino>: a kept "allow" */
#define VERDICT_MAX 16384

/* "rule\n": a rule took the image and let it run (2); "none\n": no rule took it (1); else 0. */
static int ruling(const char *word) {
  return strncmp(word, "rule\n", 5) == 0 ? 2 : strncmp(word, "none\n", 5) == 0 ? 1 : 0;
}

/* A file as it is; any change of its data or metadata moves the ctime, which no user sets. */
static void identity(char out[128], const struct stat *st) {
  snprintf(out, 128, "%ju %ju %jd %jd.%09ld %jd.%09ld", (uintmax_t)st->st_dev, (uintmax_t)st->st_ino,
           (intmax_t)st->st_size, (intmax_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (intmax_t)st->st_ctim.tv_sec,
           st->st_ctim.tv_nsec);
}

/* How `file` (VERIFIED_DIR/<dev>-<ino>) kept the image whose line is `first`: 2 allowed by a rule, 1 taken by
 * none, 0 not kept or no longer true (a file of an "IDENTITY PATH" line changed). */
static int kept_allow(const char *file, const char *first) {
  char text[VERDICT_MAX], now[128];
  int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const size_t len = strlen(first);
  if (strncmp(text, first, len) != 0) return 0;
  const int ruled = ruling(text + len);
  char *rest = text + len + 5;
  for (char *line; ruled != 0 && (line = strsep(&rest, "\n")) != NULL;) {
    char *path = strchr(line, '/');
    struct stat st;
    if (*line == '\0') continue;
    if (path == NULL || path == line || path[-1] != ' ' || stat(path, &st) != 0) return 0;
    path[-1] = '\0';
    identity(now, &st);
    if (strcmp(now, line) != 0) return 0;
  }
  return ruled;
}

/* Keeps the check's answer after "allow " (a ruling() word, then the files it named: absolute
 * paths, one a line). Best effort: a file that cannot be stat'ed, or no room, leaves the next
 * launch to check again. */
static void keep_allow(const char *file, const char *first, char *answer) {
  char text[VERDICT_MAX], now[128], tmp[sizeof VERIFIED_DIR + 96];
  int used = snprintf(text, sizeof text, "%s%.5s", first, answer);
  char *files = answer + 5;
  for (char *path; (path = strsep(&files, "\n")) != NULL;) {
    struct stat st;
    if (*path == '\0') continue;
    if (path[0] != '/' || stat(path, &st) != 0) return;
    identity(now, &st);
    int n = snprintf(text + used, sizeof text - (size_t)used, "%s %s\n", now, path);
    if (n < 0 || n >= (int)sizeof text - used) return;
    used += n;
  }
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", file, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  int ok = write(fd, text, (size_t)used) == used;
  if (close(fd) != 0 || !ok || rename(tmp, file) != 0) unlink(tmp);
}

/* Runs `ctr __verify-fd real` as CHECK_USER with image_fd on fd 3; its stdout (at most
 * VERDICT_MAX - 1 bytes) in `out`; returns its wait status. */
static int run_check(int image_fd, const char *real, char out[VERDICT_MAX]) {
  struct passwd *pw = getpwnam(CHECK_USER);
  if (pw == NULL) die("no user '" CHECK_USER "' to run the execution rule's check as");
  if (pw->pw_uid == real_uid || pw->pw_uid == 0)
    die("the execution rule's check runs as '" CHECK_USER "', so it cannot check images for uid %u", (unsigned)real_uid);
  const uid_t uid = pw->pw_uid;
  const gid_t gid = pw->pw_gid;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) die_errno("pipe2");
  const pid_t pid = fork();
  if (pid < 0) die_errno("fork");
  if (pid == 0) { /* 0, 1 and 2 are open (ensure_std_fds), so image_fd and p[] are above them */
    sigset_t none;
    sigemptyset(&none);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(p[1], 1) < 0 || dup2(null, 2) < 0 ||
        (image_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(image_fd, 3)) < 0 || chdir("/") != 0)
      _exit(254);
    become(uid, gid, 0, NULL); /* exits 255 where it cannot */
    if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) _exit(254);
    char *argv[] = {(char *)CTR_BIN_PATH, (char *)"__verify-fd", (char *)real, NULL};
    char *envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    execve(CTR_BIN_PATH, argv, envp);
    _exit(254);
  }
  close(p[1]);
  size_t used = 0;
  while (used < VERDICT_MAX - 1) {
    const ssize_t n = read(p[0], out + used, VERDICT_MAX - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += (size_t)n;
  }
  out[used] = '\0';
  close(p[0]); /* before the wait: a check that writes more gets EPIPE, not a hang */
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) die_errno("waitpid (execution rule's check)");
  return status;
}

static void check_execution(const struct hp_config *cfg, const struct checked *c) {
  if (!cfg->execution_control) return;
  char real[PATH_MAX], file[sizeof VERIFIED_DIR + 64], id[128], first[PATH_MAX + 160], out[VERDICT_MAX];
  real_path(c->fd, real);
  identity(id, &c->st);
  snprintf(file, sizeof file, VERIFIED_DIR "/%ju-%ju", (uintmax_t)c->st.st_dev, (uintmax_t)c->st.st_ino);
  snprintf(first, sizeof first, "%s %s\n", id, real);
  ensure_root_dir(CTR_HELPER_RUNDIR, 0755);
  ensure_root_dir(VERIFIED_DIR, 0700);
  int ruled = kept_allow(file, first);
  if (ruled == 0) {
    const int status = run_check(c->fd, real, out);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && strncmp(out, "allow ", 6) == 0 && ruling(out + 6) != 0) {
      ruled = ruling(out + 6);
      keep_allow(file, first, out + 6);
    } else {
      out[strcspn(out, "\n")] = '\0'; /* one line, printable: it came from a process that read the image */
      for (char *p = out; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) *p = '?';
      if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && strncmp(out, "refuse ", 7) == 0)
        die("%s %s: %s", c->what, c->path, out + 7);
      die("%s %s: the execution rule's check (%s __verify-fd) failed: %s %d", c->what, c->path, CTR_BIN_PATH,
          WIFSIGNALED(status) ? "signal" : "exit status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
  }
  /* The bytes checked must be the bytes the kernel reads: a file its caller could still change
   * (their own, which they may chmod; group- or world-writable, ACLs included) could be changed
   * after the check, under the mount. */
  if (ruled == 2 && c->st.st_uid == real_uid && real_uid != 0)
    die("%s %s: an execution rule takes it, and it is the caller's, who could change it after the check: refused "
        "(an image another user owns can run)", c->what, c->path);
  if (ruled == 2 && (c->st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    die("%s %s: an execution rule takes it, and its mode %04o lets a group or others change it after the check: "
        "refused", c->what, c->path, (unsigned)(c->st.st_mode & 07777));
}

/* Loop devices record who attached them (lo_file_name), so an index entry left from a device
 * that was since attached again, by anyone, for the same file is not counted twice. */
#define OWNER_TAG "ctr-mount-helper uid %u"

/* Index entries are "<dev>-<ino>-<offset>-<size>" -> "<loop number>". */
static void format_key(char key[128], uint64_t dev, uint64_t ino, uint64_t off, uint64_t size) {
  snprintf(key, 128, "%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64, dev, ino, off, size);
}

/* An fd on the loop device an entry of `owner`'s index names, and its path in dev, if it is
 * still attached read-only, autoclear, by a launch of `owner`, to the file range the entry's
 * name says; -1 (and nothing open) otherwise. */
static int open_entry(int dir, const char *name, uid_t owner, char dev[32]) {
  char target[32] = "", key[128], tag[LO_NAME_SIZE];
  int nr = -1;
  if (readlinkat(dir, name, target, sizeof target - 1) <= 0 || sscanf(target, "%d", &nr) != 1 || nr < 0) return -1;
  snprintf(dev, 32, LOOP_PREFIX "%d", nr);
  snprintf(tag, sizeof tag, OWNER_TAG, (unsigned)owner);
  int fd = open(dev, O_RDONLY | O_CLOEXEC);
  struct loop_info64 info;
  if (fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && (info.lo_flags & LOOP_FLAGS) == LOOP_FLAGS &&
      strncmp((const char *)info.lo_file_name, tag, LO_NAME_SIZE) == 0) {
    format_key(key, info.lo_device, info.lo_inode, info.lo_offset, info.lo_sizelimit);
    if (strcmp(key, name) == 0) return fd;
  }
  if (fd >= 0) close(fd);
  return -1;
}

/* Walks every user's index (INDEX_DIR/<uid>/), counting the caller's live devices in *mine
 * and everyone's in *total. Drops the caller's stale entries; other users' are only read
 * (their own launches clean them). Returns an fd on a live device another user attached for
 * `key`: shared, so every user's ranks share one superblock and page cache, and charged to
 * whoever attached it. Bounded by the quotas: no index holds more than its user's quota. */
static int scan_indexes(int root, const char *key, long *mine, long *total, char dev[32]) {
  int rfd = dup(root), found = -1;
  DIR *users = rfd < 0 ? NULL : fdopendir(rfd);
  if (users == NULL) die_errno("read " INDEX_DIR);
  for (struct dirent *u; found < 0 && (u = readdir(users)) != NULL;) {
    char *end;
    unsigned long uid = strtoul(u->d_name, &end, 10);
    int dir = end == u->d_name || *end != '\0' ? -1 : openat(root, u->d_name, DIR_FLAGS);
    DIR *d = dir < 0 ? NULL : fdopendir(dir); /* closedir closes dir */
    if (d == NULL && dir >= 0) close(dir);
    for (struct dirent *e; found < 0 && d != NULL && (e = readdir(d)) != NULL;) {
      int fd = e->d_name[0] == '.' ? -2 : open_entry(dir, e->d_name, (uid_t)uid, dev);
      if (fd >= 0 && uid != real_uid && strcmp(e->d_name, key) == 0) found = fd;
      else if (fd >= 0) close(fd), ++*total, *mine += uid == real_uid;
      else if (fd == -1 && uid == real_uid && unlinkat(dir, e->d_name, 0) != 0 && errno != ENOENT)
        die("unlink stale index entry %s: %s", e->d_name, strerror(errno));
    }
    if (d != NULL) closedir(d);
  }
  closedir(users);
  return found;
}

/* The caller's own index, INDEX_DIR/<uid>, locked. Only the caller's helpers take this lock,
 * so a helper the caller stops blocks only the caller's own launches, and those give up with
 * a message after LOCK_TIMEOUT_S seconds (CMake's CTR_HELPER_LOCK_TIMEOUT_S, 30). */
static int lock_own_index(int root) {
  char name[32];
  snprintf(name, sizeof name, "%u", (unsigned)real_uid);
  if (mkdirat(root, name, 0700) != 0 && errno != EEXIST) die("mkdir %s/%s: %s", INDEX_DIR, name, strerror(errno));
  int dir = openat(root, name, DIR_FLAGS);
  if (dir < 0) die("open %s/%s: %s", INDEX_DIR, name, strerror(errno));
  for (int tries = 0; flock(dir, LOCK_EX | LOCK_NB) != 0; tries++) {
    if (errno != EWOULDBLOCK) die("flock %s/%s: %s", INDEX_DIR, name, strerror(errno));
    if (tries >= LOCK_TIMEOUT_S * 100)
      die("another launch of yours has held %s/%s for %d s (stopped?): giving up", INDEX_DIR, name, LOCK_TIMEOUT_S);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  return dir;
}

/* A new read-only autoclear loop device showing [offset, offset+size) of the image. */
static int attach_new(const struct checked *c, char dev[32]) {
  struct loop_config lc = {.fd = (uint32_t)c->fd,
                           .info = {.lo_offset = c->fs.offset, .lo_sizelimit = c->fs.size, .lo_flags = LOOP_FLAGS}};
  snprintf((char *)lc.info.lo_file_name, LO_NAME_SIZE, OWNER_TAG, (unsigned)real_uid);
  int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0) die_errno("open /dev/loop-control");
  for (int attempt = 0;; attempt++) {
    const int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (nr < 0) die_errno("LOOP_CTL_GET_FREE");
    snprintf(dev, 32, LOOP_PREFIX "%d", nr);
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0) die("open %s: %s", dev, strerror(errno));
    if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) return close(ctl), fd;
    /* Another process (ours or not) took the free device between the two calls. */
    if (errno != EBUSY || attempt >= 16) die("LOOP_CONFIGURE %s: %s", dev, strerror(errno));
    close(fd);
  }
}

/* Returns an fd on a loop device showing the image's filesystem, and its path. Reuses a
 * device a launch of this or another user attached for the same file range; otherwise
 * attaches one if the caller is under 'max loop devices' and all users under 'max loop
 * devices total' (best effort across users: their launches do not wait for each other). */
static int attach_loop(const struct hp_config *cfg, const struct checked *c, char dev[32]) {
  ensure_root_dir(INDEX_DIR, 0700);
  int root = open(INDEX_DIR, DIR_FLAGS);
  if (root < 0) die("open %s: %s", INDEX_DIR, strerror(errno));
  int own = lock_own_index(root);
  char key[128];
  format_key(key, (uint64_t)c->st.st_dev, (uint64_t)c->st.st_ino, c->fs.offset, c->fs.size);
  long mine = 0, total = 0;
  int fd = open_entry(own, key, real_uid, dev);
  if (fd < 0) fd = scan_indexes(root, key, &mine, &total, dev);
  if (fd < 0) {
    if (mine >= cfg->max_loop_devices)
      die("'max loop devices = %ld' (per user) reached: you have %ld attached", cfg->max_loop_devices, mine);
    if (total >= cfg->max_loop_devices_total)
      die("'max loop devices total = %ld' reached (%ld attached by ctr)", cfg->max_loop_devices_total, total);
    fd = attach_new(c, dev);
    if (symlinkat(dev + strlen(LOOP_PREFIX), own, key) != 0) die("symlink index entry: %s", strerror(errno));
  }
  close(own); /* unlocks: the fd we hold keeps the device attached */
  close(root);
  return fd;
}

static void check_image(const struct hp_config *cfg, struct checked *c, const char *what, const char *path) {
  char err[HP_ERR_LEN];
  *c = (struct checked){.what = what, .path = path};
  open_image_as_user(c);
  if (hp_locate_fs(pread_all, &c->fd, (uint64_t)c->st.st_size, &c->fs, err, sizeof err) != 0)
    die("%s %s: %s", what, path, err);
  check_policy(cfg, c);
  check_execution(cfg, c);
}

/* Attaches (or reuses) the image's loop device and mounts its squashfs read-only at
 * mount_point, in this process's private mount namespace. */
static void mount_image(const struct hp_config *cfg, const struct checked *c, const char *mount_point) {
  char dev[32];
  const int loop_fd = attach_loop(cfg, c, dev);
  if (mount(dev, mount_point, "squashfs", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
    die("mount %s (squashfs, %s %s) on %s: %s", dev, c->what, c->path, mount_point, strerror(errno));
  /* The mount now holds the device; autoclear detaches it when the last mount is gone. */
  if (close(loop_fd) != 0) die_errno("close loop device");
  if (close(c->fd) != 0) die_errno("close image");
}

int main(int argc, char **argv) {
  ensure_std_fds();
  /* The dynamic loader already ignores LD_* for setuid programs (AT_SECURE); nothing we run
   * or exec should see the caller's environment either. */
  if (clearenv() != 0) _exit(255);
  /* Catchable signals wait until we are unprivileged; SIGKILL/SIGSTOP cannot be blocked,
   * which is why nothing privileged we create outlives the process. */
  sigset_t all, saved_mask;
  sigfillset(&all);
  if (sigprocmask(SIG_SETMASK, &all, &saved_mask) != 0) die_errno("sigprocmask");
  mode_t saved_umask = umask(022);

  real_uid = getuid();
  real_gid = getgid();
  n_groups = getgroups(NGROUPS_MAX, groups);
  if (n_groups < 0) die_errno("getgroups");

  /* euid 0 is no privilege over the host inside a user namespace (`unshare -Ur`): require the
   * initial one, whose uid_map is the identity, read from procfs itself (not a file the
   * namespace's owner mounted over it). user_namespaces(7) */
  FILE *map = fopen("/proc/self/uid_map", "re");
  struct statfs map_fs;
  unsigned long inside = 1, outside = 1, count = 0;
  if (map != NULL && (fstatfs(fileno(map), &map_fs) != 0 || map_fs.f_type != PROC_SUPER_MAGIC ||
                      fscanf(map, "%lu %lu %lu", &inside, &outside, &count) != 3))
    count = 0;
  if (map != NULL) fclose(map);
  if (geteuid() != 0 || inside != 0 || outside != 0 || count != 4294967295UL)
    die("not installed setuid root (owner root, mode 4755), or run inside a user namespace; see docs/admin-guide.md");
  char err[HP_ERR_LEN];
  struct hp_args args;
  if (hp_parse_args(argc, argv, &args, err, sizeof err) != 0) die("%s", err);

  static char config_text[HP_MAX_CONFIG + 1];
  struct hp_config cfg;
  load_config(&cfg, config_text, sizeof config_text);

  /* Every file is opened and checked before anything is attached or mounted: a refused
   * dataset costs no loop device. */
  struct checked images[1 + HP_MAX_DATASETS];
  check_image(&cfg, &images[0], "image", args.image);
  for (int i = 0; i < args.n_datasets; i++) check_image(&cfg, &images[1 + i], "dataset image", args.datasets[i]);

  ensure_root_dir(CTR_HELPER_RUNDIR, 0755);
  ensure_root_dir(MOUNT_POINT, 0755);
  if (args.n_datasets > 0) ensure_root_dir(DATA_DIR, 0755);
  /* A private copy of the mount table: the kernel mounts never appear on the host and go
   * away with the last process in this namespace. mount_namespaces(7). */
  if (unshare(CLONE_NEWNS) != 0) die_errno("unshare(CLONE_NEWNS)");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die_errno("make / private");
  mount_image(&cfg, &images[0], MOUNT_POINT);
  for (int i = 0; i < args.n_datasets; i++) {
    char mount_point[sizeof DATA_DIR + 16];
    snprintf(mount_point, sizeof mount_point, DATA_DIR "/%d", i);
    ensure_root_dir(mount_point, 0755);
    mount_image(&cfg, &images[1 + i], mount_point);
  }

  become(real_uid, real_gid, n_groups, groups);
  umask(saved_umask);
  if (sigprocmask(SIG_SETMASK, &saved_mask, NULL) != 0) die_errno("sigprocmask restore");
  char *holder_argv[HP_MAX_ARGS + 2] = {(char *)CTR_BIN_PATH, (char *)"__holder"};
  memcpy(holder_argv + 2, args.holder_args, (size_t)args.n_holder_args * sizeof(char *));
  char *envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
  execve(CTR_BIN_PATH, holder_argv, envp);
  die("exec %s: %s", CTR_BIN_PATH, strerror(errno));
}
