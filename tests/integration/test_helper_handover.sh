#!/bin/bash
# Real launches through the installed setuid helper: `ctr exec` as the test user mounts the
# image as kernel squashfs, and the app inside has no privilege, cannot touch the mount, and
# leaves nothing behind once it ends.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"

ensure_test_user
helper_runtime
CTR="$PREFIX/bin/ctr"
# The config enables the helper for every ctr built for this prefix: never leave it behind.
trap 'rm -f "$CONF"; rm -rf "$WORK"' EXIT
"$CTR" __holder --help >/dev/null 2>&1 || skip "this ctr has no __holder entry (runtime not ready)"
TUID=$(id -u "$CTR_TEST_USER")
TGID=$(id -g "$CTR_TEST_USER")

IMAGES="$WORK/images"
mkdir -p "$IMAGES" "$WORK/rootfs"
chmod 755 "$IMAGES"
make_demo_rootfs "$WORK/rootfs"
echo kernel >"$WORK/rootfs/marker"
mksquashfs "$WORK/rootfs" "$IMAGES/demo.sqfs" -noappend -quiet -all-root >/dev/null
make_sif "$IMAGES/demo.sif" "$IMAGES/demo.sqfs"
chmod 644 "$IMAGES"/*
write_conf "allow setuid = yes" "image driver = setuid"

note "ctr check sees the helper"
out=$(as_user "$CTR" check 2>&1) || fail "ctr check: $out"
expect_contains "ctr check mode" "mode: setuid-helper" "$out"

# ctr exec as the user, from a directory the user owns (cwd is bound into the container).
run_ctr() { as_user "$CTR" "$@"; }

note "LaunchesThroughHelper"
out=$(run_ctr exec "$IMAGES/demo.sif" cat /marker 2>&1) || fail "ctr exec via the helper: $out"
expect_eq "marker" kernel "$out"

note "ContainerHasNoPrivilege"
status=$(run_ctr exec "$IMAGES/demo.sif" cat /proc/self/status 2>&1) || fail "status: $status"
expect_contains "CapEff" "CapEff:	0000000000000000" "$status"
expect_contains "CapPrm" "CapPrm:	0000000000000000" "$status"
expect_contains "NoNewPrivs" "NoNewPrivs:	1" "$status"
# Inside the user namespace the user is mapped to itself.
expect_contains "uid" "Uid:	$TUID	$TUID	$TUID	$TUID" "$status"
expect_contains "gid" "Gid:	$TGID	$TGID	$TGID	$TGID" "$status"

note "ImageIsKernelSquashfsNosuidNodevRo"
mi=$(run_ctr exec "$IMAGES/demo.sif" cat /proc/self/mountinfo 2>&1) || fail "mountinfo: $mi"
root=$(echo "$mi" | awk '$5 == "/" {i = 7; while ($i != "-") i++; print $6, $(i+1), $(i+2)}' | tail -1)
note "container root: $root"
# The root is the image itself or an overlay on it (bind targets missing in the image).
case "$root" in ro,nosuid,nodev*squashfs*/dev/loop*|ro,nosuid,nodev*overlay*) ;; *) fail "container /: $root";; esac
# The holder's mount namespace has the kernel squashfs mount, and only ro,nosuid,nodev.
as_user "$CTR" exec "$IMAGES/demo.sif" sleep 3 >/dev/null 2>&1 &
launch=$!
holder=
for i in $(seq 50); do holder=$(pgrep -U "$CTR_TEST_USER" -f "__holder .*--premounted" | head -1 || true); [ -n "$holder" ] && break; sleep 0.1; done
[ -n "$holder" ] || fail "no holder process found"
sq=$(awk '{i = 7; while ($i != "-") i++; if ($(i+1) == "squashfs") print $5, $6, $(i+2)}' "/proc/$holder/mountinfo")
note "holder's squashfs mounts: $(echo "$sq" | tr '\n' ';')"
[ -n "$sq" ] || fail "no squashfs mount in the holder"
echo "$sq" | while read -r mp opts src; do
  case "$opts $src" in ro,nosuid,nodev*" /dev/loop"*) ;; *) fail "holder mount $mp: $opts $src";; esac
done
expect_eq "holder uid" "$TUID" "$(stat -c %u "/proc/$holder")"
grep -q "^NoNewPrivs:	1" "/proc/$holder/status" || fail "holder without no_new_privs (set by the helper)"
# (Its capabilities are those of its own user namespace, which is the design.)
[ "$(losetup -a | wc -l)" = 1 ] || fail "expected one loop device: $(losetup -a)"
wait "$launch" || true
out=$(run_ctr exec "$IMAGES/demo.sif" sh -c 'umount / 2>&1; umount -l / 2>&1; mount -o remount,rw / 2>&1; touch /x 2>&1; echo done' 2>&1) || true
expect_contains "umount/remount" done "$out"
case "$out" in *"Operation not permitted"*|*"Permission denied"*|*"Read-only"*) ;; *) fail "umount/remount not refused: $out";; esac
run_ctr exec "$IMAGES/demo.sif" test -e /x && fail "wrote into the image"

