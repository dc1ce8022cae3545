/* ctr-mount-helper: the one privileged step of ctr (docs/admin-guide.md, "Security model").
 *
 *   ctr-mount-helper IMAGE [HOLDER-ARG...]
 *
 * Installed setuid root. Opens IMAGE as the invoking user, checks the admin's policy in
 * ctr.conf, attaches (or reuses) a read-only autoclear loop device, mounts its squashfs in a
 * new private mount namespace at CTR_HELPER_RUNDIR/mnt, drops every privilege for good and
 * execs `CTR_BIN_PATH __holder --premounted MOUNTPOINT HOLDER-ARG...`.
 *
 * Nothing here outlives a SIGKILL: the mount lives only in this process's mount namespace,
 * and the loop device clears itself when its last opener (our fd, then the mount) is gone.
 * libc and kernel API only; every step is checked and a failure names the step and errno. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/loop.h>
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
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "helper_parse.h"

#if !defined(CTR_SYSCONF_PATH) || !defined(CTR_BIN_PATH) || !defined(CTR_HELPER_RUNDIR)
#error "CTR_SYSCONF_PATH, CTR_BIN_PATH and CTR_HELPER_RUNDIR are set by src/helper/CMakeLists.txt"
#endif
#define MOUNT_POINT CTR_HELPER_RUNDIR "/mnt"
#define INDEX_DIR CTR_HELPER_RUNDIR "/loop"
#define LOCK_FILE CTR_HELPER_RUNDIR "/lock"
#define LOCK_TIMEOUT_S 30

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  char msg[512];
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
static gid_t real_gid;
static gid_t groups[NGROUPS_MAX];
static int n_groups;

/* 0, 1 and 2 must be open before we open anything, or a config/image fd could become the
 * caller's stdout (the classic setuid fd trick). */
static void ensure_std_fds(void) {
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int nfd = open("/dev/null", O_RDWR);
    if (nfd != fd) _exit(255); /* cannot even report it */
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

/* A directory an unprivileged user cannot alter: root-owned, not group/other writable
 * (a root-owned sticky directory such as /tmp is accepted: others cannot rename in it). */
static void check_root_dir(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) die("lstat %s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode)) die("%s is not a directory (symlinks are refused)", path);
  if (st.st_uid != 0) die("%s is not owned by root", path);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    die("%s is writable by group or others", path);
}

static void check_dir_chain(const char *file) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", file) >= (int)sizeof path) die("path too long: %s", file);
  for (char *slash = strrchr(path, '/'); slash != NULL; slash = strrchr(path, '/')) {
    *slash = '\0';
    check_root_dir(slash == path ? "/" : path);
  }
}

static void load_config(struct hp_config *cfg, char *buf, size_t bufsize) {
  char err[HP_ERR_LEN];
  check_dir_chain(CTR_SYSCONF_PATH);
  int fd = open(CTR_SYSCONF_PATH, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) die("open config %s: %s", CTR_SYSCONF_PATH, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) die_errno("fstat config");
  if (!S_ISREG(st.st_mode)) die("config %s is not a regular file", CTR_SYSCONF_PATH);
  if (st.st_uid != 0) die("config %s is not owned by root: refusing", CTR_SYSCONF_PATH);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    die("config %s is writable by group or others: refusing", CTR_SYSCONF_PATH);
  if (st.st_size >= (off_t)bufsize) die("config %s is too large", CTR_SYSCONF_PATH);
  size_t len = (size_t)st.st_size;
  if (pread_all(&fd, buf, len, 0) != 0) die("read config %s: %s", CTR_SYSCONF_PATH, strerror(errno));
  buf[len] = '\0';
  if (close(fd) != 0) die_errno("close config");
  if (hp_parse_config(buf, len, cfg, err, sizeof err) != 0) die("config %s: %s", CTR_SYSCONF_PATH, err);
  if (!cfg->allow_setuid) die("%s says 'allow setuid = no': kernel squashfs mounts are disabled", CTR_SYSCONF_PATH);
}

/* setfsuid/setfsgid report the previous id, not errors: confirm by asking again. */
static void set_fs_ids(uid_t uid, gid_t gid) {
  setfsgid(gid);
  setfsuid(uid);
  if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid)
    die("setfsuid/setfsgid to %u/%u did not take effect", (unsigned)uid, (unsigned)gid);
}

