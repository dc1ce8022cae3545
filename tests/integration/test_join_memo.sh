#!/bin/bash
# A held launch remembers that it could join the holder's ready namespace (issue 56: the
# prepared root's manifest is then not read again), as the test user, and the memory never
# serves a root the launch would not have got: the second launch of a plan uses it; a launch
# with another plan (a --bind more) does not; and when a source the decision asked about
# changes (an admin 'bind path' that was absent when the holder started, then created), the
# launch decides again and shows the new bind. Nothing is left after the linger.
. "$(dirname "$0")/lib.sh"
ensure_test_user
demo_for_user
site=$WORK/site-bind
CTR_TEST_CONFIG=$WORK/memo.conf
printf 'image linger = 3\nbind path = %s:/site\n' "$site" >"$CTR_TEST_CONFIG"
chmod 644 "$CTR_TEST_CONFIG"
# run ARGS...: ctr -d exec ARGS as the test user; stdout in $out, the root decision in $root.
run() {
  out=$(as_user "$CTR_BIN" -d exec "$@" 2>"$WORK/debug") || fail "ctr exec $*: $out $(tail -3 "$WORK/debug")"
  root=$(grep -o "debug: root: .*" "$WORK/debug" || true)
}

note "the first launch decides from the manifest, the second remembers"
run "$img" true
run "$img" true
case "$root" in *"ready namespace"*) ;; *) skip "no ready namespace to join here: $root";; esac
expect_contains "the first launch joins" "exactly this launch's root" "$root"
run "$img" true
expect_contains "the next launch of the same plan remembers" "(remembered for this plan)" "$root"

note "another plan decides for itself"
run --bind "$WORK:/mnt" "$img" ls /mnt
case "$root" in *remembered*) fail "a launch with a --bind more used the memory: $root";; esac
expect_contains "the --bind is there" "memo.conf" "$out"

note "a source the decision asked about appears: decided again, and the bind is there"
mkdir -m 755 "$site" && echo here >"$site/file" && chmod 644 "$site/file"
run "$img" cat /site/file
case "$root" in *remembered*) fail "the memory hid a new admin bind: $root";; esac
expect_eq "the admin bind that appeared" here "$out"
rm -rf "$site"
run "$img" true
expect_contains "absent again: the memory holds again" "(remembered for this plan)" "$root"

assert_nothing_left "held launches that remember their root"
echo "PASS: $TEST_NAME"