note "NothingLeftAfterLastLaunch"
for i in $(seq 100); do [ -z "$(losetup -a)" ] && break; sleep 0.1; done
no_leftovers "after launches"

note "DatasetImagesThroughTheHelper"
# A dataset image the helper would take is mounted as kernel squashfs beside the image, by
# the same helper run (one loop device each, no FUSE server); one it would refuse is served
# by FUSE, the image still kernel squashfs; one the planner could not judge and the helper
# refuses fails the launch in one line under 'image driver = setuid', nothing attached.
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0"
mkdir -p "$WORK/ds/val"
echo validation >"$WORK/ds/val/v.txt"
mksquashfs "$WORK/ds" "$IMAGES/data.sqfs" -noappend -quiet -all-root >/dev/null
cp "$IMAGES/data.sqfs" "$IMAGES/own.sqfs"
chown "$TUID:$TGID" "$IMAGES/own.sqfs"
chmod 644 "$IMAGES/data.sqfs" "$IMAGES/own.sqfs"
bind_data="$IMAGES/data.sqfs:/data:image-src=/"
explain=$(run_ctr exec --explain --bind "$bind_data" "$IMAGES/demo.sif" true 2>&1) || fail "explain: $explain"
expect_contains "explain: dataset by the helper" "by the setuid helper (kernel squashfs through the setuid helper" "$explain"
expect_eq "json: dataset driver" setuid-helper \
  "$(run_ctr exec --explain --json --bind "$bind_data" "$IMAGES/demo.sif" true | jq -r '.datasets[0].driver')"
expect_eq "dataset read" validation "$(run_ctr exec --bind "$bind_data" "$IMAGES/demo.sif" cat /data/val/v.txt 2>&1)"
as_user "$CTR" exec --bind "$bind_data" "$IMAGES/demo.sif" sleep 30 >/dev/null 2>&1 &
launch=$!
for i in $(seq 100); do [ "$(losetup -a | wc -l)" = 2 ] && break; sleep 0.05; done
expect_eq "two loop devices: the image and the dataset" 2 "$(losetup -a | wc -l)"
holder=$(pgrep -U "$CTR_TEST_USER" -f "__holder .*--premounted" | head -1 || true)
[ -n "$holder" ] || fail "no holder process found"
expect_eq "the holder has the dataset by the helper's mount" 1 "$(tr '\0' '\n' <"/proc/$holder/cmdline" | grep -c -x -- --premounted-dataset)"
expect_eq "no FUSE server of the dataset" "" "$(squashfuse_of "$IMAGES/data.sqfs")"
fstype=$(run_ctr exec --bind "$bind_data" "$IMAGES/demo.sif" awk '$5 == "/data" {i = 7; while ($i != "-") i++; print $(i+1), $6}' /proc/self/mountinfo)
case "$fstype" in squashfs\ ro,*) ;; *) fail "/data in the container: '$fstype' (want squashfs, read-only)";; esac
expect_eq "still two loop devices (the second launch joined)" 2 "$(losetup -a | wc -l)"
pkill -u "$CTR_TEST_USER" -x sleep || true
wait "$launch" || true
no_leftovers "after the dataset launches"

explain=$(run_ctr exec --explain --bind "$IMAGES/own.sqfs:/data:image-src=/" "$IMAGES/demo.sif" true 2>&1) || fail "explain: $explain"
expect_contains "explain: the user's own dataset by FUSE" "the setuid helper would refuse it: its owner (uid $TUID)" "$explain"
as_user "$CTR" exec --bind "$IMAGES/own.sqfs:/data:image-src=/" "$IMAGES/demo.sif" sleep 30 >/dev/null 2>&1 &
launch=$!
for i in $(seq 100); do [ -n "$(squashfuse_of "$IMAGES/own.sqfs")" ] && break; sleep 0.05; done
expect_eq "a FUSE server of the user's dataset" 1 "$(squashfuse_of "$IMAGES/own.sqfs" | wc -l)"
expect_eq "one loop device: the image" 1 "$(losetup -a | wc -l)"
expect_eq "the user's dataset read" validation \
  "$(run_ctr exec --bind "$IMAGES/own.sqfs:/data:image-src=/" "$IMAGES/demo.sif" cat /data/val/v.txt 2>&1)"
pkill -u "$CTR_TEST_USER" -x sleep || true
wait "$launch" || true
no_leftovers "after the user's dataset launches"

# 'daemon' in the owners: the planner cannot tell whether it is this file's owner.
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0" "setuid image owners = root, daemon"
set +e
out=$(run_ctr exec --bind "$IMAGES/own.sqfs:/data:image-src=/" "$IMAGES/demo.sif" true 2>&1)
rc=$?
set -e
[ "$rc" != 0 ] || fail "a dataset the helper refuses was accepted"
expect_eq "one line ($out)" 1 "$(printf '%s\n' "$out" | wc -l)"
expect_contains "the helper names the dataset" "dataset image $IMAGES/own.sqfs: owner uid $TUID is not in 'setuid image owners'" "$out"
no_leftovers "after the refused dataset"

echo "PASS: $TEST_NAME"
