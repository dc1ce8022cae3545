#!/bin/bash
# Issue 11: resource limits through real cgroups. As root here (cgroup v1: the controllers
# are mounted separately, v2 has none of them): a child touching 200 MiB under --memory 64M
# is OOM-killed and ctr says so in one line and exits 137; a spinner under --cpus 0.5 gets
# about half a core; --pids-limit stops forks; --cpuset-cpus pins; requests the node cannot
# hold are refused at once with the numbers; --stats writes the run's record; no cgroup is
# left after a normal exit, an OOM kill, or a SIGKILL of ctr (the next launch removes it).
# As the unprivileged test user without delegation: a clear refusal.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0
export CTR_CONFIG=$CTR_TEST_CONFIG  # root's launches too: no lingering holder at the end
[ "$(id -u)" = 0 ] || skip "needs root (cgroup v1 limits are root-only)"
grep -q ' - cgroup cgroup .*memory' /proc/self/mountinfo || \
  grep -q ' - cgroup2 ' /proc/self/mountinfo || skip "no cgroup file system mounted"
for c in memory cpu cpuacct pids cpuset; do
  # v2 has no cpuacct: the cpu controller's cpu.stat does its accounting.
  grep -qE " - cgroup cgroup [^ ]*[,]?$c(,|$)" /proc/self/mountinfo ||
    grep -qw "${c/cpuacct/cpu}" "$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)/cgroup.controllers" 2>/dev/null ||
    skip "the $c controller is available in neither cgroup v1 nor v2 here"
done

