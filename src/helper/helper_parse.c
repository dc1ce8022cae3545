#include "helper_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

int hp_parse_args(int argc, char *const *argv, struct hp_args *out, char *err, size_t errlen) {
  /* argc 0 is possible (execve with an empty argv); argv[1] would then be the environment. */
  if (argc < 2) return fail(err, errlen, "usage: ctr-mount-helper [--dataset FILE]... IMAGE [HOLDER-ARG...]");
  if (argc > HP_MAX_ARGS + 1) return fail(err, errlen, "too many arguments (at most %d)", HP_MAX_ARGS);
  for (int i = 1; i < argc; i++) {
    if (argv[i] == NULL) return fail(err, errlen, "argument %d is missing", i);
    if (strnlen(argv[i], HP_MAX_ARG_LEN) >= HP_MAX_ARG_LEN)
      return fail(err, errlen, "argument %d is too long (limit %d bytes)", i, HP_MAX_ARG_LEN - 1);
  }
  memset(out, 0, sizeof *out);
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--dataset") == 0; i += 2) {
    if (i + 1 >= argc || argv[i + 1][0] != '/') return fail(err, errlen, "--dataset needs an absolute path");
    if (out->n_datasets == HP_MAX_DATASETS) return fail(err, errlen, "more than %d --dataset images", HP_MAX_DATASETS);
    out->datasets[out->n_datasets++] = argv[i + 1];
  }
  if (i >= argc) return fail(err, errlen, "no image after the --dataset images");
  if (argv[i][0] == '\0') return fail(err, errlen, "empty image path");
  out->image = argv[i];
  out->holder_args = argv + i + 1;
  out->n_holder_args = argc - i - 1;
  return 0;
}

/* Every key ctr's parser knows: config::knownKeys(), written at build time by config_keys.cpp
 * from ctr's own table, so that the helper refuses exactly the keys ctr refuses. */
const char *const hp_ctr_keys[] = {
#include "ctr_config_keys.inc"
    NULL};

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
  return s;
}

/* Splits a comma list in place into items (empty items dropped). */
static int split_list(char *value, const char **items, int *n, int lineno, char *err, size_t errlen) {
  *n = 0;
  for (char *p; (p = strsep(&value, ",")) != NULL;) {
    char *item = trim(p);
    if (*item == '\0') continue;
    if (*n == HP_MAX_LIST) return fail(err, errlen, "line %d: more than %d entries", lineno, HP_MAX_LIST);
    items[(*n)++] = item;
  }
  return 0;
}

static int parse_line(char *key, char *value, int lineno, struct hp_config *cfg, char *err, size_t errlen) {
  /* ctr validates the values of its other keys; an unknown key is refused as ctr refuses it,
   * or a misspelt helper key would silently leave its default ("anywhere"). */
  int known = 0;
  for (const char *const *k = hp_ctr_keys; *k != NULL && !known; k++) known = strcmp(key, *k) == 0;
  if (!known) return fail(err, errlen, "line %d: unknown key '%.64s'", lineno, key);
  if (strcmp(key, "allow setuid") == 0) {
    int yes = strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 || strcmp(value, "1") == 0;
    if (!yes && strcmp(value, "no") != 0 && strcmp(value, "false") != 0 && strcmp(value, "0") != 0)
      return fail(err, errlen, "line %d: allow setuid: expected yes or no", lineno);
    cfg->allow_setuid = yes;
  } else if (strcmp(key, "setuid image directories") == 0) {
    if (split_list(value, cfg->dirs, &cfg->n_dirs, lineno, err, errlen) != 0) return -1;
    for (int i = 0; i < cfg->n_dirs; i++)
      if (cfg->dirs[i][0] != '/')
        return fail(err, errlen, "line %d: '%.64s' is not an absolute path", lineno, cfg->dirs[i]);
  } else if (strcmp(key, "setuid image owners") == 0) {
    if (split_list(value, cfg->owners, &cfg->n_owners, lineno, err, errlen) != 0) return -1;
  } else if (strcmp(key, "setuid formats") == 0) {
    const char *items[HP_MAX_LIST];
    int n = 0;
    if (split_list(value, items, &n, lineno, err, errlen) != 0) return -1;
    cfg->formats = 0;
    for (int i = 0; i < n; i++) {
      if (strcmp(items[i], "sif") == 0) cfg->formats |= HP_FORMAT_SIF;
      else if (strcmp(items[i], "squashfs") == 0) cfg->formats |= HP_FORMAT_SQUASHFS;
      else return fail(err, errlen, "line %d: unknown format '%s'", lineno, items[i]);
    }
  } else if (strcmp(key, "max loop devices") == 0 || strcmp(key, "max loop devices total") == 0) {
    /* What ctr's std::stol takes (it is strtol): leading blanks and a sign included. */
    char *end = NULL;
    long n = strtol(value, &end, 10);
    if (end == value || *end != '\0' || n < 1 || n > (1L << 20))
      return fail(err, errlen, "line %d: %s: expected 1 to 1048576", lineno, key);
    *(strcmp(key, "max loop devices") == 0 ? &cfg->max_loop_devices : &cfg->max_loop_devices_total) = n;
  } else if (strcmp(key, "execution rule") == 0) {
    /* "[DIR] MODE": which rule takes an image, and its verdict, are ctr's (`__verify-fd`);
     * any rule that may refuse one is reason enough to ask. */
    const char *mode = value; /* the last word, as ctr splits it */
    for (const char *p = value; *p != '\0'; p++)
      if (*p == ' ' || *p == '\t') mode = p + 1;
    if (strcmp(mode, "off") != 0) cfg->execution_control = 1;
  }
  return 0;
}

