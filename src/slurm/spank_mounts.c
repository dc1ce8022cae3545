/* pyxis's --container-mounts as ctr's --bind and --scratch (spank_mounts.h). */
#define _GNU_SOURCE
#include "spank_mounts.h"

#include <stdio.h>
#include <string.h>

/* Appends "SEP TEXT" (SEP only when `out` has something) within `size`; -1 when it does not fit. */
static int append(char *out, size_t size, const char *sep, const char *text) {
  const size_t used = strlen(out);
  const int n = snprintf(out + used, size - used, "%s%s", used ? sep : "", text);
  return n < 0 || (size_t)n >= size - used ? -1 : 0;
}

/* 1 for ro, 0 for rw, 2 for a flag that changes nothing in ctr, -1 for another. */
static int flag_kind(const char *flag, size_t n) {
  static const char *const neutral[] = {"bind", "rbind", "private", "rprivate", "slave", "rslave", "shared", "rshared",
                                        "unbindable", "runbindable", "nosuid", "nodev", NULL};
  if (n == 2 && strncmp(flag, "ro", 2) == 0) return 1;
  if (n == 2 && strncmp(flag, "rw", 2) == 0) return 0;
  if (n > 9 && strncmp(flag, "x-create=", 9) == 0) return 2;
  for (const char *const *f = neutral; *f; ++f)
    if (strlen(*f) == n && strncmp(flag, *f, n) == 0) return 2;
  return -1;
}

/* One entry ("SRC[:DST[:FLAGS]]", `len` bytes at `entry`) appended to `binds` or `scratch`. */
static int one_mount(const char *entry, size_t len, char *binds, size_t binds_size, char *scratch,
                     size_t scratch_size, char *why, size_t why_size) {
  char text[4096], target[4096];
  if (len == 0 || len >= sizeof text) {
    snprintf(why, why_size, "ctr: --container-mounts: invalid format: '%.*s'", (int)(len > 200 ? 200 : len), entry);
    return -1;
  }
  memcpy(text, entry, len);
  text[len] = 0;
  char shown[256]; /* the entry as given, for the messages (strsep cuts `text`) */
  snprintf(shown, sizeof shown, "%.200s", text);
  char *rest = text;
  const char *src = strsep(&rest, ":");
  const char *dst = rest ? strsep(&rest, ":") : src;
  const char *flags = rest ? rest : "";
  if (!*src || !*dst) {
    snprintf(why, why_size, "ctr: --container-mounts: invalid format: '%s'", shown);
    return -1;
  }
  const int tmpfs = strcmp(src, "tmpfs") == 0;
  if (strcmp(src, "umount") == 0) {
    snprintf(why, why_size, "ctr: --container-mounts=%s: umount: is enroot's (it removes one of enroot's own mounts); "
             "a ctr container has only the mounts it is given", shown);
    return -1;
  }
  if (!tmpfs && src[0] != '/' && src[0] != '.') {
    snprintf(why, why_size, "ctr: --container-mounts=%s: the source must be a relative path, an absolute path or "
             "\"tmpfs\"", shown);
    return -1;
  }
  if (dst[0] != '/' && dst[0] != '.') {
    snprintf(why, why_size, "ctr: --container-mounts=%s: the target must be a relative path or an absolute path", shown);
    return -1;
  }
  /* A relative target is the container root's: "./x" and "x" are "/x", "." is "/". */
  const char *inside = dst;
  while (inside[0] == '.' && (inside[1] == '/' || inside[1] == 0)) inside += inside[1] ? 2 : 1;
  while (inside[0] == '/') ++inside;
  snprintf(target, sizeof target, "/%s", inside);
  for (const char *c = strstr(target, "/.."); c; c = strstr(c + 1, "/.."))
    if (c[3] == '/' || c[3] == 0) {
      snprintf(why, why_size, "ctr: --container-mounts=%s: the target %s has a '..': a target is a path in the "
               "container, without '..'", shown, dst);
      return -1;
    }
  int ro = 0;
  for (const char *f = flags; *f;) {
    const char *end = strchrnul(f, '+');
    const int kind = flag_kind(f, (size_t)(end - f));
    if (kind < 0) {
      snprintf(why, why_size, "ctr: --container-mounts=%s: flag '%.*s' is not supported (ro, rw; bind, rbind, the "
               "propagation flags, nosuid, nodev and x-create= change nothing)", shown, (int)(end - f), f);
      return -1;
    }
    if (kind < 2) ro = kind;
    f = *end ? end + 1 : end;
  }
  if (tmpfs) return append(scratch, scratch_size, ",", target);
  char bind[8300];
  snprintf(bind, sizeof bind, "%s:%s%s", src, target, ro ? ":ro" : "");
  return append(binds, binds_size, ",", bind);
}

int container_mounts(const char *spec, char *binds, size_t binds_size, char *scratch, size_t scratch_size, char *why,
                     size_t why_size) {
  binds[0] = scratch[0] = why[0] = 0;
  for (const char *entry = spec;;) {
    const char *end = strchrnul(entry, ',');
    if (one_mount(entry, (size_t)(end - entry), binds, binds_size, scratch, scratch_size, why, why_size) != 0) {
      if (!*why) snprintf(why, why_size, "ctr: --container-mounts: the list is too long");
      return -1;
    }
    if (!*end) return 0;
    entry = end + 1;
  }
}

int container_path(const char *path, char *out, size_t size) {
  if (size < 2) return -1;
  size_t used = 0;
  out[used++] = '/';
  out[used] = 0;
  for (const char *c = path; *c;) {
    while (*c == '/') ++c;
    const size_t n = strcspn(c, "/");
    if (n == 0) break;
    if (n == 2 && strncmp(c, "..", 2) == 0) {
      while (used > 1 && out[used - 1] != '/') --used; /* drop the last name */
      if (used > 1) --used;                             /* and its slash */
      out[used] = 0;
    } else if (!(n == 1 && *c == '.')) {
      if (used + (used > 1) + n + 1 > size) return -1;
      if (used > 1) out[used++] = '/';
      memcpy(out + used, c, n);
      used += n;
      out[used] = 0;
    }
    c += n;
  }
  return 0;
}