make_demo_squashfs demo
# CTR_TEST_HOG: hog.c built beforehand (a GPU node without a C library to link statically).
if [ -n "${CTR_TEST_HOG:-}" ]; then cp "$CTR_TEST_HOG" "$WORK/hog"; else cc -static -O2 -o "$WORK/hog" "$(dirname "$0")/hog.c"; fi
chmod -R a+rX "$WORK"
cd "$WORK"
CTR=$CTR_BIN
stale_cgroups() { find /sys/fs/cgroup -maxdepth 6 -type d -name 'ctr-[0-9]*' 2>/dev/null || true; }
no_cgroups() { local s; s=$(stale_cgroups); [ -z "$s" ] || fail "$1: cgroups left: $s"; }
# A launch of an earlier run that was SIGKILLed before its cgroup could be swept leaves an
# empty ctr-<pid> cgroup (the next limited launch would remove it, as ctr does): remove
# those whose launcher is gone; a live launch's cgroup stops the test.
for d in $(stale_cgroups); do
  pid=${d##*/ctr-}
  kill -0 "$pid" 2>/dev/null || { note "removing $d, left by an earlier run"; rmdir "$d" 2>/dev/null || true; }
done
no_cgroups "before the test"

note "ExplainShowsTheLimitsAndTheCgroup"
out=$("$CTR" exec --memory 64M --cpus 0.5 --pids-limit 32 --explain demo.sqfs true)
expect_contains "--explain limits" "limits:     cpus 0.5, memory 64 MiB, pids 32" "$out"
expect_contains "--explain cgroup" "cgroup:     cgroup v" "$out"
echo "$out" | grep -A5 '^cgroup:' | sed 's/^/   /'

note "MemoryLimitKillsAndSaysSo"
set +e; out=$("$CTR" exec --memory 64M demo.sqfs ./hog mem 200 2>"$WORK/err"); rc=$?; set -e
expect_eq "OOM exit status" 137 "$rc"
expect_eq "OOM message" "ctr: killed: memory limit 64 MiB reached" "$(cat "$WORK/err")"
no_cgroups "after the OOM kill"
# With a PID namespace the OOM kill reaches ctr as its init's 137: the same message.
set +e; out=$("$CTR" exec --pid --memory 64M demo.sqfs ./hog mem 200 2>"$WORK/err"); rc=$?; set -e
expect_eq "OOM exit status with --pid" 137 "$rc"
expect_eq "OOM message with --pid" "ctr: killed: memory limit 64 MiB reached" "$(cat "$WORK/err")"
no_cgroups "after the OOM kill with --pid"
out=$("$CTR" exec --memory 256M demo.sqfs ./hog mem 100) || fail "100 MiB under 256M: $out"
expect_eq "within the limit" "touched 100 MiB" "$out"

note "CpuQuotaHalvesASpinner"
cpu=$("$CTR" exec --cpus 0.5 demo.sqfs ./hog cpu 3) || fail "spinner: $cpu"
note "a spinner for 3 s under --cpus 0.5 got $cpu CPU seconds"
awk -v c="$cpu" 'BEGIN { exit !(c > 0.1 && c < 2.1) }' || fail "--cpus 0.5: $cpu CPU seconds in 3 s (at most ~1.5 expected)"

note "PidsLimitStopsForks"
n=$("$CTR" exec --pids-limit 10 demo.sqfs ./hog fork 50) || fail "fork hog: $n"
note "50 forks asked for under --pids-limit 10: $n started"
[ "$n" -lt 10 ] || fail "--pids-limit 10: $n children started"

note "CpusetPins"
first=$(cut -d, -f1 /sys/devices/system/cpu/online | cut -d- -f1)
out=$("$CTR" exec --cpuset-cpus "$first" demo.sqfs grep Cpus_allowed_list /proc/self/status)
expect_eq "--cpuset-cpus $first" "Cpus_allowed_list:	$first" "$out"
no_cgroups "after the limited runs"

note "RefusesWhatTheNodeCannotHold"
cpus=$(nproc)
mem_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)
refused() {
  local what=$1 needle=$2; shift 2
  set +e; out=$("$CTR" exec "$@" demo.sqfs true 2>&1); rc=$?; set -e
  expect_eq "$what: exit status" 255 "$rc"
  expect_contains "$what" "$needle" "$out"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "$what: not one line: $out"
  note "refused: $out"
}
refused "--cpus over the node" "asks for more than this node's $cpus CPUs" --cpus $((cpus * 2))
refused "--memory over the node" "of memory" --memory $((mem_kib * 2))k
refused "--cpuset-cpus offline" "is not online on this node" --cpuset-cpus 4000
refused "--memory nonsense" "--memory '12X' is not a size" --memory 12X
refused "--memory-swap below --memory" "is less than --memory" --memory 64M --memory-swap 32M
refused "--stats in a missing directory" "--stats /nonexistent/x.json: cannot write in /nonexistent" --stats /nonexistent/x.json
no_cgroups "after the refusals"

note "ApptainerCgroupsToml"
printf '[memory]\n  limit = 67108864\n[cpu]\n  quota = 50000\n  period = 100000\n[pids]\n  limit = 32\n' >"$WORK/limits.toml"
out=$("$CTR" exec --apply-cgroups "$WORK/limits.toml" --explain demo.sqfs true)
expect_contains "--apply-cgroups in the plan" "limits:     cpus 0.5, memory 64 MiB, pids 32" "$out"
set +e; "$CTR" exec --apply-cgroups "$WORK/limits.toml" demo.sqfs ./hog mem 200 >/dev/null 2>"$WORK/err"; rc=$?; set -e
expect_eq "--apply-cgroups memory limit" 137 "$rc"
expect_eq "--apply-cgroups OOM message" "ctr: killed: memory limit 64 MiB reached" "$(cat "$WORK/err")"
printf '[memory]\n  reservation = 5\n' >"$WORK/unsupported.toml"
refused "--apply-cgroups with a key ctr cannot apply" "unsupported.toml:2: [memory] reservation is not supported by ctr" \
  --apply-cgroups "$WORK/unsupported.toml"
refused "--apply-cgroups with --memory" "cannot be combined" --apply-cgroups "$WORK/limits.toml" --memory 1G
no_cgroups "after --apply-cgroups"

