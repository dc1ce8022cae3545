# Shared image mount: concurrent launches of one image share one squashfuse (and, when the
# holder's prepared root is all they need, its ready mount namespace); a launch
# SIGKILLed at any point leaves no FUSE server, mount or directory behind once the others end
# (and the linger time has passed: these checks run with 'image linger = 0', then the
# linger itself is tested with 3 s).
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0
make_demo_rootfs "$WORK/demo"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
chmod -R a+rX "$WORK"
uid=$(id -u "$CTR_TEST_USER")
state=/tmp/ctr-$uid
# Lock files of earlier ctr versions (which kept them) are not this version's leftovers.
if [ -z "$(live_processes_of "$(id -u "$CTR_TEST_USER")")" ]; then rm -f "$state"/*.users "$state"/*.setup "$state"/*.sock "$state"/*.pid; fi

image_squashfuse() { squashfuse_of "$WORK/demo.sqfs"; }
live_squashfuse() { image_squashfuse | wc -l; }
# Live (not zombie) holders: reparented to PID 1, which may reap late here.
live_holders() { ps -u "$CTR_TEST_USER" -o stat=,comm= | awk '$1 !~ /Z/ && $2 == "ctr-holder"' | wc -l; }
wait_gone() {
  for _ in $(seq 100); do
    [ "$(live_squashfuse)" = 0 ] && [ "$(live_holders)" = 0 ] && return 0
    sleep 0.05
  done
  fail "$1: squashfuse/holder still running: $(ps -u "$CTR_TEST_USER" -o pid,stat,args)"
}
# The test user's mounts only (as assert_nothing_left): a root launch on the host (a benchmark's
# holder in /tmp/ctr-0) is not this test's leftover.
no_host_mounts() {
  local m
  m=$(cat /proc/[0-9]*/mountinfo 2>/dev/null | grep -E "squashfuse .*user_id=$uid,|$state" | grep -v "^$" || true)
  [ -z "$m" ] || fail "$1: mounts left: $m"
}

