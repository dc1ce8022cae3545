#!/bin/bash
# ctr.conf's execution control (issue 55, item 3), as the test user without the setuid
# helper: whitelist refuses an unsigned SIF, a squashfs, a SIF signed by another key and a
# signed SIF changed after signing, each in one line before anything is mounted, and runs
# one signed by a trusted key (--explain: the rule and the signer; the second launch uses
# the verdict kept for the file); a rule for a directory overrides the one for every image;
# whitestrict wants every trusted key; blacklist refuses a blacklisted signer. Instances, run
# and dataset images (image-src) go through the same check.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
F=$CTR_FIXTURES_DIR/sif/keys
[ -d "$F" ] || skip "no signing keys at $F"
cp "$F"/*-public.pem "$F"/*-private.pem "$WORK/"
chmod 644 "$WORK"/*.pem
make_demo_rootfs "$WORK/root"
"$CTR_BIN" -q build "$WORK/unsigned.sif" "$WORK/root" >/dev/null || fail "could not build the demo SIF"
mksquashfs "$WORK/root" "$WORK/demo.sqfs" -quiet -noappend -all-root >/dev/null
for k in ed25519 ecdsa; do
  cp "$WORK/unsigned.sif" "$WORK/$k.sif"
  "$CTR_BIN" sign --key "$WORK/$k-private.pem" "$WORK/$k.sif" >/dev/null || fail "sign with $k"
done
cp "$WORK/unsigned.sif" "$WORK/both.sif"
"$CTR_BIN" sign --key "$WORK/ed25519-private.pem" --key "$WORK/rsa-private.pem" "$WORK/both.sif" >/dev/null
mkdir -p "$WORK/free" && cp "$WORK/unsigned.sif" "$WORK/free/unsigned.sif"
chmod -R a+rX "$WORK"
CTR_TEST_CONFIG=$WORK/ctr.conf
# conf LINES...: the test user's ctr.conf (image linger 0: nothing stays after a launch).
conf() { printf '%s\n' "image linger = 0" "$@" > "$CTR_TEST_CONFIG"; chmod 644 "$CTR_TEST_CONFIG"; }
# launch ARGS...: ctr ARGS as the test user; both streams in $out, status in $rc.
launch() { set +e; out=$(as_user "$CTR_BIN" "$@" 2>&1); rc=$?; set -e; }
refused() {
  [ "$rc" = 255 ] || fail "$1: exit status $rc (255: refused): $out"
  expect_contains "$1" "refused by ctr.conf's execution rule ($2" "$out"
  expect_contains "$1: why" "$3" "$out"
  expect_eq "$1: one line" 1 "$(printf '%s\n' "$out" | wc -l)"
  assert_nothing_left "$1"
}
ran() { [ "$rc" = 0 ] || fail "$1: exit status $rc: $out"; }
ed=$(as_user "$CTR_BIN" verify --key "$WORK/ed25519-public.pem" --json "$WORK/ed25519.sif" | jq -r '.signatures[0].signers[0]')

note "whitelist for every image, the Ed25519 key trusted; a rule of its own for $WORK/free"
conf "execution rule = whitelist" "execution rule = $WORK/free off" "trusted key = $WORK/ed25519-public.pem"
launch exec "$WORK/unsigned.sif" true
refused "an unsigned SIF" "whitelist for every image" "the image is not signed"
launch exec "$WORK/demo.sqfs" true
refused "a squashfs" "whitelist for every image" "not a SIF: only a signed SIF image may run here"
launch exec "$WORK/ecdsa.sif" true
refused "signed by another key" "whitelist for every image" "no signature of object group 1 verifies with a trusted key (signature object 2 not valid"
launch exec --explain "$WORK/ed25519.sif" true
ran "signed by the trusted key"
expect_contains "--explain: the rule and the signer, verified now" \
  "execution:  whitelist for every image (ctr.conf): $WORK/ed25519.sif signed by $ed (verified now)" "$out"
launch exec --explain --json "$WORK/ed25519.sif" true
expect_eq "the second launch: the kept verdict" "whitelist true $ed" \
  "$(jq -r '"\(.execution.mode) \(.execution.cached) \(.execution.signers[0])"' <<<"$out")"
launch exec "$WORK/ed25519.sif" cat /etc/os-release
ran "the trusted image runs"
expect_contains "its files" "ctr-demo" "$out"
cp "$WORK/ed25519.sif" "$WORK/rolled.sif"
"$CTR_BIN" sign --key "$WORK/ecdsa-private.pem" "$WORK/rolled.sif" >/dev/null
chmod 644 "$WORK/rolled.sif"
launch exec "$WORK/rolled.sif" true
ran "a second signature by another key beside the trusted one (a key being rolled)"
launch run "$WORK/free/unsigned.sif" true
ran "off for $WORK/free: an unsigned image runs there"
ln -s "$WORK/unsigned.sif" "$WORK/free/link.sif"
launch exec "$WORK/free/link.sif" true
refused "a link in $WORK/free to an image outside: the image's own directory's rule" "whitelist for every image" "not signed"
launch instance start "$WORK/unsigned.sif" refused1
refused "instance start" "whitelist for every image" "the image is not signed"

note "every image file the launch mounts: a dataset image (image-src) goes through the same rule"
launch exec --bind "$WORK/unsigned.sif:/data:image-src=/" "$WORK/ed25519.sif" true
refused "an unsigned dataset image beside a signed image" "whitelist for every image" \
  "dataset image $WORK/unsigned.sif: refused by ctr.conf's execution rule"
launch exec --bind "$WORK/demo.sqfs:/data:image-src=/" "$WORK/ed25519.sif" true
refused "a squashfs dataset image" "whitelist for every image" "not a SIF"
launch exec --explain --json --bind "$WORK/ed25519.sif:/data:image-src=/" "$WORK/ed25519.sif" true
ran "a signed dataset image"
expect_eq "--explain: the dataset's rule and signer" "whitelist $ed" \
  "$(jq -r '.datasets[0].execution | "\(.mode) \(.signers[0])"' <<<"$out")"
launch exec --bind "$WORK/ed25519.sif:/data:image-src=/" "$WORK/ed25519.sif" cat /data/etc/os-release
ran "the signed dataset image is mounted"
expect_contains "its files" "ctr-demo" "$out"

note "a signed image changed after signing (the kept verdict is for the file as it was)"
cp "$WORK/ed25519.sif" "$WORK/changed.sif"
launch exec "$WORK/changed.sif" true
ran "the copy, before the change"
# A byte inside the squashfs partition (ctr sif list: "ID |GROUP |LINK |START-END |FS (Squashfs...").
at=$("$CTR_BIN" sif list "$WORK/changed.sif" | awk -F'|' '/Squashfs/ { split($4, r, "-"); print r[1] + 1000 }')
[ -n "$at" ] || fail "no squashfs partition listed in $WORK/changed.sif"
python3 - "$WORK/changed.sif" "$at" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    at = int(sys.argv[2]); f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 1]))
PY
launch exec "$WORK/changed.sif" true
refused "one byte of its data changed" "whitelist for every image" "integrity compromised"

note "whitestrict: every trusted key; blacklist: none of the blacklisted"
conf "execution rule = whitestrict" "trusted key = $WORK/ed25519-public.pem" "trusted key = $WORK/rsa-public.pem"
launch exec "$WORK/ed25519.sif" true
refused "whitestrict, one of two keys" "whitestrict for every image" "not signed by the trusted key SHA256:"
launch exec "$WORK/both.sif" true
ran "whitestrict, both keys"
conf "execution rule = $WORK blacklist" "blacklisted key = $WORK/ecdsa-public.pem"
launch exec "$WORK/ecdsa.sif" true
refused "blacklisted signer" "blacklist for $WORK" "signed by a blacklisted key (SHA256:"
launch exec "$WORK/unsigned.sif" true
ran "blacklist, unsigned"
conf "execution rule = whitelist" "trusted key = $WORK/missing.pem"
launch exec "$WORK/ed25519.sif" true
[ "$rc" != 0 ] || fail "a trusted key file that is not there: the launch ran"
expect_contains "a missing key file named" "$WORK/missing.pem" "$out"
assert_nothing_left "execution control"
echo "PASS: $TEST_NAME"
