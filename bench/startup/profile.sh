#!/bin/bash
# Where a launch's time goes (issue 56, item 1), case by case, in one run: for each case of
# bench/startup/run.sh that the issue names, and the references, the kernel's accounting of
# N launches (perf stat: task-clock, page faults, context switches; every process of the
# launch counted), the system calls of one launch (strace -f -c: calls and the five most
# frequent), and for ctr its own step times (`ctr -d`, the median of N runs per step).
#
#   bench/startup/profile.sh [BUILD_DIR]        (default: build/release; as root it measures
#                                               as user BENCH_USER, default ctrbench)
#
# Environment: RUNS (default 40). Needs perf and strace (Debian: linux-perf, strace);
# ch-run and bwrap cases are left out where those are not installed. With
# kernel.perf_event_paranoid = 2 (Debian's default) an ordinary user's perf counts user-mode
# events only (task-clock:u, page-faults:u): compare the cases with each other, not with
# figures taken as root. Wall: the median of single runs timed from this script (bash's fork
# and exec included, the same for every case).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
ctr=${CTR_BIN:-$build/bin/ctr}
[ -x "$ctr" ] || { echo "profile.sh: build ctr first" >&2; exit 1; }
command -v perf >/dev/null && command -v strace >/dev/null || { echo "profile.sh: needs perf and strace" >&2; exit 1; }
. "$src/bench/startup/lib.sh"
as_bench_user "$build" RUNS
runs=${RUNS:-40}
. "$src/bench/startup/work-dir.sh"
work_dir ctr-bench-profile

sh "$src/images/demo/make-rootfs.sh" rootfs >/dev/null
cp -a rootfs rootfs-held
"$ctr" -q build demo.sif rootfs
# Held: another launch keeps the image mounted (the SIF), or its holder alive (a directory:
# what a directory image would cost if its holder lingered as a SIF's does).
"$ctr" exec demo.sif sleep 100000 & holders+=($!)
"$ctr" exec rootfs-held sleep 100000 & holders+=($!)
sleep 1

cases=(
  "unshare-Urm|/usr/bin/unshare -Urm /bin/true"
  "ctr-sif-held|$ctr exec demo.sif /bin/true"
  "ctr-dir|$ctr exec rootfs /bin/true"
  "ctr-dir-held|$ctr exec rootfs-held /bin/true"
)
floor=$(join_floor_case "$build" demo.sif)
[ -n "$floor" ] && cases+=("join-floor|$floor")
command -v ch-run >/dev/null && cases+=("ch-run-dir|$(command -v ch-run) $work/rootfs -- /bin/true")
command -v bwrap >/dev/null &&
  cases+=("bwrap-dir|$(command -v bwrap) --unshare-user --ro-bind $work/rootfs / --proc /proc --dev /dev /bin/true")

echo "== host: $(uname -r), $(nproc) cores; $runs launches per case; ctr $(stat -c %s "$ctr") bytes"
printf '%-14s %10s %10s %8s %8s %9s  %s\n' case "wall ms" "task ms" faults "ctx sw" syscalls "most frequent system calls (count)"
for entry in "${cases[@]}"; do
  name=${entry%%|*}
  read -r -a cmd <<<"${entry#*|}"
  perf stat -x, -r "$runs" -e task-clock,page-faults,context-switches -o perf.csv -- "${cmd[@]}" >/dev/null 2>&1
  task=$(awk -F, '$3 ~ /^task-clock/ { printf "%.2f", $1 }' perf.csv)  # perf stat -r: the mean per launch
  faults=$(awk -F, '$3 ~ /^page-faults/ { printf "%d", $1 }' perf.csv)
  ctx=$(awk -F, '$3 ~ /^context-switches/ { printf "%d", $1 }' perf.csv)
  # Wall: the median of single timed runs (perf stat's own is a mean).
  wall=$(for _ in $(seq "$runs"); do
    s=$(date +%s%N); "${cmd[@]}" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000 ))
  done | sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] / 1000 }')
  strace -f -c -o strace.txt -- "${cmd[@]}" >/dev/null 2>&1 || true
  # strace -c: "% time, seconds, usecs/call, calls, [errors,] syscall"
  calls=$(awk '$NF == "total" { print $4 }' strace.txt)
  top=$(awk 'NR > 2 && $1 !~ /^-/ && $NF != "total" { print $4, $NF }' strace.txt |
        sort -rn | head -5 | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }')
  printf '%-14s %10s %10s %8s %8s %9s  %s\n' "$name" "$wall" "$task" "$faults" "$ctx" "$calls" "$top"
done

echo
echo "== ctr's own steps (ctr -d), median of $runs launches, ms"
step_medians ctr-sif-held "$runs" demo.sif /bin/true
step_medians ctr-dir "$runs" rootfs /bin/true
step_medians ctr-dir-held "$runs" rootfs-held /bin/true
