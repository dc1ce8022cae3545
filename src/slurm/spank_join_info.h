/* ctr's join information as the plugin reads it: one key=value a line, what `ctr instance
 * start --join-info` prints and ctr writes beside a named instance's record
 * (STATE/instances/NAME.join). Its writer is ctr's instanceJoinInfo (src/launch/instance.cpp),
 * which percent-encodes '%' and control bytes. libc only: the unit tests read ctr's output
 * through the same code (tests/unit/spank_twins_test.cpp). */
#pragma once

#include <limits.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(hidden)

#define JOIN_MAX_NS 8

struct join_info {
  char name[96];
  char image[2 * PATH_MAX];
  pid_t keeper;
  unsigned long long keeper_start;
  int nns;
  char ns_type[JOIN_MAX_NS][8];
  unsigned long long ns_inode[JOIN_MAX_NS];
  char *seccomp;
  int keep_capabilities; /* a --fakeroot container: the joiner keeps its namespace's capabilities */
  char **set, **unset;
  int nset, nunset;
};

/* Percent-decoding in place. */
void percent_decode(char *s);

/* `text` (changed) into `info`, which starts zeroed: 0, or -1 (a line that is not key=value,
 * or no keeper, or not the user namespace first of at least two). */
int parse_join_info(char *text, struct join_info *info);

/* What parse_join_info took, freed; `info` zeroed. */
void reset_join_info(struct join_info *info);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
