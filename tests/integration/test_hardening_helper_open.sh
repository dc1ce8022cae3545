#!/bin/bash
# Issue 14, items 1 and 7 and "Also", against the installed setuid helper, as unprivileged
# users: the helper mounts only a file the caller can read, whatever the path form (/proc
# magic links of another user's process, of a thread, /proc/self/fd/N handed in), without
# telling apart missing and unreadable files; it refuses images with more than one hard link
# (another name could lie outside 'setuid image directories') and images a process on the
# node holds open for writing (a descriptor kept from before a chmod); and euid 0 inside a
# user namespace is not taken for setuid root.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"
helper_fixture

# A second user, in a group the test user is not in: the owner of the process whose
# /proc/PID/{cwd,root} the test user tries to go through.
USER2=${CTR_TEST_USER2:-ctrtest2}
GROUP2=${CTR_TEST_GROUP2:-ctrtestgrp}
getent group "$GROUP2" >/dev/null || groupadd "$GROUP2"
id "$USER2" >/dev/null 2>&1 || useradd -m -s /bin/sh "$USER2"
usermod -aG "$GROUP2" "$USER2"
id -nG "$CTR_TEST_USER" | grep -qw "$GROUP2" && fail "$CTR_TEST_USER must not be in $GROUP2"
as_user2() { ( cd / && runuser -u "$USER2" -- env -i PATH=/usr/local/bin:/usr/bin:/bin "$@" ); }

# Whether this kernel has openat2 (Linux 5.6): with it, magic links are refused outright
# ("magic link"); without it, only the caller's own rights decide ("Permission denied").
if python3 -c 'import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
how = struct.pack("QQQ", os.O_RDONLY, 0, 0)
fd = libc.syscall(437, -100, b"/", how, len(how))
sys.exit(0 if fd >= 0 or ctypes.get_errno() != 38 else 1)'; then
  magic_refusal="magic link"
else
  magic_refusal="Permission denied"
  note "no openat2 on this kernel ($(uname -r)): expecting the caller's own EACCES instead"
fi

# expect_not_mounted WHAT NEEDLE ARGS...: refused naming NEEDLE, and the private image
# (marker "secret") was not mounted.
expect_not_mounted() {
  local what=$1 needle=$2; shift 2
  run_helper "$@"
  [ "$RC" = 255 ] || fail "$what: expected refusal (255), got $RC: $OUT"
  case "$OUT" in *secret*) fail "$what: the private image was mounted: $OUT";; esac
  expect_contains "$what" "$needle" "$OUT"
  no_leftovers "$what"
  note "refused: $what: ${OUT#ctr-mount-helper: }"
}

# The issue's layout: a readable image in a 0755 directory below a root:$GROUP2 0750 one
# the test user cannot enter, where $USER2 has a shell.
PRIV="$WORK/private"
note "setup: $PRIV (0750 root:$GROUP2)/sub (0755)/app.sqfs (0644), and $USER2's shell in sub"
mkdir -p "$PRIV/sub"
make_squashfs "$PRIV/sub/app.sqfs" secret
chown -R root:"$GROUP2" "$PRIV"
chmod 750 "$PRIV"
chmod 755 "$PRIV/sub"
chmod 644 "$PRIV/sub/app.sqfs"
mkdir -p "$WORK/pids"; chmod 777 "$WORK/pids"
as_user2 sh -c "cd '$PRIV/sub' && echo \$\$ >'$WORK/pids/cwd' && exec sleep 120" &
trap 'pkill -KILL -u "$USER2" sleep || true; pkill -KILL -u "$CTR_TEST_USER" -f "^sleep 120" || true; rm -rf "$WORK"' EXIT
for i in $(seq 50); do [ -s "$WORK/pids/cwd" ] && break; sleep 0.1; done
P=$(cat "$WORK/pids/cwd")
[ "$(readlink "/proc/$P/cwd")" = "$PRIV/sub" ] || fail "setup: $USER2's process is not in $PRIV/sub"
# Control: a member of the group may mount it; the test user cannot even open it directly.
set +e; OUT=$(as_user2 "$HELPER" "$PRIV/sub/app.sqfs" marker 2>&1); RC=$?; set -e
[ "$RC" = 0 ] && [ "$OUT" = secret ] || fail "control: $USER2 (in $GROUP2) cannot mount its image ($RC): $OUT"
expect_not_mounted "the image by its own path" "Permission denied" "$PRIV/sub/app.sqfs" marker