note "RefusesOvercommitWhenTheAdminSaysSo"
mem_bytes=$((mem_kib * 1024))
printf 'refuse overcommit = yes\nimage linger = 0\n' >"$WORK/overcommit.conf"
CTR_CONFIG=$WORK/overcommit.conf "$CTR" exec --memory $((mem_bytes * 6 / 10)) --cpus "$(awk -v c="$cpus" 'BEGIN {print c * 0.75}')" demo.sqfs sleep 3 &
holder_job=$!
for _ in $(seq 50); do [ -n "$(stale_cgroups)" ] && break; sleep 0.1; done
CTR_CONFIG=$WORK/overcommit.conf refused "memory beyond what is left" "would overcommit this node: running containers reserve" \
  --memory $((mem_bytes * 6 / 10))
CTR_CONFIG=$WORK/overcommit.conf refused "CPUs beyond what are left" "would overcommit this node" --cpus "$(awk -v c="$cpus" 'BEGIN {print c * 0.5}')"
out=$(CTR_CONFIG=$WORK/overcommit.conf "$CTR" exec --memory $((mem_bytes / 10)) demo.sqfs echo fits) || fail "a request that fits: $out"
expect_eq "a request that fits beside it" fits "$out"
# Without the policy the same request is not compared with the others.
"$CTR" exec --memory $((mem_bytes * 6 / 10)) demo.sqfs true || fail "overcommit without 'refuse overcommit'"
wait "$holder_job" || fail "the first limited launch"
no_cgroups "after the overcommit checks"

note "CheckSaysWhichBackend"
expect_contains "ctr check as root" "resource limits: cgroup v" "$("$CTR" check 2>&1 || true)"
expect_contains "ctr check as the user" "resource limits: none: no usable cgroup backend" "$(as_user "$CTR" check 2>&1 || true)"

note "StatsRecordTheRun"
"$CTR" exec --memory 128M --stats "$WORK/stats.json" demo.sqfs ./hog mem 20 >/dev/null || fail "--stats run"
python3 - "$WORK/stats.json" <<'PY' || fail "--stats record: $(cat "$WORK/stats.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["exit_code"] == 0 and s["signal"] is None and not s["oom_killed"], s
assert s["wall_seconds"] > 0 and s["user_seconds"] + s["system_seconds"] > 0, s
assert s["peak_memory_bytes"] >= 20 << 20, s
assert s["limits"]["memory_bytes"] == 128 << 20, s
print("-- stats:", {k: s[k] for k in ("exit_code", "wall_seconds", "peak_memory_bytes", "cgroup")})
PY
set +e; "$CTR" exec --memory 64M --stats "$WORK/oom.json" demo.sqfs ./hog mem 200 >/dev/null 2>&1; set -e
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["oom_killed"] and s["exit_code"] == 137 and s["signal"] == "KILL", s' "$WORK/oom.json" ||
  fail "--stats after an OOM kill: $(cat "$WORK/oom.json")"
# Without limits --stats needs no cgroup privilege: the test user gets rusage figures.
as_user "$CTR" exec --stats "$WORK/user-stats.json" "$WORK/demo.sqfs" true 2>/dev/null && fail "--stats into a root-owned directory worked" || true

note "SigkillOfCtrLeavesNoCgroup"
"$CTR" exec --memory 64M demo.sqfs sleep 30 &
launcher=$!
# The app is the process in the launch's cgroup (it enters right before execve): that pid,
# not any "sleep 30" on the machine, must die with ctr.
app=""
for _ in $(seq 100); do
  for d in $(stale_cgroups); do app=$(head -1 "$d/cgroup.procs" 2>/dev/null || true); [ -n "$app" ] && break; done
  [ -n "$app" ] && [ "$(cat "/proc/$app/comm" 2>/dev/null)" = sleep ] && break
  app=""; sleep 0.05
done
[ -n "$app" ] || fail "the limited app never showed up in its cgroup: $(stale_cgroups | tr '\n' ' ')"
kill -KILL "$launcher"; wait "$launcher" 2>/dev/null || true
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
for _ in $(seq 50); do alive "$app" || break; sleep 0.1; done
alive "$app" && fail "the app ($(ps -o pid=,ppid=,stat=,args= -p "$app")) outlived its SIGKILLed ctr"
note "left by the SIGKILLed ctr: $(stale_cgroups | tr '\n' ' ')"
"$CTR" exec --memory 64M demo.sqfs true || fail "the next limited launch"
no_cgroups "after the next launch"

