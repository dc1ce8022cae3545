#!/bin/bash
# Carries what bench/io/scaling.sh needs to a machine without Debian's packages (the GPU
# node's 16 cores, host-notes.md section 9):
#
#   bench/io/pack.sh BUILD_DIR CARRY_DIR        here
#   bash CARRY_DIR/run.sh [CTR_SUID]            there, as root (ROUNDS, PATHS pass through)
#
# CARRY_DIR/build is a build tree as scaling.sh reads it: bin/ctr, bin/ctr-squashfs,
# bench/workloads/ctr-wl-smallfiles, libexec/ctr/squashfuse_ll (where ctr looks first) and
# bin/mksquashfs, each with the shared libraries it needs but glibc's in a lib/ beside it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib/carry.sh"
[ $# = 2 ] || { echo "usage: pack.sh BUILD_DIR CARRY_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
for p in patchelf squashfuse_ll mksquashfs; do
  command -v "$p" >/dev/null || { echo "pack.sh: $p is not installed" >&2; exit 1; }
done
[ -x "$build/bin/ctr-squashfs" ] || { echo "pack.sh: $build/bin/ctr-squashfs is missing" >&2; exit 1; }
mkdir -p "$2"
carry=$(cd "$2" && pwd)
out=$carry/build
mkdir -p "$out/bin" "$out/bench/workloads" "$out/libexec/ctr"
cp "$build/bin/ctr" "$out/bin/"
copy_with_libs "$build/bin/ctr-squashfs" "$out/bin"
copy_with_libs "$build/bench/workloads/ctr-wl-smallfiles" "$out/bench/workloads"
copy_with_libs "$(command -v squashfuse_ll)" "$out/libexec/ctr"
copy_with_libs "$(command -v mksquashfs)" "$out/bin"
cp "$here/scaling.sh" "$carry/"
cat > "$carry/run.sh" <<'RUN'
#!/bin/bash
# On the node, as root: scaling.sh over the carried build (squashfuse_ll by hand from it too).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH=$here/build/bin:$PATH SQUASHFUSE=$here/build/libexec/ctr/squashfuse_ll
exec bash "$here/scaling.sh" "$here/build" "$@"
RUN
du -sh "$carry"
