# Bad input: each a one-line error, exit 255, nothing left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0
make_demo_rootfs "$WORK/demo"
ln -s ../../../../../etc "$WORK/demo/escape"   # a symlink in the image climbing out of the root
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
cp "$WORK/demo.sqfs" "$WORK/secret.sqfs" && chmod 600 "$WORK/secret.sqfs"
head -c 4096 /dev/urandom > "$WORK/garbage.sqfs"
chmod -R a+rX "$WORK"; chmod 600 "$WORK/secret.sqfs"
img="$WORK/demo.sqfs"

# expect_error WHAT NEEDLE CMD...: exit 255 and exactly one line on stderr containing NEEDLE.
expect_error() {
  local what=$1 needle=$2; shift 2
  local err rc
  set +e; err=$(as_user "$@" 2>&1 >/dev/null); rc=$?; set -e
  expect_eq "$what: exit status" 255 "$rc"
  expect_eq "$what: one line" 1 "$(printf '%s\n' "$err" | wc -l)"
  expect_contains "$what" "$needle" "$err"
}

expect_error "missing image" "no-such.sif" "$CTR_BIN" exec "$WORK/no-such.sif" true
expect_error "unreadable image" "secret.sqfs" "$CTR_BIN" exec "$WORK/secret.sqfs" true
expect_error "not an image" "squashfs" "$CTR_BIN" exec "$WORK/garbage.sqfs" true
expect_error "bad bind spec" "bind" "$CTR_BIN" exec -B "$WORK:/x:rx" "$img" true
expect_error "bind source missing" "does not exist" "$CTR_BIN" exec -B "$WORK/nope:/x" "$img" true
expect_error "relative target" "not absolute" "$CTR_BIN" exec -B "$WORK:x" "$img" true
expect_error "target escaping through a symlink" "escapes" "$CTR_BIN" exec -B "$WORK:/escape/x" "$img" true
expect_error "command not found" "command 'no-such-cmd' not found in the container" \
  "$CTR_BIN" exec "$img" no-such-cmd
expect_error "command not found (directory image)" "not found in the container" \
  "$CTR_BIN" exec "$WORK/demo" /no/such/cmd

note "/dev/fuse not accessible"
chmod 600 /dev/fuse
set +e; err=$(as_user "$CTR_BIN" exec "$img" true 2>&1); rc=$?; set -e
chmod 666 /dev/fuse
expect_eq "/dev/fuse: exit status" 255 "$rc"
expect_contains "/dev/fuse: says what the admin can do" "chmod 0666 /dev/fuse" "$err"

note "no user namespaces"
# user.max_user_namespaces is per user namespace: set it to 0 in one the test user owns.
# Inside, the user is uid 0: its state directory goes under $WORK, not /tmp/ctr-0.
mkdir -p "$WORK/xdg" && chown "$CTR_TEST_USER" "$WORK/xdg" && chmod 700 "$WORK/xdg"
set +e
err=$(as_user unshare --user --map-root-user env XDG_RUNTIME_DIR="$WORK/xdg" sh -c \
  'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" exec "$1" true' "$CTR_BIN" "$WORK/demo" 2>&1)
rc=$?; set -e
expect_eq "no userns: exit status" 255 "$rc"
expect_contains "no userns: says how to enable" "user.max_user_namespaces" "$err"

# (A state directory taken by another user: test_hardening_state_squat.sh.)

sleep 0.2
[ -z "$(pgrep -u "$CTR_TEST_USER" -f "squashfuse|ctr-squashfs" || true)" ] || fail "squashfuse left running"
assert_no_leftovers
echo "PASS: $TEST_NAME"
