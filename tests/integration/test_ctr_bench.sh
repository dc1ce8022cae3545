#!/bin/bash
# ctr-bench end to end (issue 10): a quick run as root and as the test user with site
# workloads (regex output) and, when built, a fast subset of the suite's own workloads; the
# result file's contract; a failing workload gives ERROR with its stderr tail; Ctrl-C keeps
# the samples; compare and report refuse corrupt or foreign result files; a bad descriptor
# is refused with one line naming the file and the key.
. "$(dirname "$0")/lib.sh"
require_root
ensure_test_user
require_fuse
BENCH=${CTR_BENCH_BIN:-$(dirname "$CTR_BIN")/ctr-bench}
[ -x "$BENCH" ] || skip "ctr-bench not built ($BENCH)"
PY=/usr/bin/python3

# Site workloads: real commands, FOMs read by regex.
cat > "$WORK/dd.yaml" <<'Y'
name: dd-zero
description: dd from /dev/zero to /dev/null
command: [sh, -c, 'dd if=/dev/zero of=/dev/null bs=1M count=500 2>&1']
output: regex
foms:
  - {name: copy_rate, regex: '([0-9.]+) [GM]B/s', unit: GB/s, direction: higher, delta: 0.10}
  - {name: copy_time, regex: 'copied, ([0-9.]+) s', unit: s, direction: lower, delta: 0.10}
Y
cat > "$WORK/broken.yaml" <<'Y'
name: broken
command: [sh, -c, 'echo "rate: 5"; if [ -n "${CTR_CONTAINER:-}" ]; then echo "solver: cannot open /data/mesh.h5" >&2; exit 3; fi']
output: regex
foms:
  - {name: rate, regex: 'rate: ([0-9]+)', unit: 1/s, direction: higher, delta: 0.05}
Y
cat > "$WORK/skipper.yaml" <<'Y'
name: skipper
command: [sh, -c, 'echo "skip: no InfiniBand HCA here" >&2; exit 77']
output: regex
foms:
  - {name: x, regex: '([0-9]+)', unit: 1, direction: higher, delta: 0.05}
Y
cat > "$WORK/hang.yaml" <<'Y'
name: hang
command: [sh, -c, 'setsid sleep 31 & sleep 30; echo "t: 1"']
timeout_s: 1
output: regex
foms:
  - {name: t, regex: 't: ([0-9.]+)', unit: s, direction: lower, delta: 0.05}
Y
cat > "$WORK/slow.yaml" <<'Y'
name: slow
command: [sh, -c, 'sleep 0.2; echo "t: 0.2"']
output: regex
foms:
  - {name: t, regex: 't: ([0-9.]+)', unit: s, direction: lower, delta: 0.05}
