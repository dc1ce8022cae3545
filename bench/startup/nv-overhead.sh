#!/bin/bash
# What --nv adds to a warm launch (issue 8: <= 0.3 ms), and what the first, scanning launch
# costs. Runs on machines without a GPU: the NVIDIA driver is a fixture node under
# CTR_HOST_ROOT -- 60 real shared libraries of this machine listed in its own nvliblist, an
# ld.so cache of them made by ldconfig, 8 GPU device files, and a driver version file -- so
# the launch does exactly what it does on a GPU node: read the cached scan, bind 60
# libraries into /.singularity.d/libs and, with --contain, the device nodes.
#
#   bench/startup/nv-overhead.sh BUILD_DIR        (as root it measures as user ctrbench)
#
# Cases (held images: another launch keeps each one mounted, as for ranks 2..N of a job;
# a copy of the image per case, so that each case has a holder whose prepared root matches):
#   plain       ctr exec plain.sif /bin/true
#   nv          ctr exec --nv nv.sif /bin/true            (the GPU job's rank: the target)
#   contain     ctr exec --contain plainc.sif /bin/true
#   contain-nv  ctr exec --contain --nv nvc.sif /bin/true  (also binds the 8 device nodes)
# BEFORE=/path/to/bin/ctr (an earlier build) adds its plain and nv cases to the same blocks.
# DRIVER=host: this node's own NVIDIA driver instead of the fixture (on a GPU node; BUILD_DIR
# may then be a packed tree, bench/gpu/acceptance.sh pack's CARRY/ctr, whose launch-timer is
# in libexec/ctr/bench).
# Prints launch-timer's table (median, min, ratio to the first case with a 90% interval)
# and the difference of the medians; then the cold scan: the first --nv launch of a node
# (no scan cache) against a warm one.
set -euo pipefail
build=$(cd "${1:?usage: nv-overhead.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
ctr=$build/bin/ctr
timer=$build/bin/launch-timer
[ -x "$timer" ] || timer=$build/libexec/ctr/bench/launch-timer
BLOCKS=${BLOCKS:-20} REPS=${REPS:-10} DRIVER=${DRIVER:-fixture}
if [ "$(id -u)" = 0 ] && [ -z "${CTR_BENCH_AS_USER:-}" ]; then
  id ctrbench >/dev/null 2>&1 || useradd -m ctrbench
  d=$build; while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  exec runuser -u ctrbench -- env CTR_BENCH_AS_USER=1 BLOCKS="$BLOCKS" REPS="$REPS" BEFORE="${BEFORE:-}" DRIVER="$DRIVER" \
    PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/nvidia/bin "$0" "$build"
fi
. "$src/bench/startup/lib.sh"
work=$(mktemp -d /tmp/ctr-nv-bench.XXXXXX)
holders=()
cleanup() { for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

if [ "$DRIVER" = host ]; then
  # The library list installed beside ctr's own ctr.conf (a relative one would be read
  # beside this ctr.conf).
  list=$(dirname "$ctr")/../etc/ctr/nvliblist.conf
  [ -e "$list" ] || list=/etc/ctr/nvliblist.conf
  printf 'image linger = 5\nnvidia library list = %s\n' "$(realpath "$list")" > "$work/ctr.conf"
  export CTR_CONFIG=$work/ctr.conf
  n="the node's"
else
n=$(nv_fixture "$work")
export CTR_CONFIG=$work/ctr.conf CTR_HOST_ROOT=$work/node
fi

sh "$src/images/demo/make-rootfs.sh" "$work/rootfs" >/dev/null
"$ctr" build "$work/plain.sif" "$work/rootfs" >/dev/null
for copy in nv plainc nvc cold; do cp "$work/plain.sif" "$work/$copy.sif"; done
cd "$work"  # a current directory the default /tmp bind covers, as in a job's scratch
libs=$("$ctr" exec --contain --nv --explain "$work/nv.sif" /bin/true | grep -c 'singularity.d/libs/' || true)
devs=$("$ctr" exec --contain --nv --explain "$work/nv.sif" /bin/true | grep -c ' /dev/nvidia' || true)
echo "$DRIVER driver: $n libraries listed, $libs bound by --nv, $devs device binds with --contain; $(nproc) CPUs, $(uname -r)"

"$ctr" exec "$work/plain.sif" sleep 100000 & holders+=($!)
"$ctr" exec --nv "$work/nv.sif" sleep 100000 & holders+=($!)
"$ctr" exec --contain "$work/plainc.sif" sleep 100000 & holders+=($!)
"$ctr" exec --contain --nv "$work/nvc.sif" sleep 100000 & holders+=($!)
pairs=("plain nv" "contain contain-nv")
before=()
if [ -n "${BEFORE:-}" ]; then
  # An earlier ctr (BEFORE=/path/to/bin/ctr) in the same blocks: its plain and --nv held cases.
  cp "$work/plain.sif" "$work/before-plain.sif"; cp "$work/plain.sif" "$work/before-nv.sif"
  "$BEFORE" exec "$work/before-plain.sif" sleep 100000 & holders+=($!)
  "$BEFORE" exec --nv "$work/before-nv.sif" sleep 100000 & holders+=($!)
  before=("before-plain=$BEFORE exec $work/before-plain.sif /bin/true"
          "before-nv=$BEFORE exec --nv $work/before-nv.sif /bin/true")
  pairs+=("before-plain before-nv")
fi
sleep 1
"$timer" -b "$BLOCKS" -r "$REPS" -c 1 -j "$work/warm.json" \
  "plain=$ctr exec $work/plain.sif /bin/true" \
  "nv=$ctr exec --nv $work/nv.sif /bin/true" \
  "contain=$ctr exec --contain $work/plainc.sif /bin/true" \
  "contain-nv=$ctr exec --contain --nv $work/nvc.sif /bin/true" "${before[@]}"
for pair in "${pairs[@]}"; do
  read -r a b <<<"$pair"
  read -r _ _ m lo hi < <(/usr/bin/python3 "$src/bench/startup/added_ms.py" "$work/warm.json" "$BLOCKS" "$REPS" "$a" "$b")
  echo "--nv adds $m ms to a warm launch ($a -> $b; per-block differences from $lo to $hi ms)"
done

# Where --nv's time goes: ctr's own steps (ctr -d), the median of 20 launches each.
step_medians plain 20 "$work/plain.sif" /bin/true
step_medians nv 20 --nv "$work/nv.sif" /bin/true
echo "one --nv launch, its sub-steps:"
"$ctr" -d exec --nv "$work/nv.sif" /bin/true 2>&1 | grep -E "root:|debug: [a-z].*done in" |
  sed "s/^ctr\[[0-9]*\] [0-9:.]* debug: /  /"

# The cold scan: the first --nv launch with no scan cache in the state directory, against
# a warm --nv launch; each sample removes the cache first (both cases, so that the removal
# is not what differs). Both plan (CTR_LAUNCH_MEMO=off): a kept plan would skip the scan and
# its cache alike.
state=$("$ctr" exec --nv --explain "$work/cold.sif" /bin/true | awk '/^state dir:/ {print $3}')
cat > "$work/scan.sh" <<SH
#!/bin/sh
rm -f "$state"/nvidia-scan-*.json
CTR_LAUNCH_MEMO=off exec "$ctr" exec --nv "$work/nv.sif" /bin/true
SH
cat > "$work/noscan.sh" <<SH
#!/bin/sh
rm -f "$state"/nvidia-scan-none.json
CTR_LAUNCH_MEMO=off exec "$ctr" exec --nv "$work/nv.sif" /bin/true
SH
chmod +x "$work/scan.sh" "$work/noscan.sh"
"$work/noscan.sh"
"$timer" -b "$BLOCKS" -r 3 -c 1 "nv-cached=$work/noscan.sh" "nv-scanning=$work/scan.sh"
