#!/bin/bash
# How reads from one image scale with concurrent readers (issue 27: measure first).
#
#   sudo bench/io/scaling.sh BUILD_DIR [CTR_SUID]
#
# One squashfs image (mksquashfs of a root with /data and the host's /usr bound in at run
# time), read through each path:
#   host        the same tree as a host directory (the reference)
#   squashfuse  squashfuse_ll mounted by hand by the benchmark user (one thread)
#   ctr-squashfuse  ctr exec IMAGE with 'squashfs server = squashfuse': ctr's unprivileged
#               path served by squashfuse_ll (what ctr ran before ctr-squashfs)
#   ctr         ctr exec IMAGE: ctr's unprivileged path, served by ctr-squashfs (multithreaded)
#   kernel      ctr exec through the setuid helper: CTR_SUID, a ctr installed with it whose
#               ctr.conf says 'allow setuid = yes' and 'setuid image owners = self'
#               (left out without CTR_SUID)
# Two datasets (ctr-wl-smallfiles --prepare): small, SMALL_COUNT files of SMALL_SIZE
# (default 4000 x 16 KiB), and large, LARGE_COUNT x LARGE_SIZE (default 8 x 32 MiB).
# Readers k = 1, 2, 4 ... nproc, as threads of one process (--threads k) and as k processes
# (--shard i/k; for ctr and kernel k launches, as k ranks), all released at one instant
# (--start-at) after their launch and listing, so that a figure is the reads alone: files/s
# and MB/s = everything read / (last reader's end - start). Cache: cold (page cache dropped;
# for squashfuse, ctr and kernel also a fresh mount) and warm (one untimed read first, the
# mount kept). ROUNDS (default 3) rounds; the median, and its ratio to k = 1 of its row.
# KS (default "1 2 4 ... nproc") the reader counts; RESULTS_FILE keeps every sample there as it
# is taken (a run cut short still leaves them).
# SQUASHFUSE names the squashfuse_ll of the by-hand path (default: the one on PATH).
# PATHS (default: all) picks paths, e.g. PATHS="squashfuse ctr"; DATASETS (default "small
# large") picks datasets. WORK_PARENT (default /tmp) is where the images and the host trees
# are made: /dev/shm keeps the image file in memory through "cold", so that cold measures
# each path's own work (a fresh mount, its page cache dropped) without the disk. The FUSE servers' peak
# resident memory (VmHWM) is read at the end of each warm case of ctr and ctr-squashfuse.
# Root is needed to drop the page cache; readers run as BENCH_USER (default ctrbench).
set -euo pipefail
build=$(cd "${1:?usage: scaling.sh BUILD_DIR [CTR_SUID]}" && pwd)
ctr_suid=${2:+$(realpath "$2")}
ctr=$build/bin/ctr
wl=$build/bench/workloads/ctr-wl-smallfiles
user=${BENCH_USER:-ctrbench}
rounds=${ROUNDS:-3}
[ "$(id -u)" = 0 ] || { echo "scaling.sh: run as root (it drops the page cache)" >&2; exit 1; }
[ -x "$wl" ] || { echo "scaling.sh: $wl is missing (build the bench targets)" >&2; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
[ -c /dev/fuse ] && chmod 666 /dev/fuse
d=$build; while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
cd /tmp  # the launches' working directory (bound by ctr) exists in the image

work=$(mktemp -d "${WORK_PARENT:-/tmp}/ctr-scaling.XXXXXX")
chmod 755 "$work"
holders=()
# The holding launches run `sleep` as the user (ctr replaced itself with it): ending that
# sleep ends the launch, and with 'image linger = 0' the mount goes with it.
release_holders() {
  [ "${#holders[@]}" = 0 ] && return
  pkill -u "$user" -x sleep 2>/dev/null || true
  for p in "${holders[@]}"; do wait "$p" 2>/dev/null || true; done
  holders=()
}
cleanup() {
  release_holders
  fusermount3 -u -q "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
printf 'image linger = 0\n' > "$work/ctr.conf"
printf 'image linger = 0\nsquashfs server = squashfuse\n' > "$work/ctr-squashfuse.conf"
if [ -n "${KS:-}" ]; then
  read -r -a ks <<< "$KS"
else
  ks=(1); k=2; while [ "$k" -le "$(nproc)" ]; do ks+=("$k"); k=$((k * 2)); done
fi

as_user() { runuser -u "$user" -- env PATH=/usr/bin:/bin "$@"; }
# ctr's unprivileged path with 'image linger = 0' (a cold launch mounts afresh); the kernel
# path keeps CTR_SUID's own ctr.conf (the helper reads only that one).
ctr_cmd() {
  case $1 in
    kernel) echo "$ctr_suid" ;;
    ctr-squashfuse) echo "env CTR_CONFIG=$work/ctr-squashfuse.conf $ctr" ;;
    *) echo "env CTR_CONFIG=$work/ctr.conf $ctr" ;;
  esac
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# The image: /data plus merged-/usr links (the host's /usr is bound in), one per dataset.
make_image() {  # NAME COUNT SIZE
  local root=$work/$1-root
  # Every mount target of the launches is in the image (as in a real image; `ctr exec --explain`
  # lists them), so ctr lays no overlay over it to create one: the figure is
  # ctr's read path, not an overlayfs on top of it.
  mkdir -p "$root/usr" "$root/etc" "$root/tmp" "$root/var/tmp" "$root/proc" "$root/sys" "$root/dev" \
    "$root/home/$user" "$root$(dirname "$wl")"
  for f in hosts resolv.conf localtime passwd group; do : > "$root/etc/$f"; done
  for l in bin sbin lib lib64; do ln -s "usr/$l" "$root/$l"; done
  "$wl" --prepare "$root/data" --count "$2" --size "$3" 2>/dev/null
  mksquashfs "$root" "$work/$1.sqfs" -quiet -no-progress >/dev/null
  chown "$user" "$work/$1.sqfs"
  mv "$root/data" "$work/$1-host"
  rm -rf "$root"
  chmod -R a+rX "$work/$1-host"
}

