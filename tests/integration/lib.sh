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

# ---- platform probes: machines of the same kind differ, so a test asks before it relies
# on a feature and skips with the probe's reason (never passes silently).

# The mount API ctr uses (open_tree, move_mount, mount_setattr) needs Linux 5.12.
require_kernel_mount_api() {
  local v; v=$(uname -r); local major=${v%%.*} rest=${v#*.}; local minor=${rest%%[!0-9]*}
  [ "$major" -gt 5 ] || { [ "$major" = 5 ] && [ "$minor" -ge 12 ]; } ||
    skip "kernel $v is older than 5.12 (no mount_setattr), which ctr needs"
}

# Unprivileged user namespaces, and overlayfs inside one (Linux >= 5.11; some distributions
# disable either), both as the test user: every container needs the first, and roots built
# over an image that lacks a mount target need the second.
require_userns_overlay() {
  local probe
  as_user unshare -Ur true 2>/dev/null ||
    skip "unprivileged user namespaces are disabled here (unshare -Ur as $CTR_TEST_USER failed; see user.max_user_namespaces)"
  probe=$(mktemp -d /tmp/ctr-overlay-probe.XXXXXX)
  mkdir "$probe/l" "$probe/u" "$probe/w" "$probe/m" && chown -R "$CTR_TEST_USER" "$probe" && chmod 755 "$probe"
  if ! as_user unshare -Urm sh -c "mount -t overlay overlay -o lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w $probe/m" 2>/dev/null; then
    rm -rf "$probe"
    skip "overlayfs cannot be mounted in an unprivileged user namespace on this kernel ($(uname -r))"
  fi
  rm -rf "$probe"
}

# FUSE for ordinary users: /dev/fuse present (the lib makes it 0666, as clusters do) and
# squashfuse_ll installed.
require_fuse() {
  [ -c /dev/fuse ] || skip "no /dev/fuse on this machine (fuse module not loaded): squashfuse cannot run"
  command -v squashfuse_ll >/dev/null || skip "squashfuse_ll is not installed"
}

# Kernel squashfs through loop devices (the setuid helper's path). An optional argument is
# appended to the skip reason (what did run).
require_loop_squashfs() {
  local ran=${1:+ $1}
  command -v losetup >/dev/null || skip "losetup missing$ran"
  grep -qw squashfs /proc/filesystems || modprobe squashfs 2>/dev/null || skip "no squashfs in the kernel$ran"
  [ -e /dev/loop-control ] || skip "no /dev/loop-control (loop module not loaded)$ran"
  [ -z "$(losetup -a)" ] || skip "loop devices already attached on this host: $(losetup -a)$ran"
}

# Creates the unprivileged test user once and lets it reach the build tree (enough for
# commands that start no container).
create_test_user() {
  require_root
  id "$CTR_TEST_USER" >/dev/null 2>&1 || useradd -m -s /bin/sh "$CTR_TEST_USER"
  local d; d=$(dirname "$CTR_BIN")
  while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
}

# Creates the unprivileged test user once and makes /dev/fuse usable by ordinary users,
# as it is on clusters (these VMs ship it 0600); then probes what every container needs.
ensure_test_user() {
  create_test_user
  if [ -c /dev/fuse ]; then chmod 666 /dev/fuse; fi
  require_kernel_mount_api
  require_userns_overlay
}

# second_test_user: prints the name of a second ordinary user (the other user on the node:
# an attacker, a squatter, a second writer), created once.
second_test_user() {
  local u=${CTR_TEST_USER2:-ctrtest2}
  id "$u" >/dev/null 2>&1 || useradd -m -s /bin/sh "$u"
  echo "$u"
}

# as_user CMD...: runs CMD as the test user with a login-like environment, cwd $WORK
# (plus CTR_CONFIG when use_linger chose a configuration, and CTR_LAUNCH_MEMO when the suite
# runs with one: `CTR_LAUNCH_MEMO=check ctest` compares every kept launch plan with the one
# decided again).
as_user() {
  ( cd "$WORK" && runuser -u "$CTR_TEST_USER" -- env -i HOME="$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)" \
      USER="$CTR_TEST_USER" LOGNAME="$CTR_TEST_USER" PATH=/usr/local/bin:/usr/bin:/bin \
      ${CTR_TEST_CONFIG:+CTR_CONFIG=$CTR_TEST_CONFIG} ${CTR_LAUNCH_MEMO:+CTR_LAUNCH_MEMO=$CTR_LAUNCH_MEMO} "$@" )
}

# make_user_dir: $U, a directory of the test user's own in $WORK (where its launches start
# and its overlay images go).
make_user_dir() {
  U="$WORK/user"
  mkdir -m 755 "$U" && chown "$CTR_TEST_USER" "$U"
}

# demo_for_user: $img, the demo image as squashfs in $WORK (readable by the test user), and
# make_user_dir's $U.
demo_for_user() {
  make_demo_squashfs demo
  chmod -R a+rX "$WORK"
  img="$WORK/demo.sqfs"
  make_user_dir
}

# use_linger SECONDS: the test user's launches use a ctr.conf with 'image linger = SECONDS'
# (0: a holder ends with the image's last launch, so leftover checks need not wait; the
# default keeps images mounted a few seconds for the next launch).
use_linger() {
  CTR_TEST_CONFIG=$WORK/ctr-linger.conf
  printf 'image linger = %s\n' "$1" > "$CTR_TEST_CONFIG"
  chmod 644 "$CTR_TEST_CONFIG"
  note "image linger = $1 s for this test's launches"
}

# make_nvidia_fixture NODE LIST VERSION LIB...: a node with an NVIDIA driver, for --nv
# through CTR_HOST_ROOT=NODE on a machine without one: the named real libraries of this
# machine in NODE/usr/lib64 with an ld.so cache of them (ldconfig -r), LIST an nvliblist
# naming them (ctr.conf 'nvidia library list'), the driver's version file and
# /dev/nvidiactl and /dev/nvidia0.
make_nvidia_fixture() {
  local node=$1 list=$2 version=$3 lib
  shift 3
  mkdir -p "$node/usr/lib64" "$node/etc" "$node/proc/driver/nvidia" "$node/dev" "$(dirname "$list")"
  for lib in "$@"; do
    cp "$(readlink -f "/usr/lib/x86_64-linux-gnu/$lib")" "$node/usr/lib64/$lib" 2>/dev/null || true
  done
  ls "$node/usr/lib64" | sed 's/\.so\..*/.so/' > "$list"
  echo /usr/lib64 > "$node/etc/ld.so.conf"
  ldconfig -r "$node" -C /etc/ld.so.cache -f /etc/ld.so.conf -X
  echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  $version  fixture" > "$node/proc/driver/nvidia/version"
  : > "$node/dev/nvidiactl"
  : > "$node/dev/nvidia0"
}

# refused_in_one_line WHAT TEXT CMD...: CMD fails, its stderr one line containing TEXT.
refused_in_one_line() {
  local what=$1 text=$2 err rc
  shift 2
  set +e; err=$("$@" 2>&1 >/dev/null); rc=$?; set -e
  [ "$rc" != 0 ] || fail "$what: accepted"
  expect_eq "$what: one line ($err)" 1 "$(printf '%s\n' "$err" | wc -l)"
  expect_contains "$what" "$text" "$err"
}

# ends_within SECONDS WHAT CMD...: CMD (which the test user's processes serve) succeeds
# within SECONDS; else the test fails listing what the user has left and where each waits,
# and those processes are killed, so that a hang fails the test instead of stalling it.
ends_within() {
  local seconds=$1 what=$2 rc=0 pid i stuck
  shift 2
  "$@" & pid=$!
  for i in $(seq $(( seconds * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    stuck=$(ps -U "$CTR_TEST_USER" -o pid=,stat=,wchan:24=,args= || true)
    pkill -KILL -U "$CTR_TEST_USER" || true
    wait "$pid" || true
    fail "$what: still running after $seconds s (it hung): $stuck"
  fi
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || fail "$what: exit $rc"
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() { [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"; }
# expect_contains WHAT NEEDLE HAYSTACK
expect_contains() { case "$3" in *"$2"*) ;; *) fail "$1: expected to contain '$2', got '$3'";; esac; }

# Builds the busybox demo root filesystem into DIR (no network).
make_demo_rootfs() { sh "$CTR_SOURCE_DIR/images/demo/make-rootfs.sh" "$1" >/dev/null; }
# make_demo_squashfs NAME: the demo root as $WORK/NAME and packed as $WORK/NAME.sqfs
# (root-owned files), the image most launch tests run.
make_demo_squashfs() {
  make_demo_rootfs "$WORK/$1"
  mksquashfs "$WORK/$1" "$WORK/$1.sqfs" -quiet -noappend -all-root >/dev/null
}
# Builds the Apptainer-style fixture root (env scripts, %environment extending PATH,
# runscript, %test, a SCIF app "tool", /var and /etc links) into DIR.
make_apptainer_rootfs() { sh "$CTR_SOURCE_DIR/images/apptainer-style/make-rootfs.sh" "$1" >/dev/null; }

# Nothing of ours may stay mounted or attached after a test.
assert_no_leftovers() {
  local m
  m=$(grep -E 'squashfuse|ctr' /proc/self/mountinfo | grep -v ' /sys/fs/fuse/connections ' || true)
  [ -z "$m" ] || fail "stale mounts left behind: $m"
  if command -v losetup >/dev/null && [ -n "$(losetup -a 2>/dev/null)" ]; then
    fail "loop devices left attached: $(losetup -a)"
  fi
}

# squashfuse_of IMAGE: the pids of the test user's FUSE servers of IMAGE (they read it
# as /dev/fd/4, the fd ctr checked).
squashfuse_of() {
  local p
  for p in $(pgrep -u "$CTR_TEST_USER" squashfuse; pgrep -u "$CTR_TEST_USER" ctr-squashfs) ; do
    [ "$(readlink "/proc/$p/fd/4" 2>/dev/null)" = "$1" ] && echo "$p"
  done
  return 0
}

# live_processes_of UID: the pids of UID's processes, less the zombies that init (pid 1) has
# yet to reap. A holder that exited was reparented to init; some inits (a CI sandbox's) reap
# late, and such a zombie holds no file, mount or port. A zombie whose parent is anything
# else is listed: its parent, one of ctr's, failed to wait for it.
live_processes_of() {
  ps -U "$1" -o pid=,ppid=,stat= 2>/dev/null | awk '!($3 ~ /^Z/ && $2 == 1) { print $1 }'
}

# assert_nothing_left WHAT: once the test user's launches are over (give holders 5 s to
# notice), nothing of them remains: no process of the user, no mount, no loop device, no
# state file (.setup, .sock, .pid; .users of earlier versions) in any of the user's state directories. With a second
# argument "keep-state-files", the state files are not checked (a SIGKILLed holder's are
# removed by the user's next launch).
# Waits up to 5 s for the test user's processes to end (a holder with linger 0 is still
# tearing down when the launch returns).
wait_user_processes_end() {
  local uid i
  uid=$(id -u "$CTR_TEST_USER")
  for i in $(seq 100); do
    [ -z "$(live_processes_of "$uid")" ] && break
    sleep 0.05
  done
}

assert_nothing_left() {
  local uid i d m
  uid=$(id -u "$CTR_TEST_USER")
  wait_user_processes_end
  [ -z "$(live_processes_of "$uid")" ] || fail "$1: processes left: $(ps -U "$uid" -o pid,ppid,stat,args)"
  # The test user's mounts: its squashfuse (user_id=UID), anything in its state directories,
  # and the setuid helper's (a root launch of another test may linger, as designed).
  m=$(cat /proc/[0-9]*/mountinfo 2>/dev/null | grep -E "squashfuse .*user_id=$uid,|/tmp/ctr-$uid|ctr-helper" | sort -u || true)
  [ -z "$m" ] || fail "$1: mounts left: $m"
  [ -z "$(losetup -a 2>/dev/null || true)" ] || fail "$1: loop devices left: $(losetup -a)"
  [ "${2:-}" = keep-state-files ] && return 0
  for d in /tmp/ctr-"$uid" /tmp/ctr-"$uid".* /tmp/ctr-"$uid"-*; do
    [ -d "$d" ] || continue
    ! ls "$d" | grep -qE '\.(users|setup|sock|pid)$' || fail "$1: state files left in $d: $(ls "$d")"
  done
}
