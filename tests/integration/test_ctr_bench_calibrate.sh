#!/bin/bash
# ctr-bench's decision rule through the real harness (issue 23): `ctr-bench calibrate` runs
# a busy loop that does 0 (placebo), delta/2, 2 delta and 10 delta more work when it sees
# it is in a container, bare and through ctr as the test user, 12 pairs per level. Checked:
# the placebo and delta/2 are never FAIL, 2 delta and 10 delta never PASS, and 10 delta is
# FAIL on CPU time with the injected overhead inside its interval. The rule's own error
# rates (alpha 1% here) bound each of these failing by chance to 1%; the Monte Carlo test
# (ctr-bench-tests RuleMonteCarlo) proves those rates on synthetic noise.
# Then `compare` on the real result: a workload or FOM missing or errored in the new run is
# a regression (exit 1) unless --allow-missing. About 20-40 s on 2 cores.
. "$(dirname "$0")/lib.sh"
require_root
ensure_test_user
require_fuse
BENCH=${CTR_BENCH_BIN:-$(dirname "$CTR_BIN")/ctr-bench}
[ -x "$BENCH" ] || skip "ctr-bench not built ($BENCH)"
PY=/usr/bin/python3
chmod 777 "$WORK"

note "test user: ctr-bench calibrate --delta 5% (levels 0, 2.5, 10, 50 %), 12 pairs, alpha 1%"
start=$(date +%s)
set +e
as_user "$BENCH" calibrate --ctr "$CTR_BIN" --delta 5% --blocks 12 --alpha 0.01 --iterations 15000000 --seed 23 \
  --out "$WORK/cal.json" > "$WORK/cal.out" 2> "$WORK/cal.err"
rc=$?
set -e
note "calibrate took $(( $(date +%s) - start )) s, exit $rc"
cat "$WORK/cal.out"
$PY - "$WORK/cal.json" <<'PY' || fail "calibration does not hold: $(tail -12 "$WORK/cal.out") $(tail -3 "$WORK/cal.err")"
import json, sys
r = json.load(open(sys.argv[1]))
rows = {(w["name"], f["name"]): (w, f) for w in r["workloads"] for f in w["foms"]}
names = {w["name"]: w for w in r["workloads"]}
for n in ("calib-placebo", "calib-half-delta", "calib-2delta", "calib-10delta"):
    assert names[n]["status"] == "ok", (n, names[n]["status"], names[n].get("reason"))
    assert len(names[n]["plan"]) == 12, (n, len(names[n]["plan"]))
    assert names[n]["looks"] == [12], names[n]["looks"]
for (wname, fname), (w, f) in rows.items():
    a = f["analysis"]
    v = a["verdict"]
    assert a["n_pairs"] == 12 and a["alpha"] == 0.01 and a["ci_method"] == "order-statistic-median", a
    assert a["ci"] and a["ci"][0] <= a["overhead"] <= a["ci"][1], (wname, fname, a)
    if wname in ("calib-placebo", "calib-half-delta"):
        assert v != "FAIL", (wname, fname, "FAIL below delta", a)
    if wname in ("calib-2delta", "calib-10delta"):
        assert v != "PASS", (wname, fname, "PASS beyond delta", a)
w, f = rows[("calib-10delta", "busy_cpu_time")]
a = f["analysis"]
assert a["verdict"] == "FAIL", ("10 delta not FAIL on CPU time", a)
assert a["ci"][0] <= 0.5 <= a["ci"][1], ("the interval misses the injected +50%", a)
cal = r["calibration"]
assert cal["ok"] is True and cal["delta"] == 0.05 and len(cal["rows"]) == 8, cal
PY
expect_eq "calibrate exit status" 0 "$rc"
grep -q 'calibration holds' "$WORK/cal.out" || fail "no calibration verdict printed: $(tail -5 "$WORK/cal.out")"

note "compare: the same run against itself has no regression"
set +e; "$BENCH" compare "$WORK/cal.json" "$WORK/cal.json" > "$WORK/self.out" 2>&1; rc=$?; set -e
case $rc in 0|2) ;; *) fail "compare of a run with itself: exit $rc: $(cat "$WORK/self.out")";; esac

note "compare: a workload missing, a FOM missing and a workload errored in the new run are regressions"
$PY - "$WORK/cal.json" "$WORK/doctored.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["workloads"] = [w for w in r["workloads"] if w["name"] != "calib-2delta"]
for w in r["workloads"]:
    if w["name"] == "calib-half-delta":
        w["foms"] = [f for f in w["foms"] if f["name"] != "busy_time"]
    if w["name"] == "calib-placebo":
        w["status"], w["reason"], w["foms"] = "error", "the bare launch failed (exit 1)", []
json.dump(r, open(sys.argv[2], "w"))
PY
set +e; "$BENCH" compare "$WORK/cal.json" "$WORK/doctored.json" > "$WORK/miss.out" 2>&1; rc=$?; set -e
expect_eq "compare with missing workloads" 1 "$rc"
grep -q '^calib-2delta .* MISSING' "$WORK/miss.out" || fail "no MISSING row for the workload: $(cat "$WORK/miss.out")"
grep -q '^calib-half-delta  *busy_time .* MISSING' "$WORK/miss.out" || fail "no MISSING row for the FOM: $(cat "$WORK/miss.out")"
grep -q '^calib-placebo .* ERROR' "$WORK/miss.out" || fail "no ERROR row for the errored workload: $(cat "$WORK/miss.out")"
set +e; "$BENCH" compare --allow-missing "$WORK/cal.json" "$WORK/doctored.json" > "$WORK/allow.out" 2>&1; rc=$?; set -e
case $rc in 0|2) ;; *) fail "compare --allow-missing: exit $rc: $(cat "$WORK/allow.out")";; esac
grep -q 'allowed by --allow-missing' "$WORK/allow.out" || fail "--allow-missing not reported: $(cat "$WORK/allow.out")"
echo "PASS: $TEST_NAME"