/* The file is opened once, with the caller's filesystem credentials (fsuid/fsgid and the
 * caller's own supplementary groups, which setuid leaves untouched), so only what the user can
 * read can be mounted. Everything after this uses the fd, never the path again. */
static int open_image_as_user(const char *path, struct stat *st) {
  set_fs_ids(real_uid, real_gid);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  int saved = errno;
  set_fs_ids(0, 0);
  if (fd < 0) die("open image %s as uid %u: %s", path, (unsigned)real_uid, strerror(saved));
  if (fstat(fd, st) != 0) die_errno("fstat image");
  if (!S_ISREG(st->st_mode)) die("image %s is not a regular file", path);
  if (st->st_nlink == 0) die("image %s was deleted", path);
  return fd;
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

static void check_policy(const struct hp_config *cfg, int fd, const struct stat *st, const char *path,
                         const struct hp_fs *fs) {
  if ((cfg->formats & fs->format) == 0)
    die("image %s: format %s is not in 'setuid formats'", path, fs->format == HP_FORMAT_SIF ? "sif" : "squashfs");
  if (!owner_allowed(cfg, st->st_uid))
    die("image %s: owner uid %u is not in 'setuid image owners'", path, (unsigned)st->st_uid);
  if (cfg->n_dirs == 0) return;
  /* Where the opened file really is (after symlinks and renames), not what the path said. */
  char link[64], real[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, real, sizeof real - 1);
  if (n < 0 || n >= (ssize_t)sizeof real - 1) die("readlink %s: %s", link, strerror(errno));
  real[n] = '\0';
  for (int i = 0; i < cfg->n_dirs; i++) {
    char dir[PATH_MAX];
    if (realpath(cfg->dirs[i], dir) == NULL) continue; /* a missing directory allows nothing */
    size_t len = strlen(dir);
    if (strcmp(dir, "/") == 0) return;
    if (strncmp(real, dir, len) == 0 && real[len] == '/') return;
  }
  die("image %s (%s) is not under any 'setuid image directories'", path, real);
}

static void ensure_root_dir(const char *path, mode_t mode) {
  if (mkdir(path, mode) != 0 && errno != EEXIST) die("mkdir %s: %s", path, strerror(errno));
  check_root_dir(path);
}

/* An exclusive lock over the loop index, with a deadline: a caller who SIGSTOPs a helper
 * holding it must not block other users' launches forever. */
static int lock_index(void) {
  int fd = open(LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) die("open %s: %s", LOCK_FILE, strerror(errno));
  for (int tries = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; tries++) {
    if (errno != EWOULDBLOCK) die("flock %s: %s", LOCK_FILE, strerror(errno));
    if (tries >= LOCK_TIMEOUT_S * 100) die("flock %s: held by another launch for %d s", LOCK_FILE, LOCK_TIMEOUT_S);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return fd;
}

/* Opens /dev/loopN and returns its fd if it is still attached read-only, autoclear, to this
 * file at this offset and size; -1 (and nothing open) otherwise. */
static int open_matching_loop(int n, dev_t dev, ino_t ino, uint64_t off, uint64_t size) {
  char path[64];
  snprintf(path, sizeof path, "/dev/loop%d", n);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct loop_info64 info;
  const uint32_t flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
  if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && info.lo_device == dev && info.lo_inode == ino &&
      info.lo_offset == off && info.lo_sizelimit == size && (info.lo_flags & flags) == flags)
    return fd;
  close(fd);
  return -1;
}

/* Index entries are "<dev>-<ino>-<offset>-<size>" -> "<loop number>". */
static int parse_entry(const char *name, int idx, dev_t *dev, ino_t *ino, uint64_t *off, uint64_t *size, int *n) {
  char target[32];
  ssize_t len = readlinkat(idx, name, target, sizeof target - 1);
  if (len <= 0) return -1;
  target[len] = '\0';
  uint64_t d, i;
  if (sscanf(name, "%" SCNx64 "-%" SCNx64 "-%" SCNx64 "-%" SCNx64, &d, &i, off, size) != 4) return -1;
  if (sscanf(target, "%d", n) != 1 || *n < 0) return -1;
  *dev = (dev_t)d;
  *ino = (ino_t)i;
  return 0;
}

/* Number of live loop devices this helper attached; drops entries whose device is gone.
 * The index holds at most max entries, so this walk is bounded by the admin's limit. */
static long count_live(int idx) {
  int dfd = dup(idx);
  if (dfd < 0) die_errno("dup index");
  DIR *d = fdopendir(dfd);
  if (d == NULL) die_errno("fdopendir index");
  long live = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    dev_t dev; ino_t ino; uint64_t off, size; int n;
    int fd = parse_entry(e->d_name, idx, &dev, &ino, &off, &size, &n) == 0
                 ? open_matching_loop(n, dev, ino, off, size) : -1;
    if (fd >= 0) {
      live++;
      close(fd);
    } else if (unlinkat(idx, e->d_name, 0) != 0 && errno != ENOENT) {
      die("unlink stale index entry %s: %s", e->d_name, strerror(errno));
    }
  }
  closedir(d);
  return live;
}