int hp_parse_config(char *text, size_t len, struct hp_config *cfg, char *err, size_t errlen) {
  *cfg = (struct hp_config){.owners = {"root"}, .n_owners = 1, .formats = HP_FORMAT_SIF | HP_FORMAT_SQUASHFS,
                            .max_loop_devices = 64, .max_loop_devices_total = 256};
  if (len > HP_MAX_CONFIG) return fail(err, errlen, "larger than %d bytes", HP_MAX_CONFIG);
  if (memchr(text, '\0', len) != NULL) return fail(err, errlen, "contains a NUL byte");
  char *line;
  for (int lineno = 1; (line = strsep(&text, "\n")) != NULL; lineno++) {
    char *s = trim(strsep(&line, "#")); /* what precedes a comment */
    if (*s == '\0') continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) return fail(err, errlen, "line %d: expected 'key = value'", lineno);
    *eq = '\0';
    if (parse_line(trim(s), trim(eq + 1), lineno, cfg, err, errlen) != 0) return -1;
  }
  return 0;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

#define SQUASHFS_SUPERBLOCK 96

/* The squashfs superblock at `off` must say "hsqs", version 4, and bytes_used must fit in
 * `size` (the kernel reads up to bytes_used; the loop sizelimit stops it at `size` anyway). */
static int check_squashfs(hp_read_fn read, void *ctx, uint64_t off, uint64_t size, char *err, size_t errlen) {
  unsigned char sb[SQUASHFS_SUPERBLOCK];
  if (size < SQUASHFS_SUPERBLOCK) return fail(err, errlen, "squashfs partition is too small");
  if (read(ctx, sb, sizeof sb, off) != 0) return fail(err, errlen, "cannot read squashfs superblock");
  if (memcmp(sb, "hsqs", 4) != 0) return fail(err, errlen, "no squashfs magic at offset %llu", (unsigned long long)off);
  unsigned major = (unsigned)sb[28] | (unsigned)sb[29] << 8;
  if (major != 4) return fail(err, errlen, "squashfs version %u is not 4", major);
  uint64_t bytes_used = le64(sb + 40);
  if (bytes_used < SQUASHFS_SUPERBLOCK || bytes_used > size)
    return fail(err, errlen, "squashfs bytes_used %llu does not fit in its %llu-byte partition",
                (unsigned long long)bytes_used, (unsigned long long)size);
  return 0;
}

/* Layout: docs/reference/sif-format.md sections 2, 3 and 9. */
#define SIF_HEADER 128
#define SIF_DESCRIPTOR 585
#define SIF_MAX_DESCRIPTORS 65536
#define SIF_PARTITION 0x4004
#define SIF_FS_SQUASH 1
#define SIF_PART_PRIMSYS 2

static int locate_sif(hp_read_fn read, void *ctx, uint64_t file_size, const unsigned char *hdr,
                      struct hp_fs *out, char *err, size_t errlen) {
  if (memcmp(hdr + 42, "01\0", 3) != 0) return fail(err, errlen, "unsupported SIF version");
  uint64_t total = le64(hdr + 88), doff = le64(hdr + 96);
  if (total == 0 || total > SIF_MAX_DESCRIPTORS)
    return fail(err, errlen, "SIF descriptor count %llu out of range", (unsigned long long)total);
  if (doff < SIF_HEADER || doff > file_size || total * SIF_DESCRIPTOR > file_size - doff)
    return fail(err, errlen, "SIF descriptor table lies outside the file");
  int found = 0;
  for (uint64_t i = 0; i < total; i++) {
    unsigned char d[SIF_DESCRIPTOR];
    if (read(ctx, d, sizeof d, doff + i * SIF_DESCRIPTOR) != 0)
      return fail(err, errlen, "cannot read SIF descriptor %llu", (unsigned long long)i);
    if (d[4] != 1 || le32(d) != SIF_PARTITION || le32(d + 205) != SIF_PART_PRIMSYS) continue;
    if (++found > 1) return fail(err, errlen, "SIF has more than one primary partition");
    if (le32(d + 201) != SIF_FS_SQUASH) return fail(err, errlen, "SIF primary partition is not squashfs");
    uint64_t off = le64(d + 17), size = le64(d + 25);
    /* int64 on disk: a negative value is a huge uint64 and fails these tests. */
    if (off > file_size || size > file_size - off || size == 0)
      return fail(err, errlen, "SIF primary partition (offset %llu, size %llu) lies outside the %llu-byte file",
                  (unsigned long long)off, (unsigned long long)size, (unsigned long long)file_size);
    *out = (struct hp_fs){.format = HP_FORMAT_SIF, .offset = off, .size = size};
  }
  return found == 0 ? fail(err, errlen, "SIF has no primary system partition") : 0;
}

int hp_locate_fs(hp_read_fn read, void *ctx, uint64_t file_size, struct hp_fs *out, char *err, size_t errlen) {
  unsigned char hdr[SIF_HEADER];
  memset(out, 0, sizeof *out);
  if (file_size < SQUASHFS_SUPERBLOCK) return fail(err, errlen, "too small to be an image");
  size_t want = file_size < SIF_HEADER ? (size_t)file_size : SIF_HEADER;
  if (read(ctx, hdr, want, 0) != 0) return fail(err, errlen, "cannot read the image header");
  if (memcmp(hdr, "hsqs", 4) == 0)
    *out = (struct hp_fs){.format = HP_FORMAT_SQUASHFS, .offset = 0, .size = file_size};
  else if (want != SIF_HEADER || memcmp(hdr + 32, "SIF_MAGIC\0", 10) != 0)
    return fail(err, errlen, "neither a SIF nor a squashfs image");
  else if (locate_sif(read, ctx, file_size, hdr, out, err, errlen) != 0)
    return -1;
  return check_squashfs(read, ctx, out->offset, out->size, err, errlen);
}
