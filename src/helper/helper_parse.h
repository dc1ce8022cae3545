/* Pure parsing for ctr-mount-helper: argv, the ctr.conf keys the helper uses, and the
 * location of the squashfs filesystem inside an image. No system calls here (the image is
 * read through a callback), so this file is what tests/fuzz/fuzz_helper_parse.c exercises. */
#ifndef CTR_HELPER_PARSE_H
#define CTR_HELPER_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define HP_MAX_ARG_LEN 4096  /* PATH_MAX: any longer argument is refused */
#define HP_MAX_ARGS 128      /* datasets + image + holder arguments */
#define HP_MAX_DATASETS 16   /* --dataset images per launch (launch::kMaxDatasetImages) */
#define HP_MAX_LIST 32       /* entries in a config list */
#define HP_MAX_CONFIG 65536  /* bytes of ctr.conf */
#define HP_ERR_LEN 256

struct hp_args {
  const char *datasets[HP_MAX_DATASETS]; /* squashfs or SIF files mounted beside the image, in order */
  int n_datasets;
  const char *image;
  char *const *holder_args; /* passed to `ctr __holder` verbatim */
  int n_holder_args;
};

/* ctr-mount-helper [--dataset FILE]... IMAGE [HOLDER-ARG...]. Never reads argv[i] for
 * i >= argc (argc may be 0). */
int hp_parse_args(int argc, char *const *argv, struct hp_args *out, char *err, size_t errlen);

enum { HP_FORMAT_SIF = 1, HP_FORMAT_SQUASHFS = 2 };

struct hp_config {
  int allow_setuid;
  const char *dirs[HP_MAX_LIST]; /* empty = anywhere the user can read */
  int n_dirs;
  const char *owners[HP_MAX_LIST]; /* user names; "self" = the invoking user */
  int n_owners;
  int formats; /* HP_FORMAT_* bits */
  long max_loop_devices;       /* per user */
  long max_loop_devices_total; /* all users together */
  int execution_control;       /* an 'execution rule' other than off: ctr checks each image */
};

/* Every key ctr's parser knows (src/config/policy.cpp), NULL-terminated. */
extern const char *const hp_ctr_keys[];

/* Parses ctr.conf in place (`text` must hold `len` bytes plus a NUL; list entries point into
 * it). Strict about the keys the helper uses; the values of ctr's other keys are ctr's to
 * check, and a key ctr does not know is refused, as ctr refuses it. Defaults match
 * src/config/policy.cpp. */
int hp_parse_config(char *text, size_t len, struct hp_config *cfg, char *err, size_t errlen);

/* Reads exactly `len` bytes at `off`; returns 0 on success. */
typedef int (*hp_read_fn)(void *ctx, void *buf, size_t len, uint64_t off);

struct hp_fs {
  int format;      /* HP_FORMAT_SIF or HP_FORMAT_SQUASHFS */
  uint64_t offset; /* squashfs filesystem inside the file */
  uint64_t size;
};

/* Finds the squashfs filesystem in a file of `file_size` bytes: the file itself ("hsqs" at 0)
 * or a SIF's primary system partition. Every offset and size is checked against file_size,
 * and the squashfs superblock must fit in the partition. */
int hp_locate_fs(hp_read_fn read, void *ctx, uint64_t file_size, struct hp_fs *out, char *err,
                 size_t errlen);

#endif
