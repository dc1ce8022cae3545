#!/bin/bash
# `ctr key` (issue 55, item 2), as the test user: the local OpenPGP keyring that `ctr sign`
# and `ctr verify` use when given no key. newpair makes a key pair (private files, 0600 in
# 0700 directories); sign and verify with no key use it; export gives a key that verifies
# with --keyring; import takes the reference's secret key (and says when a key is already
# there); with two secret keys sign wants --fingerprint (a key id will do); remove takes a
# key out, and what only it signed no longer verifies. Bad input: one line, a non-zero
# status, the keyring unchanged: a file with no key, a secret key with a passphrase, an
# unknown or malformed key id, a keyring directory another user could change. Nothing is
# left: no GnuPG home, no gpg-agent.
. "$(dirname "$0")/lib.sh"
create_test_user
F=$CTR_FIXTURES_DIR/sif
[ -f "$F/keys/private.asc" ] && [ -f "$F/images/one-group.sif" ] || skip "no OpenPGP fixture key or image at $F"
command -v gpg >/dev/null || skip "gpg is missing (GPGME runs it)"
make_user_dir
K=$U/keys
cp "$F/keys/private.asc" "$F/images/one-group.sif" "$U/"
chown "$CTR_TEST_USER" "$U/private.asc" "$U/one-group.sif"
chmod 644 "$U/private.asc" "$U/one-group.sif"
# key ARGS...: ctr ARGS as the test user with the keyring in $K; both streams in $out.
key() { set +e; out=$(as_user env CTR_KEYS_DIR="$K" "$CTR_BIN" "$@" 2>&1); rc=$?; set -e; }
ok() { [ "$rc" = 0 ] || fail "$1: exit status $rc: $out"; }
refused() {
  [ "$rc" != 0 ] || fail "$1: succeeded: $out"
  expect_eq "$1: one line" 1 "$(printf '%s\n' "$out" | wc -l)"
  expect_contains "$1" "$2" "$out"
}
fingerprint() { awk -v u="$1" 'index($0, u) { print $1 }' <<<"$out"; }

