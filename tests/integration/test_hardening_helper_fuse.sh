#!/bin/bash
# Issue 24, F5: with 'user_allow_other' in /etc/fuse.conf, an image on a user's FUSE mount
# reports whatever owner the user's daemon says (root here) and would pass the setuid
# helper's owner policy; the kernel would then mount data the user made and can change. The
# helper refuses images on FUSE (and the other file systems whose owner and content users
# control, src/helper/untrusted_fs.h) in one line, before reading them, leaving nothing
# mounted or attached; ctr's planner predicts it: 'image driver = auto' goes straight to
# squashfuse, 'image driver = setuid' fails up front.
#
# The user's FUSE mount is squashfuse_ll serving a squashfs built with -all-root that holds a
# SIF and a plain squashfs image (uid 0, mode 0644 as seen through the mount).
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"

ensure_test_user
require_fuse
helper_runtime
CTR="$PREFIX/bin/ctr"
"$CTR" __holder --help >/dev/null 2>&1 || skip "this ctr has no __holder entry (runtime not ready)"

FUSE_CONF=/etc/fuse.conf
FUSE_MNT="$WORK/fusemnt"
if [ -e "$FUSE_CONF" ]; then cp -p "$FUSE_CONF" "$WORK/fuse.conf.saved"; fi
cleanup() {
  mountpoint -q "$FUSE_MNT" 2>/dev/null && { fusermount3 -u "$FUSE_MNT" 2>/dev/null || umount -l "$FUSE_MNT"; }
  if [ -e "$WORK/fuse.conf.saved" ]; then cp -p "$WORK/fuse.conf.saved" "$FUSE_CONF"; else rm -f "$FUSE_CONF"; fi
  rm -f "$CONF"  # the config enables the helper for every ctr built for this prefix
  rm -rf "$WORK"
}
trap cleanup EXIT
{ [ -e "$WORK/fuse.conf.saved" ] && grep -v '^[[:space:]]*user_allow_other' "$WORK/fuse.conf.saved"; echo user_allow_other; } >"$FUSE_CONF"
chmod 644 "$FUSE_CONF"

note "a user's FUSE mount holding root-looking images"
mkdir -p "$WORK/carrier" "$WORK/rootfs" "$FUSE_MNT"
make_demo_rootfs "$WORK/rootfs"
echo on-fuse >"$WORK/rootfs/marker"
mksquashfs "$WORK/rootfs" "$WORK/carrier/demo.sqfs" -noappend -quiet -all-root >/dev/null
make_sif "$WORK/carrier/demo.sif" "$WORK/carrier/demo.sqfs"
chmod 755 "$WORK/carrier"
chmod 644 "$WORK/carrier"/*
mksquashfs "$WORK/carrier" "$WORK/carrier.sqfs" -noappend -quiet -all-root >/dev/null
chmod 644 "$WORK/carrier.sqfs"
chown "$CTR_TEST_USER" "$FUSE_MNT"
as_user squashfuse_ll -o allow_other "$WORK/carrier.sqfs" "$FUSE_MNT" || fail "squashfuse_ll as the user failed"
for i in $(seq 50); do mountpoint -q "$FUSE_MNT" && break; sleep 0.1; done
fstype=$(awk -v m="$FUSE_MNT" '$5 == m {i = 7; while ($i != "-") i++; print $(i+1)}' /proc/self/mountinfo)
note "mounted as the user: $fstype at $FUSE_MNT; the images there: $(stat -c '%n uid %u mode %a' "$FUSE_MNT"/* | tr '\n' ';')"
case "$fstype" in fuse*) ;; *) fail "the carrier is not a FUSE mount: '$fstype'";; esac
[ "$(stat -c %u "$FUSE_MNT/demo.sif")" = 0 ] || fail "the image on FUSE does not look root-owned"
# The same images on the local file system: accepted, so only the FUSE mount makes the difference.
cp -p "$WORK/carrier/demo.sif" "$WORK/carrier/demo.sqfs" "$WORK/"
write_conf "allow setuid = yes" "image linger = 0" "image driver = setuid"
out=$(as_user "$CTR" exec "$WORK/demo.sif" cat /marker 2>&1) || fail "the local copy of the SIF through the helper: $out"
expect_eq "the local copy through the helper" on-fuse "$out"

# expect_fuse_refused WHAT OUT RC: exit 255, one line naming FUSE, nothing mounted or attached.
expect_fuse_refused() {
  [ "$3" = 255 ] || fail "$1: expected the helper's refusal (255), got $3: $2"
  expect_contains "$1" "is on a FUSE file system" "$2"
  [ "$(printf '%s\n' "$2" | wc -l)" = 1 ] || fail "$1: not one line: $2"
  for i in $(seq 50); do [ -z "$(losetup -a)" ] && break; sleep 0.1; done
  [ -z "$(losetup -a)" ] || fail "$1: loop devices left attached: $(losetup -a)"
  ! grep -qsF "$HELPER_RUNDIR" /proc/[0-9]*/mountinfo || fail "$1: a helper mount is left"
  note "refused: $1: $2"
}

note "RefusesImagesOnFuse"
for image in demo.sif demo.sqfs; do
  run_helper "$FUSE_MNT/$image" marker
  expect_fuse_refused "the helper as the user, $image on FUSE" "$OUT" "$RC"
  set +e; OUT=$("$HELPER" "$FUSE_MNT/$image" marker 2>&1); RC=$?; set -e
  expect_fuse_refused "the helper as root, $image on FUSE" "$OUT" "$RC"
done
# Through a symlink on the local file system: the opened file decides, not the name.
ln -s "$FUSE_MNT/demo.sif" "$WORK/link.sif"
run_helper "$WORK/link.sif" marker
expect_fuse_refused "a local symlink to the SIF on FUSE" "$OUT" "$RC"

note "PlannerPredictsTheRefusal"
write_conf "allow setuid = yes" "image linger = 0" "image driver = auto"
out=$(as_user "$CTR" check 2>&1) || fail "ctr check: $out"
expect_contains "ctr check says so" "an image on FUSE or another file system users control (vfat, SMB, ...) uses squashfuse" "$out"
out=$(as_user "$CTR" exec --explain "$FUSE_MNT/demo.sif" true 2>&1) || fail "--explain: $out"
expect_contains "auto: driver" "driver:     squashfuse (" "$out"
expect_contains "auto: why" "on a FUSE file system" "$out"
out=$(as_user "$CTR" exec "$FUSE_MNT/demo.sif" cat /marker 2>&1) || fail "a launch of the image on FUSE: $out"
expect_eq "auto: the image on FUSE runs through squashfuse, with no warning" on-fuse "$out"
out=$(as_user "$CTR" exec --explain "$WORK/demo.sif" true 2>&1) || fail "--explain of the local copy: $out"
expect_contains "auto: the local copy still goes through the helper" "driver:     setuid-helper (" "$out"
write_conf "allow setuid = yes" "image linger = 0" "image driver = setuid"
set +e; out=$(as_user "$CTR" exec "$FUSE_MNT/demo.sqfs" cat /marker 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "'image driver = setuid' ran an image on FUSE: $out"
expect_contains "setuid: refused up front" "on a FUSE file system" "$out"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "setuid: not one line: $out"
note "refused: $out"

fusermount3 -u "$FUSE_MNT"
assert_nothing_left "fuse images"
echo "PASS: $TEST_NAME"
