/* pyxis's --container-mounts as ctr's options. No Slurm here: tests/unit/spank_twins_test.cpp
 * checks that every bind it writes is one ctr's own bind parser reads the same way. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(hidden)

/* `spec` is pyxis's SRC[:DST[:FLAGS]][,SRC[:DST[:FLAGS]]...], FLAGS joined with '+'
 * (enroot's fstab flags). Writes ctr's --bind list ("SRC:DST[:ro],...") into `binds` and
 * its --scratch list (the DSTs of "tmpfs" sources: an empty writable directory each) into
 * `scratch`, both possibly empty. SRC is a path (starting with '/' or '.': a relative one
 * is the job's working directory's, where ctr runs) or "tmpfs"; DST starts with '/' or '.'
 * (relative to the container's root; no DST: SRC's path). Flags: ro, rw; the propagation
 * and bind kinds (bind, rbind, [r]private, [r]slave, [r]shared, [r]unbindable), nosuid,
 * nodev and x-create=... change nothing in ctr (its binds are recursive, private, nosuid and
 * nodev, their destinations made as needed). 0, or -1 with one line in `why` (an "umount"
 * source, another flag, a malformed entry, or a list that does not fit). */
int container_mounts(const char *spec, char *binds, size_t binds_size, char *scratch, size_t scratch_size, char *why,
                     size_t why_size);

/* A path in the container as pyxis's task reaches it (its chdir after entering the
 * container's mount namespace, whose root is then its working directory): a relative
 * `path` is the root's ("x", "./x" and "../x" are "/x"); "." and ".." resolved by name, as
 * the kernel does at "/". Into `out`: 0, or -1 when it does not fit. */
int container_path(const char *path, char *out, size_t size);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
