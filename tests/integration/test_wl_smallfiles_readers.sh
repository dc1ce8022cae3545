#!/bin/bash
# ctr-wl-smallfiles' concurrent readers (bench/io/scaling.sh uses them): --threads K reads
# every file once between K threads, N processes with --shard I/N read the dataset once
# between them (disjoint, complete), --start-at releases them together and reports when
# each ended; a bad --shard is refused with one line.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
wl=${CTR_BUILD_DIR:?CTR_BUILD_DIR must name the build tree (ctest sets it)}/bench/workloads/ctr-wl-smallfiles
[ -x "$wl" ] || skip "ctr-wl-smallfiles was not built (CTR_BUILD_BENCH=OFF)"
"$wl" --prepare "$WORK/set" --count 301 --size 4096 2>/dev/null
info() { python3 -c 'import json,sys; i=json.loads(sys.stdin.read().splitlines()[-1])["info"]; print(*(i[k] for k in sys.argv[1:]))' "$@"; }

expect_eq "--threads 3: every file once" "301 1232896 3" "$("$wl" --read "$WORK/set" --epochs 2 --threads 3 2>/dev/null | info files bytes_per_epoch threads)"
start=$(python3 -c 'import time; print(f"{time.time() + 0.5:.6f}")')
for i in 0 1 2; do "$wl" --read "$WORK/set" --epochs 1 --shard "$i/3" --start-at "$start" >"$WORK/shard$i" 2>/dev/null & done
wait
total=0
for i in 0 1 2; do
  read -r files bytes begin end < <(info files bytes_per_epoch start_realtime epoch1_end_realtime <"$WORK/shard$i")
  expect_eq "shard $i/3: its bytes" "$((files * 4096))" "$bytes"
  # The JSON number drops trailing zeros (.356530 is .35653): compared at the same precision.
  expect_eq "shard $i/3: the common start" "$start" "$(printf '%.6f' "$begin")"
  python3 -c "import sys; sys.exit(0 if float('$end') > float('$begin') else 1)" || fail "shard $i/3 ended ($end) before the start ($begin)"
  total=$((total + files))
done
expect_eq "3 shards: the dataset once between them" 301 "$total"
rc=0; out=$("$wl" --read "$WORK/set" --shard 3/3 2>&1) || rc=$?
expect_eq "--shard 3/3: status" 1 "$rc"
expect_eq "--shard 3/3: the message" "smallfiles: --shard I/N with 0 <= I < N, not '3/3'" "$out"
echo "PASS: $TEST_NAME"
