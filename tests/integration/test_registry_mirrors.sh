#!/bin/bash
# Issue 53, item 2: ctr.conf's 'registry mirror', as the test user, against two of Debian's
# docker-registry on 127.0.0.1 (an "origin" and a "mirror"):
#  - a Docker Hub short name (demo:1 = docker.io/library/demo:1) is served by its mirror,
#    which the pull names for each blob; a mirror's /PATH goes in front of the repository;
#  - a mirror that is down, or serves a blob whose digest does not match, gets one warning
#    and the registry itself serves; with `only` the pull fails in one line naming the
#    mirror, and leaves nothing behind;
#  - a malformed entry is refused in one line naming the file, the line and the key.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"
command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
ensure_test_user
trap 'kill ${origin_pid:-} ${mirror_pid:-} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/layout"
demo_layer "$WORK/layer.tgz"
layout_image "$WORK/layout" 1 "$WORK/layer.tgz"
REGISTRY_NAME=origin start_registry
origin=$REGISTRY origin_pid=$REGISTRY_PID
REGISTRY_NAME=mirror start_registry
mirror=$REGISTRY mirror_pid=$REGISTRY_PID
for target in "$origin/demo:1" "$mirror/demo:1" "$mirror/library/demo:1" "$mirror/proxy/library/demo:1"; do
  skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout:1" "docker://$target"
done
dead=$(free_port)
chmod -R a+rX "$WORK"
make_user_dir
# pull NAME SOURCE CONF-LINE...: the user's pull of SOURCE into $U/NAME.sif with a ctr.conf of
# these lines and a fresh cache; status in $rc, output in $WORK/NAME.out.
pull() {
  local name=$1 source=$2
  shift 2
  printf '%s\n' "$@" > "$WORK/$name.conf"
  chmod 644 "$WORK/$name.conf"
  as_user rm -rf "$U/cache" "$U/$name.sif"
  rc=0
  as_user env CTR_CACHE_DIR="$U/cache" CTR_CONFIG="$WORK/$name.conf" "$CTR_BIN" pull "$U/$name.sif" "docker://$source" \
    >"$WORK/$name.out" 2>&1 || rc=$?
}
requests() { grep -c "GET /v2/$2" "$WORK/$1.log" || true; }

note "a Docker Hub short name through its mirror (only), each blob named with the mirror that served it"
pull short demo:1 "registry mirror = docker.io = http://$mirror only"
[ "$rc" = 0 ] || fail "short name through the mirror: $rc: $(cat "$WORK/short.out")"
[ -s "$U/short.sif" ] || fail "no image from the mirror"
expect_contains "the blob's line names the mirror" "from mirror $mirror" "$(cat "$WORK/short.out")"
[ "$(requests mirror library/demo/manifests/1)" -ge 1 ] || fail "the mirror was not asked for library/demo"

note "exec --explain of the short name says where its blobs come from"
printf 'registry mirror = docker.io = http://%s only\n' "$mirror" > "$WORK/explain.conf"; chmod 644 "$WORK/explain.conf"
explained=$(as_user env CTR_CACHE_DIR="$U/cache" CTR_CONFIG="$WORK/explain.conf" "$CTR_BIN" exec --explain docker://demo:1 true 2>&1) ||
  fail "exec --explain docker://demo:1: $explained"
expect_contains "the endpoints line" "endpoints:  mirror http://$mirror/v2/" "$explained"
case "$explained" in *"then the registry"*) fail "an 'only' mirror's image lists the registry too: $explained";; esac

note "a mirror's path goes in front of the repository (a proxy project)"
pull prefixed demo:1 "registry mirror = docker.io = http://$mirror/proxy/ only"
[ "$rc" = 0 ] || fail "mirror with a path: $rc: $(cat "$WORK/prefixed.out")"
[ "$(requests mirror proxy/library/demo/manifests/1)" -ge 1 ] || fail "the mirror was not asked for proxy/library/demo"

note "a mirror that is down: one warning, then the registry itself"
before=$(requests origin demo/manifests/1)
pull fallback "$origin/demo:1" "registry mirror = $origin = http://127.0.0.1:$dead" \
  "registry mirror = $origin = 127.0.0.1:$dead"
[ "$rc" = 0 ] || fail "fallback to the registry: $rc: $(cat "$WORK/fallback.out")"
expect_eq "warnings about the dead mirror (two entries of it, each warned once)" 2 \
  "$(grep -c "mirror 127.0.0.1:$dead of $origin: cannot reach mirror 127.0.0.1:$dead" "$WORK/fallback.out" || true)"
expect_contains "the last warning says where it goes next" "trying the registry itself" "$(cat "$WORK/fallback.out")"
[ "$(requests origin demo/manifests/1)" -gt "$before" ] || fail "the registry itself did not serve"

note "only a mirror that is down: one line naming it, nothing left"
pull only "$origin/demo:1" "registry mirror = $origin = http://127.0.0.1:$dead only"
[ "$rc" != 0 ] || fail "a pull through a dead 'only' mirror succeeded"
expect_eq "one line" 1 "$(grep -vc '^-- ' "$WORK/only.out" || true)"
expect_contains "names the mirror" "cannot reach mirror 127.0.0.1:$dead" "$(cat "$WORK/only.out")"
[ ! -e "$U/only.sif" ] || fail "an image was left by the failed pull"
[ -z "$(ls -A "$U" | grep '\.pull\.' || true)" ] || fail "scratch left in $U: $(ls -A "$U")"

note "a mirror serving a blob whose digest does not match: one warning, the registry serves it"
layer=$(find "$WORK/mirror" -path '*/blobs/sha256/*/data' -size +1k | head -1)
[ -n "$layer" ] || fail "no layer blob in the mirror's storage"
cp "$layer" "$WORK/layer.orig"
printf 'X' | dd of="$layer" bs=1 seek=10 conv=notrunc status=none
pull corrupt "$origin/demo:1" "registry mirror = $origin = http://$mirror"
cp "$WORK/layer.orig" "$layer"
[ "$rc" = 0 ] || fail "a corrupt mirror blob was not fetched again from the registry: $(cat "$WORK/corrupt.out")"
expect_contains "the warning names the mismatch" "digest mismatch" "$(grep "mirror $mirror of $origin" "$WORK/corrupt.out" || true)"
expect_eq "one warning" 1 "$(grep -c "mirror $mirror of $origin" "$WORK/corrupt.out" || true)"

note "a malformed entry: one line naming the file, line and key"
pull bad demo:1 "" "registry mirror = docker.io"
[ "$rc" != 0 ] || fail "a malformed mirror entry was accepted"
expect_contains "names the key" "bad.conf:2: registry mirror: expected REGISTRY = [https://]HOST[:PORT][/PATH] [only]" \
  "$(cat "$WORK/bad.out")"
pull scheme demo:1 "registry mirror = docker.io = ftp://mirror.example"
[ "$rc" != 0 ] || fail "an ftp:// mirror was accepted"
expect_contains "names the scheme rule" "a mirror is reached over http:// or https://" "$(cat "$WORK/scheme.out")"
echo "PASS: $TEST_NAME"