Y
chmod 644 "$WORK"/*.yaml

# A fast subset of the suite's own workloads, where their descriptors and programs exist.
suite=()
for name in ${CTR_BENCH_TEST_WORKLOADS:-gemm-cpu gemm stream}; do
  if grep -qs "^name: *$name *$" "$CTR_SOURCE_DIR"/bench/workloads/*.yaml; then suite+=("$name"); break; fi
done
# --workloads always: with the suite's descriptors built, a run would otherwise take them all.
suite_list=$(IFS=,; echo "${suite[*]}")
suite_args=(--workloads "${suite_list:+$suite_list,}dd-zero,skipper")
user_args=(--workloads "${suite_list:+$suite_list,}dd-zero")
note "suite workloads in this run: ${suite[*]:-none (no descriptors built yet)}"

# check_result FILE EXPECTED_STATUS: the result file keeps the contract.
check_result() {
  $PY - "$1" "$2" <<'PY' || fail "result file $1 breaks the contract"
import json, os, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "ctr-bench-result" and r["version"] == 1, r.get("format")
assert r["profile"] == "quick" and r["mode"] == "runtime-overhead"
for k in ("host", "config", "workloads", "summary", "started", "finished", "seed"):
    assert k in r, k
assert r["host"]["memory_bytes"] > 0 and r["host"]["cores"] >= 1
assert r["config"]["env"]["LANG"] == "C"
assert not os.path.exists(r["config"]["workdir"]), "work directory left behind"
assert r["summary"]["exit_status"] == int(sys.argv[2]), r["summary"]
cold = r["cold_start"]
assert cold is None or all(len(cold["samples_s"][c]) > 0 for c in ("bare", "warm", "cold")), cold
names = {w["name"]: w for w in r["workloads"]}
dd = names["dd-zero"]
assert dd["status"] == "ok", dd
assert dd["commands"]["B"][1] == "exec" and "--bind" in dd["commands"]["B"], dd["commands"]
assert len(dd["plan"]) >= 3 and all(sorted(p["order"]) == ["A", "B"] for p in dd["plan"])
for f in dd["foms"]:
    a = f["analysis"]
    assert a["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE"), a
    assert len(f["samples"]["A"]) == len(f["samples"]["B"]) == len(dd["plan"])
    assert all(isinstance(x, (int, float)) for x in f["samples"]["A"] + f["samples"]["B"])
if sys.argv[1].endswith("root.json"):
    s = names["skipper"]
    assert s["status"] == "skipped" and s["reason"] == "no InfiniBand HCA here", s
    assert r["summary"]["SKIPPED"] >= 1, r["summary"]
    sc = {s["name"]: s for s in r["scenarios"]}
    conc = sc["concurrent"]
    assert [p["copies"] for p in conc["points"]] == [1, 2, 4], conc
    assert all(len(p["samples"]) == 2 * p["copies"] and not p["errors"] for p in conc["points"]), conc
    steps = sc["cpu-steps"]
    # Limits need cgroups the runtime can use; where ctr refuses them the scenario says why.
    assert "skipped" in steps or [p["limit"] for p in steps["points"]][:2] == ["--cpus 0.5", "--cpus 1"], steps
    assert "skipped" in steps or all(len(p["samples"]) == 3 for p in steps["points"]), steps
for w in r["workloads"]:
    if w["name"] in ("dd-zero", "skipper"):
        continue
    assert w["status"] in ("ok", "skipped"), (w["name"], w["status"], w.get("reason"), w.get("stderr_tail"))
    for f in w["foms"]:
        assert f["analysis"]["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE"), (w["name"], f["name"], f["analysis"])
PY
}

note "root: ctr-bench run --quick"
set +e
"$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/dd.yaml" --workload-file "$WORK/skipper.yaml" \
  "${suite_args[@]}" --blocks 3 --budget 90 --seed 5 --scenario concurrent --scenario cpu-steps \
  --scenario-workload dd-zero --out "$WORK/root.json" > "$WORK/root.out" 2> "$WORK/root.err"
rc=$?
set -e
case $rc in 0|1|2) ;; *) fail "root run: exit $rc: $(tail -5 "$WORK/root.err")";; esac
check_result "$WORK/root.json" "$rc"
grep -q '^dd-zero  *copy_rate' "$WORK/root.out" || fail "no summary table: $(cat "$WORK/root.out")"
# Nothing may keep the run's images (host-stack, the cold-start copy) open or mounted.
wd=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["workdir"])' "$WORK/root.json")
held=$(ls -l /proc/[0-9]*/fd 2>/dev/null | grep -F "$wd/" || true)
[ -z "$held" ] || fail "images of the run still open after it ended: $held"
! grep -qF "$wd" /proc/self/mountinfo || fail "a mount of the run's work directory is left: $(grep -F "$wd" /proc/self/mountinfo)"

note "test user: ctr-bench run --quick"
chmod 777 "$WORK"
set +e
as_user "$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/dd.yaml" "${user_args[@]}" --blocks 3 --budget 60 \
  --out "$WORK/user.json" > "$WORK/user.out" 2> "$WORK/user.err"
rc=$?
set -e
case $rc in 0|1|2) ;; *) fail "test user run: exit $rc: $(tail -5 "$WORK/user.err")";; esac
check_result "$WORK/user.json" "$rc"
$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert not r["host"]["is_root"] and "OMPI_ALLOW_RUN_AS_ROOT" not in r["config"]["env"]' \
  "$WORK/user.json" || fail "test user's run recorded as root"

note "a workload failing in the container: ERROR with its stderr tail; a hanging one times out; exit 3"
set +e
"$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/broken.yaml" --workload-file "$WORK/hang.yaml" \
  --workloads broken,hang --no-cold-start --blocks 3 \
  --out "$WORK/broken.json" > "$WORK/broken.out" 2>&1
