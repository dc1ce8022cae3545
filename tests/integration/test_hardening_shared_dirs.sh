#!/bin/bash
# Issue 51 (hardening, round 3): per-user directories in a directory everybody can write
# (ctr.conf's 'image cache dir = /var/tmp/ctr-cache-%u', 'stage dir = /var/tmp/ctr-stage-%u'),
# which another user can take first. Against a real registry on 127.0.0.1, as root and as
# the test user, with a second user as the attacker:
#   H1  root's `ctr pull` into a cache directory another user planted (a directory of theirs
#       with blobs/sha256 a symlink, or the cache directory itself a symlink) writes nothing
#       where they point, and pulls into root's own directory beside it;
#   M3  the user's pulled layers are theirs alone (cache 0700, blobs 0600; an older ctr's
#       0755 cache is made 0700): another user cannot read them;
#   L1  a taken stage or image cache name does not stop `--stage` or `exec docker://`: the
#       user's own directory beside it serves, and the next launch finds it again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
ensure_test_user
require_fuse
use_linger 0
ATTACKER=$(second_test_user)
uid=$(id -u "$CTR_TEST_USER")
as_attacker() { runuser -u "$ATTACKER" -- "$@"; }

demo_layer "$WORK/l1.tgz"
layout_image "$WORK/layout1" 1 "$WORK/l1.tgz"
make_demo_squashfs demo
start_registry
trap 'kill $REGISTRY_PID 2>/dev/null || true; wait $REGISTRY_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout1:1" "docker://$REGISTRY/demo:1"
ref=docker://$REGISTRY/demo:1

# $V stands for /var/tmp: root's, sticky, anyone may add to it.
V=$WORK/vartmp
mkdir -m 1777 "$V"
cat >> "$CTR_TEST_CONFIG" <<EOF
image cache dir = $V/ctr-cache-%u
stage dir = $V/ctr-stage-%u
EOF
chmod -R a+rX "$WORK"
chmod 1777 "$V"
# What stands for /etc/cron.d: a directory of root's that root's pull must never write in.
mkdir -m 755 "$WORK/cron.d" "$WORK/cron2.d"

note "H1: root's pull into a cache directory another user made, blobs/sha256 a symlink"
as_attacker mkdir -p "$V/ctr-cache-0/blobs"
as_attacker ln -s "$WORK/cron.d" "$V/ctr-cache-0/blobs/sha256"
set +e; out=$(cd "$WORK" && CTR_CONFIG=$CTR_TEST_CONFIG "$CTR_BIN" pull --dir "$WORK" "$ref" 2>&1); rc=$?; set -e
[ -z "$(ls -A "$WORK/cron.d")" ] || fail "root wrote where another user's symlink points: $(ls -la "$WORK/cron.d")"
[ "$rc" = 0 ] || fail "root's pull with its cache name taken: $rc: $out"
expect_contains "root is told" "is a directory of uid $(id -u "$ATTACKER")" "$out"
sibling=$(ls -d "$V"/ctr-cache-0-* 2>/dev/null | head -1)
[ -n "$sibling" ] || fail "no directory of root's beside the taken name: $(ls -la "$V")"
expect_eq "root's own cache" "root 700" "$(stat -c '%U %a' "$sibling")"
[ -n "$(ls -A "$sibling/blobs/sha256")" ] || fail "no layers in $sibling"
expect_eq "the attacker's directory untouched" "$ATTACKER" "$(stat -c %U "$V/ctr-cache-0")"
[ -L "$V/ctr-cache-0/blobs/sha256" ] || fail "the attacker's symlink was replaced"
[ -f "$WORK/demo_1.sif" ] || fail "no SIF pulled: $(ls "$WORK")"
rm -f "$WORK/demo_1.sif"

note "H1: the cache directory itself a symlink of the attacker's"
rm -rf "$V/ctr-cache-0" "$sibling"
as_attacker ln -s "$WORK/cron2.d" "$V/ctr-cache-0"
set +e; out=$(cd "$WORK" && CTR_CONFIG=$CTR_TEST_CONFIG "$CTR_BIN" pull --dir "$WORK" "$ref" 2>&1); rc=$?; set -e
[ -z "$(ls -A "$WORK/cron2.d")" ] || fail "root wrote through another user's symlink: $(ls -la "$WORK/cron2.d")"
[ "$rc" = 0 ] || fail "root's pull with its cache name a symlink: $rc: $out"
expect_contains "root is told" "is a symlink of uid $(id -u "$ATTACKER")" "$out"
rm -f "$WORK/demo_1.sif"
rm -rf "$V"/ctr-cache-0*

