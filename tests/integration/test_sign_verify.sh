#!/bin/bash
# ctr verify and ctr sign (issue 55), as the test user: every signed fixture of the reference
# library verifies with its key and fails with another; a flipped byte in a signed object,
# a covered descriptor field, the header or the signature fails with a line naming it; sign
# then verify round trips for Ed25519, RSA and ECDSA; the reference's keys make ctr's
# signature byte for byte the reference's; OpenPGP (gpg's keyring) leaves no agent and no
# GnuPG home behind; bad input gets one line.
. "$(dirname "$0")/lib.sh"
ensure_test_user
F=$CTR_FIXTURES_DIR/sif
[ -d "$F/keys" ] || skip "no SIF signing fixtures at $F/keys"
command -v gpg >/dev/null || skip "gpg is not installed (the OpenPGP checks run it through GPGME)"
mkdir -m 755 "$WORK/u" && chown "$CTR_TEST_USER" "$WORK/u"
# The keys and images where the test user reads them (the fixtures' directory may not be).
cp "$F"/keys/*-public.pem "$F"/keys/*-private.pem "$F"/keys/private.asc "$WORK/"
cp -r "$F/images" "$WORK/images"
chmod 644 "$WORK"/*.pem "$WORK"/private.asc
chmod -R a+rX "$WORK"
# verify ARGS...: ctr verify as the test user; stdout and stderr in $out, status in $rc.
verify() { set +e; out=$(as_user "$CTR_BIN" verify "$@" 2>&1); rc=$?; set -e; }
ok() { [ "$rc" = 0 ] || fail "$1: exit status $rc: $out"; }
refused() {
  [ "$rc" != 0 ] || fail "$1: verified: $out"
  expect_contains "$1" "$2" "$out"
}

note "the reference's signed images: DSSE with each key, OpenPGP with the keyring, legacy when asked"
for img in one-group-signed-dsse two-groups-signed-dsse apptainer-one-group-signed-dsse apptainer-two-groups-signed-dsse; do
  for key in ed25519 rsa; do
    verify --key "$WORK/$key-public.pem" "$WORK/images/$img.sif"
    ok "$img with $key"
    expect_contains "$img: verified" "verified: $WORK/images/$img.sif" "$out"
  done
  verify --key "$WORK/ecdsa-public.pem" "$WORK/images/$img.sif"
  refused "$img with the ECDSA key" "not valid: dsse: no signature in the envelope verifies with the keys given"
done
for img in one-group-signed-pgp two-groups-signed-pgp apptainer-one-group-signed-pgp apptainer-two-groups-signed-pgp; do
  verify --keyring "$WORK/private.asc" "$WORK/images/$img.sif"
  ok "$img"
  expect_contains "$img: the signer" "signed by 12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84" "$out"
  verify --key "$WORK/rsa-public.pem" "$WORK/images/$img.sif"
  refused "$img without its keyring" "key material not provided for PGP clear-sign signature"
done
verify --keyring "$WORK/private.asc" --legacy-insecure "$WORK/images/one-group-signed-legacy.sif"
ok "legacy"
verify --keyring "$WORK/private.asc" "$WORK/images/one-group-signed-legacy.sif"
refused "legacy without --legacy-insecure" "signature not found for object group 1"
verify --keyring "$WORK/private.asc" --legacy-insecure --all "$WORK/images/one-group-signed-legacy-all.sif"
ok "legacy --all"
verify --keyring "$WORK/private.asc" --legacy-insecure -g 1 "$WORK/images/one-group-signed-legacy-group.sif"
ok "legacy group"
verify --json --key "$WORK/rsa-public.pem" -g 2 "$WORK/images/two-groups-signed-dsse.sif"
ok "--json -g 2"
expect_eq "--json: group 2, object 3" "true object group 2 3" \
  "$(jq -r '"\(.verified) \(.signatures[0].covers) \(.signatures[0].objects | join(","))"' <<<"$out")"
wait_user_processes_end
[ -z "$(live_processes_of "$(id -u "$CTR_TEST_USER")")" ] || fail "processes left (gpg-agent?): $(ps -U "$CTR_TEST_USER" -o pid,stat,args)"
[ -z "$(find /tmp /run/user -maxdepth 2 -name 'ctr-gnupg-*' 2>/dev/null)" ] || fail "GnuPG homes left behind"

note "one flipped byte: in object 2's data, its descriptor, the header, the signature"
src=$WORK/images/one-group-signed-dsse.sif
# flip OFFSET: a copy of the DSSE fixture in $WORK/u with the byte at OFFSET changed.
flip() {
  cp "$src" "$WORK/u/f.sif"
  python3 - "$WORK/u/f.sif" "$1" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 1]))
PY
  chmod 644 "$WORK/u/f.sif"
}
# Object 2 lies at 36864 (4096 bytes); the descriptor table at 4096, 585 bytes a slot;
# the signature object (3) at 40960 (fixtures' README and docs/design-signing.md 1.6).
for c in "36864:data object integrity compromised: 2" "$((4096 + 585 + 41)):data object descriptor integrity compromised: 2" \
         "5:header integrity compromised" "$((40960 + 800)):signature object 3"; do
  flip "${c%%:*}"
  verify --key "$WORK/ed25519-public.pem" "$WORK/u/f.sif"
  refused "byte ${c%%:*}" "${c#*:}"
  expect_eq "byte ${c%%:*}: one line on stderr" 1 "$(as_user "$CTR_BIN" verify --key "$WORK/ed25519-public.pem" "$WORK/u/f.sif" 2>&1 >/dev/null | wc -l)"
done

note "sign, then verify: each key type; the reference's keys give the reference's bytes"
for key in ed25519 rsa ecdsa; do
  cp "$WORK/images/one-group.sif" "$WORK/u/$key.sif" && chown "$CTR_TEST_USER" "$WORK/u/$key.sif" && chmod 644 "$WORK/u/$key.sif"
  as_user "$CTR_BIN" sign --key "$WORK/$key-private.pem" "$WORK/u/$key.sif" >/dev/null || fail "sign with $key"
  verify --key "$WORK/$key-public.pem" "$WORK/u/$key.sif"
  ok "signed with $key"
  other=rsa; [ "$key" = rsa ] && other=ed25519
  verify --key "$WORK/$other-public.pem" "$WORK/u/$key.sif"
  refused "signed with $key, checked with $other" "not valid"
done
cp "$WORK/images/two-groups.sif" "$WORK/u/ref.sif" && chown "$CTR_TEST_USER" "$WORK/u/ref.sif" && chmod 644 "$WORK/u/ref.sif"
as_user "$CTR_BIN" sign --key "$WORK/ed25519-private.pem" --key "$WORK/rsa-private.pem" "$WORK/u/ref.sif" >/dev/null
cmp -s "$WORK/u/ref.sif" "$WORK/images/two-groups-signed-dsse.sif" ||
  fail "ctr's signature of two-groups.sif with the reference's keys is not the reference's two-groups-signed-dsse.sif"

note "an OpenPGP signature (the fixtures' secret key): verified by the keyring, no agent left"
cp "$WORK/images/one-group.sif" "$WORK/u/pgp.sif" && chown "$CTR_TEST_USER" "$WORK/u/pgp.sif" && chmod 644 "$WORK/u/pgp.sif"
as_user "$CTR_BIN" sign --keyring "$WORK/private.asc" "$WORK/u/pgp.sif" >/dev/null || fail "sign --keyring"
verify --keyring "$WORK/private.asc" "$WORK/u/pgp.sif"
ok "signed with the OpenPGP key"
expect_contains "the signer" "(OpenPGP) on object group 1: objects 1, 2 verified, signed by 12045C8C0B1004D058DE4BEDA20C27EE7FF7BA84" "$out"
set +e; err=$(as_user "$CTR_BIN" sign --keyring "$WORK/private.asc" --key "$WORK/ed25519-private.pem" "$WORK/u/pgp.sif" 2>&1); rc=$?; set -e
expect_contains "--key and --keyring together" "not both" "$err"
wait_user_processes_end
[ -z "$(live_processes_of "$(id -u "$CTR_TEST_USER")")" ] || fail "gpg-agent left after signing: $(ps -U "$CTR_TEST_USER" -o pid,stat,args)"

note "bad input: one line, nothing changed or left"
before=$(sha256sum < "$WORK/u/ed25519.sif")
set +e; err=$(as_user "$CTR_BIN" sign --key "$WORK/ed25519-public.pem" "$WORK/u/ed25519.sif" 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "signing with a public key succeeded"
expect_contains "a public key to sign with" "not a PEM private key" "$err"
expect_eq "the image unchanged" "$before" "$(sha256sum < "$WORK/u/ed25519.sif")"
set +e; err=$(as_user "$CTR_BIN" sign --key "$WORK/ed25519-private.pem" -g 9 "$WORK/u/ed25519.sif" 2>&1); rc=$?; set -e
expect_contains "a group the image lacks" "object group 9 not found in the image" "$err"
chmod 444 "$WORK/u/ed25519.sif"
set +e; err=$(as_user "$CTR_BIN" sign --key "$WORK/ed25519-private.pem" "$WORK/u/ed25519.sif" 2>&1); rc=$?; set -e
expect_contains "a read-only image" "ed25519.sif: permission denied" "$err"
expect_eq "the read-only image unchanged" "$before" "$(sha256sum < "$WORK/u/ed25519.sif")"
verify "$WORK/u/ed25519.sif"
refused "no key material" "no key material: give --key FILE.pem (DSSE) or --keyring FILE (OpenPGP)"
verify --key "$WORK/ed25519-public.pem" "$WORK/u/none.sif"
refused "a missing image" "none.sif"
[ -z "$(ls -A "$WORK/u" | grep -v '\.sif$' || true)" ] || fail "left in the image's directory: $(ls -A "$WORK/u")"
echo "PASS: $TEST_NAME"
