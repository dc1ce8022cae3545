#!/bin/bash
# ext3 overlay images (`ctr overlay create`), as Apptainer stacks them, as an ordinary user:
# --overlay env.img keeps a run's changes in the image's upper/ (fuse2fs mounts it, and
# fuse-overlayfs stacks it over the image, both for that launch alone), the next run sees
# them and a run without it does not; env.img:ro stacks it read-only; one writer at a time,
# a second refused in one line; the same with a PID namespace, whose init ends the servers
# before the namespace ends; an ext3 overlay partition in a SIF works the same; after each
# run no FUSE server, no mount, and the image is clean (e2fsck -fn).
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
require_kernel_mount_api
command -v fuse2fs >/dev/null || skip "fuse2fs is not installed (Debian package fuse2fs)"
command -v fuse-overlayfs >/dev/null || skip "fuse-overlayfs is not installed (Debian package fuse-overlayfs)"
E2FSCK=$(PATH=$PATH:/usr/sbin:/sbin command -v e2fsck) || skip "e2fsck is not installed (e2fsprogs)"
DUMPE2FS=$(PATH=$PATH:/usr/sbin:/sbin command -v dumpe2fs) || skip "dumpe2fs is not installed (e2fsprogs)"
use_linger 0
demo_for_user
uid=$(id -u "$CTR_TEST_USER")
run() { as_user env -C "$U" "$CTR_BIN" exec "$@"; }

# fuse_servers: the user's fuse2fs and fuse-overlayfs processes, listed; false when none.
fuse_servers() {
  local found
  found=$(pgrep -u "$uid" -a -x fuse2fs; pgrep -u "$uid" -a -x fuse-overlayfs)
  [ -n "$found" ] && echo "$found"
}
# settled IMAGE [no-fsck]: the run's FUSE servers have ended (its fuse2fs holds the image's lock until
# it has written it back), none of the user's is left, nor a FUSE mount, and the image is clean.
settled() {
  local i
  flock -w 10 "$1" true || fail "$1: still locked 10 s after the run"
  for i in $(seq 100); do
    fuse_servers >/dev/null || break
    sleep 0.05
  done
  ! fuse_servers || fail "FUSE servers left"
  ! as_user grep -E 'fuse2fs|fuse-overlayfs|fuse\.' /proc/self/mountinfo || fail "FUSE mounts left"
  [ "${2:-}" = no-fsck ] && return 0  # a SIF: the file system is at an offset in it
  "$E2FSCK" -fn "$1" >"$WORK/fsck" 2>&1 || fail "$1 not clean after the run: $(cat "$WORK/fsck")"
  # fuse2fs marks the file system clean only as it ends normally (SIGTERM), not when killed.
  state=$("$DUMPE2FS" -h "$1" 2>/dev/null | sed -n 's/^Filesystem state: *//p')
  [ "$state" = clean ] || fail "$1: file system state '$state' after the run (fuse2fs was killed before it closed it?)"
}

as_user "$CTR_BIN" overlay create "$U/env.img"

note "--explain: the ext3 layer and fuse-overlayfs"
explain=$(run --explain --overlay env.img "$img" true)
expect_contains "union" "union:    fuse-overlayfs" "$explain"
expect_contains "layer" "layer:    upper/ of ext3 image $U/env.img (offset 0, $((64 << 20)) bytes" "$explain"
json=$(run --explain --json --overlay env.img "$img" true)
expect_eq "json driver" fuse-overlayfs "$(jq -r .overlay.driver <<<"$json")"
expect_eq "json ext3" "0 true" "$(jq -r '.overlay.layers[0].ext3 | "\(.offset) \(.read_only | not)"' <<<"$json")"

note "a file written under /opt through --overlay env.img is there in the next run"
run --overlay env.img "$img" sh -c 'mkdir -p /opt/app && echo kept > /opt/app/file'
settled "$U/env.img"
expect_eq "second run" kept "$(run --overlay env.img "$img" cat /opt/app/file)"
settled "$U/env.img"
out=$(run "$img" cat /opt/app/file 2>&1) && fail "the file is there without the overlay: $out"

note "the user guide's persistent overlay: in \$HOME, a write at the container's root, read in the next run"
# A write at the root changes the root directory's attributes, and the write itself asks
# for the new file's security.capability: fuse-overlayfs, its root moved onto its own
# mount by the launch's pivot_root, asked itself for them and hung for good (issue 58).
home=$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)
rm -f "$home/ov.img"
as_user sh -c 'cd && "$1" overlay create --size 64 ov.img' sh "$CTR_BIN"
guide() { runuser -u "$CTR_TEST_USER" -- env -i HOME="$home" PATH=/usr/bin:/bin \
  ${CTR_TEST_CONFIG:+CTR_CONFIG=$CTR_TEST_CONFIG} sh -c 'cd && exec "$@"' sh "$CTR_BIN" exec --overlay ov.img "$img" "$@"; }
ends_within 60 "writing at the root through an overlay in \$HOME" guide sh -c 'echo persist > /p'
settled "$home/ov.img"
expect_eq "read in the next run" persist "$(guide cat /p)"
settled "$home/ov.img"
rm -f "$home/ov.img"

note "env.img:ro sees it and cannot write"
expect_eq "read-only run" kept "$(run --overlay env.img:ro "$img" cat /opt/app/file)"
out=$(run --overlay env.img:ro "$img" sh -c 'echo x > /opt/app/other' 2>&1) && fail "wrote through :ro"
expect_contains "read-only" "Read-only file system" "$out"
settled "$U/env.img"