rc=$?
set -e
expect_eq "exit status with an ERROR FOM" 3 "$rc"
# The timed-out launch's whole tree is gone, also what left its process group (as mpirun's ranks do).
if pgrep -f 'sleep 3[01]$' >/dev/null; then fail "a timed-out launch left processes: $(pgrep -af 'sleep 3[01]$')"; fi
$PY - "$WORK/broken.json" <<'PY' || fail "broken workload: $(cat "$WORK/broken.json")"
import json, sys
ws = json.load(open(sys.argv[1]))["workloads"]
w = ws[0]
f = w["foms"][0]
h = ws[1]
assert h["name"] == "hang" and h["status"] == "error" and "timed out after 1 s" in h["reason"], h
assert w["status"] == "error" and f["analysis"]["verdict"] == "ERROR", w
assert "cannot open /data/mesh.h5" in f["errors"][0]["stderr_tail"], f["errors"]
assert all(x is None for x in f["samples"]["B"])
PY

note "Ctrl-C keeps the samples so far"
"$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/slow.yaml" --workloads slow --no-cold-start --blocks 100 \
  --out "$WORK/int.json" > "$WORK/int.out" 2>&1 &
pid=$!
for i in $(seq 100); do
  [ -s "$WORK/int.json" ] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["workloads"] and len(r["workloads"][0]["plan"]) >= 3 else 1)' "$WORK/int.json" 2>/dev/null && break
  sleep 0.2
done
kill -INT "$pid"
set +e; wait "$pid"; rc=$?; set -e
expect_eq "exit status after SIGINT" 130 "$rc"
$PY - "$WORK/int.json" <<'PY' || fail "interrupted result: $(cat "$WORK/int.json")"
import json, os, sys
r = json.load(open(sys.argv[1]))
assert r["interrupted"] is True and r["summary"]["exit_status"] == 130
f = r["workloads"][0]["foms"][0]
assert sum(x is not None for x in f["samples"]["A"]) >= 3, f["samples"]
assert not os.path.exists(r["config"]["workdir"])
PY
[ -z "$(pgrep -f "sleep 0.2; echo" || true)" ] || fail "a launch survived Ctrl-C"

note "compare and report"
set +e
"$BENCH" compare "$WORK/root.json" "$WORK/user.json" > "$WORK/cmp.out" 2>&1; rc=$?
set -e
case $rc in 0|1|2) ;; *) fail "compare: exit $rc: $(cat "$WORK/cmp.out")";; esac
grep -q '^dd-zero .* ctr ' "$WORK/cmp.out" || fail "compare printed no container row: $(cat "$WORK/cmp.out")"
head -c 300 "$WORK/root.json" > "$WORK/corrupt.json"
sed 's/"version": 1/"version": 99/' "$WORK/root.json" > "$WORK/v99.json"
for bad in corrupt v99; do
  set +e; out=$("$BENCH" compare "$WORK/root.json" "$WORK/$bad.json" 2>&1); rc=$?; set -e
  expect_eq "compare with a $bad file" 3 "$rc"
  expect_contains "compare with a $bad file" "$WORK/$bad.json" "$out"
  [ "$(echo "$out" | wc -l)" = 1 ] || fail "compare: more than one line for a $bad file: $out"
done
set +e; out=$("$BENCH" report "$WORK/v99.json" --out-dir "$WORK/rep" 2>&1); rc=$?; set -e
expect_eq "report of another version" 3 "$rc"
expect_contains "report of another version" "version 99 is not supported" "$out"
"$BENCH" report "$WORK/root.json" --out-dir "$WORK/rep" > /dev/null
grep -q 'dd-zero' "$WORK/rep/ctr-bench-report.md" || fail "report without the workload"

note "a bad descriptor is refused naming file and key"
printf 'name: x\ncommand: [true]\noutput: regex\nfoms:\n  - {name: f, regex: "([0-9]+)", direction: sideways, delta: 0.1}\n' > "$WORK/bad.yaml"
set +e; out=$("$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/bad.yaml" --out "$WORK/bad.json" 2>&1); rc=$?; set -e
expect_eq "exit status for a bad descriptor" 3 "$rc"
expect_contains "bad descriptor" "$WORK/bad.yaml: foms[0].direction: must be 'higher'" "$out"
echo "PASS: $TEST_NAME"
