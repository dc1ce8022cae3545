/* The user's state place on the node (spank_state_dir.h). */
#define _GNU_SOURCE
#include "spank_state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const instance_file_suffixes[INSTANCE_FILES] = {"json", "join", "bpf", "out", "err", "lock"};

void name_characters(char *text) {
  for (char *c = text; *c; ++c)
    if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9') && *c != '-' && *c != '_')
      *c = '_';
}

int step_instance_name(char *name, size_t size, unsigned job, const unsigned *step, const char *container,
                       const char *host) {
  char stepText[40];
  if (container && *container) {
    snprintf(stepText, sizeof stepText, "n-%.32s", container);
    name_characters(stepText);
  } else if (!step) {
    snprintf(stepText, sizeof stepText, "batch");
  } else {
    snprintf(stepText, sizeof stepText, "%u", *step);
  }
  int used = snprintf(name, size, "slurm.%u.%s.", job, stepText);
  if (used < 0 || (size_t)used >= size || used >= 64) return -1;
  snprintf(name + used, size - (size_t)used, "%.*s", 64 - used, host);
  return 0;
}

int open_runtime_base(const char *base, int create) {
  int made = create && mkdir(base, 0755) == 0;
  if (create && !made && errno != EEXIST) {
    spank_error("ctr: cannot make %s: %s", base, strerror(errno));
    return -1;
  }
  const int fd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    else if (errno != ENOENT) spank_error("ctr: cannot open %s: %s", base, strerror(errno));
    return -1;
  }
  if (made) fchmod(fd, 0755); /* whatever slurmd's umask */
  else if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    spank_error("ctr: %s is not a directory of root's that only root may write: not used", base);
    close(fd);
    return -1;
  }
  return fd;
}

int open_runtime_dir(const char *base_path, uid_t uid, gid_t gid, int create) {
  const int base = open_runtime_base(base_path, create);
  if (base < 0) return -1;
  char name[32];
  snprintf(name, sizeof name, "%u", (unsigned)uid);
  if (create && mkdirat(base, name, 0700) != 0 && errno != EEXIST)
    spank_error("ctr: cannot make %s/%s: %s", base_path, name, strerror(errno));
  const int fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(base);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  /* Root's: made here (or by a run stopped before it gave it away), so closed first. */
  if (create && st.st_uid == 0 && uid != 0 && (fchmod(fd, 0700) != 0 || fchown(fd, uid, gid) != 0 || fstat(fd, &st) != 0))
    spank_error("ctr: cannot give %s/%s to uid %u: %s", base_path, name, (unsigned)uid, strerror(errno));
  if (st.st_uid != uid) {
    spank_error("ctr: %s/%s is not uid %u's: not used", base_path, name, (unsigned)uid);
    close(fd);
    return -1;
  }
  return fd;
}

int open_owned(int dir, const char *name, int flags, uid_t uid) {
  int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != uid)) {
    close(fd);
    return -1;
  }
  return fd;
}

int open_state_dir_in(int runtime, uid_t uid) {
  return open_owned(runtime, "ctr", O_RDONLY | O_DIRECTORY, uid);
}

char *read_join_file_in(int state, const char *name, uid_t uid) {
  int dir = open_owned(state, "instances", O_RDONLY | O_DIRECTORY, uid);
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

int open_user_state_dir(uid_t uid, gid_t gid) {
  const int runtime = open_runtime_dir(RUNTIME_BASE, uid, gid, 0);
  if (runtime < 0) return -1;
  const int state = open_state_dir_in(runtime, uid);
  close(runtime);
  return state;
}

void node_name(char *host, size_t size) {
  if (gethostname(host, size - 1) != 0) snprintf(host, size, "node");
  host[size - 1] = 0;
  name_characters(host);
}
