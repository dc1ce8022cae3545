#!/bin/bash
# Issue 15, item 6: no file descriptor of ctr's in the container. The app sees only what its
# caller passed (here 0-2): the holder watches the app through a pidfd, so no lock file or
# socket of the state directory stays open across execve (Apptainer's regression test
# issue4488 lists /proc/self/fd). As the unprivileged test user: a directory image, a SIF
# through squashfuse, the supervised path (--stats), and the SIF through the setuid helper.
# And the image stays mounted for a long-running app while another launch of it ends, and
# is torn down after the last one.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"
ensure_test_user
require_fuse
use_linger 0
uid=$(id -u "$CTR_TEST_USER")
trap 'pkill -KILL -U "$uid" || true; rm -f "${CONF:-/nonexistent}"; rm -rf "$WORK"' EXIT

make_demo_rootfs "$WORK/demo"
"$CTR_BIN" build "$WORK/demo.sif" "$WORK/demo" >/dev/null
chmod -R a+rX "$WORK"
mkdir "$WORK/out" && chown "$CTR_TEST_USER" "$WORK/out"
CTR=$CTR_BIN

# as_user_stdio_only CMD...: as_user CMD with every fd but 0-2 closed (the test's own lock
# fds, say), so that what the container sees is only what ctr adds.
as_user_stdio_only() {
  as_user bash -c 'for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -le 2 ] || eval "exec $n>&-"; done
                   exec "$@"' stdio-only "$@"
}

# only_stdio WHAT ARGS...: `ctr exec ARGS... ls -l /proc/self/fd`, started with only fds 0-2
# open, lists 0, 1, 2 and ls's own directory fd, nothing else.
only_stdio() {
  local what=$1 out extra
  shift
  out=$(as_user_stdio_only "$CTR" exec "$@" ls -l /proc/self/fd) ||
    fail "$what: launch failed: $out"
  # busybox ls -l: "lrwx------ 1 user user 64 <date> N -> TARGET"
  extra=$(printf '%s\n' "$out" | awk '$(NF-1) == "->" && $(NF-2) !~ /^[012]$/ && $NF !~ /^\/proc\/[0-9]+\/fd$/')
  [ -z "$extra" ] || fail "$what: descriptors besides 0-2 in the container: $extra"
  for fd in 0 1 2; do
    printf '%s\n' "$out" | awk -v fd="$fd" '$(NF-2) == fd' | grep -q . || fail "$what: fd $fd missing: $out"
  done
  note "$what: only 0-2 (and ls's own)"
}

only_stdio "directory image" "$WORK/demo"
only_stdio "SIF through squashfuse" "$WORK/demo.sif"
only_stdio "supervised (--stats)" --stats "$WORK/out/stats.json" "$WORK/demo.sif"
[ -s "$WORK/out/stats.json" ] || fail "--stats wrote no record"
# The shell's own view, as a loop over /proc/$$/fd (Apptainer's issue4488 check), run in a
# subshell so that the directory's own fd is the subshell's, not the shell's. No pipeline:
# while the shell sets one up it holds the pipe's other end, which a loop on its left could
# list as the shell's fd 3 (seen once under load).
out=$(as_user_stdio_only "$CTR" exec "$WORK/demo.sif" sh -c '(for f in /proc/$$/fd/*; do printf "%s " "${f##*/}"; done); :')
expect_eq "fds of the container's shell" "0 1 2 " "$out"
assert_nothing_left "fd listings"

note "the holder's socket works in a state directory whose path is longer than sun_path"
rundir=$WORK/out/$(printf 'r%.0s' $(seq 120))
mkdir -m 700 "$rundir" && chown "$CTR_TEST_USER" "$rundir"
out=$(as_user env XDG_RUNTIME_DIR="$rundir" "$CTR" exec "$WORK/demo.sif" echo ran 2>&1) ||
  fail "launch with a ${#rundir}-byte XDG_RUNTIME_DIR: $out"
expect_eq "launch with a ${#rundir}-byte XDG_RUNTIME_DIR" ran "$out"
[ -d "$rundir/ctr/mnt" ] || fail "state not kept in $rundir/ctr"
for _ in $(seq 100); do ls "$rundir/ctr" | grep -qE '\.(setup|sock|pid)$' || break; sleep 0.05; done
! ls "$rundir/ctr" | grep -qE '\.(setup|sock|pid)$' || fail "state files left in $rundir/ctr: $(ls "$rundir/ctr")"

note "a long-running app keeps the image mounted while another launch of it ends"
image_squashfuse() { squashfuse_of "$WORK/demo.sif"; }
as_user "$CTR" exec "$WORK/demo.sif" sleep 0.5 &
first=$!
sleep 0.2
as_user "$CTR" exec "$WORK/demo.sif" sh -c 'sleep 1.5; cat /etc/os-release' >"$WORK/out/second" &
second=$!
wait "$first" || fail "the first launch failed"
server=$(image_squashfuse)
[ -n "$server" ] || fail "the image was unmounted when the first launch ended, with the second running"
wait "$second" || fail "the second launch failed after the first ended: $(cat "$WORK/out/second")"
expect_contains "the second launch read the image after the first ended" 'NAME="ctr demo (busybox)"' \
  "$(cat "$WORK/out/second")"
assert_nothing_left "after the last launch ended"

note "processes the app leaves behind are not tracked: the image goes when the app has ended"
# 30 s: long enough to outlive the checks on a loaded machine; killed right after them.
as_user "$CTR" exec "$WORK/demo.sif" sh -c 'sleep 30 >/dev/null 2>&1 </dev/null & exit 0'
for _ in $(seq 40); do [ -z "$(image_squashfuse)" ] && break; sleep 0.05; done
[ -z "$(image_squashfuse)" ] || fail "the image stayed mounted for a process the app left behind"
pgrep -u "$CTR_TEST_USER" -x sleep >/dev/null || fail "the app's background process did not outlive it"
pkill -KILL -u "$CTR_TEST_USER" -x sleep || true
assert_nothing_left "after the orphan"

helper_runtime "(the directory, squashfuse and supervised cases passed)"
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0"
CTR_TEST_CONFIG=  # the installed ctr reads $CONF
CTR=$PREFIX/bin/ctr
only_stdio "SIF through the setuid helper" "$WORK/demo.sif"
assert_nothing_left "setuid helper"
rm -f "$CONF"
echo "PASS: $TEST_NAME"
