#!/bin/bash
# ctr.conf's execution control with the setuid helper (issue 55, item 3): the installed helper
# checks the very file it opened, by its fd, before the privileged mount, whatever the ctr in
# front of it said. Called directly by the test user (no ctr to refuse first), it refuses an
# unsigned SIF, a squashfs, a SIF signed by another key, a signed SIF changed after signing
# and an unsigned dataset image beside a signed image, in one line with nothing attached or
# mounted; it mounts a SIF signed by the trusted key and keeps that verdict (root's alone),
# which the next launch uses while the image, ctr.conf and the key files are unchanged. The
# check runs as nobody (a key file only root may read fails it, and `ctr check` says so
# beforehand), and the user's own
# $CTR_CONFIG cannot lift the rule for `ctr exec`.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"

ensure_test_user
F=$CTR_FIXTURES_DIR/sif/keys
[ -d "$F" ] || skip "no signing keys at $F"
id nobody >/dev/null 2>&1 || skip "no user nobody (the helper runs the check as nobody)"
helper_runtime
CTR="$PREFIX/bin/ctr"
# The config enables the helper for every ctr built for this prefix: never leave it behind;
# nor the verdicts kept for this test's images.
trap 'rm -f "$CONF"; for i in "$WORK"/images/* "$WORK"/images/free/*; do [ -f "$i" ] && rm -f "$VERIFIED/$(stat -c %d-%i "$i")"; done; rm -rf "$WORK"' EXIT
"$CTR" __verify-fd --help >/dev/null 2>&1 || fail "the ctr installed for the helper ($CTR) has no __verify-fd"
VERIFIED=$HELPER_RUNDIR/verified

