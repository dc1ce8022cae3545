# ctr execs the app: a SIGTERM sent to the ctr pid reaches the app's handler and its exit
# status comes back; a signal death is 128+N for the shell.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
make_demo_rootfs "$WORK/demo"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
chmod -R a+rX "$WORK"
mkdir -m 777 "$WORK/rw"

note "SIGTERM handler runs, its exit status is ctr's"
as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c 'trap "exit 42" TERM; echo ready > '"$WORK"'/rw/ready; while :; do sleep 0.05; done' &
pid=$!
for _ in $(seq 100); do [ -e "$WORK/rw/ready" ] && break; sleep 0.05; done
[ -e "$WORK/rw/ready" ] || fail "container did not start"
# runuser forks: signal the ctr process itself (the child of runuser), which is the app.
app=$(pgrep -u "$CTR_TEST_USER" -f '^sh -c trap' | head -1)
[ -n "$app" ] || fail "no app process"
expect_contains "ctr became the app (no supervisor)" "sh" "$(cat /proc/$app/comm)"
kill -TERM "$app"
set +e; wait "$pid"; rc=$?; set -e
expect_eq "exit status after SIGTERM" 42 "$rc"

note "signal death: 128+N"
set +e; as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c 'kill -USR1 $$'; rc=$?; set -e
expect_eq "killed by SIGUSR1" $((128 + 10)) "$rc"

note "exit statuses pass through"
for code in 0 1 3 254; do
  set +e; as_user "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c "exit $code"; rc=$?; set -e
  expect_eq "exit $code" "$code" "$rc"
done
sleep 0.2
assert_no_leftovers
echo "PASS: $TEST_NAME"
