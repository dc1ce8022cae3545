# Shared helpers for integration tests. Source it first: `. "$(dirname "$0")/lib.sh"`.
# Tests run as root in CI; behaviour that differs for ordinary users is checked as the
# unprivileged user $CTR_TEST_USER, created here if missing.
set -euo pipefail

CTR_BIN=${CTR_BIN:?CTR_BIN must point at the ctr binary (ctest sets it)}
CTR_SOURCE_DIR=${CTR_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CTR_TEST_USER=${CTR_TEST_USER:-ctrtest}
TEST_NAME=$(basename "$0" .sh)
# Per-test scratch space, world-readable so the test user can reach images in it.
WORK=$(mktemp -d "/tmp/ctr-${TEST_NAME}.XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $TEST_NAME: $*" >&2; exit 1; }
skip() { echo "SKIP: $TEST_NAME: $*" >&2; exit 77; }
note() { echo "-- $*"; }

require_root() { [ "$(id -u)" = 0 ] || skip "needs root (to create the test user)"; }

# Creates the unprivileged test user once and makes /dev/fuse usable by ordinary users,
# as it is on clusters (these VMs ship it 0600).
ensure_test_user() {
  require_root
  id "$CTR_TEST_USER" >/dev/null 2>&1 || useradd -m -s /bin/sh "$CTR_TEST_USER"
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  # The build tree must be reachable by the test user.
  local d; d=$(dirname "$CTR_BIN")
  while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
}

# as_user CMD...: runs CMD as the test user with a login-like environment, cwd $WORK.
as_user() {
  ( cd "$WORK" && runuser -u "$CTR_TEST_USER" -- env -i HOME="$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)" \
      USER="$CTR_TEST_USER" LOGNAME="$CTR_TEST_USER" PATH=/usr/local/bin:/usr/bin:/bin "$@" )
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() { [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"; }
# expect_contains WHAT NEEDLE HAYSTACK
expect_contains() { case "$3" in *"$2"*) ;; *) fail "$1: expected to contain '$2', got '$3'";; esac; }

# Builds the busybox demo root filesystem into DIR (no network).
make_demo_rootfs() { sh "$CTR_SOURCE_DIR/images/demo/make-rootfs.sh" "$1" >/dev/null; }

# Nothing of ours may stay mounted or attached after a test.
assert_no_leftovers() {
  local m
  m=$(grep -E 'squashfuse|ctr' /proc/self/mountinfo | grep -v ' /sys/fs/fuse/connections ' || true)
  [ -z "$m" ] || fail "stale mounts left behind: $m"
  if command -v losetup >/dev/null && [ -n "$(losetup -a 2>/dev/null)" ]; then
    fail "loop devices left attached: $(losetup -a)"
  fi
}
