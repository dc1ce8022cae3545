#!/bin/bash
# Issue 14, "Done when": a SIGKILL storm. At least 100 launches as the unprivileged test user,
# three at a time, through squashfuse and through the installed setuid helper; while they
# run, SIGKILL goes at random moments to a random one of: the ctr launcher, the image holder,
# the setuid helper, the FUSE server (ctr-squashfs or squashfuse_ll), or all of them. Once
# the holders are gone nothing may remain: no mount, loop device, process or state file; and
# the next launch works.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"

ensure_test_user
require_fuse
use_linger 0
uid=$(id -u "$CTR_TEST_USER")
trap 'pkill -KILL -U "$uid" || true; rm -f "${CONF:-/nonexistent}"; rm -rf "$WORK"' EXIT
LAUNCHES=${CTR_STORM_LAUNCHES:-60}   # per driver
RANDOM=${CTR_STORM_SEED:-$$}
note "seed $RANDOM (CTR_STORM_SEED reproduces a run), $LAUNCHES launches per driver"

make_demo_squashfs demo
chmod -R a+rX "$WORK"

# kill_one KIND...: picks one of the KINDs at random and SIGKILLs the test user's processes of
# that kind, trying for up to ~40 ms (the helper lives a few ms); prints the kind when a kill
# landed.
kill_one() {
  local kinds=("$@") kind pattern try
  kind=${kinds[$((RANDOM % ${#kinds[@]}))]}
  case "$kind" in
    ctr) pattern='^[^ ]*/ctr exec';;
    holder) pattern='holder';;
    helper) pattern='ctr-mount-helper';;
    squashfuse) pattern='squashfuse|ctr-squashfs';;  # the image's FUSE server
    all) pattern='ctr|squashfuse';;
  esac
  for try in $(seq 40); do
    # -U: the real uid (the setuid helper runs with euid 0 and the user's real uid).
    pkill -KILL -U "$uid" -f "$pattern" 2>/dev/null && { echo "$kind"; return 0; }
    sleep 0.001
  done
  return 0
}

# storm CTR DRIVER KIND...: LAUNCHES launches, three at a time, under random kills of KINDs.
storm() {
  local ctr=$1 driver=$2 i killed=0 ok=0 pids=() kinds=""
  shift 2
  for i in $(seq "$LAUNCHES"); do
    as_user "$ctr" exec "$WORK/demo.sqfs" sh -c "sleep 0.0$((RANDOM % 5))" >/dev/null 2>&1 &
    pids+=($!)
    if [ $((i % 3)) = 0 ]; then
      sleep "0.0$((RANDOM % 10))$((RANDOM % 10))"
      k=$(kill_one "$@"); [ -n "$k" ] && killed=$((killed + 1)) && kinds+=" $k"
      sleep "0.00$((RANDOM % 10))"
      k=$(kill_one "$@"); [ -n "$k" ] && killed=$((killed + 1)) && kinds+=" $k"
      for p in "${pids[@]}"; do wait "$p" 2>/dev/null && ok=$((ok + 1)); done
      pids=()
    fi
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null && ok=$((ok + 1)); done
  note "$driver: $LAUNCHES launches, $ok exited 0, $killed kills:$(echo "$kinds" | tr ' ' '\n' | sed '/^$/d' | sort | uniq -c | awk '{printf " %s %s", $2, $1}')"
  [ "$killed" -ge $((LAUNCHES / 6)) ] || fail "$driver: only $killed kills landed: the storm did not hit the launches"
  # A SIGKILLed holder cannot remove its own state files: the user's next launch does (it
  # sweeps the keys whose holder is dead). Everything else must be gone already.
  assert_nothing_left "$driver storm" keep-state-files
  local left
  left=$(ls /tmp/ctr-"$uid" | grep -E '\.(users|setup|sock|pid)' | tr '\n' ' ' || true)
  note "$driver: state files of killed holders before the next launch: ${left:-none}"
}

# after_storm CTR DRIVER: the next launch works and leaves nothing, state files included.
after_storm() {
  local ctr=$1 driver=$2 out
  out=$(as_user "$ctr" exec "$WORK/demo.sqfs" echo alive 2>&1) || fail "$driver: launch after the storm: $out"
  expect_eq "$driver: launch after the storm" alive "$out"
  assert_nothing_left "$driver: launch after the storm"
}

storm "$CTR_BIN" squashfuse ctr holder squashfuse all
after_storm "$CTR_BIN" squashfuse

helper_runtime "(the squashfuse storm passed)"
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0"
CTR_TEST_CONFIG=  # the installed ctr reads $CONF
# The helper lives a few milliseconds, too short for pkill: a C hunter scanning /proc kills
# it at random points while the storm runs. How many it catches depends on the machine's
# load, so the storm runs again (at most three times) until it has killed three.
cc -O2 -o "$WORK/kill_hunter" "$(dirname "$0")/kill_hunter.c"
kills=0
for round in 1 2 3; do
  touch "$WORK/hunting"
  "$WORK/kill_hunter" "$uid" ctr-mount-helpe "$WORK/hunting" >"$WORK/helper-kills" &
  hunter=$!
  storm "$PREFIX/bin/ctr" "setuid helper" ctr holder all
  rm -f "$WORK/hunting"
  wait "$hunter"
  kills=$((kills + $(cat "$WORK/helper-kills")))
  note "setuid helper, storm $round: $(cat "$WORK/helper-kills") helpers killed by the hunter ($kills in all)"
  after_storm "$PREFIX/bin/ctr" "setuid helper"
  [ "$kills" -lt 3 ] || break
done
[ "$kills" -ge 3 ] || fail "the hunter killed $kills helpers in three storms (fewer than 3): the storms missed them"
rm -f "$CONF"
echo "PASS: $TEST_NAME"
