#!/bin/bash
# ctr pull from a registry that wants a bearer token (the distribution spec's token
# authentication, as Docker Hub, GitLab and Harbor do it): Debian's docker-registry with
# `auth: token`, and a token service on 127.0.0.1 (registry/token_server.py) that signs
# JWTs with a key made here and grants a known user what it asks for. Without credentials,
# with a wrong password, and with the right ones (CTR_DOCKER_USERNAME/PASSWORD), as root
# and as the test user.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
command -v docker-registry >/dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
command -v openssl >/dev/null || skip "openssl is not installed"
ensure_test_user
require_fuse
use_linger 0
export CTR_CONFIG=$CTR_TEST_CONFIG  # root's launches too: no lingering holder at the end

# ---- a one-layer OCI layout of the demo root, Env and Cmd in its config.
mkdir -p "$WORK/root" "$WORK/layout/blobs/sha256"
make_demo_rootfs "$WORK/root"
blob() { layout_blob "$WORK/layout" "$1"; }
tar -C "$WORK/root" --numeric-owner --owner=0 --group=0 -czf "$WORK/layer.tgz" .
diff_id=$(gzip -dc "$WORK/layer.tgz" | sha256sum | cut -d' ' -f1)
read -r layer layer_size < <(blob "$WORK/layer.tgz")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin","SECRET_IMAGE=yes"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$diff_id" > "$WORK/config.json"
read -r config config_size < <(blob "$WORK/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" > "$WORK/manifest.json"
read -r manifest manifest_size < <(blob "$WORK/manifest.json")
echo '{"imageLayoutVersion":"1.0.0"}' > "$WORK/layout/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"1"}}]}' \
  "$manifest" "$manifest_size" > "$WORK/layout/index.json"

# The token service and the registry, on free ports of 127.0.0.1, killed at exit.
start_token_registry alice:s3cret
trap 'kill $REGISTRY_PID $TOKEN_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
token_port=$TOKEN_PORT
reg=$REGISTRY
skopeo copy -q --dest-tls-verify=false --dest-creds alice:s3cret "oci:$WORK/layout:1" "docker://$reg/team/app:1" ||
  fail "skopeo could not push through the token service"
chmod -R a+rX "$WORK"
export CTR_CACHE_DIR=$WORK/cache

note "without credentials: refused, naming the registry and how to log in"
rc=0; out=$("$CTR_BIN" pull "$WORK/anon.sif" "docker://$reg/team/app:1" 2>&1) || rc=$?
[ "$rc" != 0 ] || fail "an anonymous pull worked"
expect_contains "anonymous" "team/app:1: access denied by $reg (HTTP 401; no credentials for $reg: ctr registry login $reg)" "$out"
[ ! -e "$WORK/anon.sif" ] || fail "a refused pull left its output"

note "a wrong password: the token service's refusal is named"
rc=0; out=$(CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=wr0ng-s3kr1t "$CTR_BIN" pull "$WORK/wrong.sif" "docker://$reg/team/app:1" 2>&1) || rc=$?
[ "$rc" != 0 ] || fail "a pull with a wrong password worked"
expect_contains "wrong password" "the token service http://127.0.0.1:$token_port/token of $reg refused credentials from CTR_DOCKER_USERNAME/PASSWORD (or Apptainer's) (HTTP 401)" "$out"
case "$out" in *wr0ng-s3kr1t*) fail "the password is in the message: $out";; esac

note "the right credentials: a token for repository:team/app:pull, then the image runs"
CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=s3cret "$CTR_BIN" -q pull "$WORK/app.sif" "docker://$reg/team/app:1" ||
  fail "pull with credentials"
expect_contains "the token asked for" "token for alice: ['repository:team/app:pull']" "$(cat "$WORK/tokens.log")"
expect_eq "exec in the pulled image" "yes" "$("$CTR_BIN" exec "$WORK/app.sif" sh -c 'echo $SECRET_IMAGE')"

note "as $CTR_TEST_USER, with Apptainer's variable names"
mkdir "$WORK/user-cache" && chown "$CTR_TEST_USER" "$WORK/user-cache"
out=$(as_user env CTR_CACHE_DIR="$WORK/user-cache" APPTAINER_DOCKER_USERNAME=alice APPTAINER_DOCKER_PASSWORD=s3cret \
  "$CTR_BIN" -q pull "/tmp/ctr-pull-auth-$$.sif" "docker://$reg/team/app:1" 2>&1) || fail "pull as the test user: $out"
expect_eq "exec as the test user" "yes" "$(as_user "$CTR_BIN" exec "/tmp/ctr-pull-auth-$$.sif" sh -c 'echo $SECRET_IMAGE')"
rm -f "/tmp/ctr-pull-auth-$$.sif"
assert_nothing_left "pull with token auth"
echo "PASS: $TEST_NAME"