# reader PATH IMAGE DIR THREADS SHARD SHARDS START: one reader (ctr_cmd's words split on
# purpose).
# shellcheck disable=SC2046
reader() {
  local path=$1 image=$2 args=(--read "$3" --epochs 1 --threads "$4" --shard "$5/$6" --start-at "$7")
  case $path in
    host | squashfuse) as_user "$wl" "${args[@]}" ;;
    ctr | ctr-squashfuse | kernel) as_user $(ctr_cmd "$path") exec --bind /usr:/usr:ro --bind "$(dirname "$wl")" "$image" "$wl" "${args[@]}" ;;
  esac
}

# sample DATASET PATH MODE K CACHE: prints "files_per_s MBps".
sample() {
  local set=$1 path=$2 mode=$3 k=$4 cache=$5 dir image=$work/$1.sqfs start i out readers=()
  case $path in
    host) dir=$work/$set-host ;;
    squashfuse) mkdir -p "$work/mnt"; chown "$user" "$work/mnt"; as_user "${SQUASHFUSE:-squashfuse_ll}" "$image" "$work/mnt"; dir=$work/mnt/data ;;
    *) dir=/data ;;
  esac
  if [ "$cache" = warm ]; then
    case $path in
      ctr | ctr-squashfuse | kernel)
        # shellcheck disable=SC2046
        as_user $(ctr_cmd "$path") exec --bind /usr:/usr:ro "$image" sleep 100000 & holders+=($!)
        sleep 1
        kill -0 "${holders[-1]}" 2>/dev/null || { echo "scaling.sh: the launch that holds $image did not start" >&2; exit 1; } ;;
    esac
    reader "$path" "$image" "$dir" 1 0 1 0 >/dev/null 2>&1
  else
    drop_caches
  fi
  start=$(python3 -c 'import time; print(f"{time.time() + 1.5:.6f}")')
  out=$work/out.$$
  rm -f "$out".*
  if [ "$mode" = threads ]; then
    reader "$path" "$image" "$dir" "$k" 0 1 "$start" >"$out.0" 2>"$out.err0" & readers+=($!)
  else
    for ((i = 0; i < k; i++)); do
      reader "$path" "$image" "$dir" 1 "$i" "$k" "$start" >"$out.$i" 2>"$out.err$i" & readers+=($!)
    done
  fi
  for p in "${readers[@]}"; do wait "$p" || { echo "scaling.sh: a reader failed ($set $path $mode $k $cache): $(cat "$out".err*)" >&2; exit 1; }; done
  rm -f "$out".err*
  if [ "$cache" = warm ] && [ "$path" != host ] && [ "$path" != kernel ]; then
    local server pid
    server=$([ "$path" = ctr ] && echo ctr-squashfs || echo squashfuse_ll)
    for pid in $(pgrep -u "$user" -x "$server"); do
      echo "$path $mode $k $(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")" >> "$work/server-rss"
    done
  fi
  release_holders
  [ "$path" = squashfuse ] && fusermount3 -u "$work/mnt"
  python3 - "$start" "$out".* <<'PY'
