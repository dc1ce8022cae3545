#!/bin/bash
# Issue 14, item 6: files ctr reads from an image or from the user cannot hang or balloon a
# launch. Identity files (/etc/passwd, /etc/group) and env scripts that are a FIFO, a device
# or a sparse 1 GiB file, an image path that is a FIFO, `--env-file /dev/zero`, a directory,
# a named FIFO, and a $CTR_CONFIG that is a device: each is refused at once with a one-line
# message naming the file and why (or, for a pipe the user made, read to its end), exits
# 255, and leaves no mount, loop device, process or state file behind. As the unprivileged
# test user, through squashfuse and through the installed setuid helper (kernel squashfs).
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"

ensure_test_user
require_fuse
use_linger 0
uid=$(id -u "$CTR_TEST_USER")
trap 'pkill -KILL -u "$CTR_TEST_USER" || true; rm -f "${CONF:-/nonexistent}"; rm -rf "$WORK"' EXIT

# ---- the images, built as root (device nodes and FIFOs need it), all root-owned.
IMAGES="$WORK/images"
mkdir -p "$IMAGES"
chmod 755 "$IMAGES"
make_demo_rootfs "$WORK/base"
# hostile NAME FILE KIND: the demo root with FILE replaced by KIND (fifo, zero, sparse, big).
hostile() {
  local name=$1 file=$2 kind=$3 root="$WORK/root-$1"
  cp -a "$WORK/base" "$root"
  rm -f "$root/$file"
  case "$kind" in
    fifo) mkfifo "$root/$file";;
    zero) mknod "$root/$file" c 1 5;;                  # /dev/zero
    sparse) truncate -s 1G "$root/$file";;            # 1 GiB of holes
    big) head -c $((2 << 20)) /dev/zero | tr '\0' '#' >"$root/$file";;  # 2 MiB of comment
  esac
  mksquashfs "$root" "$IMAGES/$name.sqfs" -noappend -quiet -all-root >/dev/null
  rm -rf "$root"
  chmod 644 "$IMAGES/$name.sqfs"
}
note "building hostile images"
hostile passwd-fifo etc/passwd fifo
hostile passwd-zero etc/passwd zero
hostile group-sparse etc/group sparse
hostile env-fifo .singularity.d/env/95-hostile.sh fifo
hostile env-big .singularity.d/env/95-hostile.sh big
mksquashfs "$WORK/base" "$IMAGES/good.sqfs" -noappend -quiet -all-root >/dev/null
chmod 644 "$IMAGES/good.sqfs"