note "a second writer is refused in one line while the first runs"
run --overlay env.img "$img" sleep 8 &
first=$!
for i in $(seq 100); do pgrep -u "$uid" -x fuse-overlayfs >/dev/null && break; sleep 0.05; done
rc=0; out=$(run --overlay env.img "$img" true 2>&1) || rc=$?
expect_eq "second writer: exit" 1 "$rc"
expect_eq "second writer: one line" 1 "$(wc -l <<<"$out")"
expect_contains "second writer" "in use by another container" "$out"
rc=0; out=$(run --overlay env.img:ro "$img" true 2>&1) || rc=$?
expect_eq "reader while written: exit" 1 "$rc"
expect_contains "reader while written" "open writable in another container" "$out"
wait "$first" || fail "the first writer failed"
settled "$U/env.img"

note "with a PID namespace (--pid, --containall): the init lets fuse2fs write the image back"
# The namespace's end SIGKILLs what is left in it: the init ends the FUSE servers first.
run --pid --overlay env.img "$img" sh -c 'dd if=/dev/zero of=/opt/app/big bs=1M count=8 2>/dev/null; echo pid > /opt/app/pid'
settled "$U/env.img"
expect_eq "--pid: the file is kept" pid "$(run --containall --overlay "$U/env.img" "$img" cat /opt/app/pid)"
settled "$U/env.img"
expect_eq "--pid: the 8 MiB file is whole" 8388608 "$(run --pid --overlay env.img:ro "$img" stat -c %s /opt/app/big)"
settled "$U/env.img"
rc=0; run --pid --overlay env.img "$img" sh -c 'echo status > /opt/app/status; exit 7' || rc=$?
expect_eq "--pid: the app's exit status" 7 "$rc"
settled "$U/env.img"
expect_eq "--pid: written before exit 7" status "$(run --overlay env.img:ro "$img" cat /opt/app/status)"
settled "$U/env.img"

note "an ext3 overlay partition in a SIF"
"$CTR_BIN" build "$WORK/demo.sif" "$WORK/demo" >/dev/null
cp "$WORK/demo.sif" "$U/app.sif" && chown "$CTR_TEST_USER" "$U/app.sif"
as_user "$CTR_BIN" overlay create "$U/app.sif"
run --overlay app.sif "$img" sh -c 'mkdir -p /opt && echo insif > /opt/sif'
settled "$U/app.sif" no-fsck
expect_eq "SIF partition, read-only" insif "$(run --overlay app.sif:ro "$img" cat /opt/sif)"
expect_eq "the SIF itself, with its partition" insif "$(run --overlay app.sif app.sif cat /opt/sif)"
settled "$U/app.sif" no-fsck

note "a FUSE server that stops answering never leaves the container waiting forever (the watchdog)"
# fuse2fs stopped (SIGSTOP) once mounted: the app's write waits on fuse-overlayfs, which
# waits on fuse2fs. SIGTERM to the app alone (not to the servers) makes the kernel kill it,
# but a FUSE request its server has read ends only with an answer or the connection: the
# app sits in D for good. The watchdog sees a killed process stuck for 10 s (the plan's
# grace) and ends the servers; the launch then ends with the app's signal.
expect_contains "--explain: the watchdog" "watchdog: the FUSE servers are aborted when a killed process" \
  "$(run --explain --overlay env.img "$img" true)"
as_user "$CTR_BIN" overlay create "$U/stuck.img"
rm -f "$U/go"
( rc=0; run --overlay stuck.img "$img" sh -c "while [ ! -e $U/go ]; do sleep 0.1; done; echo x > /stuck" \
    >"$WORK/stuck.out" 2>&1 || rc=$?; echo "rc=$rc" >>"$WORK/stuck.out" ) &
for _ in $(seq 100); do
  f2fs=$(pgrep -u "$uid" -x fuse2fs) && pgrep -u "$uid" -x fuse-overlayfs >/dev/null && break
  sleep 0.1
done
[ -n "${f2fs:-}" ] || fail "the stuck case's fuse2fs did not start: $(cat "$WORK/stuck.out")"
kill -STOP "$f2fs"
touch "$U/go"
sleep 1
app=$(pgrep -u "$uid" -f "^sh -c while")
kill -TERM "$app"
t0=$(date +%s)
for _ in $(seq 400); do grep -q '^rc=' "$WORK/stuck.out" && break; sleep 0.1; done
if ! grep -q '^rc=' "$WORK/stuck.out"; then
  stuck=$(ps -U "$uid" -o pid=,stat=,wchan:24=,args= || true)
  kill -KILL "$f2fs" || true
  fail "the killed app still waits on its FUSE servers after 40 s: $stuck"
fi
took=$(( $(date +%s) - t0 ))
expect_eq "ended by the app's signal" "rc=143" "$(tail -1 "$WORK/stuck.out")"
expect_contains "the watchdog says what it did" "was killed but has waited 10 s on the overlay's FUSE servers" \
  "$(cat "$WORK/stuck.out")"
[ "$took" -ge 9 ] || fail "the servers were ended after $took s, before the grace"
for _ in $(seq 100); do fuse_servers >/dev/null || break; sleep 0.05; done
! fuse_servers || fail "FUSE servers left after the watchdog: $(fuse_servers)"

assert_nothing_left "ext3 overlays"
