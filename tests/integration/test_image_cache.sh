#!/bin/bash
# exec|run|inspect|instance start docker://REF through the image cache (and build OUT
# docker://REF or docker-archive://PATH, a pull into OUT), as the test user, against a real
# registry on 127.0.0.1 (Debian's docker-registry, filled with skopeo): the first launch
# pulls and packs the image once, the next ones run it with no pull; a moved tag is a new
# image; with the registry gone the copy cached before runs, with a warning; parallel
# first launches pull once; the least recently used image goes past 'image cache max
# size'; `ctr cache list|clean`; a cache directory others can write is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
ensure_test_user
require_fuse
use_linger 0

# Images: v1 is the demo root; each other one adds /etc/NAME (a digest of its own).
demo_layer "$WORK/l1.tgz"
for name in v2 par other; do
  mkdir -p "$WORK/root-$name/etc" && echo "$name" > "$WORK/root-$name/etc/$name"
  tar -C "$WORK/root-$name" --numeric-owner --owner=0 --group=0 -czf "$WORK/$name.tgz" .
  cp "$WORK/l1.tgz" "$WORK/$name-base.tgz"  # layout_image moves the files it is given
  layout_image "$WORK/layout-$name" 1 "$WORK/$name-base.tgz" "$WORK/$name.tgz"
done
layout_image "$WORK/layout1" 1 "$WORK/l1.tgz"

start_registry
trap 'kill $REGISTRY_PID 2>/dev/null || true; wait $REGISTRY_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
push() { skopeo copy -q --dest-tls-verify=false "oci:$1:1" "docker://$REGISTRY/$2"; }
push "$WORK/layout1" demo:1
push "$WORK/layout-other" other:1

cache=$WORK/cache-$(id -u "$CTR_TEST_USER")
cat >> "$CTR_TEST_CONFIG" <<EOF
image cache dir = $WORK/cache-%u
EOF
chmod 1777 "$WORK"  # sticky: the cache in it stays private to its user
ref=docker://$REGISTRY/demo:1

note "first launch: pulled and packed into the cache, once"
out=$(as_user "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/e1") || fail "exec $ref: $(cat "$WORK/e1")"
expect_contains "the image's files" "ID=ctr-demo" "$out"
expect_contains "says it pulls" "pulling sha256:" "$(cat "$WORK/e1")"
expect_eq "one image in the cache" 1 "$(find "$cache/images" -name 'sha256-*.sif' | wc -l)"
expect_eq "the cache is private" 700 "$(stat -c %a "$cache/images")"
[ -z "$(find "$cache/images" -mindepth 1 -maxdepth 1 -type d)" ] || fail "scratch left in the cache: $(ls -la "$cache/images")"

note "next launches: no pull; --explain names the reference and the digest"
as_user "$CTR_BIN" exec "$ref" true 2> "$WORK/e2" || fail "second exec: $(cat "$WORK/e2")"
! grep -q pulling "$WORK/e2" || fail "the second launch pulled again: $(cat "$WORK/e2")"
digest=$(sed -n 's/.*pulling \(sha256:[0-9a-f]*\).*/\1/p' "$WORK/e1")
expect_contains "explain" "from:       $ref ($digest, the image cache)" "$(as_user "$CTR_BIN" exec --explain "$ref" true)"
expect_contains "inspect --runscript (the image's Cmd)" "OCI_CMD=" "$(as_user "$CTR_BIN" inspect --runscript "$ref")"
expect_contains "run" "ctr-demo" "$(as_user "$CTR_BIN" exec "$ref" sh -c 'grep ^ID= /etc/os-release')"
# Apptainer's layout: the summary, and with -v a row per entry (the image by its digest).
listing=$(as_user "$CTR_BIN" cache list)
expect_contains "cache list" "There are 1 container file(s) using" "$listing"
expect_contains "cache list: the total" "Total space used: " "$listing"
hex=${digest#sha256:}
expect_contains "cache list -v" "${hex:0:22}" "$(as_user "$CTR_BIN" cache list -v -T oci)"
expect_eq "cache list -T blob: layers alone" 0 "$(as_user "$CTR_BIN" cache list -v -T blob | grep -c ' oci$')"
expect_eq "cache list --json: the reference" "$ref" "$(as_user "$CTR_BIN" cache list --json | jq -r '.images[0].references[0]')"
expect_contains "cache list --json" "\"digest\": \"$digest\"" "$(as_user "$CTR_BIN" cache list --json)"
expect_eq "cache list -T oci --json: the images alone" '["images","root"]' \
  "$(as_user "$CTR_BIN" cache list -T oci --json | jq -c 'keys')"

note "a moved tag is a new image"
push "$WORK/layout-v2" demo:1
expect_eq "the new image" v2 "$(as_user "$CTR_BIN" exec "$ref" cat /etc/v2 2>/dev/null)"
expect_eq "two images cached" 2 "$(find "$cache/images" -name 'sha256-*.sif' | wc -l)"
# The tag names the new image only (the old one's record lost it), whichever was used last.
expect_eq "the tag's records" 1 "$(grep -l "\"$ref\"" "$cache"/images/sha256-*.json | wc -l)"

note "an instance of a docker:// image"
as_user "$CTR_BIN" instance start "$ref" cachetest > /dev/null 2> "$WORK/ei" || fail "instance start: $(cat "$WORK/ei")"
expect_eq "exec instance://" v2 "$(as_user "$CTR_BIN" exec instance://cachetest cat /etc/v2)"
as_user "$CTR_BIN" instance stop cachetest > /dev/null

