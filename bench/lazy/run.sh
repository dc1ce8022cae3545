#!/bin/bash
# Lazy start against a full pull (issue 57, item 5; docs/benchmark-guide.md, "Lazy start").
#
# A node and a registry share one network namespace whose loopback is shaped to RATE (tc tbf,
# MTU 1500): the link a node has to the registry. The image is a real one: this machine's
# python3 with PyTorch (python3-torch and what it loads: /usr/lib/python3, python3.11 and the
# shared libraries of /usr/lib/x86_64-linux-gnu, about 3.6 GB of files, compressed) over
# the demo root, plus incompressible data the job never reads up to each SIZE. `ctr push`
# puts it in Debian's docker-registry with its chunk table. For each size, as an ordinary
# user, with the node's caches empty and the page cache dropped:
#   pull   ctr exec oras://REF JOB        (the whole SIF is fetched, then the job runs)
#   lazy   ctr exec --lazy oras://REF JOB (chunks fetched as the job reads them)
# JOB prints "started" (the first exec in the container), then imports torch and prints
# "imported". Figures: seconds from the launch to each line, the bytes the registry sent for
# the SIF (its access log) and their share of the image ('lazy prefetch = no': the bytes are
# what the job read; with the prefetch they would grow while the link is idle). Then warm: the lazy cache filled
# (every file read once), REPS launches of each, alternating, page cache dropped before each,
# time to "imported" and the ratio lazy/pulled per pair.
#
# Usage: bench/lazy/run.sh CTR_BIN [SIZES] [RATE] [REPS]   (as root: netns, tc, drop_caches)
#   SIZES comma list (default 1G,4G,10G), RATE a tc rate (default 1gbit), REPS (default 3).
#   Needs docker-registry, mksquashfs, python3-torch, iproute2. Disk: about 3 x the largest
#   SIZE under BENCH_DIR (default /var/tmp).
set -euo pipefail
CTR_BIN=$(realpath "${1:?usage: run.sh CTR_BIN [SIZES] [RATE] [REPS]}")
SIZES=${2:-1G,4G,10G}
RATE=${3:-1gbit}
REPS=${4:-3}
SOURCE_DIR=$(realpath "$(dirname "$0")/../..")
USER_NAME=${BENCH_USER:-ctrbench}
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (network namespace, tc, drop_caches)" >&2; exit 2; }
for tool in docker-registry mksquashfs ip tc; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "run.sh: python3-torch is missing" >&2; exit 2; }
id "$USER_NAME" >/dev/null 2>&1 || useradd -m -s /bin/sh "$USER_NAME"
[ -c /dev/fuse ] && chmod 666 /dev/fuse
d=$(dirname "$CTR_BIN"); while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
UID_N=$(id -u "$USER_NAME")
HOME_DIR=$(getent passwd "$USER_NAME" | cut -d: -f6)
NS=ctr-lazy-bench-$$
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ctr-bench-lazy.XXXXXX")
chmod 755 "$WORK"
registry_pid=
trap '[ -z "$registry_pid" ] || kill $registry_pid 2>/dev/null || true; wait 2>/dev/null || true
      ip netns del "$NS" 2>/dev/null || true; rm -rf "$WORK" "/var/tmp/ctr-lazy-$UID_N"' EXIT

ip netns add "$NS"
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo mtu 1500
in_ns ip link set lo up
in_ns tc qdisc add dev lo root tbf rate "$RATE" burst 256kb latency 100ms
port=5000
printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
  "$WORK/registry" "$port" > "$WORK/registry.yml"
in_ns docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 & registry_pid=$!
for _ in $(seq 50); do in_ns curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.1; done
printf 'image linger = 0\nlazy prefetch = no\n' > "$WORK/ctr.conf"; chmod 644 "$WORK/ctr.conf"