note "RefusesMagicLinksOfAnotherUsersProcess"
# (The pre-fix helper, with CAP_SYS_PTRACE still effective, mounted "secret" this way.)
# Without CAP_SYS_PTRACE the kernel's own ptrace check on another user's process refuses
# these links before they resolve: the caller's own EACCES.
expect_not_mounted "/proc/PID/cwd/FILE" "Permission denied" "/proc/$P/cwd/app.sqfs" marker
expect_not_mounted "/proc/PID/root/PATH" "Permission denied" "/proc/$P/root$PRIV/sub/app.sqfs" marker
expect_not_mounted "/proc/PID/task/TID/cwd/FILE" "Permission denied" "/proc/$P/task/$P/cwd/app.sqfs" marker
mkdir -p "$WORK/mine"; chown "$CTR_TEST_USER" "$WORK/mine"
as_user ln -s "/proc/$P/cwd/app.sqfs" "$WORK/mine/link.sqfs"
expect_not_mounted "a symlink of the user's into /proc/PID/cwd" "Permission denied" "$WORK/mine/link.sqfs" marker
# Magic links the caller may follow (its own processes) are refused as such.
as_user sh -c "cd '$IMAGES' && exec sleep 120" &
own_job=$!
own=
for i in $(seq 50); do own=$(pgrep -u "$CTR_TEST_USER" -f "^sleep 120" | head -1 || true); [ -n "$own" ] && break; sleep 0.1; done
[ -n "$own" ] || fail "setup: the test user's own process did not start"
expect_not_mounted "the caller's own /proc/PID/cwd" "$magic_refusal" "/proc/$own/cwd/good.sqfs" marker
expect_not_mounted "the caller's own /proc/PID/task/TID/cwd" "$magic_refusal" "/proc/$own/task/$own/cwd/good.sqfs" marker
kill "$own" 2>/dev/null || true; wait "$own_job" 2>/dev/null || true

note "RefusesFdsHandedIn: /proc/self/fd/N, even for a file the caller holds open"
make_squashfs "$IMAGES/rootonly.sqfs" secret
chmod 600 "$IMAGES/rootonly.sqfs"
# Root opens the file and the test user's helper inherits fd 7 (as a daemon might pass it).
set +e; OUT=$(as_user "$HELPER" /proc/self/fd/7 marker 7<"$IMAGES/rootonly.sqfs" 2>&1); RC=$?; set -e
[ "$RC" = 255 ] || fail "/proc/self/fd/7 of a root-only file: expected refusal, got $RC: $OUT"
case "$OUT" in *secret*) fail "/proc/self/fd/7: the root-only image was mounted";; esac
expect_contains "/proc/self/fd/7" "$magic_refusal" "$OUT"
note "refused: /proc/self/fd/7 (root-only file): ${OUT#ctr-mount-helper: }"
set +e; OUT=$(as_user "$HELPER" /proc/self/fd/7 marker 7<"$IMAGES/good.sqfs" 2>&1); RC=$?; set -e
[ "$RC" = 255 ] || fail "/proc/self/fd/7 of a readable file: expected refusal, got $RC: $OUT"
note "refused: /proc/self/fd/7 (readable file): ${OUT#ctr-mount-helper: }"
no_leftovers "fds handed in"

