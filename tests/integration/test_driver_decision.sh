# `ctr check` and `ctr exec` make one driver decision (launch::decideDriver): for every
# ctr.conf mode, the mode check reports is the driver exec plans, or both refuse.
. "$(dirname "$0")/lib.sh"
ensure_test_user
make_demo_rootfs "$WORK/demo"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
chmod -R a+rX "$WORK"

json_field() { sed -n "s/^  \"$1\": \"\\([^\"]*\\)\".*/\\1/p"; }
for setuid in no yes; do
  for driver in auto squashfuse setuid; do
    CTR_TEST_CONFIG=$WORK/ctr-$setuid-$driver.conf
    printf 'allow setuid = %s\nimage driver = %s\nimage linger = 0\n' "$setuid" "$driver" > "$CTR_TEST_CONFIG"
    chmod 644 "$CTR_TEST_CONFIG"
    check=$(as_user "$CTR_BIN" check --json 2>/dev/null | json_field mode || true)
    if plan=$(as_user "$CTR_BIN" exec --explain --json "$WORK/demo.sqfs" true 2>"$WORK/err"); then
      planned=$(printf '%s\n' "$plan" | json_field driver)
    else
      planned=none
      note "exec refused: $(cat "$WORK/err")"
    fi
    note "allow setuid = $setuid, image driver = $driver: check says '$check', exec plans '$planned'"
    [ -n "$check" ] || fail "ctr check gave no mode"
    expect_eq "check and exec agree (allow setuid = $setuid, image driver = $driver)" "$check" "$planned"
  done
done
echo "PASS: $TEST_NAME"
