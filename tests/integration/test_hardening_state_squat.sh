#!/bin/bash
# Issue 14, item 5, and issue 51, M2: another user who pre-creates every predictable state
# directory name (/tmp/ctr-UID and /tmp/ctr-UID.1 ... .15, as directories or symlinks)
# cannot stop a user from launching or from keeping instances: the user's own
# $XDG_RUNTIME_DIR comes first, and without one the user's own /tmp/ctr-UID-XXXXXX (made
# with mkdtemp, so nobody can take it first) serves, found again by every later launch, so
# mounts are still shared and instances still found. A FIFO planted as an instance record
# does not hang `instance list` (M1). As unprivileged users, through squashfuse.
. "$(dirname "$0")/lib.sh"
# A user of its own: no earlier test's state directories stand in the way of the squat.
CTR_TEST_USER=${CTR_SQUAT_TEST_USER:-ctrsquat}
ensure_test_user
require_fuse
use_linger 0
SQUATTER=$(second_test_user)
uid=$(id -u "$CTR_TEST_USER")
[ -n "$(live_processes_of "$uid")" ] && skip "$CTR_TEST_USER has processes running: cannot clear its state directories"
rm -rf /tmp/ctr-"$uid" /tmp/ctr-"$uid".* /tmp/ctr-"$uid"-*
RUNDIR=$WORK/run-user
trap 'pkill -KILL -U "$uid" || true; rm -rf /tmp/ctr-"$uid" /tmp/ctr-"$uid".* /tmp/ctr-"$uid"-* "$WORK"' EXIT

make_demo_squashfs demo
chmod -R a+rX "$WORK"
private_dirs() { ls -d /tmp/ctr-"$uid"-* 2>/dev/null | wc -l; }

note "all 16 names squatted by $SQUATTER (14 directories, a symlink to a directory of the user's, a file)"
mkdir -p "$WORK/victim-owned"; chown "$CTR_TEST_USER" "$WORK/victim-owned"; chmod 700 "$WORK/victim-owned"
for i in $(seq 0 15); do
  name=/tmp/ctr-$uid; [ "$i" = 0 ] || name=$name.$i
  case $i in
    3) runuser -u "$SQUATTER" -- ln -s "$WORK/victim-owned" "$name";;
    7) runuser -u "$SQUATTER" -- touch "$name";;
    *) runuser -u "$SQUATTER" -- mkdir -m 0777 "$name";;
  esac
done

note "KeptStateDirWhenAllNamesAreTaken"
explained=$(as_user "$CTR_BIN" exec --explain "$WORK/demo.sqfs" true 2>&1) || fail "--explain: $explained"
expect_contains "--explain names the user's own state dir" "/tmp/ctr-$uid-" "$explained"
set +e; out=$(as_user "$CTR_BIN" exec "$WORK/demo.sqfs" echo ran 2>"$WORK/err"); rc=$?; set -e
err=$(cat "$WORK/err")
[ "$rc" = 0 ] || fail "launch with every name squatted: $rc: $out $err"
expect_eq "launch with every name squatted" ran "$out"
expect_contains "the user is told why" "a private one of yours, instead" "$err"
note "warned: $err"
for i in $(seq 0 15); do
  name=/tmp/ctr-$uid; [ "$i" = 0 ] || name=$name.$i
  [ "$(stat -c %U "$name")" = "$SQUATTER" ] || fail "$name changed owner"
done
[ -z "$(ls -A "$WORK/victim-owned")" ] || fail "ctr wrote through the squatter's symlink: $(ls -A "$WORK/victim-owned")"
assert_nothing_left "kept state dir launch"
expect_eq "the user's own state directories" 1 "$(private_dirs)"
kept=$(ls -d /tmp/ctr-"$uid"-*)
expect_eq "the user's, 0700" "$CTR_TEST_USER 700" "$(stat -c '%U %a' "$kept")"

note "ConcurrentLaunchesShareIt"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 1 2>/dev/null &
p1=$!
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 1 2>/dev/null &
p2=$!
sleep 0.5
holders=$(ls "$kept" | grep -c '\.pid$' || true)
[ "$holders" -le 1 ] || fail "two launches of one image started $holders holders in $kept"
wait "$p1" || fail "first concurrent launch failed"
wait "$p2" || fail "second concurrent launch failed"
assert_nothing_left "concurrent launches"
expect_eq "still one state directory" "$kept" "$(ls -d /tmp/ctr-"$uid"-*)"

note "InstancesWhenAllNamesAreTaken (M2)"
set +e; out=$(as_user "$CTR_BIN" instance start "$WORK/demo.sqfs" squatted 2>&1); rc=$?; set -e
[ "$rc" = 0 ] || fail "instance start with every name squatted: $rc: $out"
expect_contains "instance list finds it" squatted "$(as_user "$CTR_BIN" instance list 2>/dev/null)"
expect_eq "exec in it" ran "$(as_user "$CTR_BIN" exec instance://squatted echo ran 2>/dev/null)"
[ -f "$kept/instances/squatted.json" ] || fail "the instance is not kept in $kept: $(ls -la "$kept")"

note "FifoRecordDoesNotHangTheLister (M1)"
as_user mkfifo "$kept/instances/planted.json"
set +e; out=$(timeout 20 runuser -u "$CTR_TEST_USER" -- env -i PATH=/usr/bin:/bin HOME=/ ${CTR_TEST_CONFIG:+CTR_CONFIG=$CTR_TEST_CONFIG} \
  "$CTR_BIN" instance list 2>&1); rc=$?; set -e
[ "$rc" != 124 ] || fail "instance list hung on a FIFO named like a record"
[ "$rc" = 0 ] || fail "instance list with a FIFO record: $rc: $out"
expect_contains "still lists the real one" squatted "$out"
as_user rm -f "$kept/instances/planted.json"
as_user "$CTR_BIN" instance stop squatted >/dev/null 2>&1 || fail "instance stop"
assert_nothing_left "instances in the kept state dir"

note "RuntimeDirComesFirst"
mkdir -p "$RUNDIR"; chown "$CTR_TEST_USER" "$RUNDIR"; chmod 700 "$RUNDIR"
explained=$(as_user env XDG_RUNTIME_DIR="$RUNDIR" "$CTR_BIN" exec --explain "$WORK/demo.sqfs" true 2>&1)
expect_contains "--explain with XDG_RUNTIME_DIR" "$RUNDIR/ctr" "$explained"
set +e; out=$(as_user env XDG_RUNTIME_DIR="$RUNDIR" "$CTR_BIN" exec "$WORK/demo.sqfs" echo ran 2>&1); rc=$?; set -e
[ "$rc" = 0 ] && [ "$out" = ran ] || fail "launch with XDG_RUNTIME_DIR: $rc: $out"
[ -d "$RUNDIR/ctr/mnt" ] || fail "state not kept in $RUNDIR/ctr"
wait_user_processes_end  # the image's holder removes its files as it ends
! ls "$RUNDIR/ctr" | grep -qE '\.(users|setup|sock|pid)$' || fail "state files left in $RUNDIR/ctr: $(ls "$RUNDIR/ctr")"
chown "$SQUATTER" "$RUNDIR"
explained=$(as_user env XDG_RUNTIME_DIR="$RUNDIR" "$CTR_BIN" exec --explain "$WORK/demo.sqfs" true 2>&1)
expect_contains "XDG_RUNTIME_DIR of another user is ignored" "$kept" "$explained"
assert_nothing_left "runtime dir"
echo "PASS: $TEST_NAME"
