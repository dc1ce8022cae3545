#!/bin/bash
# ctr-bench end to end (issue 10): `ctr-bench run --quick` with every workload of the quick
# profile plus site workloads (regex output) as the test user, and as root (the netns
# two-host OSU case, the scenarios, the workloads but resnet, fio and stream) (1-10 min
# each on 2 cores, with the node's load);
# one pair decides nothing under issue 23's rule; --budget bounds the first blocks; the result file's
# contract; the root run's HTML report in headless Chromium with every plot; a failing
# workload gives ERROR with its stderr tail; a hanging one times out; Ctrl-C keeps
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
# A teardown without a setup runs too (it may clean what the workload wrote).
mkdir -m 1777 "$WORK/teardown"
echo "teardown: [touch, '$WORK/teardown/dd-zero']" >>"$WORK/dd.yaml"
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
command: [sh, -c, 'setsid sleep 31.0417 & sleep 30.0417; echo "t: 1"']
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

# The suite: every descriptor of the quick profile that the build copied beside the
# programs (ctr-bench finds them there). CTR_BENCH_TEST_WORKLOADS=a,b narrows the runs to
# those (for a quick local check); CI runs them all.
DESCRIPTORS=${CTR_BUILD_DIR:-$(dirname "$(dirname "$CTR_BIN")")}/bench/workloads/descriptors
suite=()
for f in "$DESCRIPTORS"/*.yaml; do
  [ -f "$f" ] || continue
  if grep -q '^profiles:' "$f" && ! grep -q '^profiles:.*quick' "$f"; then continue; fi
  suite+=("$(sed -n 's/^name: *\([^ ]*\) *$/\1/p' "$f")")
done
if [ -n "${CTR_BENCH_TEST_WORKLOADS:-}" ]; then
  IFS=, read -ra suite <<<"$CTR_BENCH_TEST_WORKLOADS"
  root_args=(--workloads "$CTR_BENCH_TEST_WORKLOADS,dd-zero,skipper")
  user_args=(--workloads "$CTR_BENCH_TEST_WORKLOADS,dd-zero")
fi
suite_list=$(IFS=,; echo "${suite[*]}")
note "suite workloads in this run: ${suite_list:-none (no descriptors built in $DESCRIPTORS)}"
# The test user's run has the whole quick profile. The root run has what needs root (the
# two-host OSU case, the scenarios) and the launch as root (gemm-cpu, the lightest, and the
# GPU ones, which skip here), but not the workloads whose path does not change with the
# user and take most of a run's time (resnet, fio, stream, osu-shm, smallfiles-*, dl-io-*:
# about 190 s of the 2 cores' time); they run once, as the user.
root_suite_list=$suite_list
if [ -z "${CTR_BENCH_TEST_WORKLOADS:-}" ]; then
  root_suite=()
  for w in "${suite[@]}"; do
    case $w in resnet|fio|stream|osu-shm|smallfiles-dir|smallfiles-squashfs|dl-io-*) ;; *) root_suite+=("$w");; esac
  done
  root_suite_list=$(IFS=,; echo "${root_suite[*]}")
  # No --workloads for the user: the quick profile's every suite workload, and the site ones given.
  root_args=(--workloads "${root_suite_list:+$root_suite_list,}dd-zero,skipper") user_args=()
fi
# dl-io needs torch and squashfs-tools; with both its directory and image workloads must run
# (not skip) in the user's run, and the image one is compared with the directory as a source.
need_dlio=0
if $PY -c 'import torch' 2>/dev/null && command -v mksquashfs >/dev/null; then need_dlio=1; fi
# The two-host OSU case needs root and iproute2 (netns-hosts.sh); with both it must run.
need_2host=0
if command -v ip >/dev/null && [[ ",$suite_list," == *,osu-tcp-2host,* ]]; then need_2host=1; fi

# check_result FILE EXIT_STATUS: the result file keeps the contract, every suite workload ran
# (or was skipped with a reason), both sides of every block gave a number for every FOM,
# and the exit status is the one the verdicts call for. The runs' one pair (--blocks 1) is
# below the rule's minimum of 10 (benchmark-guide.md, "Decision per FOM"): every FOM must be
# INCONCLUSIVE with no interval and a note that says so (exit 2); a container over five
# times as slow in every pair still fails the test: a broken path does that (ranks that fell
# back from shared memory to TCP: osu-shm's 8-byte latency 34x, its 8-byte bandwidth 50x on
# this VM), noise on a loaded 2-core node does not (it has shown 2.6x in one pair of
# sgemm_n512, and 2.4x and 2.2x in both of the user run's resnet pairs on CI: 2x was too
# tight). ERROR (exit 3) always fails.
check_result() {
  local list=$suite_list
  [[ $1 != *root.json ]] || list=$root_suite_list
  $PY - "$1" "$2" "$list" "$need_2host" "$need_dlio" <<'PY' || fail "result file $1 breaks the contract"
import json, math, os, statistics, sys
path, rc, suite, need_2host = sys.argv[1], int(sys.argv[2]), [n for n in sys.argv[3].split(",") if n], sys.argv[4] == "1"
need_dlio = sys.argv[5] == "1"
is_root = path.endswith("root.json")
r = json.load(open(path))
assert r["format"] == "ctr-bench-result" and r["version"] == 1, r.get("format")
assert r["profile"] == "quick" and r["mode"] == "runtime-overhead"
for k in ("host", "config", "workloads", "summary", "started", "finished", "seed"):
    assert k in r, k
assert r["host"]["memory_bytes"] > 0 and r["host"]["cores"] >= 1
assert r["config"]["env"]["LANG"] == "C"
assert not os.path.exists(r["config"]["workdir"]), "work directory left behind"
cold = r["cold_start"]
assert cold is not None and cold.get("rounds") == 3, cold
assert all(len(cold["samples_s"][c]) > 0 for c in ("bare", "warm", "cold")), cold
names = {w["name"]: w for w in r["workloads"]}
missing = [n for n in suite + ["dd-zero"] if n not in names]
assert not missing, f"workloads never attempted: {missing}"
dd = names["dd-zero"]
assert dd["status"] == "ok", dd
assert dd["commands"]["B"][1] == "exec" and "--bind" in dd["commands"]["B"], dd["commands"]
verdicts = []
for w in r["workloads"]:
    n = w["name"]
    if n == "skipper":
        assert w["status"] == "skipped" and w["reason"] == "no InfiniBand HCA here", w
        continue
    if w["status"] == "skipped":
        assert w["reason"], (n, "skipped without a reason")
        print(f"-- {os.path.basename(path)}: {n}: skipped ({w['reason']})")
        continue
    assert w["status"] == "ok", (n, w["status"], w.get("reason"), w.get("stderr_tail"))
    plan = w["plan"]
    assert len(plan) >= 1 and all(sorted(p["order"]) == ["A", "B"] and set(p["wall_s"]) == {"A", "B"} for p in plan), (n, plan)
    assert w["commands"]["A"] and w["commands"]["B"] and "exec" in w["commands"]["B"], (n, w["commands"])
    assert w["foms"], (n, "no FOM")
    for f in w["foms"]:
        a = f["analysis"]
        assert not f["errors"], (n, f["name"], f["errors"])
        assert len(f["samples"]["A"]) == len(f["samples"]["B"]) == len(plan), (n, f["name"], f["samples"])
        assert all(isinstance(x, (int, float)) and x > 0 for x in f["samples"]["A"] + f["samples"]["B"]), (n, f["name"], f["samples"])
        assert a["n_pairs"] == len(plan) < a["min_pairs"] == 10, (n, f["name"], a)
        assert a["verdict"] == "INCONCLUSIVE" and a["ci"] is None, (n, f["name"], "a verdict from too few pairs", a)
        assert "a verdict needs at least 10" in a["note"], (n, f["name"], a)
        verdicts.append(a["verdict"])
        # Over five times as slow in every pair: a broken path, not a loaded node.
        pairs = [(x, y) for x, y in zip(f["samples"]["A"], f["samples"]["B"])]
        worse = [(y / x if f["direction"] == "lower" else x / y) for x, y in pairs]
        assert min(worse) < 5.0, (n, f["name"], "the container is over five times as slow in every pair", worse, a)
    print(f"-- {os.path.basename(path)}: {n}: ok in {w['duration_s']:.0f} s, {len(plan)} blocks, "
          + ", ".join(f"{f['name']} {f['analysis']['verdict']}" for f in w["foms"]))
want = 1 if "FAIL" in verdicts else 2 if "INCONCLUSIVE" in verdicts else 0
assert rc == want == r["summary"]["exit_status"], (rc, want, r["summary"])
if "osu-tcp-2host" in names:
    t = names["osu-tcp-2host"]
    if is_root and need_2host:
        assert t["status"] == "ok", ("the netns two-host case did not run as root", t["status"], t["reason"])
        assert "-H" in t["commands"]["B"] and "10.99.0.1,10.99.0.2" in t["commands"]["B"], t["commands"]
    if not is_root:
        assert t["status"] == "skipped" and "root" in t["reason"], t
# dl-io: its figures, the container reading the image through ctr's dataset bind, and the
# image against the directory as a data source (unpaired, apart from the overhead rows).
for n in ("dl-io-dir", "dl-io-image", "dl-io-staged"):
    if n not in suite or n not in names:
        continue
    w = names[n]
    if need_dlio:
        assert w["status"] == "ok", (n, "skipped or failed although torch and mksquashfs are here", w["status"], w["reason"])
    if w["status"] != "ok":
        continue
    assert [f["name"] for f in w["foms"]] == ["files_per_s", "epoch_s", "MBps", "first_epoch_s"], (n, [f["name"] for f in w["foms"]])
    assert w["info"]["files"] == 2000 and 1 <= w["info"]["workers"] <= 2 and w["info"]["epochs"] == 2, (n, w["info"])
    assert "exec" not in w["commands"]["A"], (n, w["commands"]["A"])
    if n == "dl-io-dir":
        continue
    a, b = w["commands"]["A"], w["commands"]["B"]
    data = a[a.index("--data") + 1]
    assert data.endswith(f"/{n}/sq/mnt"), a
    want = f"{data[:-len('mnt')]}dataset.sqfs:{data}:image-src=/"
    assert want in b and b[b.index(want) - 1] == "--bind", ("B does not bind the dataset image at the bare mount's path", want, b)
    assert b[b.index("--data") + 1] == data, b
    assert ("--stage" in b[:b.index(want)]) == (n == "dl-io-staged"), (n, "--stage", b)
    sc = w["source_comparison"]
    assert sc["against"] == "dl-io-dir", sc
    ref = names.get("dl-io-dir")
    if ref and ref["status"] == "ok":
        assert not sc.get("note"), sc
        assert {(x["fom"], x["side"]) for x in sc["rows"]} == {(f, s) for f in ("files_per_s", "epoch_s", "MBps", "first_epoch_s") for s in "AB"}, sc["rows"]
        for row in sc["rows"]:
            mine = [v for v in next(f for f in w["foms"] if f["name"] == row["fom"])["samples"][row["side"]] if v]
            theirs = [v for v in next(f for f in ref["foms"] if f["name"] == row["fom"])["samples"][row["side"]] if v]
            assert row["n"] == len(mine) == len(w["plan"]) and row["n_against"] == len(theirs) == len(ref["plan"]), row
            assert abs(row["median"] / statistics.median(mine) - 1) < 1e-9, row
            assert row["verdict"] == "INCONCLUSIVE", row
            if min(len(mine), len(theirs)) < 2:
                # One block (this test's runs): medians, no ratio (the arithmetic is unit-tested).
                assert row["ratio"] is None and row["note"] == "fewer than 2 samples on a side", row
                continue
            # The Hodges-Lehmann ratio: the median of every log(mine/theirs).
            hl = math.exp(statistics.median([math.log(y / x) for x in theirs for y in mine]))
            assert abs(row["ratio"] / hl - 1) < 1e-9, (row, hl)
            assert "a verdict needs at least 10 on each side" in row["note"], row
        print(f"-- {os.path.basename(path)}: {n} against dl-io-dir: " + ", ".join(
            f"{x['fom']} {x['side']} median {x['median']:.4g} against {x['median_against']:.4g}"
            for x in sc["rows"] if x["fom"] == "files_per_s"))
if is_root:
    assert r["summary"]["SKIPPED"] >= 1, r["summary"]
    sc = {s["name"]: s for s in r["scenarios"]}
    conc = sc["concurrent"]
    assert [p["copies"] for p in conc["points"]] == [1, 2, 4], conc
    assert all(len(p["samples"]) == 2 * p["copies"] and not p["errors"] for p in conc["points"]), conc
    steps = sc["cpu-steps"]
    # Limits need cgroups the runtime can use; where ctr refuses them the scenario says why.
    assert "skipped" in steps or [p["limit"] for p in steps["points"]][:2] == ["--cpus 0.5", "--cpus 1"], steps
    assert "skipped" in steps or all(len(p["samples"]) == 3 for p in steps["points"]), steps
PY
}

# run_quick NAME [as_user] ARGS...: ctr-bench run --quick, timed; exit 0, 1 or 2 (else the
# test fails with the tail of its output), then the result file is checked.
run_quick() {
  local name=$1 start rc; shift
  start=$(date +%s)
  set +e
  "$@" --out "$WORK/$name.json" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  set -e
  note "$name: ctr-bench run --quick took $(( $(date +%s) - start )) s, exit $rc"
  case $rc in
    0|1|2) ;;
    3) fail "$name run: exit 3 (an ERROR): $(grep -E 'ERROR|error' "$WORK/$name.out" | head -20) $(tail -5 "$WORK/$name.err")";;
    *) fail "$name run: exit $rc: $(tail -5 "$WORK/$name.err")";;
  esac
  check_result "$WORK/$name.json" "$rc"
}

note "root: ctr-bench run --quick (${root_suite_list:-no suite workload}, the two-host OSU case, scenarios)"
# --budget: the whole path must run here however slow the node; the budget's own bound is
# checked below with a small one. --blocks 1, as the user's run: the quick profile's other
# two pairs decide nothing either, and the two-host OSU case's took 10 s of the suite.
run_quick root "$BENCH" run --quick --blocks 1 --budget 3000 --ctr "$CTR_BIN" --workload-file "$WORK/dd.yaml" --workload-file "$WORK/skipper.yaml" \
  "${root_args[@]}" --seed 5 --scenario concurrent --scenario cpu-steps --scenario-workload dd-zero
grep -q '^dd-zero  *copy_rate' "$WORK/root.out" || fail "no summary table: $(cat "$WORK/root.out")"
[ -e "$WORK/teardown/dd-zero" ] || fail "dd-zero's teardown, in a descriptor without setup, did not run"
# Nothing may keep the run's images (host-stack, the cold-start copy) open or mounted.
wd=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["workdir"])' "$WORK/root.json")
held=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "$wd/*" -printf "%p -> %l\n" 2>/dev/null || true)
[ -z "$held" ] || fail "images of the run still open after it ended: $held"
! grep -qF "$wd" /proc/self/mountinfo || fail "a mount of the run's work directory is left: $(grep -F "$wd" /proc/self/mountinfo)"
if ip netns list 2>/dev/null | grep -qw '^n[12]'; then fail "the two-host case left its network namespaces: $(ip netns list)"; fi

note "root: the run's HTML report in headless Chromium, every plot"
"$BENCH" report "$WORK/root.json" --out-dir "$WORK/rep" > /dev/null
grep -q 'dd-zero' "$WORK/rep/ctr-bench-report.md" || fail "report without the workload"
if command -v chromium >/dev/null; then
  . "$CTR_SOURCE_DIR/bench/ctr-bench/tests/chromium-page.sh"
  # One distribution per FOM of every workload that ran, the overview, cold start, and
  # each scenario that was not skipped.
  plots=$($PY -c '
import json, sys
r = json.load(open(sys.argv[1]))
foms = sum(len(w["foms"]) for w in r["workloads"] if w["status"] != "skipped")
print(foms + (1 if foms else 0) + (1 if r["cold_start"] else 0) + sum("skipped" not in s for s in r["scenarios"]))' "$WORK/root.json")
  check_html quick-root "$WORK/rep/ctr-bench-report.html" "$plots"
else
  note "chromium is not installed: the report's page is checked by test_ctr_bench_report where it is"
fi

note "test user: ctr-bench run --quick (the whole quick profile)"
chmod 777 "$WORK"
# One block, as the root run's: each workload still runs bare and in a container after its two
# warm-up launches (4 launches, not the profile's 8): the path is the same, about 100 s shorter.
run_quick user as_user "$BENCH" run --quick --blocks 1 --budget 3000 --ctr "$CTR_BIN" --workload-file "$WORK/dd.yaml" "${user_args[@]}"
$PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert not r["host"]["is_root"] and "OMPI_ALLOW_RUN_AS_ROOT" not in r["config"]["env"]' \
  "$WORK/user.json" || fail "test user's run recorded as root"
if [ "$need_dlio" = 1 ] && [[ ",$suite_list," == *,dl-io-image,* ]]; then
  note "dl-io: the image against the directory is reported as a data source, apart from the overheads"
  grep -q '^data source (not runtime overhead): dl-io-image against dl-io-dir' "$WORK/user.out" ||
    fail "no data-source lines in the summary: $(cat "$WORK/user.out")"
  "$BENCH" report "$WORK/user.json" --out-dir "$WORK/rep-user" > /dev/null || fail "report of the user's run"
  grep -q '^| dl-io-image | dl-io-dir | files\\_per\\_s |' <(sed -n '/Data sources (not runtime overhead)/,$p' "$WORK/rep-user/ctr-bench-report.md") ||
    fail "the report has no data-source row for dl-io-image: $(grep -n 'dl-io' "$WORK/rep-user/ctr-bench-report.md")"
fi

note "test user: the host-stack image holds every mount target of B (no overlay for the workload's binds, the home, /etc/hosts...)"
# A target missing in the image makes ctr lay an overlay over the image to create it, and
# every absolute path the workload opens then walks through the overlay: +9% on
# smallfiles-dir (benchmark-guide.md). Checked against B's own plan (ctr exec --explain
# --json) and the image's listing (unsquashfs), and in ctr's debug log. About 10 s.
as_user "$BENCH" run --quick --ctr "$CTR_BIN" --workloads smallfiles-dir --blocks 1 --no-cold-start \
  --workdir "$WORK/hs" --out "$WORK/hs.json" > "$WORK/hs.out" 2>&1 || [ $? -le 2 ] || fail "smallfiles-dir run: $(tail -5 "$WORK/hs.out")"
mapfile -t hs_b < <($PY -c '
import json, sys
r = json.load(open(sys.argv[1]))
b = r["workloads"][0]["commands"]["B"]
print("\n".join(b[1:b.index(r["config"]["image"]) + 1]))' "$WORK/hs.json")
[ "${hs_b[0]:-}" = exec ] || fail "no B command in $WORK/hs.json"
as_user "$CTR_BIN" "${hs_b[0]}" --explain --json "${hs_b[@]:1}" true > "$WORK/hs-plan.json" || fail "ctr exec --explain --json ${hs_b[*]:1}"
offset=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["image"]["offset"])' "$WORK/hs-plan.json")
unsquashfs -o "$offset" -l "${hs_b[-1]}" | sed -n "s|^squashfs-root||p" > "$WORK/hs-list" || fail "unsquashfs -l ${hs_b[-1]}"
$PY - "$WORK/hs-plan.json" "$WORK/hs-list" <<'PY' || fail "mount targets of B missing in the host-stack image"
import json, os, sys
plan = json.load(open(sys.argv[1]))
listed = {l.strip().rstrip("/") or "/" for l in open(sys.argv[2])}
missing = [m["destination"] for m in plan["mounts"]
           if m["kind"] != "symlink" and (m["kind"] != "bind" or os.path.exists(m["source"]))
           and m["destination"] not in listed]
assert not missing, f"not in the image: {missing}"
PY
as_user "$CTR_BIN" -d "${hs_b[@]}" true > /dev/null 2> "$WORK/hs.err" || fail "ctr ${hs_b[*]} true: $(tail -3 "$WORK/hs.err")"
! grep -E 'missing in the (image|prepared root)|own root' "$WORK/hs.err" ||
  fail "ctr builds its own root for B (ctr ${hs_b[*]})"
# With every target in the image, the holder's prepared root is the image itself, bound:
# no overlay at / for the workload's path walks.
as_user "$CTR_BIN" "${hs_b[@]}" cat /proc/self/mountinfo > "$WORK/hs-mi" || fail "ctr ${hs_b[*]} cat /proc/self/mountinfo"
rootfs=$(awk '$5 == "/" { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' "$WORK/hs-mi")
[ -n "$rootfs" ] && [ "$rootfs" != overlay ] || fail "B's root is '$rootfs' although the image has every target"

if [ "$need_dlio" = 1 ]; then
  note "dl-io-image's B reads the image through ctr's dataset mount, laid over the bare side's mount at the same path"
  # Its setup's script as the test user (ctr-squashfs where built), and B's binds with the dataset.
  dl=$WORK/dlio-mount
  sq=$(dirname "$DESCRIPTORS")/smallfiles-squashfs.sh
  as_user mkdir -p "$dl"
  as_user "$sq" up "$dl/sq" --count 20 --size 4096 --server auto > "$WORK/dl-up.log" 2>&1 || fail "smallfiles-squashfs.sh up: $(tail -2 "$WORK/dl-up.log")"
  bare=$(as_user sh -c "stat -c %d '$dl/sq/mnt'; md5sum < '$dl/sq/mnt/0000/0000007.bin'")
  inside=$(as_user "$CTR_BIN" "${hs_b[0]}" --bind "$dl/sq/dataset.sqfs:$dl/sq/mnt:image-src=/" "${hs_b[@]:1}" \
    sh -c "stat -c %d '$dl/sq/mnt'; md5sum < '$dl/sq/mnt/0000/0000007.bin'") || fail "ctr exec with the dataset bind"
  as_user "$sq" down "$dl/sq" || fail "smallfiles-squashfs.sh down"
  [ "$(echo "$bare" | sed -n 2p)" = "$(echo "$inside" | sed -n 2p)" ] || fail "a file of the dataset differs in the container: $bare / $inside"
  [ "$(echo "$bare" | sed -n 1p)" != "$(echo "$inside" | sed -n 1p)" ] ||
    fail "the container reads the bare side's mount (device $(echo "$bare" | head -1)), not ctr's dataset mount"
fi

note "a workload failing in the container: ERROR with its stderr tail; a hanging one times out; exit 3"
set +e
"$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/broken.yaml" --workload-file "$WORK/hang.yaml" \
  --workloads broken,hang --no-cold-start --blocks 3 \
  --out "$WORK/broken.json" > "$WORK/broken.out" 2>&1
rc=$?
set -e
expect_eq "exit status with an ERROR FOM" 3 "$rc"
# The timed-out launch's whole tree is gone, also what left its process group (as mpirun's ranks do).
# (Odd durations: another sleep on the machine is not taken for theirs.)
if pgrep -f 'sleep 3[01]\.0417$' >/dev/null; then fail "a timed-out launch left processes: $(pgrep -af 'sleep 3[01]\.0417$')"; fi
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
for _ in $(seq 100); do
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

note "--budget bounds the first blocks too: a workload that cannot fit is skipped with the reason"
cat > "$WORK/slow2.yaml" <<'Y'
name: slow2
command: [sh, -c, 'sleep 1; echo "t: 1"']
output: regex
foms:
  - {name: t, regex: 't: ([0-9.]+)', unit: s, direction: lower, delta: 0.05}
Y
chmod 644 "$WORK/slow2.yaml"
start=$(date +%s)
set +e
"$BENCH" run --full --ctr "$CTR_BIN" --workload-file "$WORK/slow2.yaml" --workloads slow2 --no-cold-start --budget 8 \
  --out "$WORK/budget.json" > "$WORK/budget.out" 2>&1
rc=$?
set -e
took=$(( $(date +%s) - start ))
[ "$took" -le 30 ] || fail "--budget 8 run took $took s"
$PY - "$WORK/budget.json" <<'PY' || fail "budget: $(cat "$WORK/budget.json")"
import json, sys
w = json.load(open(sys.argv[1]))["workloads"][0]
assert w["status"] == "skipped" and "does not fit the budget: 10 blocks of about" in w["reason"], w
PY

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

note "a bad descriptor is refused naming file and key"
printf 'name: x\ncommand: [true]\noutput: regex\nfoms:\n  - {name: f, regex: "([0-9]+)", direction: sideways, delta: 0.1}\n' > "$WORK/bad.yaml"
set +e; out=$("$BENCH" run --quick --ctr "$CTR_BIN" --workload-file "$WORK/bad.yaml" --out "$WORK/bad.json" 2>&1); rc=$?; set -e
expect_eq "exit status for a bad descriptor" 3 "$rc"
expect_contains "bad descriptor" "$WORK/bad.yaml: foms[0].direction: must be 'higher'" "$out"
echo "PASS: $TEST_NAME"