/* Returns an fd on a loop device showing [off, off+size) of the image read-only, and its
 * number. Reuses the device another launch attached for the same file and offset, so ranks
 * share one squashfs superblock and page cache. */
static int attach_loop(const struct hp_config *cfg, int image_fd, const struct stat *st,
                       const struct hp_fs *fs, int *loop_nr) {
  ensure_root_dir(INDEX_DIR, 0700);
  int idx = open(INDEX_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (idx < 0) die("open %s: %s", INDEX_DIR, strerror(errno));
  char key[128];
  snprintf(key, sizeof key, "%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64, (uint64_t)st->st_dev,
           (uint64_t)st->st_ino, fs->offset, fs->size);
  dev_t dev; ino_t ino; uint64_t off, size; int n;
  if (parse_entry(key, idx, &dev, &ino, &off, &size, &n) == 0) {
    int fd = open_matching_loop(n, st->st_dev, st->st_ino, fs->offset, fs->size);
    if (fd >= 0) {
      close(idx);
      *loop_nr = n;
      return fd;
    }
  }
  if (unlinkat(idx, key, 0) != 0 && errno != ENOENT) die("unlink stale index entry: %s", strerror(errno));
  long live = count_live(idx);
  if (live >= cfg->max_loop_devices)
    die("'max loop devices = %ld' reached (%ld attached by ctr): refusing to attach another", cfg->max_loop_devices, live);

  int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0) die_errno("open /dev/loop-control");
  for (int attempt = 0;; attempt++) {
    n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0) die_errno("LOOP_CTL_GET_FREE");
    char path[64];
    snprintf(path, sizeof path, "/dev/loop%d", n);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) die("open %s: %s", path, strerror(errno));
    struct loop_config lc;
    memset(&lc, 0, sizeof lc);
    lc.fd = (uint32_t)image_fd;
    lc.info.lo_offset = fs->offset;
    lc.info.lo_sizelimit = fs->size;
    lc.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
    snprintf((char *)lc.info.lo_file_name, LO_NAME_SIZE, "ctr-mount-helper");
    if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
      if (symlinkat(path + strlen("/dev/loop"), idx, key) != 0) die("symlink index entry: %s", strerror(errno));
      close(ctl);
      close(idx);
      *loop_nr = n;
      return fd;
    }
    /* Another process (ours or not) took the free device between the two calls. */
    if (errno != EBUSY || attempt >= 16) die("LOOP_CONFIGURE %s: %s", path, strerror(errno));
    close(fd);
  }
}

