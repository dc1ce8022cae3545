#!/bin/bash
# Issue 53, item 3: oras:// images, as Apptainer's `push oras://` lays them out
# (an OCI manifest whose config is application/vnd.sylabs.sif.config.v1+json, "{}", and
# whose one layer is the SIF, application/vnd.sylabs.sif.layer.v1.sif; internal/pkg/client/
# oras in Apptainer's source), pushed here with the distribution API itself (curl) into
# Debian's docker-registry on 127.0.0.1:
#  - `ctr pull OUT.sif oras://REG/NAME:TAG` gives the very file pushed (byte for byte);
#  - `ctr exec oras://REF` runs it, as the test user;
#  - a SIF blob that does not match its digest, a manifest without a SIF layer and a tag
#    that is not there are refused in one line, and leave no output;
#  - `ctr push IMAGE.sif oras://REG/NAME:TAG` lays it out as Apptainer does (checked on the
#    manifest itself), with ctr's chunk table (issue 57) as the config where Apptainer has
#    "{}", it pulls back byte for byte, and a second push sends no blob again;
#    a file that is not a SIF, or another transport, is refused in one line;
#  - a SIF signed with ctr sign keeps its signature through push and pull (verifies after),
#    and under a whitelist rule the signed oras image runs from the cache, an unsigned one not.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"
ensure_test_user
require_fuse
use_linger 0
trap 'kill ${REGISTRY_PID:-} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
start_registry
reg=$REGISTRY

make_demo_rootfs "$WORK/root"
"$CTR_BIN" -q build "$WORK/demo.sif" "$WORK/root" >/dev/null || fail "could not build the demo SIF"
push_oras demo/app:1 "$WORK/demo.sif"
chmod -R a+rX "$WORK"
make_user_dir

note "pull oras://: the file pushed, byte for byte"
as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" pull "$U/pulled.sif" "oras://$reg/demo/app:1" >"$WORK/pull.out" 2>&1 ||
  fail "pull oras://: $(cat "$WORK/pull.out")"
cmp "$WORK/demo.sif" "$U/pulled.sif" || fail "the pulled SIF differs from the one pushed"

