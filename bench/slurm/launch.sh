#!/bin/bash
# What a container costs a Slurm step (issue 26): the wall time of a step `srun -N2 -nN CMD`
# in one allocation (salloc -N2 -nN: steps, not jobs, so no queueing is timed) on the
# suite's real two-node cluster (tests/integration/slurm/cluster.sh: slurmctld and two
# slurmd in network namespaces of this machine), for N in SIZES, interleaved in blocks by
# launch-timer:
#   bare     srun -N2 -nN /bin/true
#   plugin   srun -N2 -nN --container-image=demo.sif /bin/true   (ctr_spank.so: one
#            container per node and step, the tasks join it; writable, pyxis's default)
#   readonly the same with --container-readonly (no writable layer)
#   named    the same with --container-name=bench: after the first step, a step in a named
#            container that is already up
#   exec     srun -N2 -nN ctr exec demo.sif /bin/true             (no plugin: each task a ctr)
# Prints launch-timer's table (median, min, ratio to bare) and what each adds to bare,
# per block; and the image mounts on the nodes during a plugin step (one per node).
# As root (it starts the daemons); the jobs run as user ctrbench.
#
#   bench/slurm/launch.sh BUILD_DIR        (SIZES="2 8 32" BLOCKS=6 REPS=4 by default)
set -euo pipefail
build=$(cd "${1:?usage: launch.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
BLOCKS=${BLOCKS:-6} REPS=${REPS:-4} SIZES=${SIZES:-2 8 32}
[ "$(id -u)" = 0 ] || { echo "launch.sh: run as root (it starts slurmctld and slurmd)" >&2; exit 1; }
[ -f "$build/lib/ctr_spank.so" ] || { echo "launch.sh: $build/lib/ctr_spank.so was not built (libslurm-dev)" >&2; exit 1; }
id ctrbench >/dev/null 2>&1 || useradd -m ctrbench
d=$build; while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
[ -c /dev/fuse ] && chmod 666 /dev/fuse
work=$(mktemp -d /tmp/ctr-slurm-bench.XXXXXX)
cluster=$work/cluster
cleanup() { bash "$src/tests/integration/slurm/cluster.sh" down "$cluster" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
chmod 755 "$work"
bash "$src/tests/integration/slurm/cluster.sh" up "$cluster" "$build/lib/ctr_spank.so" "$build/bin/ctr"
[ ! -e "$cluster/skip" ] || { echo "launch.sh: no cluster: $(cat "$cluster/skip")" >&2; exit 1; }
sh "$src/images/demo/make-rootfs.sh" "$work/rootfs" >/dev/null
"$build/bin/ctr" build "$work/demo.sif" "$work/rootfs" >/dev/null
chmod -R a+rX "$work"
mkdir -m 777 "$work/out"
echo "$(nproc) CPUs, $(uname -r), $(srun --version 2>/dev/null || echo slurm); $BLOCKS blocks of $REPS runs per case"
srun=$(command -v srun)
as_user() {
  bash "$src/tests/integration/slurm/cluster.sh" client "$cluster" runuser -u ctrbench -- \
    env -i HOME=/home/ctrbench PATH=/usr/bin:/bin SLURM_CONF="$cluster/etc/slurm.conf" "$@"
}
for n in $SIZES; do
  echo
  echo "== srun -N2 -n$n (tasks beyond the 4 CPUs overcommitted)"
  step="$srun --overlap -O -N2 -n$n"
  as_user salloc -Q -O -N2 -n"$n" sh -c "cd '$work/out' && '$build/bin/launch-timer' -b '$BLOCKS' -r '$REPS' -c 1 \
    -j '$work/out/n$n.json' \
    'bare=$step /bin/true' \
    'plugin=$step --container-image=$work/demo.sif /bin/true' \
    'readonly=$step --container-image=$work/demo.sif --container-readonly /bin/true' \
    'named=$step --container-image=$work/demo.sif --container-name=bench /bin/true' \
    'exec=$step $build/bin/ctr exec $work/demo.sif /bin/true'"
  for b in plugin readonly named exec; do
    read -r ma mb m lo hi < <(/usr/bin/python3 "$src/bench/startup/added_ms.py" "$work/out/n$n.json" "$BLOCKS" "$REPS" bare "$b")
    echo "-n$n: $b adds $m ms to a bare step of $ma ms (median $mb ms; per-block differences from $lo to $hi ms)"
  done
done
echo
echo "== image mounts during a plugin step of 8 tasks on 2 nodes (image servers of ctrbench, by node)"
rm -f "$work"/out/up.*
as_user salloc -Q -O -N2 -n8 "$srun" --overlap -N2 -n8 --container-image="$work/demo.sif" \
  sh -c "touch $work/out/up.\$SLURM_PROCID; sleep 3" &
for _ in $(seq 200); do [ "$(ls "$work"/out/up.* 2>/dev/null | wc -l)" = 8 ] && break; sleep 0.1; done
for node in n1 n2; do
  servers=0
  for p in $(pgrep -u ctrbench -f "squashfuse|ctr-squashfs" || true); do
    grep -q ":freezer:/slurm_$node/" "/proc/$p/cgroup" 2>/dev/null && servers=$((servers + 1))
  done
  echo "$node: $servers"
done
echo "(all: $(pgrep -u ctrbench -c -f "squashfuse|ctr-squashfs" || true); by node only under proctrack/cgroup, where each node's are in its job cgroup)"
wait
