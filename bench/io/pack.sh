#!/bin/bash
# Carries what bench/io/scaling.sh needs to a machine without Debian's packages (the GPU
# node's 16 cores, host-notes.md section 9):
#
#   bench/io/pack.sh BUILD_DIR CARRY_DIR        here
#   bash CARRY_DIR/run.sh                       there, as root (ROUNDS, PATHS, KS,
#                                               DATASETS, WORK_PARENT, RESULTS_FILE
#                                               pass through)
#
# CARRY_DIR/build is a build tree as scaling.sh reads it: bin/ctr, bin/ctr-squashfs,
# bench/workloads/ctr-wl-smallfiles, libexec/ctr/squashfuse_ll (where ctr looks first) and
# bin/mksquashfs, each with the shared libraries it needs but glibc's in a lib/ beside it, and
# bin/fusermount3 (installed setuid where the node has none: squashfuse_ll by hand needs it).
# CARRY_DIR/prefix is the build installed (with its setuid helper) for the kernel path:
# run.sh puts it at the prefix the build was configured with (the helper's paths are
# compiled in), makes the helper setuid root and allows it for the benchmark user's images.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib/carry.sh"
[ $# = 2 ] || { echo "usage: pack.sh BUILD_DIR CARRY_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
for p in patchelf squashfuse_ll mksquashfs fusermount3; do
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
cp "$(command -v fusermount3)" "$out/bin/"  # squashfuse_ll by hand mounts through it
cmake --install "$build" --prefix "$carry/prefix" >/dev/null
rm -rf "$carry/prefix/share/doc" "$carry/prefix/libexec/ctr/bench"
[ ! -x "$carry/prefix/libexec/ctr/ctr-squashfs" ] || copy_with_libs "$carry/prefix/libexec/ctr/ctr-squashfs" "$carry/prefix/libexec/ctr"
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
echo "$configured" > "$carry/prefix.path"
cp "$here/scaling.sh" "$carry/"
cat > "$carry/run.sh" <<'RUN'
#!/bin/bash
# On the node, as root: scaling.sh over the carried build (squashfuse_ll by hand from it too).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH=$here/build/bin:$PATH SQUASHFUSE=$here/build/libexec/ctr/squashfuse_ll
[ -x /usr/bin/fusermount3 ] || install -m 4755 "$here/build/bin/fusermount3" /usr/bin/fusermount3
prefix=$(cat "$here/prefix.path")
suid=()
if [ -x "$here/prefix/libexec/ctr/ctr-mount-helper" ] && [ ! -e "$prefix" ]; then
  cp -a "$here/prefix" "$prefix"
  chown -R root:root "$prefix"
  chmod 4755 "$prefix/libexec/ctr/ctr-mount-helper"
  printf 'allow setuid = yes\nsetuid image owners = root, self\nimage linger = 0\n' > "$prefix/etc/ctr/ctr.conf"
  suid=("$prefix/bin/ctr")
fi
exec bash "$here/scaling.sh" "$here/build" "${suid[@]}"
RUN
du -sh "$carry"
