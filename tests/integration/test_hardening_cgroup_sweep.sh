#!/bin/bash
# Issue 24, F11: a launch SIGKILLed while it held cgroups in several hierarchies (--memory and
# --pids-limit: memory, cpuacct and pids on cgroup v1) left them all; the next launch, with
# --memory only, swept just the hierarchies it used itself, so pids/ctr-<pid> stayed for good.
# The sweep now covers every hierarchy ctr uses (limits::Placement::sweepDirs).
. "$(dirname "$0")/lib.sh"
require_root
ensure_test_user
require_fuse
use_linger 0
export CTR_CONFIG=$CTR_TEST_CONFIG
CTR=$CTR_BIN

make_demo_squashfs demo
chmod -R a+rX "$WORK"
cd "$WORK"

plan=$("$CTR" exec --memory 64M --pids-limit 32 --explain demo.sqfs true 2>&1) ||
  skip "no cgroup for --memory and --pids-limit here: $plan"
backend=$(printf '%s\n' "$plan" | sed -n 's/^cgroup: *\(cgroup v[12]\).*/\1/p')
note "${backend:-no backend}: $(printf '%s\n' "$plan" | sed -n '/^cgroup:/,/^[a-z]/p' | grep '^  ' | tr -s ' ' | tr '\n' ';')"
# On v2 one directory holds every controller, so nothing can be left in another hierarchy.
[ "$backend" = "cgroup v1" ] || skip "$backend here: one hierarchy, the case needs cgroup v1's separate ones"
printf '%s\n' "$plan" | grep -q '^  pids: ' || skip "the pids controller is not a v1 hierarchy here"
cgroups_of() { find /sys/fs/cgroup -mindepth 1 -maxdepth 8 -type d -name "ctr-$1" 2>/dev/null || true; }

note "SweepsEveryHierarchyAfterASigkill"
"$CTR" exec --memory 64M --pids-limit 32 demo.sqfs sleep 30 &
launcher=$!
for _ in $(seq 100); do
  [ -n "$(cgroups_of "$launcher" | grep /pids/)" ] && [ -n "$(cat $(cgroups_of "$launcher" | grep /pids/)/cgroup.procs 2>/dev/null)" ] && break
  sleep 0.05
done
left=$(cgroups_of "$launcher")
printf '%s\n' "$left" | grep -q /pids/ || fail "the launch never made its pids cgroup: $left"
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null || true
# Its app dies with it (PR_SET_PDEATHSIG); wait for the cgroups to empty.
for _ in $(seq 100); do
  busy=0
  for d in $(cgroups_of "$launcher"); do [ -z "$(cat "$d/cgroup.procs" 2>/dev/null)" ] || busy=1; done
  [ "$busy" = 0 ] && break
  sleep 0.05
done
note "left by the SIGKILLed ctr ($launcher): $(echo $(cgroups_of "$launcher"))"
"$CTR" exec --memory 64M demo.sqfs true || fail "the next launch (--memory only)"
left=$(cgroups_of "$launcher")
[ -z "$left" ] || fail "cgroups of the dead launch $launcher left after the next launch: $(echo $left)"
assert_nothing_left "cgroup sweep"
echo "PASS: $TEST_NAME"
