#!/bin/bash
# Mounts made on the node after a launch started, and a later launch that joins it (the
# image's holder: a job's other ranks, a second `ctr exec` while one runs). Where the root
# mount is shared (systemd's default), they show in the joining launch, even below a bind;
# where it is private, they cannot (the holder's mount namespace is a copy of the first
# launch's), and `ctr check` warns with the fix. Each case runs in a mount namespace of its
# own whose / has that propagation (unshare --propagation), so the node's own setting does
# not decide the outcome. A launch from another mount namespace gets a holder of its own.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root
create_test_user
require_fuse
require_userns_overlay
command -v unshare >/dev/null || skip "unshare (util-linux) is missing"
use_linger 0
make_demo_squashfs demo
export IMAGE=$WORK/demo.sqfs WORK CTR_BIN CTR_TEST_USER CTR_TEST_CONFIG TEST_NAME
export CTR_LAUNCH_MEMO=${CTR_LAUNCH_MEMO:-}

# hold DIR: a launch of the image that runs on, so that its holder stays (back once DIR/started
# exists); release: its end.
hold() {
  as_user "$CTR_BIN" exec "$IMAGE" sh -c "touch '$1/started'; exec sleep 60" &
  held=$!
  for i in $(seq 200); do [ -e "$1/started" ] && break; sleep 0.05; done
  [ -e "$1/started" ] || fail "the launch that holds the image did not start"
}
release() {
  pkill -u "$CTR_TEST_USER" -f '^sleep 60$' || true
  { wait "$held"; } 2>/dev/null || true
}

# scenario PROPAGATION: in a mount namespace whose / has PROPAGATION, a launch starts and
# runs on; root then mounts a tmpfs below a directory; a second launch binds that directory.
# Leaves in $WORK/PROPAGATION: seen (what the second launch read), log (its debug log) and
# check (ctr check).
scenario() {
  local dir=$WORK/$1
  mkdir -p "$dir/m/sub" && chown "$CTR_TEST_USER" "$dir" && chmod 755 "$dir/m" "$dir/m/sub"
  hold "$dir"
  mount -t tmpfs -o mode=755,size=1m later "$dir/m/sub"
  echo "mounted later" >"$dir/m/sub/file"
  as_user "$CTR_BIN" -d exec --bind "$dir/m:/data" "$IMAGE" cat /data/sub/file >"$dir/seen" 2>"$dir/log" || true
  as_user "$CTR_BIN" check >"$dir/check" 2>&1 || true
  umount "$dir/m/sub"
  release
}
export -f scenario hold release as_user fail

for propagation in shared private; do
  note "/ $propagation: a launch joins one started before a host mount"
  unshare --mount --propagation "$propagation" bash -c 'set -euo pipefail; scenario "$0"' "$propagation" ||
    fail "$propagation: the scenario failed"
  wait_user_processes_end
done
for propagation in shared private; do
  expect_contains "/ $propagation: the second launch joined the first's holder" "reusing the mounted image" \
    "$(cat "$WORK/$propagation/log")"
done
expect_eq "/ shared: the joining launch sees the later mount below its bind" "mounted later" "$(cat "$WORK/shared/seen")"
case $(cat "$WORK/private/seen") in
  "mounted later") fail "/ private: the joining launch saw the later mount (then ctr check's warning is wrong)" ;;
esac
expect_contains "/ shared: ctr check" "[ok] mount propagation: / receives the host's mounts" "$(cat "$WORK/shared/check")"
expect_contains "/ private: ctr check" "[warn] mount propagation: / is private" "$(cat "$WORK/private/check")"
expect_contains "/ private: ctr check names the fix" "mount --make-rshared /" "$(cat "$WORK/private/check")"
note "a launch in a mount namespace of its own does not join a holder made outside it"
# The holder's mounts are a copy of the namespace it started in: joined from another (a job's
# private /tmp without cgroups, unshare -m), it would show that one's mounts in place of the
# launch's own, here an empty directory for the bind.
mkdir -p "$WORK/other/m" && chown "$CTR_TEST_USER" "$WORK/other" && chmod 755 "$WORK/other/m"
hold "$WORK/other"
# The same command outside first: its plan is kept (the launch memo), and must not be taken
# for the launch inside, whose holder differs.
as_user "$CTR_BIN" -d exec --bind "$WORK/other/m:/data" "$IMAGE" cat /data/file >/dev/null 2>"$WORK/other/log-outside" || true
grep -q "reusing the mounted image" "$WORK/other/log-outside" || fail "the same command outside did not join its holder"
unshare --mount --propagation private bash -c 'set -euo pipefail
  mount -t tmpfs -o mode=755,size=1m own "$0/m" && echo "its own" >"$0/m/file"
  as_user "$CTR_BIN" -d exec --bind "$0/m:/data" "$IMAGE" cat /data/file >"$0/seen" 2>"$0/log" || true' "$WORK/other"
release
wait_user_processes_end
! grep -q "reusing the mounted image" "$WORK/other/log" || fail "the launch in its own mount namespace joined the holder outside it"
expect_eq "the launch in its own mount namespace sees its own mount" "its own" "$(cat "$WORK/other/seen")"
note "inside: $(grep -m1 'launch memo' "$WORK/other/log" || echo 'no launch memo line')"

note "/ private: the joining launch read: $(head -c 200 "$WORK/private/seen") $(grep -m1 "can't open" "$WORK/private/log" || true)"
assert_nothing_left "after both"
echo "PASS: $TEST_NAME"