IMAGES="$WORK/images"
KEYS="$WORK/keys"
mkdir -p "$IMAGES" "$KEYS" "$WORK/rootfs"
cp "$F"/ed25519-*.pem "$F"/ecdsa-*.pem "$KEYS/"
chmod 644 "$KEYS"/*-public.pem
make_demo_rootfs "$WORK/rootfs"
echo signed >"$WORK/rootfs/marker"
"$CTR" -q build "$IMAGES/unsigned.sif" "$WORK/rootfs" >/dev/null || fail "could not build the demo SIF"
mksquashfs "$WORK/rootfs" "$IMAGES/demo.sqfs" -noappend -quiet -all-root >/dev/null
for k in ed25519 ecdsa; do
  cp "$IMAGES/unsigned.sif" "$IMAGES/$k.sif"
  "$CTR" sign --key "$KEYS/$k-private.pem" "$IMAGES/$k.sif" >/dev/null || fail "sign with $k"
done
cp "$IMAGES/ed25519.sif" "$IMAGES/changed.sif"
chmod 755 "$IMAGES" "$KEYS"
chmod 644 "$IMAGES"/*
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0" \
  "execution rule = whitelist" "trusted key = $KEYS/ed25519-public.pem"
rule="refused by ctr.conf's execution rule (whitelist for every image, $CONF)"

# kept IMAGE: the kept verdict's file for IMAGE ("" when there is none).
kept() { local f; f="$VERIFIED/$(stat -c %d-%i "$1")"; [ -f "$f" ] && echo "$f" || true; }

note "the helper itself, called by the user: only a SIF signed by the trusted key is mounted"
expect_refused "an unsigned SIF" "image $IMAGES/unsigned.sif: $rule: the image is not signed" \
  "$IMAGES/unsigned.sif" --help
expect_eq "one line" 1 "$(printf '%s\n' "$OUT" | wc -l)"
expect_refused "a squashfs" "$rule: not a SIF: only a signed SIF image may run here" "$IMAGES/demo.sqfs" --help
expect_refused "a SIF signed by another key" "$rule: no signature of object group 1 verifies with a trusted key" \
  "$IMAGES/ecdsa.sif" --help
[ -z "$(kept "$IMAGES/unsigned.sif")" ] || fail "a refusal was kept: $(kept "$IMAGES/unsigned.sif")"
# Once it has mounted, the helper execs `$CTR __holder HOLDER-ARGS`: with --help, the
# holder's help and exit status 0 say the mount was done.
run_helper "$IMAGES/changed.sif" --help
[ "$RC" = 0 ] || fail "signed by the trusted key: the helper did not mount it ($RC): $OUT"
verdict=$(kept "$IMAGES/changed.sif")
[ -n "$verdict" ] || fail "no verdict kept in $VERIFIED for the signed image"
expect_eq "the kept verdict is root's alone" "0 600 0 700" "$(stat -c '%u %a' "$verdict") $(stat -c '%u %a' "$VERIFIED")"
expect_contains "it names ctr.conf" " $CONF" "$(cat "$verdict")"
expect_contains "and the trusted key" " $KEYS/ed25519-public.pem" "$(cat "$verdict")"
inode=$(stat -c %i "$verdict")
run_helper "$IMAGES/changed.sif" --help
expect_eq "the next launch uses the kept verdict (no check ran: it would have written a new one)" \
  "$inode" "$(stat -c %i "$verdict")"
no_leftovers "signed image mounted"

note "the file changed after it was checked: checked again, refused"
at=$("$CTR" sif list "$IMAGES/changed.sif" | awk -F'|' '/Squashfs/ { split($4, r, "-"); print r[1] + 1000 }')
[ -n "$at" ] || fail "no squashfs partition listed in $IMAGES/changed.sif"
python3 - "$IMAGES/changed.sif" "$at" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    at = int(sys.argv[2]); f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 1]))
PY
expect_refused "one byte of the data changed" "$rule: " "$IMAGES/changed.sif" --help
expect_contains "names the integrity failure" "integrity compromised" "$OUT"

note "a dataset image beside a signed image goes through the same check"
expect_refused "an unsigned dataset image" "dataset image $IMAGES/demo.sqfs: $rule: not a SIF" \
  --dataset "$IMAGES/demo.sqfs" "$IMAGES/ed25519.sif" --help

note "the check runs as nobody: a trusted key only root may read fails it, naming the key"
out=$(as_user "$CTR" check 2>&1) || true
expect_contains "ctr check: the keys are readable" \
  "[ok] execution rule keys: 1 key file(s) readable by you and by 'nobody' (the setuid helper's check)" "$out"
# A service running as nobody could trace the check: ctr check says so, and names it.
others=$(pgrep -c -u nobody || true)  # pgrep -c prints 0 and exits 1 when none
[ "$others" != 0 ] || expect_contains "ctr check: nobody is no user of the check's own" \
  "[warn] execution rule's check user: 'nobody' is shared by design: a service run as it could trace" "$out"
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups sleep 60 &
service=$!
for _ in $(seq 50); do [ "$(stat -c %U /proc/$service 2>/dev/null)" = nobody ] && break; sleep 0.05; done
out=$(as_user "$CTR" check 2>&1) || true
kill "$service"; wait "$service" 2>/dev/null || true
if [ "$others" = 0 ]; then
  expect_contains "ctr check names the process that runs as the check's user" \
    "[warn] execution rule's check user: 1 process(es) run as 'nobody' now ($service (sleep)): any of them could trace" "$out"
else
  expect_contains "ctr check counts the processes that run as the check's user" \
    "$((others + 1)) process(es) run as 'nobody' now (" "$out"
fi
chmod 600 "$KEYS/ed25519-public.pem"
expect_refused "a key file nobody cannot read" "$KEYS/ed25519-public.pem: Permission denied" \
  "$IMAGES/ed25519.sif" --help
out=$(as_user "$CTR" check 2>&1) || true
expect_contains "ctr check says so before a launch does" \
  "$KEYS/ed25519-public.pem: user 'nobody' cannot read it (mode 0600, owner uid 0): the setuid helper's check" "$out"
expect_contains "ctr check: nor can the user" "$KEYS/ed25519-public.pem: you cannot read it (Permission denied)" "$out"
chmod 644 "$KEYS/ed25519-public.pem"
chmod 700 "$KEYS"
out=$(as_user "$CTR" check 2>&1) || true
expect_contains "ctr check: a directory on the way" "user 'nobody' cannot search $KEYS" "$out"
chmod 755 "$KEYS"

note "what the check read must be what the kernel reads: no image the caller could still change"
cp "$IMAGES/ed25519.sif" "$IMAGES/own.sif"
chown "$CTR_TEST_USER" "$IMAGES/own.sif"
cp "$IMAGES/ed25519.sif" "$IMAGES/group-writable.sif"
chmod 664 "$IMAGES/group-writable.sif"
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0" "setuid image owners = root, self" \
  "execution rule = whitelist" "trusted key = $KEYS/ed25519-public.pem"
expect_refused "the caller's own signed image" "it is the caller's, who could change it after the check" \
  "$IMAGES/own.sif" --help
expect_refused "a group-writable signed image" "its mode 0664 lets a group or others change it" \
  "$IMAGES/group-writable.sif" --help
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0" "setuid image owners = root, self" \
  "execution rule = whitelist" "execution rule = $IMAGES/free off" "trusted key = $KEYS/ed25519-public.pem"
mkdir "$IMAGES/free"
cp "$IMAGES/unsigned.sif" "$IMAGES/free/own.sif"
chown "$CTR_TEST_USER" "$IMAGES/free/own.sif"
run_helper "$IMAGES/free/own.sif" --help
[ "$RC" = 0 ] || fail "the caller's unsigned image where the rule is off: refused ($RC): $OUT"
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0" \
  "execution rule = whitelist" "trusted key = $KEYS/ed25519-public.pem"

note "ctr exec as the user: a signed image runs; the user's own ctr.conf cannot lift the rule"
out=$(as_user "$CTR" exec "$IMAGES/ed25519.sif" cat /marker 2>&1) || fail "ctr exec of the signed image: $out"
expect_eq "the signed image runs through the helper" signed "$out"
printf '%s\n' "allow setuid = yes" "image driver = setuid" "image linger = 0" >"$WORK/user.conf"
chmod 644 "$WORK/user.conf"
set +e
out=$(as_user env CTR_CONFIG="$WORK/user.conf" "$CTR" exec "$IMAGES/unsigned.sif" true 2>&1)
rc=$?
set -e
[ "$rc" != 0 ] || fail "\$CTR_CONFIG without the rule: the unsigned image ran through the helper"
expect_contains "the helper refuses it" "$rule: the image is not signed" "$out"
no_leftovers "execution control through the helper"
echo "PASS: $TEST_NAME"