note "newpair, list, and the files it keeps"
key key newpair --name "Test Signer" --email signer@example.org --comment ci --bit-length 2048
ok "newpair"
key key list --secret
ok "list --secret"
mine=$(fingerprint "Test Signer (ci) <signer@example.org>")
[ ${#mine} = 40 ] || fail "list --secret does not show the new key: $out"
expect_eq "the directories and files are the user's alone" "700 700 700 600 600" \
  "$(stat -c %a "$K" "$K/public" "$K/secret" "$K/public/$mine.pgp" "$K/secret/$mine.pgp" | tr '\n' ' ' | sed 's/ $//')"

note "sign and verify with no key: the local keyring"
key sign "$U/one-group.sif"
ok "sign with the local keyring"
expect_contains "signed by the new key" "with $mine" "$out"
key verify "$U/one-group.sif"
ok "verify with the local keyring"
expect_contains "verified by the new key" "signed by $mine" "$out"
key key export --armor "${mine: -8}" "$U/mine.asc"
ok "export by key id"
expect_contains "armoured" "BEGIN PGP PUBLIC KEY BLOCK" "$(cat "$U/mine.asc")"
out=$(as_user env CTR_KEYS_DIR="$U/nothing" "$CTR_BIN" verify --keyring "$U/mine.asc" "$U/one-group.sif" 2>&1) ||
  fail "verify with the exported key: $out"

note "import the reference's secret key; two secret keys: sign wants --fingerprint"
key key import "$U/private.asc"
ok "import"
ref=$(sed -n 's/^imported \([0-9A-F]\{40\}\) (secret)$/\1/p' <<<"$out")
[ ${#ref} = 40 ] || fail "import did not name the secret key it added: $out"
expect_contains "and its public key" "imported $ref" "$out"
key key import "$U/private.asc"
ok "a second import"
expect_contains "a second import says so" "already in the keyring: $ref" "$out"
cp "$F/images/one-group.sif" "$U/two.sif" && chown "$CTR_TEST_USER" "$U/two.sif" && chmod 644 "$U/two.sif"
key sign "$U/two.sif"
refused "two secret keys, none named" "hold 2 secret keys: name one with --fingerprint"
key sign --fingerprint "${ref: -16}" "$U/two.sif"
ok "sign with --fingerprint KEYID"
key verify --keyring "$F/keys/private.asc" "$U/two.sif"
ok "the reference's public key verifies what its secret key signed here"

note "remove: what only the removed key signed no longer verifies"
key key remove "$mine"
ok "remove"
key key list
expect_eq "one public key left" "$ref" "$(awk 'NR > 1 { print $1 }' <<<"$out")"
key verify "$U/one-group.sif"
[ "$rc" != 0 ] || fail "an image signed only by the removed key verified: $out"
expect_contains "why, in the error line" "ctr: error: $U/one-group.sif: " "$out"
key key remove -s "$mine"
ok "remove -s: the secret key whose public key was removed before"
key key list --secret
[[ "$out" != *"$mine"* ]] || fail "remove -s left the secret key: $out"

note "bad input: one line, non-zero, the keyring unchanged"
before=$(cd "$K" && find . -type f | sort | xargs sha256sum)
key key import /etc/hostname
refused "a file with no key" "OpenPGP key file /etc/hostname: no key gpg could import"
key key remove 0123456789ABCDEF
refused "an unknown key id" "no public key 0123456789ABCDEF in the keyring $K"
key key export zz "$U/x.asc"
refused "a malformed key id" "'zz' is no key fingerprint"
expect_eq "a usage error: status 1" 1 "$rc"
[ ! -e "$U/x.asc" ] || fail "a refused export wrote $U/x.asc"
# A secret key with a passphrase: ctr asks for none, so it cannot keep it.
G=$U/gnupg
as_user mkdir -m 700 "$G"
as_user gpg --homedir "$G" --batch --pinentry-mode loopback --passphrase secret \
  --quick-gen-key "Protected <p@example.org>" rsa2048 sign never >/dev/null 2>&1 || fail "gpg could not make a test key"
as_user gpg --homedir "$G" --batch --pinentry-mode loopback --passphrase secret --export-secret-keys \
  --armor >"$U/protected.asc" 2>/dev/null || fail "gpg could not export the test key"
as_user gpgconf --homedir "$G" --kill all 2>/dev/null || true
key key import "$U/protected.asc"
refused "a secret key with a passphrase" "passphrase"
expect_eq "the keyring is unchanged" "$before" "$(cd "$K" && find . -type f | sort | xargs sha256sum)"
mkdir -m 777 "$WORK/open" && chmod +t "$WORK/open" && chmod -t "$WORK/open"
out=$(as_user env CTR_KEYS_DIR="$WORK/open/keys" "$CTR_BIN" key list 2>&1) && fail "a keyring under a world-writable directory: $out"
expect_contains "a keyring others could change is refused" "keyring $WORK/open/keys" "$out"

note "nothing left: no GnuPG home, no gpg-agent"
# A gpg-agent that is still running (zombies, which init has not reaped yet, are not).
agents() { ps -u "$CTR_TEST_USER" -o stat=,pid=,args= | awk '$1 !~ /^Z/ && /gpg-agent/' || true; }
for i in $(seq 20); do [ -z "$(agents)" ] && break; sleep 0.1; done
[ -z "$(agents)" ] || fail "gpg-agent left running: $(agents)"
leftdirs=$(find /tmp /run/user -maxdepth 2 -name 'ctr-gnupg-*' -user "$CTR_TEST_USER" 2>/dev/null || true)
[ -z "$leftdirs" ] || fail "GnuPG homes left: $leftdirs"
echo "PASS: $TEST_NAME"