import json, sys
start, files, total, end = float(sys.argv[1]), 0, 0, 0.0
for name in sys.argv[2:]:
    info = json.loads(open(name).read().strip().splitlines()[-1])["info"]
    files += info["files"]; total += info["bytes_per_epoch"]; end = max(end, info["epoch1_end_realtime"])
print(f"{files / (end - start):.1f} {total / (end - start) / 1e6:.1f}")
PY
}

read -r -a datasets <<< "${DATASETS:-small large}"
for set in "${datasets[@]}"; do
  case $set in
    small) make_image small "${SMALL_COUNT:-4000}" "${SMALL_SIZE:-16384}" ;;
    large) make_image large "${LARGE_COUNT:-8}" "${LARGE_SIZE:-33554432}" ;;
    *) echo "scaling.sh: unknown dataset '$set' in DATASETS (small, large)" >&2; exit 1 ;;
  esac
done
if [ -n "${PATHS:-}" ]; then
  read -r -a paths <<< "$PATHS"
else
  paths=(host squashfuse ctr-squashfuse ctr); [ -n "$ctr_suid" ] && paths+=(kernel)
fi
[ -n "$ctr_suid" ] || [[ " ${paths[*]} " != *" kernel "* ]] || { echo "scaling.sh: the kernel path needs CTR_SUID" >&2; exit 1; }
echo "$(nproc) CPUs, $(uname -r); small: ${SMALL_COUNT:-4000} x ${SMALL_SIZE:-16384} B, large: ${LARGE_COUNT:-8} x ${LARGE_SIZE:-33554432} B; $rounds rounds; k = ${ks[*]}"
results=${RESULTS_FILE:-$work/results.tsv}
: > "$results"
for round in $(seq "$rounds"); do
  # Every case once per round, in a random order (drift spreads over all of them).
  cases=()
  for set in "${datasets[@]}"; do for path in "${paths[@]}"; do for cache in cold warm; do
    for k in "${ks[@]}"; do
      cases+=("$set $path threads $k $cache")
      [ "$k" = 1 ] || cases+=("$set $path processes $k $cache")
    done
  done; done; done
  while read -r c; do
    # shellcheck disable=SC2086
    printf '%s %s\n' "$c" "$(sample $c)" >> "$results"
  done < <(printf '%s\n' "${cases[@]}" | shuf)
  echo "round $round/$rounds done"
done
python3 - "$results" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    s, path, mode, k, cache, fps, mbps = line.split()
    rows[(s, path, cache, mode, int(k))].append((float(fps), float(mbps)))
med = {key: (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)) for key, vals in rows.items()}
print(f"{'dataset':7} {'path':14} {'cache':5} {'readers':14} {'files/s':>10} {'MB/s':>8} {'x k=1':>6}")
order = ["host", "squashfuse", "ctr-squashfuse", "ctr", "kernel"]
for key in sorted(med, key=lambda k: (k[0], order.index(k[1]), k[2], k[4], k[3])):
    s, path, cache, mode, k = key
    one = med.get((s, path, cache, "threads", 1))
    ratio = med[key][1] / one[1] if one and one[1] else float("nan")
    who = "1" if k == 1 else f"{k} {mode}"
    print(f"{s:7} {path:14} {cache:5} {who:14} {med[key][0]:10.0f} {med[key][1]:8.1f} {ratio:6.2f}")
PY
if [ -s "$work/server-rss" ]; then
  echo "FUSE server peak RSS (VmHWM, MiB), largest per path and readers:"
  sort -k1,1 -k3,3n -k4,4n "$work/server-rss" | awk '{key=$1" "$3" "$2; if ($4 > max[key]) max[key]=$4} END {for (k in max) printf "  %-28s %6.1f\n", k, max[k]/1024}' | sort
fi
