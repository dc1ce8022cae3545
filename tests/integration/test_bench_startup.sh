#!/bin/bash
# The start-up benchmark runs end to end as an admin runs it after an upgrade (sudo
# bench/startup/run.sh BUILD, measuring as an ordinary user), at its smallest size (two
# blocks): every case launches and exits 0 (launch-timer aborts otherwise), the tables and
# JSON files name each case with a ratio, the join-floor reference is among them, and nothing
# is left behind (the holders and FUSE servers end, the work directory goes). No figure is
# judged here: that is the benchmark's business (docs/benchmark-guide.md). Also join-floor's
# own refusals, and bench/startup/launch-text.sh at a small size where perf can sample.
# ~20-30 s.
. "$(dirname "$0")/lib.sh"
require_root
ensure_test_user
require_fuse
require_userns_overlay
BUILD=${CTR_BUILD_DIR:?ctest sets CTR_BUILD_DIR}
FLOOR=$BUILD/bin/join-floor
[ -x "$BUILD/bin/launch-timer" ] && [ -x "$FLOOR" ] || skip "launch-timer or join-floor not built in $BUILD"
PY=/usr/bin/python3

note "join-floor refuses what is not a holder record, in one line, non-zero"
set +e
err=$("$FLOOR" "$WORK/none.pid" "$WORK/none.bpf" /bin/true 2>&1); rc=$?
set -e
[ "$rc" != 0 ] && [ "$(wc -l <<<"$err")" = 1 ] && [[ "$err" == *"$WORK/none.pid"* ]] ||
  fail "missing record: rc $rc, '$err'"
printf '123 4 5\n' > "$WORK/short.pid"
set +e
err=$("$FLOOR" "$WORK/short.pid" "$WORK/none.bpf" /bin/true 2>&1); rc=$?
set -e
[ "$rc" = 2 ] && [[ "$err" == *"not a holder record with a prepared root"* ]] || fail "short record: rc $rc, '$err'"

note "bench/startup/run.sh as $CTR_TEST_USER, 2 blocks (its least) x 1 launch, 2 concurrent"
out=$WORK/out
mkdir "$out"
start=$(date +%s)
BENCH_USER=$CTR_TEST_USER BLOCKS=2 REPS=1 CONC=2 OUT=$out CTR_BIN="$CTR_BIN" \
  bash "$CTR_SOURCE_DIR/bench/startup/run.sh" "$BUILD" > "$WORK/run.out" 2>&1 ||
  fail "run.sh failed: $(tail -5 "$WORK/run.out")"
note "run.sh took $(( $(date +%s) - start )) s"
grep -E "^(unshare-Urm|ctr-sif-held|join-floor) " "$WORK/run.out" || true
grep -q "^join-floor " "$WORK/run.out" || fail "no join-floor row: $(grep '^==' "$WORK/run.out")"

$PY - "$out/single.json" "$out/concurrent.json" <<'PY' || fail "result files"
import json, sys
single, concurrent = (json.load(open(p)) for p in sys.argv[1:3])
names = [c["name"] for c in single["cases"]]
for wanted in ("unshare-Urm", "true", "ctr-sif-held", "ctr-sif-seq", "ctr-sif-cold", "ctr-appt-held", "ctr-dir", "join-floor"):
    assert wanted in names, (wanted, names)
assert names[0] == "unshare-Urm", names[0]
for c in single["cases"] + concurrent["cases"]:
    assert len(c["samples_ms"]) >= 1 and all(s > 0 for s in c["samples_ms"]), c["name"]
    assert c["ratio"] > 0 and c["ci90"][0] <= c["ratio"] <= c["ci90"][1], (c["name"], c["ratio"], c["ci90"])
assert concurrent["concurrency"] == 2, concurrent["concurrency"]
PY

# The generator of src/cli/launch-text.ld (perf samples of launches) at a small size: it
# writes a fragment the linker takes, naming functions; its figures are the benchmark's.
if ! command -v perf >/dev/null; then
  note "SKIP part: no perf (Debian: linux-perf): bench/startup/launch-text.sh not run"
elif ! as_user sh -c 'f=$(mktemp) && perf record -q -e cpu-clock:u -o "$f" -- true; r=$?; rm -f "$f"; exit $r' >/dev/null 2>&1; then
  note "SKIP part: perf cannot sample an ordinary user's programs here (kernel.perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)): bench/startup/launch-text.sh not run"
else
  note "bench/startup/launch-text.sh as $CTR_TEST_USER, 40 launches of each held case"
  BENCH_USER=$CTR_TEST_USER RUNS=40 OUT=$WORK/launch-text.ld CTR_BIN="$CTR_BIN" \
    bash "$CTR_SOURCE_DIR/bench/startup/launch-text.sh" "$BUILD" > "$WORK/text.out" 2>&1 ||
    fail "launch-text.sh failed: $(tail -5 "$WORK/text.out")"
  entries=$(grep -c '^    \*(\.text\.' "$WORK/launch-text.ld" || true)
  (( entries >= 20 )) || fail "launch-text.sh listed $entries functions: $(tail -3 "$WORK/text.out")"
  grep -q '^} INSERT BEFORE \.text;$' "$WORK/launch-text.ld" || fail "launch-text.ld is not an INSERT fragment"
  printf 'int main(void) { return 0; }\n' > "$WORK/empty.c"
  cc -o "$WORK/empty" "$WORK/empty.c" -Wl,-T,"$WORK/launch-text.ld" || fail "the linker does not take the written launch-text.ld"
  note "launch-text.sh: $entries functions listed"
  left=$(find /tmp -maxdepth 1 -name 'ctr-launch-text.*' -user "$CTR_TEST_USER")
  [ -z "$left" ] || fail "launch-text.sh left its work directory: $left"
fi

note "nothing left: the holders and their FUSE servers end once their linger is over (their mounts live in their own namespaces and end with them)"
uid=$(id -u "$CTR_TEST_USER")
for _ in $(seq 40); do
  pgrep -u "$uid" 'ctr-holder|ctr-squashfs|squashfuse' >/dev/null || break
  sleep 0.5
done
left=$(pgrep -a -u "$uid" 'ctr-holder|ctr-squashfs|squashfuse' || true)
[ -z "$left" ] || fail "still running 20 s after the benchmark: $left"
left=$(find /tmp -maxdepth 1 -name 'ctr-bench.*' -user "$CTR_TEST_USER")
[ -z "$left" ] || fail "the benchmark's work directory was left: $left"
echo "PASS: $TEST_NAME"
