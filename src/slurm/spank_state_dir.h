/* The user's state place on the node, as the plugin finds it, and the names it gives the
 * instances there (ctr's isValidInstanceName must take them).
 *
 * Every ctr the plugin runs for a user gets XDG_RUNTIME_DIR=/run/ctr/UID, a directory root
 * makes and gives to the user: ctr keeps its state in RUNTIME/ctr (host::chooseStateDir) and
 * an instance's files in STATE/instances/NAME.* (launch::planInstanceFiles), so the plugin's
 * steps and the epilog find the same instances there, and no other user can take its name
 * first (as they can /tmp/ctr-UID and each name after it). Opened and checked through file
 * descriptors, never following a link. No Slurm here (spank_error is the plugin's log):
 * tests/unit/spank_twins_test.cpp finds with it what ctr's side wrote. */
#pragma once

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(hidden)

/* In place: '_' for each character an instance name may not have. */
void name_characters(char *text);

/* The instance name of a step's container, into `name`: "slurm.JOB.STEP.HOST" (`step` NULL,
 * the batch step: "slurm.JOB.batch.HOST"), or for a named container ("" or NULL: none)
 * "slurm.JOB.n-NAME.HOST": the node's name too (`host`, node_name's), for nodes that share
 * the user's state directory (a shared /tmp). At most 64 characters (ctr's bound), the
 * node's name cut to fit. 0, or -1. */
int step_instance_name(char *name, size_t size, unsigned job, const unsigned *step, const char *container,
                       const char *host);

/* One line in slurmd's log (slurm_error). */
__attribute__((format(printf, 1, 2))) void spank_error(const char *format, ...);

/* The files of an instance NAME in STATE/instances: NAME.SUFFIX for each. */
#define INSTANCE_FILES 6
extern const char *const instance_file_suffixes[INSTANCE_FILES];

/* `base` (/run/ctr), root's and writable by root alone (made 0755 when `create` and
 * missing), opened; -1 (with a line unless it is just missing). */
int open_runtime_base(const char *base, int create);

/* BASE/UID, the user's (made 0700 and given to the user when `create` and missing),
 * opened; -1. */
int open_runtime_dir(const char *base, uid_t uid, gid_t gid, int create);

/* A file the user owns, at `name` in the directory `dir`, opened without following a link. */
int open_owned(int dir, const char *name, int flags, uid_t uid);

/* The state directory ctr keeps in the runtime directory `runtime`, opened, or -1. */
int open_state_dir_in(int runtime, uid_t uid);

/* Where the plugin keeps each user's runtime directory (RUNTIME_BASE/UID). */
#define RUNTIME_BASE "/run/ctr"

/* The user's state directory, where the plugin's ctr runs keep their instances
 * (STATE/instances/NAME.*), opened, or -1: RUNTIME_BASE/UID/ctr (host::chooseStateDir with
 * the XDG_RUNTIME_DIR the plugin gives). Opened as root: no link followed, owned by the user. */
int open_user_state_dir(uid_t uid, gid_t gid);

/* The node's name, with only characters an instance name may have. */
void node_name(char *host, size_t size);

/* The join file of the instance `name` in the state directory `state`, malloc'd, or NULL.
 * Read as root: no link followed, every step owned by the user (so nothing the user could
 * not read anyway). */
char *read_join_file_in(int state, const char *name, uid_t uid);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
