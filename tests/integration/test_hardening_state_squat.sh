#!/bin/bash
# Issue 14, item 5: another user who pre-creates every predictable state directory name
# (/tmp/ctr-UID and /tmp/ctr-UID.1 ... .15, as directories or symlinks) cannot stop a user
# from launching: the user's own $XDG_RUNTIME_DIR comes first, and without one each launch
# gets an unpredictable private directory (mkdtemp) that its holder removes, losing only the
# sharing of a mount between launches. As unprivileged users, through squashfuse.
. "$(dirname "$0")/lib.sh"
# A user of its own: no earlier test's state directories stand in the way of the squat.
CTR_TEST_USER=${CTR_SQUAT_TEST_USER:-ctrsquat}
ensure_test_user
require_fuse
use_linger 0
SQUATTER=${CTR_TEST_USER2:-ctrtest2}
id "$SQUATTER" >/dev/null 2>&1 || useradd -m -s /bin/sh "$SQUATTER"
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

note "PrivateStateDirWhenAllNamesAreTaken"
explained=$(as_user "$CTR_BIN" exec --explain "$WORK/demo.sqfs" true 2>&1) || fail "--explain: $explained"
expect_contains "--explain names no shared state dir" "a private one per launch" "$explained"
set +e; out=$(as_user "$CTR_BIN" exec "$WORK/demo.sqfs" echo ran 2>"$WORK/err"); rc=$?; set -e
err=$(cat "$WORK/err")
[ "$rc" = 0 ] || fail "launch with every name squatted: $rc: $out $err"
expect_eq "launch with every name squatted" ran "$out"
expect_contains "the user is told why" "belong to other users" "$err"
note "warned: $err"
for i in $(seq 0 15); do
  name=/tmp/ctr-$uid; [ "$i" = 0 ] || name=$name.$i
  [ "$(stat -c %U "$name")" = "$SQUATTER" ] || fail "$name changed owner"
done
[ -z "$(ls -A "$WORK/victim-owned")" ] || fail "ctr wrote through the squatter's symlink: $(ls -A "$WORK/victim-owned")"
assert_nothing_left "private state dir launch"
expect_eq "private state directories left" 0 "$(private_dirs)"

note "ConcurrentLaunchesEachGetTheirOwn"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 1 2>/dev/null &
p1=$!
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 1 2>/dev/null &
p2=$!
sleep 0.5
n=$(private_dirs)
wait "$p1" || fail "first concurrent launch failed"
wait "$p2" || fail "second concurrent launch failed"
expect_eq "private state directories while two launches ran" 2 "$n"
assert_nothing_left "concurrent private launches"
expect_eq "private state directories left" 0 "$(private_dirs)"

note "RuntimeDirComesFirst"
mkdir -p "$RUNDIR"; chown "$CTR_TEST_USER" "$RUNDIR"; chmod 700 "$RUNDIR"
explained=$(as_user env XDG_RUNTIME_DIR="$RUNDIR" "$CTR_BIN" exec --explain "$WORK/demo.sqfs" true 2>&1)
expect_contains "--explain with XDG_RUNTIME_DIR" "$RUNDIR/ctr" "$explained"
set +e; out=$(as_user env XDG_RUNTIME_DIR="$RUNDIR" "$CTR_BIN" exec "$WORK/demo.sqfs" echo ran 2>&1); rc=$?; set -e
[ "$rc" = 0 ] && [ "$out" = ran ] || fail "launch with XDG_RUNTIME_DIR: $rc: $out"
[ -d "$RUNDIR/ctr/mnt" ] || fail "state not kept in $RUNDIR/ctr"
! ls "$RUNDIR/ctr" | grep -qE '\.(users|setup|sock|pid)$' || fail "state files left in $RUNDIR/ctr: $(ls "$RUNDIR/ctr")"
chown "$SQUATTER" "$RUNDIR"
explained=$(as_user env XDG_RUNTIME_DIR="$RUNDIR" "$CTR_BIN" exec --explain "$WORK/demo.sqfs" true 2>&1)
expect_contains "XDG_RUNTIME_DIR of another user is ignored" "a private one per launch" "$explained"
assert_nothing_left "runtime dir"
echo "PASS: $TEST_NAME"