# kill_launches N: N launches, each SIGKILLed at a different point of its setup.
kill_launches() {
  for i in $(seq "$1"); do
    as_user "$CTR_BIN" exec "$WORK/demo.sqfs" true &
    p=$!
    sleep "0.00$((i % 10))"
    pkill -KILL -u "$CTR_TEST_USER" -x ctr 2>/dev/null || true   # launchers, not holders
    wait "$p" 2>/dev/null || true
  done
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

note "a launch that came while another ran keeps the image once the first has ended"
# The holder takes registrations that come while a known app lives only when that app
# ends (or every second): the second launch must be found then, with no linger to cover it.
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 0.4 &
p1=$!
sleep 0.2
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c 'sleep 0.8; head -1 /etc/os-release >/dev/null' &
p2=$!
wait $p1
sleep 0.2
expect_eq "squashfuse kept for the second launch after the first ended" 1 "$(live_squashfuse)"
wait $p2 || fail "the second launch failed after the first ended"
wait_gone "after both ended, the second last"
no_host_mounts "after both ended, the second last"

note "the image goes with the app: a process it leaves behind is not tracked (test_no_fd_leak)"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c 'sleep 3 >/dev/null 2>&1 </dev/null & exit 0'
wait_gone "after the app ended, its background child still running"
pkill -KILL -u "$CTR_TEST_USER" -x sleep || true

note "SIGKILL of launches at random points of setup"
kill_launches 12
# A survivor keeps running meanwhile and still works.
# (No pipe into head: cat could die of SIGPIPE, and pipefail would end the test silently.)
out=$(as_user "$CTR_BIN" exec "$WORK/demo.sqfs" cat /etc/os-release)
out=${out%%$'\n'*}
expect_eq "launch after kills" 'NAME="ctr demo (busybox)"' "$out"
wait_gone "after the SIGKILL loop"
no_host_mounts "after the SIGKILL loop"

note "the ready namespace: launches the prepared root fits share it; one with more mounts gets its own copy"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sleep 4 &
p1=$!
sleep 0.5
ns_of() { as_user "$CTR_BIN" exec "$@" readlink /proc/self/ns/mnt; }
mounts_of() { as_user "$CTR_BIN" exec "$@" cat /proc/self/mountinfo; }
a=$(ns_of "$WORK/demo.sqfs")
b=$(ns_of "$WORK/demo.sqfs")
expect_eq "ready namespace: two plain launches share one mount namespace" "$a" "$b"
mkdir -p "$WORK/extra"
c=$(ns_of --bind "$WORK/extra:/mnt" "$WORK/demo.sqfs")
[ -n "$c" ] && [ "$c" != "$a" ] || fail "ready namespace: a launch with a --bind shares it ($c, $a)"
with_bind=$(mounts_of --bind "$WORK/extra:/mnt" "$WORK/demo.sqfs" | awk '$5 == "/mnt"' | wc -l)
expect_eq "ready namespace: the --bind launch has its bind" 1 "$with_bind"
ready=$(mounts_of "$WORK/demo.sqfs")
expect_eq "ready namespace: no other launch's bind shows up in it" 0 "$(awk '$5 == "/mnt"' <<<"$ready" | wc -l)"
# The image's env scripts come from the holder's copy in the ready namespace, and give
# the environment that reading them in an own copy gives.
dbg=$(as_user "$CTR_BIN" -d exec "$WORK/demo.sqfs" true 2>&1)
expect_contains "ready namespace: env scripts from the holder's copy" "env scripts: the holder's copy of 1" "$dbg"
env_ready=$(as_user "$CTR_BIN" exec "$WORK/demo.sqfs" env | sort)
# (But for the bind's destination, which the container is told: APPTAINER_BIND.)
env_own=$(as_user "$CTR_BIN" exec --bind "$WORK/extra:/mnt" "$WORK/demo.sqfs" env | grep -Ev '^(APPTAINER|SINGULARITY)_BIND=' | sort)
expect_contains "ready namespace: the image's env script applied" "CTR_DEMO=1" "$env_ready"
expect_eq "ready namespace: the same environment as from an own copy" "$env_own" "$env_ready"
# Only the container's mounts: the holder's state directory and the host's root are gone.
leaked=$(awk -v s="$state" 'index($5, s) == 1 || $5 ~ "^/tmp/ctr-"' <<<"$ready")
[ -z "$leaked" ] || fail "ready namespace: host mounts visible in it: $leaked"
# The app cannot change what the others share: it holds no capability.
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" mount -t tmpfs none /mnt 2>/dev/null &&
  fail "ready namespace: an app mounted a tmpfs"
expect_eq "ready namespace: unchanged after the mount attempt" 0 "$(mounts_of "$WORK/demo.sqfs" | awk '$5 == "/mnt"' | wc -l)"
wait $p1
wait_gone "ready namespace: after the launches ended"
no_host_mounts "ready namespace: after the launches ended"

note "linger: sequential launches join the image's holder; nothing is left once it has passed"
# 3 s, not 1: the checks "inside the window" must still be inside it on a loaded machine.
use_linger 3
squashfuse_pid() { image_squashfuse | head -1; }
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" true
first=$(squashfuse_pid)
[ -n "$first" ] || fail "linger: no squashfuse kept after the first launch"
for _ in 1 2 3; do as_user "$CTR_BIN" exec "$WORK/demo.sqfs" true; sleep 0.3; done
expect_eq "linger: the same squashfuse served every sequential launch" "$first" "$(squashfuse_pid)"
sleep 0.5   # 0.5 s after the last launch: still inside the 3 s window
expect_eq "linger: still mounted inside the window" "$first" "$(squashfuse_pid)"
for _ in $(seq 60); do [ -z "$(squashfuse_pid)" ] && break; sleep 0.1; done
wait_gone "linger: after the window"
no_host_mounts "linger: after the window"

note "linger: a changed image (new mtime) is never served from the old mount"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" true
old=$(squashfuse_pid)
mkdir -p "$WORK/demo/extra" && echo new > "$WORK/demo/extra/file"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs.new" -quiet -noappend >/dev/null
chmod a+r "$WORK/demo.sqfs.new"
cat "$WORK/demo.sqfs.new" > "$WORK/demo.sqfs"   # same inode, new content and mtime
out=$(as_user "$CTR_BIN" exec "$WORK/demo.sqfs" cat /extra/file)
expect_eq "linger: the rewritten image's content" new "$out"
image_squashfuse | grep -vqx "$old" ||
  fail "linger: no new mount for the changed image (the old one, still lingering, served it)"

note "linger: SIGKILL of launches inside the window leaves nothing once it has passed"
kill_launches 6
for _ in $(seq 60); do [ "$(live_squashfuse)" = 0 ] && break; sleep 0.1; done
wait_gone "linger: after kills and the window"
no_host_mounts "linger: after kills and the window"

note "a lingering holder ignores its user's SIGTERM (an app's kill -TERM -1) and ends on root's (a batch system's epilog), its files removed"
use_linger 60
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" true
holder=$(ps -u "$CTR_TEST_USER" -o pid=,stat=,comm= | awk '$2 !~ /Z/ && $3 == "ctr-holder" {print $1}')
expect_eq "one holder lingers" 1 "$(echo "$holder" | wc -w)"
as_user kill -TERM "$holder"
sleep 0.3
expect_eq "after the user's SIGTERM" 1 "$(live_holders)"
kill -TERM "$holder"
for _ in $(seq 50); do [ "$(live_holders)" = 0 ] && break; sleep 0.1; done
expect_eq "after root's SIGTERM, well inside the linger" 0 "$(live_holders)"
wait_gone "root's SIGTERM"
no_host_mounts "root's SIGTERM"

note "nothing but the state directory, its mnt/ and the caches (seccomp filters, GPU driver and host MPI scans, kept signature verdicts, kept launch plans) remain"
left=$(find "$state" -mindepth 1 ! -path "$state/mnt" ! -regex "$state/seccomp-[0-9a-f]*\.bpf" \
         ! -regex "$state/\(nvidia\|amd\|mpi\)-scan-[0-9a-f]*\.json" \
         ! -path "$state/verified" ! -regex "$state/verified/[0-9a-f]*\.json" \
         ! -path "$state/memo" ! -regex "$state/memo/launch-[0-9a-f]*")
[ -z "$left" ] || fail "left in $state: $left"
assert_no_leftovers
echo "PASS: $TEST_NAME"