note "M3: the user's layers are the user's alone, an older ctr's 0755 cache made 0700"
make_user_dir
runuser -u "$CTR_TEST_USER" -- mkdir -m 755 "$V/ctr-cache-$uid"
as_user sh -c "cd '$U' && '$CTR_BIN' pull '$ref'" >/dev/null 2>"$WORK/e-m3" || fail "pull as the user: $(cat "$WORK/e-m3")"
cache=$V/ctr-cache-$uid
expect_eq "the cache root" 700 "$(stat -c %a "$cache")"
for d in "$cache/blobs" "$cache/blobs/sha256"; do expect_eq "$d" 700 "$(stat -c %a "$d")"; done
blob=$(ls "$cache/blobs/sha256"/* | head -1)
expect_eq "a layer" 600 "$(stat -c %a "$blob")"
! as_attacker cat "$blob" >/dev/null 2>&1 || fail "another user read $blob"
rm -rf "$cache"

note "L1: --stage with the stage directory's name taken by another user"
as_attacker mkdir -m 777 "$V/ctr-stage-$uid"
set +e; out=$(as_user "$CTR_BIN" exec --stage "$WORK/demo.sqfs" echo ran 2>"$WORK/e-stage"); rc=$?; set -e
[ "$rc" = 0 ] || fail "--stage with the stage name taken: $rc: $(cat "$WORK/e-stage")"
expect_eq "--stage ran" ran "$out"
expect_contains "the user is told" "using $V/ctr-stage-$uid-" "$(cat "$WORK/e-stage")"
stage=$(ls -d "$V/ctr-stage-$uid"-*)
expect_eq "one stage directory of the user's" 1 "$(echo "$stage" | wc -l)"
expect_eq "the user's, 0700" "$CTR_TEST_USER 700" "$(stat -c '%U %a' "$stage")"
[ -n "$(ls "$stage" | grep -- '-demo.sqfs$')" ] || fail "no copy in $stage: $(ls -la "$stage")"
[ -z "$(ls -A "$V/ctr-stage-$uid")" ] || fail "wrote into the attacker's directory"
expect_contains "--explain names it" "-> $stage/" "$(as_user "$CTR_BIN" exec --stage --explain "$WORK/demo.sqfs" true 2>/dev/null)"
as_user "$CTR_BIN" exec --stage "$WORK/demo.sqfs" true 2>/dev/null || fail "second --stage launch"
expect_eq "found again, not made again" "$stage" "$(ls -d "$V/ctr-stage-$uid"-*)"

note "L1: exec docker:// with the image cache's name taken by another user"
as_attacker mkdir -m 777 "$V/ctr-cache-$uid"
set +e; out=$(as_user "$CTR_BIN" exec "$ref" cat /etc/os-release 2>"$WORK/e-cache"); rc=$?; set -e
[ "$rc" = 0 ] || fail "exec docker:// with the cache name taken: $rc: $(cat "$WORK/e-cache")"
expect_contains "the image ran" "ID=ctr-demo" "$out"
cache=$(ls -d "$V/ctr-cache-$uid"-*)
expect_eq "one cache directory of the user's" 1 "$(echo "$cache" | wc -l)"
expect_eq "the user's, 0700" "$CTR_TEST_USER 700" "$(stat -c '%U %a' "$cache")"
[ -z "$(ls -A "$V/ctr-cache-$uid")" ] || fail "wrote into the attacker's directory"
as_user "$CTR_BIN" exec "$ref" true 2>"$WORK/e-cache2" || fail "second launch: $(cat "$WORK/e-cache2")"
! grep -q pulling "$WORK/e-cache2" || fail "the second launch pulled again: $(cat "$WORK/e-cache2")"
expect_eq "cache list names it" "$cache" "$(as_user "$CTR_BIN" cache list --json 2>/dev/null | jq -r .root)"

note "a directory the user named (CTR_CACHE_DIR) is refused, not replaced"
set +e; err=$(as_user env CTR_CACHE_DIR="$V/ctr-cache-$uid" "$CTR_BIN" pull "$U/x.sif" "$ref" 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "pulled into another user's directory named by CTR_CACHE_DIR"
expect_contains "names it" "$V/ctr-cache-$uid is a directory of uid" "$err"

assert_nothing_left "shared directories"
echo "PASS: $TEST_NAME"