static void mount_image(const struct hp_config *cfg, int image_fd, const struct stat *st, const struct hp_fs *fs) {
  /* A private copy of the mount table: the kernel mount never appears on the host and goes
   * away with the last process in this namespace. mount_namespaces(7). */
  if (unshare(CLONE_NEWNS) != 0) die_errno("unshare(CLONE_NEWNS)");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die_errno("make / private");
  int lock = lock_index();
  int loop_nr = -1;
  int loop_fd = attach_loop(cfg, image_fd, st, fs, &loop_nr);
  char dev[64];
  snprintf(dev, sizeof dev, "/dev/loop%d", loop_nr);
  if (mount(dev, MOUNT_POINT, "squashfs", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
    die("mount %s (squashfs) on %s: %s", dev, MOUNT_POINT, strerror(errno));
  /* The mount now holds the device; autoclear detaches it when the last mount is gone. */
  if (close(loop_fd) != 0) die_errno("close loop device");
  if (close(lock) != 0) die_errno("unlock index");
}

static void check_status_zero(const char *field) {
  FILE *f = fopen("/proc/self/status", "re");
  if (f == NULL) die_errno("open /proc/self/status");
  char line[256];
  size_t flen = strlen(field);
  int seen = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, field, flen) != 0 || line[flen] != ':') continue;
    seen = 1;
    if (strtoull(line + flen + 1, NULL, 16) != 0) die("%s is not zero after dropping privileges", field);
  }
  fclose(f);
  if (!seen) die("%s missing from /proc/self/status", field);
}

/* Groups, then gid, then uid (the other order would lose the right to change groups);
 * then prove none of it can be undone. */
static void drop_privileges(void) {
  if (setgroups((size_t)n_groups, groups) != 0) die_errno("setgroups");
  if (setresgid(real_gid, real_gid, real_gid) != 0) die_errno("setresgid");
  if (setresuid(real_uid, real_uid, real_uid) != 0) die_errno("setresuid");
  uid_t r, e, s;
  gid_t rg, eg, sg;
  if (getresuid(&r, &e, &s) != 0 || r != real_uid || e != real_uid || s != real_uid)
    die("uids are not all %u after setresuid", (unsigned)real_uid);
  if (getresgid(&rg, &eg, &sg) != 0 || rg != real_gid || eg != real_gid || sg != real_gid)
    die("gids are not all %u after setresgid", (unsigned)real_gid);
  if (real_uid != 0 && (setuid(0) != -1 || seteuid(0) != -1)) die("root could be regained after setresuid");
  if (real_gid != 0 && (setgid(0) != -1 || setegid(0) != -1)) die("gid 0 could be regained after setresgid");
  check_status_zero("CapEff");
  check_status_zero("CapPrm");
  check_status_zero("CapAmb");
  /* Nothing exec'd from here on can gain privileges (setuid files, file capabilities). */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die_errno("PR_SET_NO_NEW_PRIVS");
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

  if (geteuid() != 0) die("not installed setuid root (owner root, mode 4755); see docs/admin-guide.md");
  char err[HP_ERR_LEN];
  struct hp_args args;
  if (hp_parse_args(argc, argv, &args, err, sizeof err) != 0) die("%s", err);

  static char config_text[HP_MAX_CONFIG + 1];
  struct hp_config cfg;
  load_config(&cfg, config_text, sizeof config_text);

  struct stat st;
  int image_fd = open_image_as_user(args.image, &st);
  struct hp_fs fs;
  if (hp_locate_fs(pread_all, &image_fd, (uint64_t)st.st_size, &fs, err, sizeof err) != 0)
    die("image %s: %s", args.image, err);
  check_policy(&cfg, image_fd, &st, args.image, &fs);

  ensure_root_dir(CTR_HELPER_RUNDIR, 0755);
  ensure_root_dir(MOUNT_POINT, 0755);
  mount_image(&cfg, image_fd, &st, &fs);
  if (close(image_fd) != 0) die_errno("close image");

  drop_privileges();
  umask(saved_umask);
  if (sigprocmask(SIG_SETMASK, &saved_mask, NULL) != 0) die_errno("sigprocmask restore");

  char *holder_argv[HP_MAX_ARGS + 8];
  int k = 0;
  holder_argv[k++] = (char *)CTR_BIN_PATH;
  holder_argv[k++] = (char *)"__holder";
  holder_argv[k++] = (char *)"--premounted";
  holder_argv[k++] = (char *)MOUNT_POINT;
  for (int i = 0; i < args.n_holder_args; i++) holder_argv[k++] = args.holder_args[i];
  holder_argv[k] = NULL;
  char *envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
  execve(CTR_BIN_PATH, holder_argv, envp);
  die("exec %s: %s", CTR_BIN_PATH, strerror(errno));
}