note "build OUT docker://REF and docker-archive://PATH (cwltool's dockerLoad): a pull into OUT"
as_user "$CTR_BIN" build "$WORK/built.sif" "$ref" 2> "$WORK/eb" || fail "build from $ref: $(cat "$WORK/eb")"
expect_eq "built from the registry" v2 "$(as_user "$CTR_BIN" exec "$WORK/built.sif" cat /etc/v2)"
skopeo copy -q "oci:$WORK/layout-par:1" "docker-archive:$WORK/par.tar:par:1"
chmod 644 "$WORK/par.tar"
as_user "$CTR_BIN" build "$WORK/archive.sif" "docker-archive://$WORK/par.tar" 2> "$WORK/eb" ||
  fail "build from docker-archive://: $(cat "$WORK/eb")"
expect_eq "built from the archive" par "$(as_user "$CTR_BIN" exec "$WORK/archive.sif" cat /etc/par)"

note "the registry gone: the copy cached before runs, with a warning; an image never cached fails in one line"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true
out=$(as_user "$CTR_BIN" exec "$ref" cat /etc/v2 2> "$WORK/e3") || true
[ "$out" = v2 ] || fail "offline: expected 'v2' (the image the tag named last), got '$out': $(cat "$WORK/e3")"
expect_contains "the warning" "running the copy cached before" "$(cat "$WORK/e3")"
set +e; err=$(as_user "$CTR_BIN" exec "docker://$REGISTRY/never:1" true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "an uncached image with no registry ran"
expect_eq "one line" 1 "$(printf '%s\n' "$err" | wc -l)"
expect_contains "names the image" "never" "$err"

note "parallel first launches: one pull, every launch runs"
start_registry
push "$WORK/layout-par" par:1
pids=()
for i in 1 2 3 4; do
  as_user "$CTR_BIN" exec "docker://$REGISTRY/par:1" cat /etc/os-release > "$WORK/p$i.out" 2> "$WORK/p$i.err" &
  pids+=($!)
done
for i in 1 2 3 4; do wait "${pids[$((i - 1))]}" || fail "parallel launch $i: $(cat "$WORK/p$i.err")"; done
expect_eq "every launch ran the image" 4 "$(cat "$WORK"/p?.out | grep -c '^ID=ctr-demo')"
expect_eq "one pull" 1 "$(cat "$WORK"/p?.err | grep -c 'pulling sha256:')"

note "past 'image cache max size' the least recently used image goes"
size=$(stat -c %s "$(find "$cache/images" -name 'sha256-*.sif' | head -1)")
echo "image cache max size = $(( size * 3 / 2 ))" >> "$CTR_TEST_CONFIG"
as_user "$CTR_BIN" exec "docker://$REGISTRY/par:1" true 2>/dev/null  # the most recent use
as_user "$CTR_BIN" exec "docker://$REGISTRY/other:1" true 2> "$WORK/e4" || fail "exec other:1: $(cat "$WORK/e4")"
expect_eq "one image left" 1 "$(as_user "$CTR_BIN" cache list --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["images"]))')"
expect_contains "the one just run" "other:1" "$(as_user "$CTR_BIN" cache list --json | jq -r '.images[0].references[]')"

note "cache clean"
expect_contains "dry run" "would remove 1 image(s)" "$(as_user "$CTR_BIN" cache clean --dry-run)"
expect_eq "still there" 1 "$(find "$cache/images" -name 'sha256-*.sif' | wc -l)"
expect_contains "days: nothing that old" "removed 0 image(s)" "$(as_user "$CTR_BIN" cache clean --days 1)"
# A layer's time is its last use: one fetched 40 days ago and used by a pull today stays.
find "$cache/blobs" -type f -exec touch -d '40 days ago' {} +
as_user "$CTR_BIN" -q pull --force "$WORK/again.sif" "docker://$REGISTRY/other:1" 2> "$WORK/e5" || fail "pull again: $(cat "$WORK/e5")"
rm -f "$WORK/again.sif"
used=$(find "$cache/blobs" -type f -mtime -1 | sort)
[ -n "$used" ] || fail "the pull marked none of the cached layers it used"
as_user "$CTR_BIN" cache clean --days 30 -T blob >/dev/null
expect_eq "--days 30: the layers the pull used stay, the others go" "$used" "$(find "$cache/blobs" -type f | sort)"
expect_contains "clean -T blob: the layers alone" "removed 0 image(s)" "$(as_user "$CTR_BIN" cache clean -T blob)"
expect_eq "no layer left" 0 "$(find "$cache/blobs" -type f | wc -l)"
expect_eq "the image stays" 1 "$(find "$cache/images" -name 'sha256-*.sif' | wc -l)"
expect_contains "clean" "removed 1 image(s)" "$(as_user "$CTR_BIN" cache clean -f)"
expect_eq "empty" 0 "$(find "$cache" -name 'sha256-*' | wc -l)"

note "refused in one line: a cache others can write, an unknown scheme"
chmod 777 "$cache/images"
set +e; err=$(as_user "$CTR_BIN" exec "docker://$REGISTRY/par:1" true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "ran from a cache others can write"
expect_contains "names the directory" "$cache/images: not private" "$err"
chmod 700 "$cache/images"
set +e; err=$(as_user "$CTR_BIN" exec library://alpine true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "library:// ran"
expect_contains "the schemes ctr runs" "ctr runs docker://REF" "$err"

assert_nothing_left "docker:// launches"
echo "PASS: $TEST_NAME"
