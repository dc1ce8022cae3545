#!/bin/bash
# ctr build / inspect / sif: bad input, overwrite protection, reproducibility, interrupted
# builds, and inspect of a built image. Runs unprivileged operations only.
. "$(dirname "$0")/lib.sh"

FIX=${CTR_FIXTURES_DIR:-$CTR_SOURCE_DIR/../shared/fixtures}/sif

# expect_failure WHAT CMD...: exit status 255 and exactly one line on stderr.
expect_failure() {
  local what=$1; shift
  local rc=0
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  expect_eq "$what: exit status" 255 "$rc"
  expect_eq "$what: stderr lines" 1 "$(wc -l <"$WORK/err")"
  cat "$WORK/err"
}

note "bad input: one line, exit 255"
head -c 20000 "$FIX/images/one-group.sif" >"$WORK/truncated.sif"
err=$(expect_failure truncated "$CTR_BIN" sif list "$WORK/truncated.sif")
expect_contains "truncated" "$WORK/truncated.sif: descriptor table" "$err"
err=$(expect_failure "not an image" "$CTR_BIN" inspect "$FIX/input/index.json")
expect_contains "not an image" "not a SIF, squashfs image or directory" "$err"
err=$(expect_failure missing "$CTR_BIN" inspect "$WORK/nope.sif")
expect_contains missing "no such file" "$err"
cp "$FIX/images/one-group.sif" "$WORK/overlap.sif"
printf '\x01\x10' | dd of="$WORK/overlap.sif" bs=1 seek=$((4096 + 25)) conv=notrunc status=none
err=$(expect_failure overlap "$CTR_BIN" sif header "$WORK/overlap.sif")
expect_contains overlap "overlaps descriptor 0 (id 1)" "$err"
err=$(expect_failure "unknown id" "$CTR_BIN" sif info 9 "$FIX/images/one-group.sif")
expect_contains "unknown id" "object 9 not found" "$err"

note "sif new/add/setprim/del round trip"
"$CTR_BIN" sif new "$WORK/edit.sif"
"$CTR_BIN" sif add --datatype 4 --parttype 1 --partfs 1 --partarch 2 "$WORK/edit.sif" "$FIX/input/root.squashfs"
"$CTR_BIN" sif setprim 1 "$WORK/edit.sif"
expect_contains "list after setprim" "FS (Squashfs/*System/amd64)" "$("$CTR_BIN" sif list "$WORK/edit.sif")"
"$CTR_BIN" sif del 1 "$WORK/edit.sif"
expect_eq "list after del" 3 "$("$CTR_BIN" sif list "$WORK/edit.sif" | wc -l)"

note "build: overwrite protection and --force"
ROOT="$WORK/rootfs"
make_demo_rootfs "$ROOT"
printf 'Bootstrap: scratch\n' >"$ROOT/.singularity.d/Singularity"
printf '{"org.example.purpose": "test"}\n' >"$ROOT/.singularity.d/labels.json"
"$CTR_BIN" build "$WORK/a.sif" "$ROOT"
err=$(expect_failure "refuse overwrite" "$CTR_BIN" build "$WORK/a.sif" "$ROOT")
expect_contains "refuse overwrite" "already exists" "$err"
"$CTR_BIN" build --force "$WORK/a.sif" "$ROOT"

note "build: deterministic builds are byte-identical"
"$CTR_BIN" build --deterministic "$WORK/d1.sif" "$ROOT"
touch "$ROOT/bin"  # mtimes must not matter
"$CTR_BIN" build --deterministic "$WORK/d2.sif" "$ROOT"
cmp "$WORK/d1.sif" "$WORK/d2.sif" || fail "deterministic builds differ"

note "inspect a built image (ctr's overview; Apptainer's form: test_apptainer_inspect.sh)"
expect_eq "inspect labels (Apptainer's default)" "org.example.purpose: test" "$("$CTR_BIN" inspect "$WORK/a.sif")"
out=$("$CTR_BIN" inspect --ctr-summary "$WORK/a.sif")
expect_contains "inspect labels" "org.example.purpose: test" "$out"
expect_contains "inspect deffile" "Bootstrap: scratch" "$out"
expect_contains "inspect runscript" "Hello from the ctr demo container" "$out"
expect_contains "inspect partition" "FS (Squashfs/*System/" "$out"
json=$("$CTR_BIN" inspect --ctr-json "$WORK/a.sif")
expect_contains "inspect --ctr-json" '"kind": "sif"' "$json"
expect_contains "inspect dir" "Hello from the ctr demo" "$("$CTR_BIN" inspect --ctr-summary "$ROOT")"
expect_eq "deffile object" "Bootstrap: scratch" "$("$CTR_BIN" sif dump 1 "$WORK/a.sif")"

note "interrupted build leaves nothing behind"
BIG="$WORK/big"
mkdir -p "$BIG"
for i in $(seq 1 40); do head -c 4000000 /dev/urandom >"$BIG/f$i"; done
mkdir "$WORK/outdir"
"$CTR_BIN" build "$WORK/outdir/big.sif" "$BIG" &
pid=$!
sleep 0.5
kill -INT "$pid"
rc=0; wait "$pid" || rc=$?
[ "$rc" -ne 0 ] || note "build finished before the signal (machine too fast); nothing to check"
sleep 1
if [ "$rc" -ne 0 ]; then
  left=$(ls -A "$WORK/outdir")
  expect_eq "files left after SIGINT" "" "$left"
  pgrep -f "mksquashfs $BIG" >/dev/null && fail "mksquashfs still running after SIGINT"
fi
echo "PASS: $TEST_NAME"
