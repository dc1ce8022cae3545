/* join-floor: the kernel's part of a held launch and nothing else, as a reference case for
 * bench/startup/run.sh (issue 56, item 3: a held launch within 1.2x of `unshare -Urm`).
 *
 *   join-floor HOLDER.pid FILTER.bpf COMMAND [ARG...]
 *
 * HOLDER.pid is an image holder's record in ctr's state directory ("PID USER-NS MNT-NS
 * READY-FD READY-NS"), FILTER.bpf the compiled seccomp filter ctr caches beside it. It does
 * what a held `ctr exec` must ask of the kernel once ctr has decided everything: join the
 * holder's user namespace and its prepared root's mount namespace, keep the working
 * directory, set no_new_privs, empty the capability bounding, ambient and process sets, load
 * the seccomp filter, exec the command. No ctr.conf, image, host user, plan, lock or
 * registration with the holder: its time against ctr's is what ctr's own work costs, and
 * against unshare's it is the floor that no launch joining a prepared root with these
 * restrictions can go below. A small C program linked like unshare (glibc only). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static void die(const char *what) {
  fprintf(stderr, "join-floor: %s: %s\n", what, strerror(errno));
  exit(127);
}

static int open_ns(int pid, const char *what) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, what);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(path);
  return fd;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: join-floor HOLDER.pid FILTER.bpf COMMAND [ARG...]\n");
    return 2;
  }
  char record[128] = {0};
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, record, sizeof record - 1) <= 0) die(argv[1]);
  close(fd);
  int pid = 0, ready = -1;
  unsigned long long user_ns = 0, mnt_ns = 0;
  if (sscanf(record, "%d %llu %llu %d", &pid, &user_ns, &mnt_ns, &ready) != 4 || pid <= 0 || ready < 0) {
    fprintf(stderr, "join-floor: %s: not a holder record with a prepared root\n", argv[1]);
    return 2;
  }
  char fdname[32];
  snprintf(fdname, sizeof fdname, "fd/%d", ready);
  int user = open_ns(pid, "ns/user");
  int root = open_ns(pid, fdname);

  struct sock_filter filter[BPF_MAXINSNS];
  fd = open(argv[2], O_RDONLY | O_CLOEXEC);
  ssize_t bytes = fd < 0 ? -1 : read(fd, filter, sizeof filter);
  if (bytes <= 0 || bytes % (ssize_t)sizeof filter[0] != 0) die(argv[2]);
  close(fd);
  struct sock_fprog program = {(unsigned short)(bytes / (ssize_t)sizeof filter[0]), filter};

  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) die("getcwd");
  if (setns(user, CLONE_NEWUSER) != 0) die("setns user");
  if (setns(root, CLONE_NEWNS) != 0) die("setns mnt");
  close(user);
  close(root);
  if (chdir(cwd) != 0) die(cwd);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
  int cap = 0;  /* until the first number past the kernel's last capability (EINVAL) */
  while (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) ++cap;
  if (errno != EINVAL || cap == 0) die("PR_CAPBSET_DROP");
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) die("PR_CAP_AMBIENT_CLEAR_ALL");
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct none[2] = {{0, 0, 0}, {0, 0, 0}};
  if (syscall(SYS_capset, &header, none) != 0) die("capset");
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) die("seccomp");
  execve(argv[3], argv + 3, environ);
  die(argv[3]);
}
