#!/bin/bash
# The functions a launch runs, for the linker to place side by side in ctr
# (src/cli/launch-text.ld, CMake option CTR_LAUNCH_TEXT; docs/benchmark-guide.md, "The launch
# path's code in one place"). It samples launches of BUILD_DIR's ctr under perf, as an
# ordinary user: a held SIF, a held image in Apptainer's layout, a held SIF with --nv (on
# nv-overhead.sh's driver fixture) and one with --contain (kept plans), then the same SIF and
# a directory image planned on every launch (CTR_LAUNCH_MEMO=off). It writes a
# linker script fragment: the held launch's functions first, most sampled first, then those
# only planning ran.
#
#   bench/startup/launch-text.sh [BUILD_DIR]        (default: build/release; as root it samples
#                                                   as user BENCH_USER, default ctrbench)
#
# Environment: RUNS (launches of each held case, default 1000; half that with --nv or
# --contain, a quarter for each planned case), OUT (default BUILD_DIR/launch-text.ld).
# Needs perf (Debian: linux-perf) and a ctr with its symbols (not stripped). Then copy OUT
# to src/cli/launch-text.ld, rebuild, and compare: bench/startup/run.sh with BEFORE= the
# old build's ctr, and the faults column of bench/startup/profile.sh. A function not
# sampled still runs, from wherever the linker put it.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
ctr=${CTR_BIN:-$build/bin/ctr}
OUT=${OUT:-$build/launch-text.ld}
[ -x "$ctr" ] || { echo "launch-text.sh: build ctr first" >&2; exit 1; }
command -v perf >/dev/null || { echo "launch-text.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }
[ "$(nm "$ctr" 2>/dev/null | grep -c ' main$')" != 0 ] || { echo "launch-text.sh: $ctr has no symbol table (stripped)" >&2; exit 1; }
. "$src/bench/startup/lib.sh"
if [ "$(id -u)" = 0 ]; then
  user=${BENCH_USER:-ctrbench}
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
  touch "$OUT" && chown "$user" "$OUT"
fi
as_bench_user "$build" RUNS OUT
runs=${RUNS:-1000}
. "$src/bench/startup/work-dir.sh"
work_dir ctr-launch-text

sh "$src/images/demo/make-rootfs.sh" rootfs >/dev/null
"$ctr" -q build demo.sif rootfs
mkdir -p rootfs/.singularity.d/env
printf '#!/bin/sh\nexport CTR_DEMO=1\n' > rootfs/.singularity.d/env/90-environment.sh
"$ctr" -q build appt.sif rootfs
cp demo.sif nv.sif; cp demo.sif contain.sif
# A GPU rank's launch (--nv) on the NVIDIA driver fixture nv-overhead.sh uses.
nv_fixture "$work" >/dev/null
nv=("CTR_CONFIG=$work/ctr.conf" "CTR_HOST_ROOT=$work/node")
"$ctr" exec demo.sif sleep 100000 & holders+=($!)
"$ctr" exec appt.sif sleep 100000 & holders+=($!)
env "${nv[@]}" "$ctr" exec --nv nv.sif sleep 100000 & holders+=($!)
"$ctr" exec --contain contain.sif sleep 100000 & holders+=($!)
sleep 1

# sample NAME LAUNCHES [VAR=VALUE]... CTR-ARGS...: perf samples (user mode: any
# perf_event_paranoid up to 2 allows them) of LAUNCHES launches, in NAME.data.
sample() {
  local name=$1 n=$2 env=()
  shift 2
  while [[ $1 == *=* ]]; do env+=("$1"); shift; done
  env "${env[@]}" "$ctr" "$@" >/dev/null  # fails here, with its message, if the case cannot run
  perf record -q -F 25000 -e cpu-clock:u -o "$name.data" -- \
    env "${env[@]}" bash -c 'for i in $(seq "$0"); do "$@" >/dev/null; done' "$n" "$ctr" "$@"
}
# symbols NAME...: ctr's functions in the samples of NAME.data..., most sampled first.
symbols() {
  local comm dso
  dso=$(basename "$ctr"); comm=${dso:0:15}
  for name in "$@"; do
    perf report -i "$name.data" --no-demangle --comm "$comm" --dso "$dso" --sort sym --stdio -n 2>/dev/null |
      awk '$3 == "[.]" { print $2, $4 }'
  done | awk '{ n[$2] += $1 } END { for (s in n) print n[s], s }' | sort -k1,1nr -k2 | awk '{ print $2 }'
}

sample held-sif "$runs" exec demo.sif /bin/true
sample held-appt "$runs" exec appt.sif /bin/true
sample held-nv "$((runs / 2))" "${nv[@]}" exec --nv nv.sif /bin/true
sample held-contain "$((runs / 2))" exec --contain contain.sif /bin/true
sample planned-sif "$((runs / 4))" CTR_LAUNCH_MEMO=off exec demo.sif /bin/true
sample planned-dir "$((runs / 4))" CTR_LAUNCH_MEMO=off exec rootfs /bin/true
symbols held-sif held-appt held-nv held-contain > held.txt
symbols planned-sif planned-dir | grep -vxF -f held.txt > planned.txt || true

# Input section names (g++ -ffunction-sections): .text.NAME; main and the static
# initialisers in .text.startup.NAME; a complete-object constructor or destructor (C1, D1,
# D0) is an alias of the base-object one's section (C2, D2). PLT entries, the split-off
# cold parts (.text.unlikely) and the C run-time's own are not ctr's to place.
sections() {
  awk '
    /@|\.cold$|^(_init|_start|_fini|frame_dummy|register_tm_clones|deregister_tm_clones|__do_global_dtors_aux)$/ { next }
    { out[++n] = ".text." $0
      if ($0 == "main" || $0 ~ /^_GLOBAL__sub_I_/) out[++n] = ".text.startup." $0
      s = $0; if (sub(/C1E/, "C2E", s) || sub(/C1I/, "C2I", s) || sub(/D[01]E/, "D2E", s)) out[++n] = ".text." s }
    END { for (i = 1; i <= n; i++) if (!seen[out[i]]++) print "    *(" out[i] ")" }'
}
{
  echo "/* The functions a ctr launch runs, side by side before the rest of .text (CMake option"
  echo " * CTR_LAUNCH_TEXT): written by bench/startup/launch-text.sh from $(wc -l < held.txt) functions"
  echo " * sampled in held launches and $(wc -l < planned.txt) more in planned ones. Run that script"
  echo " * again when the launch path changes. Sampled with: $("$ctr" version | head -1 | sed 's/ (/\n *   (/')"
  echo " */"
  echo "SECTIONS {"
  echo "  .text.ctr_launch : {"
  cat held.txt planned.txt | sections
  echo "  }"
  echo "} INSERT BEFORE .text;"
} > "$OUT"
echo "launch-text.sh: $(wc -l < held.txt) functions of held launches and $(wc -l < planned.txt) of planned ones in $OUT"
