#!/bin/bash
# Start-up benchmark: ctr against unshare, Charliecloud and bubblewrap, in one run.
#
#   bench/startup/run.sh [BUILD_DIR]        (default: build/release)
#
# Environment: BLOCKS (default 10), REPS (default 5), CONC (default 64), OUT (result dir,
# default $BUILD_DIR/bench-startup), BENCH_USER (user to run as when started as root,
# default ctrbench, created if missing), CTR_SUID (a ctr installed with the setuid helper,
# optional: adds kernel-squashfs cases).
# Output: two tables (single launches; CONC concurrent launches) and single.json /
# concurrent.json in OUT. Format: docs/benchmark-guide.md.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
ctr=${CTR_BIN:-$build/bin/ctr}
timer=$build/bin/launch-timer
out=${OUT:-$build/bench-startup}
[ -x "$ctr" ] && [ -x "$timer" ] || { echo "run.sh: build ctr and launch-timer first (cmake --build $build)" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then
  # Containers are an ordinary user's business: measure as one.
  user=${BENCH_USER:-ctrbench}
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  mkdir -p "$out" && chown "$user" "$out"
  d=$build; while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  exec runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" USER="$user" \
    PATH=/usr/bin:/bin BLOCKS="${BLOCKS:-}" REPS="${REPS:-}" CONC="${CONC:-}" OUT="$out" \
    CTR_SUID="${CTR_SUID:-}" CTR_BIN="$ctr" bash "$0" "$build"
fi

blocks=${BLOCKS:-10}; reps=${REPS:-5}; conc=${CONC:-64}
mkdir -p "$out"
work=$(mktemp -d /tmp/ctr-bench.XXXXXX)
holders=()
cleanup() {
  for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

echo "== preparing images in $work"
sh "$src/images/demo/make-rootfs.sh" rootfs >/dev/null
# The demo image in Apptainer's layout: its /.singularity.d/env scripts make every launch
# source them through the image's /bin/sh (as Apptainer does), a cost the other runtimes
# never pay. The cross-runtime cases use the same tree without that layout.
"$ctr" -q build apptainer-layout.sif rootfs
rm -rf rootfs/.singularity.d rootfs/singularity
mksquashfs rootfs demo.sqfs -quiet -noappend -comp gzip >/dev/null
"$ctr" -q build demo.sif rootfs
cp demo.sif cold.sif    # never held open: every launch mounts it afresh

# Warm = an image already mounted on this node by another rank: keep one holder alive.
for img in demo.sif demo.sqfs apptainer-layout.sif; do
  "$ctr" exec "$img" sleep 100000 & holders+=($!)
done
sleep 1

cases=(
  "unshare-Urm=/usr/bin/unshare -Urm /bin/true"
  "true=/bin/true"
  "ctr-sif-warm=$ctr exec demo.sif /bin/true"
  "ctr-squashfs-warm=$ctr exec demo.sqfs /bin/true"
  "ctr-dir=$ctr exec rootfs /bin/true"
  "ctr-sif-cold=$ctr exec cold.sif /bin/true"
  "ctr-sif-warm-envscripts=$ctr exec apptainer-layout.sif /bin/true"
  "ch-run-dir=/usr/bin/ch-run $work/rootfs -- /bin/true"
  "ch-run-squashfs=/usr/bin/ch-run $work/demo.sqfs -- /bin/true"
  "bwrap-dir=/usr/bin/bwrap --unshare-user --ro-bind $work/rootfs / --proc /proc --dev /dev /bin/true"
)
concurrent=(
  "unshare-Urm=/usr/bin/unshare -Urm /bin/true"
  "ctr-sif-warm=$ctr exec demo.sif /bin/true"
  "ctr-sif-cold=$ctr exec cold.sif /bin/true"
  "ctr-dir=$ctr exec rootfs /bin/true"
  "ch-run-squashfs=/usr/bin/ch-run $work/demo.sqfs -- /bin/true"
  "bwrap-dir=/usr/bin/bwrap --unshare-user --ro-bind $work/rootfs / --proc /proc --dev /dev /bin/true"
)
if [ -n "${CTR_SUID:-}" ]; then
  cp demo.sif kernel.sif
  "$CTR_SUID" exec kernel.sif sleep 100000 & holders+=($!)
  cp demo.sif kernel-cold.sif
  cases+=("ctr-kernel-warm=$CTR_SUID exec kernel.sif /bin/true" "ctr-kernel-cold=$CTR_SUID exec kernel-cold.sif /bin/true")
  concurrent+=("ctr-kernel-warm=$CTR_SUID exec kernel.sif /bin/true")
  sleep 1
fi

echo "== host: $(uname -r), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "== single launches: $blocks blocks x $reps launches per case, randomized order per block"
"$timer" -b "$blocks" -r "$reps" -c 1 -j "$out/single.json" "${cases[@]}"
echo
echo "== $conc concurrent launches: $blocks blocks x 1 sample per case (wall time until the last exits)"
"$timer" -b "$blocks" -r 1 -c "$conc" -j "$out/concurrent.json" "${concurrent[@]}"
echo
echo "results: $out/single.json $out/concurrent.json"