# The base: the demo root with python3 and PyTorch linked in from this machine (hard links:
# nothing copied), packed once; each size appends its padding to a copy of it.
# BENCH_BASE=FILE: the base packed by an earlier run (kept there when it names a missing file).
echo "packing python3 + torch ..."
base=$WORK/base
sh "$SOURCE_DIR/images/demo/make-rootfs.sh" "$base" >/dev/null
mkdir -p "$base/usr/bin" "$base/usr/lib" "$base/lib64"
cp -al /usr/lib/python3 /usr/lib/python3.11 /usr/lib/x86_64-linux-gnu "$base/usr/lib/"
cp -a /usr/bin/python3 /usr/bin/python3.11 "$base/usr/bin/"
cp -a /lib64/ld-linux-x86-64.so.2 "$base/lib64/" 2>/dev/null || true
mkdir -p "$base/lib" && ln -sfn ../usr/lib/x86_64-linux-gnu "$base/lib/x86_64-linux-gnu"
cp -al /usr/lib/*.so* "$base/lib/"  # libgloo and others torch loads, where ld.so.cache says: /lib
cp -a /etc/alternatives /etc/ld.so.cache "$base/etc/"  # libblas.so.3 and the like are alternatives
if [ -n "${BENCH_BASE:-}" ] && [ -f "$BENCH_BASE" ]; then
  cp "$BENCH_BASE" "$WORK/base.sqfs"
else
  mksquashfs "$base" "$WORK/base.sqfs" -quiet -no-progress -noappend -all-root -comp zstd >/dev/null
  [ -z "${BENCH_BASE:-}" ] || cp "$WORK/base.sqfs" "$BENCH_BASE"
fi
rm -rf "$base"
base_bytes=$(stat -c %s "$WORK/base.sqfs")
echo "base squashfs: $((base_bytes >> 20)) MiB"

as_user() {
  in_ns runuser -u "$USER_NAME" -- env -i HOME="$HOME_DIR" USER="$USER_NAME" PATH=/usr/bin:/bin \
    CTR_CONFIG="$WORK/ctr.conf" CTR_CACHE_DIR="$WORK/pull-cache" "$@"
}
JOB=(sh -c 'echo started; python3 -c "import torch; print(\"imported\", torch.__version__, flush=True)"')
# timed NAME ARGS...: runs ctr exec ARGS JOB; prints "SECONDS-TO-started SECONDS-TO-imported".
timed() {
  local name=$1 t0
  shift
  sync; echo 3 > /proc/sys/vm/drop_caches
  t0=$(date +%s%N)
  as_user "$CTR_BIN" exec "$@" "${JOB[@]}" 2>>"$WORK/$name.err" | while IFS= read -r line; do
    echo "$(( ($(date +%s%N) - t0) / 1000000 )) $line"
  done > "$WORK/$name.lines"
  grep -q imported "$WORK/$name.lines" || { echo "$name: the job did not import torch: $(cat "$WORK/$name.err")" >&2; exit 1; }
  awk '/ started/ {s=$1} / imported/ {i=$1} END {printf "%.2f %.2f\n", s/1000, i/1000}' "$WORK/$name.lines"
}
# sent DIGEST FROM-LINE: bytes the registry sent for the blob since that line of its log.
sent() { tail -n "+$2" "$WORK/registry.log" | awk -v d="$1" '$7 ~ d && ($9 == 200 || $9 == 206) {s += $10} END {printf "%d\n", s}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "link $RATE (tc tbf on the loopback of the namespace that holds the node and the registry)"
printf '%-6s %-9s | %-26s | %-32s | %s\n' size image "pull: started imported (s)" "lazy: started imported (s), sent" "warm lazy/pulled"
for size in ${SIZES//,/ }; do
  want=$(numfmt --from=iec "$size")
  cp "$WORK/base.sqfs" "$WORK/img.sqfs"
  pad=$(( want > base_bytes ? want - base_bytes : 0 ))
  if [ "$pad" -gt 0 ]; then
    mkdir -p "$WORK/pad/data"
    for i in 1 2 3 4; do
      # Another key for each: four copies of one stream would be stored once (mksquashfs
      # finds duplicate files).
      head -c $(( pad / 4 )) < <(openssl enc -aes-128-ctr -pass "pass:ctr-$size-$i" -nosalt -pbkdf2 < /dev/zero 2>/dev/null) \
        > "$WORK/pad/data/pad$i"
    done
    mksquashfs "$WORK/pad" "$WORK/img.sqfs" -quiet -no-progress -all-root -noD -noF >/dev/null  # appended
    rm -rf "$WORK/pad"
  fi
  # Wrapped as it is (ctr build would unpack and pack it again): a SIF whose primary system
  # partition is this squashfs.
  "$CTR_BIN" sif new "$WORK/img.sif" >/dev/null
  "$CTR_BIN" sif add --datatype 4 --parttype 2 --partfs 1 --partarch 2 "$WORK/img.sif" "$WORK/img.sqfs" >/dev/null
  rm -f "$WORK/img.sqfs"
  bytes=$(stat -c %s "$WORK/img.sif")
  digest=$(sha256sum "$WORK/img.sif" | cut -d' ' -f1)
  in_ns "$CTR_BIN" -q push "$WORK/img.sif" "oras://127.0.0.1:$port/bench/${size,,}:1"
  rm -f "$WORK/img.sif"
  ref=oras://127.0.0.1:$port/bench/${size,,}:1

  rm -rf "$WORK/pull-cache" "/var/tmp/ctr-lazy-$UID_N"
  install -d -o "$USER_NAME" -m 700 "$WORK/pull-cache"
  from=$(( $(wc -l < "$WORK/registry.log") + 1 ))
  read -r pull_started pull_imported < <(timed pull "$ref")
  pull_sent=$(sent "$digest" "$from")
  from=$(( $(wc -l < "$WORK/registry.log") + 1 ))
  read -r lazy_started lazy_imported < <(timed lazy --lazy "$ref")
  lazy_sent=$(sent "$digest" "$from")

  # Warm: the lazy cache filled (every file read once), then pairs.
  as_user "$CTR_BIN" exec --lazy "$ref" sh -c 'find / -xdev -type f -exec cat {} + > /dev/null' 2>/dev/null || true
  : > "$WORK/ratios"
  for _ in $(seq "$REPS"); do
    read -r _ p < <(timed warm-pull "$ref")
    read -r _ l < <(timed warm-lazy --lazy "$ref")
    echo "scale=3; $l / $p" | bc >> "$WORK/ratios"
  done
  printf '%-6s %-9s | %-26s | %-32s | %s\n' "$size" "$((bytes >> 20)) MiB" \
    "$pull_started $pull_imported (sent $((pull_sent >> 20)) MiB)" \
    "$lazy_started $lazy_imported, $((lazy_sent >> 20)) MiB ($(echo "scale=1; 100 * $lazy_sent / $bytes" | bc)%)" \
    "$(median < "$WORK/ratios") (pairs: $(tr '\n' ' ' < "$WORK/ratios"))"
  # The registry's copy goes too: the next size needs the room.
  rm -rf "$WORK/registry/docker/registry/v2/blobs/sha256/${digest:0:2}/$digest" "$WORK/pull-cache"
done
