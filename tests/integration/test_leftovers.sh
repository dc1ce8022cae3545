# Shared image mount: concurrent launches of one image share one squashfuse; a launch
# SIGKILLed at any point leaves no FUSE server, mount or directory behind once the others end.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
make_demo_rootfs "$WORK/demo"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
chmod -R a+rX "$WORK"
uid=$(id -u "$CTR_TEST_USER")
state=/tmp/ctr-$uid

live_squashfuse() { pgrep -u "$CTR_TEST_USER" -f "squashfuse.*$WORK/demo.sqfs" | wc -l; }
# Live (not zombie) holders: reparented to PID 1, which may reap late here.
live_holders() { ps -u "$CTR_TEST_USER" -o stat=,comm= | awk '$1 !~ /Z/ && $2 == "ctr-holder"' | wc -l; }
wait_gone() {
  for _ in $(seq 100); do
    [ "$(live_squashfuse)" = 0 ] && [ "$(live_holders)" = 0 ] && return 0
    sleep 0.05
  done
  fail "$1: squashfuse/holder still running: $(ps -u "$CTR_TEST_USER" -o pid,stat,args)"
}
no_host_mounts() {
  local m
  m=$(cat /proc/[0-9]*/mountinfo 2>/dev/null | grep -E "squashfuse|$state" | grep -v "^$" || true)
  [ -z "$m" ] || fail "$1: mounts left: $m"
}

note "two concurrent launches share one squashfuse"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 1.5 &
p1=$!
sleep 0.3
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 0.5 &
p2=$!
sleep 0.3
expect_eq "squashfuse processes while both run" 1 "$(live_squashfuse)"
wait $p1 $p2
wait_gone "after both ended"
no_host_mounts "after both ended"

note "the image stays mounted while the app's children live"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c 'sleep 1 & exit 0'
expect_eq "squashfuse kept by a background child" 1 "$(live_squashfuse)"
wait_gone "after the background child ended"

note "SIGKILL of launches at random points of setup"
for i in $(seq 12); do
  as_user "$CTR_BIN" exec "$WORK/demo.sqfs" true &
  p=$!
  sleep "0.00$((i % 10))"
  pkill -KILL -u "$CTR_TEST_USER" -x ctr 2>/dev/null || true   # launchers, not holders
  wait "$p" 2>/dev/null || true
done
# A survivor keeps running meanwhile and still works.
out=$(as_user "$CTR_BIN" exec "$WORK/demo.sqfs" cat /etc/os-release | head -1)
expect_eq "launch after kills" 'NAME="ctr demo (busybox)"' "$out"
wait_gone "after the SIGKILL loop"
no_host_mounts "after the SIGKILL loop"

note "nothing but the state directory, its mnt/, lock files and the seccomp filter cache remain"
left=$(find "$state" -mindepth 1 ! -name '*.users' ! -name '*.setup' ! -path "$state/mnt" \
  ! -regex "$state/seccomp-[0-9a-f]*\.bpf")
[ -z "$left" ] || fail "left in $state: $left"
assert_no_leftovers
echo "PASS: $TEST_NAME"