note "BlkioWeightIsWritten"
# The weight goes to blkio.weight (CFQ) or blkio.bfq.weight (BFQ, which these kernels have);
# it only shapes I/O on a device whose scheduler is BFQ, so the test reads the value back.
if grep -qE ' - cgroup cgroup [^ ]*blkio' /proc/self/mountinfo && cat /sys/block/*/queue/scheduler 2>/dev/null | grep -qwE 'bfq|cfq'; then
  "$CTR" exec --blkio-weight 300 demo.sqfs sleep 2 &
  launcher=$!
  dir=""
  for _ in $(seq 50); do dir=$(find /sys/fs/cgroup/blkio -maxdepth 4 -type d -name "ctr-$launcher" 2>/dev/null | head -1); [ -n "$dir" ] && break; sleep 0.1; done
  [ -n "$dir" ] || fail "no blkio cgroup ctr-$launcher while the app runs"
  weight=$(cat "$dir/blkio.weight" 2>/dev/null || cat "$dir/blkio.bfq.weight")
  expect_eq "--blkio-weight 300: the cgroup's weight" 300 "${weight##* }"
  wait "$launcher" || fail "--blkio-weight 300: the launch failed"
  no_cgroups "after --blkio-weight"
else
  note "SKIP part: no cgroup v1 blkio controller or no weight-capable I/O scheduler (BFQ/CFQ) here"
fi

note "GpusDeniesTheLeftOutGpusDevices"
# Two "GPUs" from a CDI spec whose nodes are real character devices (195:0 and 195:1, the
# NVIDIA numbers; no driver here, so opening one says ENXIO) made with mknod. --gpus 0 as
# root (with --contain: the spec puts the nodes at other paths): the devices cgroup refuses the other GPU's node (EPERM) and lets this one through;
# as the test user nothing can enforce that, and --explain says so.
if grep -qE ' - cgroup cgroup [^ ]*devices' /proc/self/mountinfo; then
  mkdir -p "$WORK/gpudev" "$WORK/cdi"
  mknod -m 666 "$WORK/gpudev/nvidia0" c 195 0
  mknod -m 666 "$WORK/gpudev/nvidia1" c 195 1
  cat > "$WORK/cdi/gpus.yaml" <<SPEC
cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
- {name: "0", containerEdits: {deviceNodes: [{path: /dev/nvidia0, hostPath: $WORK/gpudev/nvidia0}]}}
- {name: "1", containerEdits: {deviceNodes: [{path: /dev/nvidia1, hostPath: $WORK/gpudev/nvidia1}]}}
SPEC
  chmod -R a+rX "$WORK/cdi"
  printf 'image linger = 0\ncdi spec dirs = %s\n' "$WORK/cdi" > "$WORK/gpus.conf"
  chmod 644 "$WORK/gpus.conf"
  probe='for n in 0 1; do m=$(cat /mnt/gpudev/nvidia$n 2>&1 >/dev/null) && echo "nvidia$n: opened" || echo "nvidia$n: ${m##*: }"; done'
  out=$(CTR_CONFIG=$WORK/gpus.conf "$CTR" exec --gpus 0 --contain --explain -B "$WORK/gpudev:/mnt/gpudev" demo.sqfs true)
  expect_contains "--gpus 0 --explain: the denied node" "denied:     /dev/nvidia1 (c 195:1)" "$out"
  expect_contains "--gpus 0 --explain: how" "enforced: the cgroup v1 devices controller denies them" "$out"
  out=$(CTR_CONFIG=$WORK/gpus.conf "$CTR" exec --gpus 0 --contain -B "$WORK/gpudev:/mnt/gpudev" demo.sqfs sh -c "$probe" 2>&1) ||
    fail "--gpus 0 as root: $out"
  note "--gpus 0 as root: $(echo $out)"
  expect_contains "--gpus 0: the left-out GPU" "nvidia1: Operation not permitted" "$out"
  case "$out" in *"nvidia0: Operation not permitted"*) fail "--gpus 0 denied GPU 0 too: $out";; esac
  out=$(CTR_CONFIG=$WORK/gpus.conf "$CTR" exec --gpus all --contain -B "$WORK/gpudev:/mnt/gpudev" demo.sqfs sh -c "$probe" 2>&1) ||
    fail "--gpus all as root: $out"
  case "$out" in *"Operation not permitted"*) fail "--gpus all denied a GPU: $out";; esac
  no_cgroups "after --gpus"
  out=$(as_user env CTR_CONFIG="$WORK/gpus.conf" "$CTR" exec --gpus 0 --contain --explain "$WORK/demo.sqfs" true 2>&1)
  expect_contains "--gpus 0 as the user: not enforced, and why" "device access is not enforced: it needs root" "$out"
else
  note "SKIP part: no cgroup v1 devices controller here; the v2 BPF filter is DeviceFilter.* in the unit tests"
fi

note "InstanceLimitsCoverTheWholeInstance"
# Issue 28: an instance's limits are one cgroup named for it, which its keeper, what its
# startscript starts and every later launch into it are in; stopping it removes the cgroup.
instance_cgroups() { find /sys/fs/cgroup -maxdepth 6 -type d -name 'ctr-instance-*' 2>/dev/null || true; }
[ -z "$(instance_cgroups)" ] || fail "instance cgroups before the test: $(instance_cgroups)"
"$CTR" instance start --memory 64M --cpus 0.5 demo.sqfs limited >/dev/null
# v1: the directory in the memory hierarchy; v2: the one directory, with memory.max.
mem_dir=$(instance_cgroups | grep /memory/ | head -1 || true)
[ -n "$mem_dir" ] || mem_dir=$(instance_cgroups | head -1)
[ -n "$mem_dir" ] || fail "no cgroup for the instance"
limit_file=$mem_dir/memory.limit_in_bytes
[ -e "$limit_file" ] || limit_file=$mem_dir/memory.max
expect_eq "instance memory limit" $((64 << 20)) "$(cat "$limit_file")"
keeper=$("$CTR" instance list --json | jq -r '.instances[] | select(.instance == "limited") | .pid')
grep -qx "$keeper" "$mem_dir/cgroup.procs" || fail "the keeper ($keeper) is not in $mem_dir: $(cat "$mem_dir/cgroup.procs")"
joined=$("$CTR" exec instance://limited sh -c 'grep -E ":memory:|^0::" /proc/self/cgroup')
expect_contains "a launch into the instance is in its cgroup" "ctr-instance-0-limited" "$joined"
set +e; "$CTR" exec instance://limited ./hog mem 200 2>/dev/null; rc=$?; set -e
[ "$rc" != 0 ] || fail "200 MiB touched in an instance limited to 64M"
expect_eq "the instance survives its process's OOM kill" limited \
  "$("$CTR" instance list --json | jq -r '.instances[] | select(.instance == "limited") | .instance')"
"$CTR" instance stop limited >/dev/null
[ -z "$(instance_cgroups)" ] || fail "instance stop left its cgroups: $(instance_cgroups)"
# An instance whose keeper was SIGKILLed: the next look at it removes its cgroup.
"$CTR" instance start --memory 64M demo.sqfs killed >/dev/null
kill -KILL "$("$CTR" instance list --json | jq -r '.instances[] | select(.instance == "killed") | .pid')"
for _ in $(seq 50); do [ -z "$("$CTR" instance list --json | jq -r '.instances[].instance')" ] && break; sleep 0.1; done
for _ in $(seq 50); do [ -z "$(instance_cgroups)" ] && break; sleep 0.1; done
[ -z "$(instance_cgroups)" ] || fail "a killed instance's cgroup stayed: $(instance_cgroups)"
set +e; out=$("$CTR" instance start --stats "$WORK/s.json" demo.sqfs withstats 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "instance start --stats accepted"
expect_contains "instance --stats refused" "instance stats NAME" "$out"

note "UserWithDelegationGetsLimits"
# cgroup v2 delegated to the user as systemd delegates user@UID.service: a directory the
# user owns (with its cgroup.procs, cgroup.subtree_control and cgroup.threads), ctr.conf's
# 'cgroup delegate' naming it, and the user's session in a child of it (a process may only
# be moved between cgroups below one whose cgroup.procs it may write). Needs the controllers
# at the v2 root (not so where v1 holds them, as on the CI VMs).
v2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null && grep -qw cpu "$v2/cgroup.controllers" &&
  grep -qw memory "$v2/cgroup.subtree_control" && grep -qw cpu "$v2/cgroup.subtree_control"; then
  deleg=$v2/ctr-test-delegated-$$
  mkdir "$deleg" "$deleg/session"
  chown "$CTR_TEST_USER" "$deleg" "$deleg/cgroup.procs" "$deleg/cgroup.subtree_control" "$deleg/cgroup.threads" \
    "$deleg/session" "$deleg/session/cgroup.procs"
  printf 'image linger = 0\ncgroup delegate = %s\n' "$deleg" > "$WORK/deleg.conf"
  chmod 644 "$WORK/deleg.conf"
  trap 'rmdir "$deleg"/ctr-* "$deleg/session" "$deleg" 2>/dev/null || true; rm -rf "$WORK"' EXIT
  # as_user, from a shell that first moves itself into the session cgroup.
  in_session() {
    (cd "$WORK" && sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$deleg/session/cgroup.procs" \
      runuser -u "$CTR_TEST_USER" -- env -i HOME="$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)" \
      USER="$CTR_TEST_USER" PATH=/usr/local/bin:/usr/bin:/bin CTR_CONFIG="$WORK/deleg.conf" "$@")
  }
  set +e
  out=$(in_session "$CTR" exec --memory 64M "$WORK/demo.sqfs" ./hog mem 200 2>&1)
  rc=$?
  set -e
  expect_eq "delegated: OOM exit status" 137 "$rc"
  expect_contains "delegated: OOM message" "ctr: killed: memory limit 64 MiB reached" "$out"
  cpu=$(in_session "$CTR" exec --cpus 0.5 "$WORK/demo.sqfs" ./hog cpu 3) ||
    fail "delegated spinner: $cpu"
  note "delegated v2: a spinner for 3 s under --cpus 0.5 got $cpu CPU seconds"
  awk -v c="$cpu" 'BEGIN { exit !(c > 0.1 && c < 2.1) }' || fail "delegated --cpus 0.5: $cpu CPU seconds in 3 s"
  n=$(in_session "$CTR" exec --pids-limit 10 "$WORK/demo.sqfs" ./hog fork 50) ||
    fail "delegated fork hog: $n"
  [ "$n" -lt 10 ] || fail "delegated --pids-limit 10: $n children started"
  expect_contains "delegated: ctr check" "cgroup v2, below the delegated $deleg" \
    "$(in_session "$CTR" check 2>&1 || true)"
  left=$(find "$deleg" -mindepth 1 -maxdepth 1 -type d -name 'ctr-*')
  [ -z "$left" ] || fail "delegated: cgroups left: $left"
  rmdir "$deleg/session" "$deleg"
else
  note "SKIP part: cgroup v2 here has no memory and cpu controllers at its root (${v2:-none mounted}): nothing to delegate"
fi

note "UserWithoutDelegationIsRefused"
set +e; out=$(as_user "$CTR" exec --memory 64M "$WORK/demo.sqfs" true 2>&1); rc=$?; set -e
expect_eq "user limits: exit status" 255 "$rc"
expect_contains "user limits" "cannot apply the resource limits" "$out"
note "refused: $out"
no_cgroups "at the end"
assert_nothing_left "limits"
echo "PASS: $TEST_NAME"
