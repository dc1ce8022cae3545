#!/bin/bash
# What ctr.conf's execution control costs a launch (issue 55, item 5), in one run:
#  - warm: a signed SIF already mounted on the node (held), launched with a whitelist rule
#    whose verdict is kept, against the same launch with no rule (the same ctr.conf
#    otherwise), interleaved in blocks (launch-timer); the added milliseconds per block.
#  - cold: a signed SIF of SIZE_MB (default 1024) of incompressible data, its first launch
#    under the rule (every byte read and hashed) against its second (the kept verdict).
#
#   bench/startup/execution-control.sh [BUILD_DIR]      (default: build/release)
#
# Environment: BLOCKS (default 20), REPS (default 10), SIZE_MB (default 1024; 0: no cold
# case), BENCH_USER (when started as root, default ctrbench). Needs openssl (the key).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
ctr=${CTR_BIN:-$build/bin/ctr}
timer=$build/bin/launch-timer
[ -x "$ctr" ] && [ -x "$timer" ] || { echo "execution-control.sh: build ctr and launch-timer first" >&2; exit 1; }
command -v openssl >/dev/null || { echo "execution-control.sh: needs openssl" >&2; exit 1; }
. "$src/bench/startup/lib.sh"
as_bench_user "$build" BLOCKS REPS SIZE_MB
blocks=${BLOCKS:-20}; reps=${REPS:-10}; size_mb=${SIZE_MB:-1024}
. "$src/bench/startup/work-dir.sh"
work_dir ctr-bench-ecl

openssl genpkey -algorithm ed25519 -out key.pem 2>/dev/null
openssl pkey -in key.pem -pubout -out key.pub.pem
sh "$src/images/demo/make-rootfs.sh" rootfs >/dev/null
"$ctr" -q build signed.sif rootfs
"$ctr" sign --key key.pem signed.sif >/dev/null
printf 'image linger = 5\n' > off.conf
printf 'image linger = 5\nexecution rule = whitelist\ntrusted key = %s/key.pub.pem\n' "$work" > on.conf
# The first launch under the rule verifies and keeps the verdict; a launch under each
# ctr.conf keeps the image mounted for its case, so both cases join a mount.
CTR_CONFIG=$work/on.conf "$ctr" exec signed.sif true
CTR_CONFIG=$work/on.conf "$ctr" exec signed.sif sleep 100000 & holders+=($!)
CTR_CONFIG=$work/off.conf "$ctr" exec signed.sif sleep 100000 & holders+=($!)
sleep 1

echo "== host: $(uname -r), $(nproc) cores"
echo "== warm: held signed SIF, $blocks blocks x $reps launches, randomized order per block"
"$timer" -b "$blocks" -r "$reps" -c 1 -j warm.json \
  "no-rule=CTR_CONFIG=$work/off.conf $ctr exec signed.sif /bin/true" \
  "whitelist-kept=CTR_CONFIG=$work/on.conf $ctr exec signed.sif /bin/true"
read -r a b added low high < <(python3 "$src/bench/startup/added_ms.py" warm.json "$blocks" "$reps" no-rule whitelist-kept)
echo "warm: no rule ${a} ms, whitelist (kept verdict) ${b} ms: adds ${added} ms (per-block ${low} .. ${high})"

if [ "$size_mb" -gt 0 ]; then
  echo "== cold: a signed SIF of $size_mb MiB (incompressible), first launch (verified) and second (kept)"
  make_big_signed_sif "$work/big.sif" "$size_mb" key.pem rootfs
  t0=$(date +%s%N); CTR_CONFIG=$work/on.conf "$ctr" exec big.sif true; t1=$(date +%s%N)
  CTR_CONFIG=$work/on.conf "$ctr" exec big.sif true; t2=$(date +%s%N)
  CTR_CONFIG=$work/off.conf "$ctr" exec big.sif true; t3=$(date +%s%N)
  echo "cold: $(stat -c %s big.sif) bytes: first launch $(( (t1 - t0) / 1000000 )) ms (verified), second $(( (t2 - t1) / 1000000 )) ms (kept verdict), without a rule $(( (t3 - t2) / 1000000 )) ms"
fi