note "DoesNotTellMissingFromUnreadable"
same_error() {
  local a b
  run_helper "$1" marker; a=${OUT//"$1"/PATH}
  run_helper "$2" marker; b=${OUT//"$2"/PATH}
  expect_eq "$3: missing and unreadable give one error" "$a" "$b"
  note "both: $a"
}
same_error "$PRIV/sub/app.sqfs" "$PRIV/sub/missing.sqfs" "below a directory the user cannot enter"
same_error "/proc/$P/cwd/app.sqfs" "/proc/$P/cwd/missing.sqfs" "through another user's /proc/PID/cwd"
no_leftovers "missing vs unreadable"

note "RefusesHardLinkedImages"
mkdir -p "$WORK/allowed" "$WORK/elsewhere"
chmod 755 "$WORK/allowed" "$WORK/elsewhere"
cp -p "$IMAGES/good.sif" "$WORK/allowed/one-name.sif"
cp -p "$IMAGES/good.sif" "$WORK/elsewhere/outside.sif"
ln "$WORK/elsewhere/outside.sif" "$WORK/allowed/hardlink.sif"
write_conf "allow setuid = yes" "setuid image directories = $WORK/allowed"
run_helper "$WORK/allowed/one-name.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "an image with one name in the allowed directory: $RC: $OUT"
expect_refused "hard link in the allowed directory to an image outside it" "has 2 hard links (1 is allowed): refused" \
  "$WORK/allowed/hardlink.sif" marker
expect_refused "the same image by its outside name" "has 2 hard links" "$WORK/elsewhere/outside.sif" marker
write_conf "allow setuid = yes"
ln "$WORK/allowed/one-name.sif" "$WORK/allowed/second-name.sif"
expect_refused "two names, no directory policy" "has 2 hard links" "$WORK/allowed/one-name.sif" marker
rm "$WORK/allowed/second-name.sif"
run_helper "$WORK/allowed/one-name.sif" marker
[ "$RC" = 0 ] || fail "back to one name: $RC: $OUT"

note "RefusesImagesOpenForWriting: chmod does not take back a descriptor kept from before"
# An admin adopts a user's image by moving it and making it root's and 0644; the user kept a
# descriptor opened while it was writable, through which it could change under the mount.
cp -p "$IMAGES/good.sif" "$WORK/allowed/adopted.sif"
chmod 666 "$WORK/allowed/adopted.sif"
# hold MODE: a process of the test user holding the image open (9<> writes, 9< reads).
hold() {
  rm -f "$WORK/pids/held"
  as_user sh -c "exec 9$1'$WORK/allowed/adopted.sif' && echo \$\$ >'$WORK/pids/held' && exec sleep 120" &
  held_job=$!
  for i in $(seq 50); do [ -s "$WORK/pids/held" ] && break; sleep 0.1; done
  [ -s "$WORK/pids/held" ] || fail "setup: the test user could not hold the image open ($1)"
}
unhold() { kill "$(cat "$WORK/pids/held")" 2>/dev/null || true; wait "$held_job" 2>/dev/null || true; }
hold "<>"
chmod 644 "$WORK/allowed/adopted.sif"
refused_while_held "an image a process holds open for writing" \
  "image $WORK/allowed/adopted.sif: a process on this node has it open for writing: refused" \
  "$WORK/allowed/adopted.sif" marker
unhold
no_leftovers "open for writing"
hold "<"
run_helper "$WORK/allowed/adopted.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "an image a process holds open only for reading: $RC: $OUT"
unhold
run_helper "$WORK/allowed/adopted.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "once the writer is gone: $RC: $OUT"
no_leftovers "readers"

note "RefusesRootInsideAUserNamespace"
if as_user unshare -Ur true 2>/dev/null; then
  set +e; OUT=$(as_user unshare -Ur "$HELPER" "$IMAGES/good.sif" marker 2>&1); RC=$?; set -e
  [ "$RC" = 255 ] || fail "helper run as root of a user namespace: got $RC: $OUT"
  expect_contains "helper in unshare -Ur" "not installed setuid root" "$OUT"
  note "refused: unshare -Ur: ${OUT#ctr-mount-helper: }"
  no_leftovers "user namespace"
else
  # The one check here that needs them; everything above has run.
  skip "unprivileged user namespaces are disabled here (unshare -Ur as $CTR_TEST_USER failed); the rest passed"
fi

echo "PASS: $TEST_NAME"