# refused CTR WHAT NEEDLE ARGS...: `CTR ARGS` as the test user ends within 20 s with 255 and a
# message containing NEEDLE (the file and why), and leaves nothing behind.
refused() {
  local ctr=$1 what=$2 needle=$3; shift 3
  local t0 ms out rc
  t0=$(date +%s%N)
  set +e; out=$(as_user timeout -s KILL 20 "$ctr" "$@" 2>&1); rc=$?; set -e
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$rc" != 137 ] || fail "$what: hung (killed after 20 s): $out"
  [ "$rc" = 255 ] || fail "$what: expected refusal (255), got $rc after $ms ms: $out"
  expect_contains "$what" "$needle" "$out"
  [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "$what: expected one line, got: $out"
  assert_nothing_left "$what"
  note "refused in $ms ms: $what: $out"
}

# hostile_images CTR DRIVER: the image-borne cases through one driver.
hostile_images() {
  local ctr=$1 driver=$2 planned
  planned=$(as_user "$ctr" exec --explain --json "$IMAGES/good.sqfs" true | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["driver"])')
  note "HostileIdentityFiles ($driver: the plan's driver is '$planned')"
  [ "$driver" = squashfuse ] && expect_eq "planned driver" squashfuse "$planned"
  [ "$driver" = squashfuse ] || expect_eq "planned driver" setuid-helper "$planned"
  refused "$ctr" "$driver: /etc/passwd a FIFO" "/etc/passwd is a FIFO" exec "$IMAGES/passwd-fifo.sqfs" true
  refused "$ctr" "$driver: /etc/passwd a character device" "/etc/passwd is a character device" \
    exec "$IMAGES/passwd-zero.sqfs" true
  refused "$ctr" "$driver: /etc/group sparse 1 GiB" "/etc/group is larger than" \
    exec "$IMAGES/group-sparse.sqfs" true
  refused "$ctr" "$driver: --contain, /etc/passwd a FIFO" "/etc/passwd is a FIFO" \
    exec --contain "$IMAGES/passwd-fifo.sqfs" true
  note "HostileEnvScripts ($driver)"
  refused "$ctr" "$driver: env script a FIFO" "95-hostile.sh is a FIFO" exec "$IMAGES/env-fifo.sqfs" true
  refused "$ctr" "$driver: env script of 2 MiB" "95-hostile.sh is larger than" exec "$IMAGES/env-big.sqfs" true
  # Control: the same launch of a sound image works, and the user has their passwd entry.
  local out
  out=$(as_user timeout -s KILL 20 "$ctr" exec "$IMAGES/good.sqfs" sh -c 'id -un; echo $CTR_DEMO' 2>&1) ||
    fail "$driver: control launch failed: $out"
  expect_eq "$driver: control launch" "$CTR_TEST_USER
1" "$out"
  assert_nothing_left "$driver: control launch"
}

hostile_images "$CTR_BIN" squashfuse

note "HostileUserFiles"
mkfifo "$WORK/image.fifo" "$WORK/env.fifo"
chmod 666 "$WORK/image.fifo" "$WORK/env.fifo"
refused "$CTR_BIN" "image path a FIFO" "image.fifo: a FIFO, not a SIF" exec "$WORK/image.fifo" true
refused "$CTR_BIN" "image path /dev/zero" "/dev/zero: a character device, not a SIF" exec /dev/zero true
refused "$CTR_BIN" "--env-file /dev/zero" "--env-file /dev/zero is a character device" \
  exec --env-file /dev/zero "$IMAGES/good.sqfs" true
refused "$CTR_BIN" "--env-file a directory" "--env-file $WORK is a directory" \
  exec --env-file "$WORK" "$IMAGES/good.sqfs" true
head -c $((2 << 20)) /dev/zero | tr '\0' '#' >"$WORK/big.env"
chmod 644 "$WORK/big.env"
refused "$CTR_BIN" "--env-file of 2 MiB" "--env-file $WORK/big.env is larger than" \
  exec --env-file "$WORK/big.env" "$IMAGES/good.sqfs" true
# A pipe the user made is read to its end (`--env-file <(...)`); a named FIFO nobody writes
# reads as empty rather than blocking.
out=$(as_user timeout -s KILL 20 bash -c "'$CTR_BIN' exec --env-file <(echo FROM_PIPE=yes) '$IMAGES/good.sqfs' sh -c 'echo \$FROM_PIPE'" 2>&1) ||
  fail "--env-file <(...): $out"
expect_eq "--env-file from a pipe" yes "$out"
out=$(as_user timeout -s KILL 20 "$CTR_BIN" exec --env-file "$WORK/env.fifo" "$IMAGES/good.sqfs" echo ran 2>&1) ||
  fail "--env-file FIFO without a writer: $out"
expect_eq "--env-file FIFO without a writer" ran "$out"
assert_nothing_left "pipes"
# $CTR_CONFIG names a file of the user's choosing.
set +e; out=$(as_user env CTR_CONFIG=/dev/zero timeout -s KILL 20 "$CTR_BIN" exec "$IMAGES/good.sqfs" true 2>&1); rc=$?; set -e
[ "$rc" = 255 ] || fail "CTR_CONFIG=/dev/zero: expected 255, got $rc: $out"
expect_contains "CTR_CONFIG=/dev/zero" "/dev/zero is a character device" "$out"
set +e; out=$(as_user env CTR_CONFIG="$WORK/env.fifo" timeout -s KILL 20 "$CTR_BIN" exec "$IMAGES/good.sqfs" true 2>&1); rc=$?; set -e
[ "$rc" = 255 ] || fail "CTR_CONFIG=FIFO: expected 255, got $rc: $out"
expect_contains "CTR_CONFIG=FIFO" "env.fifo is a FIFO" "$out"
assert_nothing_left "CTR_CONFIG"

# ---- the same images through the installed setuid helper (kernel squashfs on a loop device).
helper_runtime "(the squashfuse cases passed)"
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0"
CTR_TEST_CONFIG=  # the installed ctr reads $CONF
hostile_images "$PREFIX/bin/ctr" "setuid helper"
rm -f "$CONF"
echo "PASS: $TEST_NAME"
