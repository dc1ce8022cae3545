/* libFuzzer target over ctr-mount-helper's pure parsing (src/helper/helper_parse.c).
 * The first byte picks what the rest is: 0 = argv (NUL-separated), 1 = ctr.conf text (an
 * accepted one names only ctr's keys), 2 = an image file (SIF or squashfs) read through the
 * same callback the helper uses. Agreement with ctr's own parser is helper-config-agreement's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helper_parse.h"

struct buffer {
  const uint8_t *data;
  size_t size;
};

static int read_buffer(void *ctx, void *buf, size_t len, uint64_t off) {
  const struct buffer *b = ctx;
  if (off > b->size || len > b->size - off) return -1;
  memcpy(buf, b->data + off, len);
  return 0;
}

static void fuzz_args(const uint8_t *data, size_t size) {
  char *copy = malloc(size + 1);
  if (copy == NULL) return;
  memcpy(copy, data, size);
  copy[size] = '\0';
  char *argv[HP_MAX_ARGS + 8];
  int argc = 0;
  for (size_t i = 0; i <= size && argc < HP_MAX_ARGS + 7; i++) {
    argv[argc++] = copy + i;
    i += strlen(copy + i);
  }
  argv[argc] = NULL;
  struct hp_args a;
  char err[HP_ERR_LEN];
  if (hp_parse_args(argc, argv, &a, err, sizeof err) == 0) {
    if (a.image == NULL || a.n_holder_args != argc - 2 - 2 * a.n_datasets || strlen(a.image) >= HP_MAX_ARG_LEN) abort();
    if (a.n_datasets < 0 || a.n_datasets > HP_MAX_DATASETS) abort();
    for (int i = 0; i < a.n_datasets; i++)
      if (a.datasets[i][0] != '/') abort();
    for (int i = 0; i < a.n_holder_args; i++) (void)strlen(a.holder_args[i]);
  }
  free(copy);
}

/* Whether every "key = value" line of an accepted file names a key ctr knows: a misspelt
 * key must be refused, not skipped (the helper would use its default). */
static int only_ctr_keys(const uint8_t *data, size_t size) {
  for (size_t pos = 0; pos < size;) {
    const uint8_t *nl = memchr(data + pos, '\n', size - pos);
    size_t end = nl != NULL ? (size_t)(nl - data) : size, stop = end;
    const uint8_t *hash = memchr(data + pos, '#', end - pos);
    if (hash != NULL) stop = (size_t)(hash - data);
    const uint8_t *eq = memchr(data + pos, '=', stop - pos);
    if (eq != NULL) {
      size_t b = pos, e = (size_t)(eq - data);
      while (b < e && strchr(" \t\r", data[b]) != NULL) b++;
      while (e > b && strchr(" \t\r", data[e - 1]) != NULL) e--;
      int known = 0;
      for (const char *const *k = hp_ctr_keys; *k != NULL && !known; k++)
        known = strlen(*k) == e - b && memcmp(*k, data + b, e - b) == 0;
      if (!known) return 0;
    }
    pos = end + 1;
  }
  return 1;
}

static void fuzz_config(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) return;
  memcpy(text, data, size);
  text[size] = '\0';
  struct hp_config cfg;
  char err[HP_ERR_LEN];
  if (hp_parse_config(text, size, &cfg, err, sizeof err) == 0) {
    if (!only_ctr_keys(data, size)) abort();
    if (cfg.n_dirs > HP_MAX_LIST || cfg.n_owners > HP_MAX_LIST) abort();
    for (int i = 0; i < cfg.n_dirs; i++)
      if (cfg.dirs[i][0] != '/') abort();
    for (int i = 0; i < cfg.n_owners; i++) (void)strlen(cfg.owners[i]);
    if (cfg.max_loop_devices < 1 || cfg.max_loop_devices > (1L << 20)) abort();
    if (cfg.max_loop_devices_total < 1 || cfg.max_loop_devices_total > (1L << 20)) abort();
  }
  free(text);
}

static void fuzz_image(const uint8_t *data, size_t size) {
  struct buffer b = {data, size};
  struct hp_fs fs;
  char err[HP_ERR_LEN];
  if (hp_locate_fs(read_buffer, &b, size, &fs, err, sizeof err) == 0) {
    /* What the helper hands to LOOP_CONFIGURE must lie inside the file. */
    if (fs.offset > size || fs.size > size - fs.offset || fs.size < 96) abort();
    if (memcmp(data + fs.offset, "hsqs", 4) != 0) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: fuzz_args(data + 1, size - 1); break;
    case 1: fuzz_config(data + 1, size - 1); break;
    default: fuzz_image(data + 1, size - 1); break;
  }
  return 0;
}