note "exec oras://REF runs it"
out=$(as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" exec "oras://$reg/demo/app:1" sh -c '. /etc/os-release; echo $ID' 2>"$WORK/exec.err") ||
  fail "exec oras://: $out $(cat "$WORK/exec.err")"
expect_eq "the image's os-release" ctr-demo "$out"
[ ! -s "$WORK/exec.err" ] || fail "a launch of a cached oras image printed: $(cat "$WORK/exec.err")"

note "refusals: a SIF that does not match its digest, no SIF layer, no such tag"
# expect_refused WHAT NEEDLE SOURCE: non-zero, one line holding NEEDLE, no output left.
expect_refused() {
  local rc=0
  as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" pull "$U/bad.sif" "$3" >"$WORK/bad.out" 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "$1: succeeded"
  expect_eq "$1: one line" 1 "$(grep -vc '^SIF \|^-- ' "$WORK/bad.out" || true)"
  expect_contains "$1" "$2" "$(cat "$WORK/bad.out")"
  [ ! -e "$U/bad.sif" ] || fail "$1: an output was left"
  [ -z "$(ls -A "$U" | grep '\.pull\.' || true)" ] || fail "$1: scratch left in $U"
}
as_user rm -rf "$U/cache"
stored=$(find "$WORK/registry" -path "*/blobs/sha256/*/${SIF_DIGEST#sha256:}/data")
cp "$stored" "$WORK/sif.orig"
printf 'X' | dd of="$stored" bs=1 seek=4096 conv=notrunc status=none
expect_refused "a SIF blob that does not match its digest" "blob $SIF_DIGEST of demo/app:1: digest mismatch" "oras://$reg/demo/app:1"
cp "$WORK/sif.orig" "$stored"
push_oras demo/tar:1 "$WORK/demo.sif" application/vnd.oci.image.layer.v1.tar
expect_refused "no SIF layer" "demo/tar:1: not a SIF pushed to an OCI registry" "oras://$reg/demo/tar:1"
expect_refused "no such tag" "manifest unknown: demo/app:2 not in $reg" "oras://$reg/demo/app:2"
note "push oras://: Apptainer's layout with the chunk table as config, pulled back byte for byte, nothing sent twice"
cp "$WORK/demo.sif" "$U/mine.sif"; chown "$CTR_TEST_USER" "$U/mine.sif"
printf 'X' | dd of="$U/mine.sif" bs=1 seek=$(( $(stat -c %s "$U/mine.sif") - 1 )) conv=notrunc status=none  # another blob
as_user "$CTR_BIN" push "$U/mine.sif" "oras://$reg/pushed/app:2" >"$WORK/push.out" 2>&1 || fail "push: $(cat "$WORK/push.out")"
manifest=$(curl -sSf -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$reg/v2/pushed/app/manifests/2")
expect_contains "config media type" '"mediaType":"application/vnd.sylabs.sif.config.v1+json"' "$manifest"
expect_contains "layer media type" '"mediaType":"application/vnd.sylabs.sif.layer.v1.sif"' "$manifest"
expect_contains "layer title" '"org.opencontainers.image.title":"mine.sif"' "$manifest"
expect_contains "layer digest" "\"digest\":\"sha256:$(sha256sum "$U/mine.sif" | cut -d' ' -f1)\"" "$manifest"
# The config is ctr's chunk table (issue 57) where Apptainer pushes "{}": Apptainer neither
# checks nor fetches it, and a lazy reader checks each MiB of the SIF by it.
config_digest=$(jq -r '.config.digest' <<<"$manifest")
expect_eq "config media type, still Apptainer's" application/vnd.sylabs.sif.config.v1+json "$(jq -r '.config.mediaType' <<<"$manifest")"
curl -sSfL -o "$WORK/pushed-config" "http://$reg/v2/pushed/app/blobs/$config_digest" ||
  fail "could not fetch the config $config_digest of the pushed image"
expect_eq "config digest" "$config_digest" "sha256:$(sha256sum "$WORK/pushed-config" | cut -d' ' -f1)"
expect_eq "config size" "$(jq -r '.config.size' <<<"$manifest")" "$(stat -c %s "$WORK/pushed-config")"
table=$(jq -ce '."org.ctr.chunks.v1" | objects' "$WORK/pushed-config") ||
  fail "the config holds no org.ctr.chunks.v1 object: $(head -c 300 "$WORK/pushed-config")"
size=$(stat -c %s "$U/mine.sif")
chunks=$(( (size + 1048575) / 1048576 ))
digests=$(jq -r '.digests' <<<"$table")
expect_eq "table: algorithm" sha256 "$(jq -r '.algorithm' <<<"$table")"
expect_eq "table: chunk size" 1048576 "$(jq -r '.chunkSize' <<<"$table")"
expect_eq "layer size" "$size" "$(jq -r '.layers[0].size' <<<"$manifest")"
expect_eq "table: size" "$size" "$(jq -r '.size' <<<"$table")"
expect_eq "table: hex digits for $chunks chunk(s)" $(( 64 * chunks )) "${#digests}"
expect_eq "table: the first chunk's digest" "$(head -c 1048576 "$U/mine.sif" | sha256sum | cut -d' ' -f1)" "${digests:0:64}"
expect_eq "table: the last chunk's digest" \
  "$(tail -c +$(( (chunks - 1) * 1048576 + 1 )) "$U/mine.sif" | sha256sum | cut -d' ' -f1)" "${digests: -64}"
as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" -q pull "$U/back.sif" "oras://$reg/pushed/app:2" 2>"$WORK/back.err" ||
  fail "pull of a pushed image: $(cat "$WORK/back.err")"
cmp "$U/mine.sif" "$U/back.sif" || fail "the image pulled back differs from the one pushed"
uploads=$(grep -c 'POST /v2/pushed/app/blobs/uploads/' "$WORK/registry.log" || true)
as_user "$CTR_BIN" push "$U/mine.sif" "oras://$reg/pushed/app:3" >"$WORK/push2.out" 2>&1 || fail "second push: $(cat "$WORK/push2.out")"
expect_eq "blobs uploaded by a second push" "$uploads" "$(grep -c 'POST /v2/pushed/app/blobs/uploads/' "$WORK/registry.log" || true)"
expect_contains "the second push says so" "already in $reg" "$(cat "$WORK/push2.out")"
echo "not a SIF" > "$U/text.sif"; chown "$CTR_TEST_USER" "$U/text.sif"
rc=0; out=$(as_user "$CTR_BIN" push "$U/text.sif" "oras://$reg/pushed/app:4" 2>&1) || rc=$?
[ "$rc" != 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "a file that is not a SIF: $rc: $out"
expect_contains "not a SIF, named" "$U/text.sif" "$out"
rc=0; out=$(as_user "$CTR_BIN" push "$U/mine.sif" "docker://$reg/pushed/app:5" 2>&1) || rc=$?
expect_eq "another transport: status 1" 1 "$rc"
expect_contains "another transport" "ctr pushes to oras://REGISTRY/NAME:TAG" "$out"
note "a signed SIF keeps its signature through push and pull, and runs from the cache under a whitelist"
F=$CTR_FIXTURES_DIR/sif/keys
if [ -f "$F/ed25519-private.pem" ]; then
  cp "$F/ed25519-private.pem" "$F/ed25519-public.pem" "$U/"
  cp "$WORK/demo.sif" "$U/signed.sif"
  chown "$CTR_TEST_USER" "$U"/ed25519-*.pem "$U/signed.sif"
  as_user "$CTR_BIN" sign --key "$U/ed25519-private.pem" "$U/signed.sif" >/dev/null || fail "ctr sign of the demo SIF"
  as_user "$CTR_BIN" push "$U/signed.sif" "oras://$reg/signed/app:1" >"$WORK/push3.out" 2>&1 ||
    fail "push of a signed SIF: $(cat "$WORK/push3.out")"
  as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" -q pull "$U/signed-back.sif" "oras://$reg/signed/app:1" ||
    fail "pull of the signed SIF"
  cmp "$U/signed.sif" "$U/signed-back.sif" || fail "the signed SIF pulled back differs from the one pushed"
  out=$(as_user "$CTR_BIN" verify --key "$U/ed25519-public.pem" "$U/signed-back.sif" 2>&1) || fail "verify after the pull: $out"
  expect_contains "it verifies after the pull" "verified: $U/signed-back.sif" "$out"
  printf 'image linger = 0\nexecution rule = whitelist\ntrusted key = %s\n' "$U/ed25519-public.pem" > "$WORK/ecl.conf"
  chmod 644 "$WORK/ecl.conf"
  out=$(CTR_TEST_CONFIG=$WORK/ecl.conf as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" exec "oras://$reg/signed/app:1" \
    sh -c '. /etc/os-release; echo $ID' 2>&1) || fail "exec of the signed oras image under a whitelist: $out"
  expect_eq "the signed oras image runs under the rule" ctr-demo "$out"
  rc=0
  out=$(CTR_TEST_CONFIG=$WORK/ecl.conf as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" exec "oras://$reg/demo/app:1" true 2>&1) ||
    rc=$?
  [ "$rc" != 0 ] || fail "the unsigned oras image ran under a whitelist"
  expect_contains "the unsigned one is refused" "refused by ctr.conf's execution rule (whitelist for every image" "$out"
  expect_contains "why" "the image is not signed" "$out"
else
  note "skipped the signed round trip: no signing keys at $F"
fi
note "ctr build with Bootstrap: oras"
printf 'Bootstrap: oras\nFrom: %s/pushed/app:2\n\n%%post\n    echo built-from-oras > /built\n' "$reg" > "$U/oras.def"
chown "$CTR_TEST_USER" "$U/oras.def"
(cd "$U" && as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" -q build "$U/built.sif" "$U/oras.def") >"$WORK/build.out" 2>&1 ||
  fail "build from oras: $(cat "$WORK/build.out"; cat "$U/built.sif.build.log" 2>/dev/null | tail -5)"
expect_eq "the %post of a build on an oras image" built-from-oras "$(as_user "$CTR_BIN" exec "$U/built.sif" cat /built)"
assert_nothing_left "oras"
echo "PASS: $TEST_NAME"
