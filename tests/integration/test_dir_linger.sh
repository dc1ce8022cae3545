#!/bin/bash
# Directory images linger as SIFs do (issue 56, item 2), as the test user, and are never
# served stale: the next launch joins the lingering holder (no new one starts); a change of
# what the prepared root was made from starts a new holder, which shows it (an identity
# file's source: /etc/passwd; the entries of a directory where a mount target is made: a new
# entry in /home); a file changed in place shows without one (the tree is bound, live); and
# where an overlay has the directory as its lower layer (a target made in a directory of
# more than 64 entries), the holder does not linger at all. Nothing is left after the linger.
. "$(dirname "$0")/lib.sh"
ensure_test_user
make_user_dir
CTR_TEST_CONFIG=$WORK/linger.conf
printf 'image linger = 3\n' >"$CTR_TEST_CONFIG"
chmod 644 "$CTR_TEST_CONFIG"
make_demo_rootfs "$U/dir"
echo one >"$U/dir/marker"
chown -R "$CTR_TEST_USER" "$U/dir"
TUID=$(id -u "$CTR_TEST_USER")
# holders: the test user's image holders that are alive (prctl name ctr-holder).
holders() { ps -U "$TUID" -o stat=,comm= 2>/dev/null | awk '$1 !~ /^Z/ && $2 == "ctr-holder"' | wc -l; }
# run ARGS...: ctr -d exec ARGS as the test user; stdout in $out, the debug log in $WORK/debug.
run() { out=$(as_user "$CTR_BIN" -d exec "$@" 2>"$WORK/debug") || fail "ctr exec $*: $out $(tail -3 "$WORK/debug")"; }
started() { grep -c "starting the image holder: done" "$WORK/debug" || true; }

note "a second launch joins the lingering holder"
run "$U/dir" cat /marker
expect_eq "first launch" one "$out"
expect_eq "the first launch starts a holder" 1 "$(started)"
[ "$(holders)" = 1 ] || fail "no holder lingers after the first launch of a directory image ($(holders))"
run "$U/dir" cat /marker
expect_eq "the second launch starts none" 0 "$(started)"

note "a file changed in place shows at once (the tree is bound, live)"
echo two >"$U/dir/marker"
run "$U/dir" cat /marker
expect_eq "the changed file" two "$out"
expect_eq "no new holder for it" 0 "$(started)"

note "what the prepared root was made from changed: a new holder, which shows it"
echo "extra:x:4242:4242::/nonexistent:/bin/false" >>"$U/dir/etc/passwd"
run "$U/dir" cat /etc/passwd
expect_contains "an identity file's source changed" "extra:x:4242" "$out"
expect_eq "a new holder for it" 1 "$(started)"
mkdir "$U/dir/home/new-entry" && chown "$CTR_TEST_USER" "$U/dir/home/new-entry"
run "$U/dir" ls /home
expect_contains "a new entry where a target is made (/home)" "new-entry" "$out"
expect_eq "a new holder for it" 1 "$(started)"

note "an overlay with the directory as its lower layer: no linger"
make_demo_rootfs "$U/wide"
for i in $(seq 70); do mkdir "$U/wide/home/u$i"; done  # over kUnderlayMaxEntries: an overlay of /home
chown -R "$CTR_TEST_USER" "$U/wide"
wait_user_processes_end
run "$U/wide" true
grep -q "an overlay of it" "$WORK/debug" || note "(the launch's own debug log does not show the holder's choice)"
for i in $(seq 40); do [ "$(holders)" = 0 ] && break; sleep 0.05; done
expect_eq "no holder lingers for it" 0 "$(holders)"
run "$U/wide" true
expect_eq "so the next launch starts one" 1 "$(started)"

assert_nothing_left "directory images that linger"
echo "PASS: $TEST_NAME"
