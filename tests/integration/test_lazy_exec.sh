#!/bin/bash
# Issue 57, item 3 (the launch): `ctr exec --lazy oras://REF` runs an image `ctr push` put in
# Debian's docker-registry on 127.0.0.1 without pulling it, as the test user:
#  - the first launch reads one small file and fetches a small part of the blob into the
#    node cache (/var/tmp/ctr-lazy-UID, 0700), not the whole;
#  - --explain names the source, the cache file and that each chunk is verified (text and
#    JSON), and the driver and server it takes (ctr-squashfs, whatever ctr.conf's server);
#  - a file read in the container has the bytes of the SIF's;
#  - an image without a chunk table (pushed as Apptainer does, config "{}") is pulled whole
#    with one warning, and runs; --lazy on a local SIF warns and runs it as usual;
#  - `ctr cache list` shows it with the part of it this node holds, `ctr cache clean` removes it;
#  - a registry that answers a range request with the whole blob (HTTP 200): pulled whole,
#    one warning, one range request, nothing left in the node cache;
#  - 'lazy unverified = allow': an image without a table is read lazily, its chunks unchecked,
#    --explain says so, and once every chunk is cached the whole blob is checked: it matches
#    (the entry is marked checked), or, served altered by a registry, the entry is emptied,
#    logged, and the job's next read gets EIO;
#  - 'lazy cache max size': a launch removes the least recently used image to make room for
#    its own, never one in use (then its own is not prefetched, with a warning);
#  - nothing is left behind once the launches end (no server, no mount).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"
ensure_test_user
require_fuse
[ -x "$(dirname "$CTR_BIN")/ctr-squashfs" ] || skip "ctr-squashfs was not built here (it needs libsquashfs-dev and libfuse3-dev)"
command -v python3 >/dev/null || skip "python3 (to read JSON) is not installed"
use_linger 0
# The chunks this test counts are the job's own: no prefetch (test_lazy_server tests it).
printf 'lazy prefetch = no\n' >> "$CTR_TEST_CONFIG"
TUID=$(id -u "$CTR_TEST_USER")
cache=/var/tmp/ctr-lazy-$TUID
rm -rf "$cache"
trap 'kill ${REGISTRY_PID:-} ${HOSTILE_PID:-} 2>/dev/null || true; [ ! -d "$WORK/ctl" ] || touch "$WORK/ctl/done"
      wait 2>/dev/null || true; rm -rf "$WORK" "$cache"' EXIT
start_registry
reg=$REGISTRY
make_user_dir

note "the image: the demo root, 6 MiB of random bytes in one file, 400 small files; pushed by ctr push"
push_lazy_app
size=$(stat -c %s "$WORK/app.sif")
chunks=$(( (size + 1048575) / 1048576 ))
digest=$(sha256sum "$WORK/app.sif" | cut -d' ' -f1)
# marked [HEX]: the chunks of the image (default: app.sif) in the node cache.
marked() { python3 -c 'import sys; print(open(sys.argv[1], "rb").read()[64:].count(1))' "$cache/${1:-$digest}.have"; }

note "a first launch reads one small file and fetches a small part of the blob"
out=$(as_user "$CTR_BIN" exec --lazy "oras://$reg/lazy/app:1" cat /data/small/f7 2>"$WORK/err1") ||
  fail "ctr exec --lazy: $(cat "$WORK/err1")"
expect_eq "the file" "small file 7" "$out"
[ ! -s "$WORK/err1" ] || fail "a lazy launch printed: $(cat "$WORK/err1")"
first=$(marked)
note "$first of $chunks chunks fetched"
[ "$first" -ge 1 ] && [ "$first" -le $(( chunks / 2 )) ] || fail "$first of $chunks chunks fetched for one small file"
expect_eq "cache directory mode and owner" "700 $CTR_TEST_USER" "$(stat -c '%a %U' "$cache")"
expect_eq "spec mode (it may hold a token)" 600 "$(stat -c %a "$cache/$digest.spec")"
[ "$(stat -c %s "$cache/$digest.data")" = "$size" ] || fail "the cache file is not the blob's size"

note "--explain: source, cache, verified; ctr-squashfs whatever the setting"
printf 'squashfs server = squashfuse\n' >> "$CTR_TEST_CONFIG"
explain=$(as_user "$CTR_BIN" exec --explain --lazy "oras://$reg/lazy/app:1" true 2>&1) || fail "--explain: $explain"
expect_contains "explain" "lazy:       chunks from http://$reg/v2/lazy/app/blobs/sha256:$digest, each checked" "$explain"
expect_contains "explain" "(verified)" "$explain"
expect_contains "explain" "cached in $cache/$digest.data" "$explain"
expect_contains "explain" "driver:     squashfuse (read lazily (--lazy)" "$explain"
expect_contains "explain" "ctr-squashfs (a lazily read image" "$explain"
json=$(as_user "$CTR_BIN" exec --explain --json --lazy "oras://$reg/lazy/app:1" true 2>&1) || fail "--explain --json: $json"
python3 -c '
import json, sys
lazy = json.loads(sys.argv[1])["image"]["lazy"]
assert lazy["verified"] is True and lazy["chunks"] == int(sys.argv[2]) and lazy["cache"].endswith(".data"), lazy
assert lazy["prefetch"] is False, lazy
' "$json" "$chunks" || fail "--explain --json has no lazy object as expected: $json"
printf 'lazy prefetch = yes\n' >> "$CTR_TEST_CONFIG"
expect_contains "explain with 'lazy prefetch = yes'" "the rest is fetched while the link is idle" \
  "$(as_user "$CTR_BIN" exec --explain --lazy "oras://$reg/lazy/app:1" true 2>&1)"
printf 'lazy prefetch = no\n' >> "$CTR_TEST_CONFIG"

note "a file read in the container has the SIF's bytes"
in=$(as_user "$CTR_BIN" exec --lazy "oras://$reg/lazy/app:1" sha256sum /data/big.bin 2>"$WORK/err2" | cut -d' ' -f1) ||
  fail "sha256sum in the container: $(cat "$WORK/err2")"
expect_eq "big.bin" "$(sha256sum "$tree/data/big.bin" | cut -d' ' -f1)" "$in"
note "after reading big.bin: $(marked) of $chunks chunks"

note "an image without a chunk table is pulled whole, with one warning"
push_oras lazy/plain:1 "$WORK/app.sif"
out=$(as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" exec --lazy "oras://$reg/lazy/plain:1" cat /data/small/f9 2>"$WORK/err3") ||
  fail "--lazy of an image without a table: $(cat "$WORK/err3")"
expect_eq "the file" "small file 9" "$out"
expect_eq "one warning" 1 "$(grep -c "warning" "$WORK/err3")"
expect_contains "the warning" "--lazy: oras://$reg/lazy/plain:1 has no chunk table" "$(cat "$WORK/err3")"

note "'lazy images = no': --lazy pulls whole, with one warning naming the setting"
printf 'lazy images = no\n' >> "$CTR_TEST_CONFIG"
out=$(as_user env CTR_CACHE_DIR="$U/cache2" "$CTR_BIN" exec --lazy "oras://$reg/lazy/app:1" cat /data/small/f4 2>"$WORK/err5") ||
  fail "--lazy with 'lazy images = no': $(cat "$WORK/err5")"
expect_eq "the file" "small file 4" "$out"
expect_contains "the warning" "'lazy images = no' in $CTR_TEST_CONFIG" "$(cat "$WORK/err5")"
printf 'lazy images = registry\n' >> "$CTR_TEST_CONFIG"

note "--lazy on a local SIF: a warning, and it runs as usual"
out=$(as_user "$CTR_BIN" exec --lazy "$WORK/app.sif" cat /data/small/f3 2>"$WORK/err4") || fail "--lazy on a file: $(cat "$WORK/err4")"
expect_eq "the file" "small file 3" "$out"
expect_contains "the warning" "is not an oras:// image" "$(cat "$WORK/err4")"

note "ctr cache list|clean: the lazily read image and how much of it this node holds"
out=$(as_user "$CTR_BIN" cache list -T lazy)
expect_contains "cache list" "There are 1 lazily read image(s) using" "$out"
expect_contains "cache list" "oras://$reg/lazy/app:1: $chunks of $chunks chunks (100%)" "$out"
json=$(as_user "$CTR_BIN" cache list --json)
python3 -c '
import json, sys
e = json.loads(sys.argv[1])["lazy"]["images"][0]
assert e["digest"] == "sha256:" + sys.argv[2] and e["cached_chunks"] == e["chunks"] and not e["in_use"], e
' "$json" "$digest" || fail "cache list --json: $json"
expect_contains "cache clean" "1 lazily read image(s)" "$(as_user "$CTR_BIN" cache clean -T lazy)"
[ ! -e "$cache/$digest.data" ] && [ ! -e "$cache/$digest.have" ] && [ ! -e "$cache/$digest.spec" ] ||
  fail "cache clean left files: $(ls "$cache")"

note "a registry that ignores range requests: pulled whole, one warning, nothing cached"
hostile=$WORK/hostile
mkdir -p "$hostile/manifests/lazy/app" "$hostile/blobs"
curl -sSf -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$reg/v2/lazy/app/manifests/1" \
  > "$hostile/manifests/lazy/app/1" || fail "could not read the manifest back"
cfg=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["config"]["digest"])' "$hostile/manifests/lazy/app/1")
curl -sSf "http://$reg/v2/lazy/app/blobs/$cfg" > "$hostile/blobs/$cfg" || fail "could not read the config back"
cp "$WORK/app.sif" "$hostile/blobs/sha256:$digest"
echo '{}' > "$WORK/hostile.json"
hport=$(free_port)
python3 "$CTR_SOURCE_DIR/tests/integration/registry/hostile_registry.py" "$hport" "$hostile" "$WORK/hostile.json" \
  "$WORK/hostile.log" 2>/dev/null &
HOSTILE_PID=$!
wait_http "http://127.0.0.1:$hport/v2/" 200 || fail "the range-ignoring registry did not start"
out=$(as_user env CTR_CACHE_DIR="$U/cache3" "$CTR_BIN" exec --lazy "oras://127.0.0.1:$hport/lazy/app:1" \
  cat /data/small/f5 2>"$WORK/err6") || fail "--lazy from a registry that ignores ranges: $(cat "$WORK/err6")"
expect_eq "the file" "small file 5" "$out"
expect_eq "one warning" 1 "$(grep -c warning "$WORK/err6")"
expect_contains "the warning" "is served by a server that ignores range requests (HTTP 200): pulled whole" \
  "$(cat "$WORK/err6")"
expect_eq "range requests (not tried again)" 1 "$(grep "^GET /v2/lazy/app/blobs/sha256:$digest " "$WORK/hostile.log" | grep -ci "| range:")"
[ -z "$(ls -A "$cache")" ] || fail "the node cache kept: $(ls "$cache")"
kill "$HOSTILE_PID"; wait "$HOSTILE_PID" 2>/dev/null || true

note "'lazy unverified = allow': no table, read lazily unchecked, the whole checked once cached"
mkdir -p "$WORK/uv" && cp -a "$tree/." "$WORK/uv/" && head -c 2097152 /dev/urandom > "$WORK/uv/data/unchecked.bin"
"$CTR_BIN" -q build "$WORK/unchecked.sif" "$WORK/uv" >/dev/null || fail "could not build the unchecked SIF"
chmod a+r "$WORK/unchecked.sif"
push_oras lazy/unchecked:1 "$WORK/unchecked.sif"
uv=$(sha256sum "$WORK/unchecked.sif" | cut -d' ' -f1)
printf 'lazy unverified = allow\nlazy prefetch = yes\n' >> "$CTR_TEST_CONFIG"
explain=$(as_user "$CTR_BIN" exec --explain --lazy "oras://$reg/lazy/unchecked:1" true 2>&1) || fail "--explain: $explain"
expect_contains "explain" "NOT checked one by one (no chunk table; 'lazy unverified = allow')" "$explain"
expect_contains "the launch's warning" "has no chunk table: read lazily unchecked ('lazy unverified = allow')" "$explain"
json=$(as_user "$CTR_BIN" exec --explain --json --lazy "oras://$reg/lazy/unchecked:1" true 2>/dev/null)
python3 -c 'import json, sys; assert json.loads(sys.argv[1])["image"]["lazy"]["verified"] is False' "$json" ||
  fail "--explain --json does not say unverified: $json"
mkdir -m 777 "$WORK/uvctl"
# unchecked_job REF: a job that reads a small file, then waits for the test's go-file and
# reads unchecked.bin (its status in uvctl/rc); the server prefetches the rest meanwhile.
unchecked_job() {
  rm -f "$WORK/uvctl/"*
  as_user "$CTR_BIN" exec --lazy -B "$WORK/uvctl:/ctl" "$1" sh -c 'cat /data/small/f2 > /ctl/first
    while [ -d /ctl ] && [ ! -e /ctl/go ]; do sleep 0.05; done
    cat /data/unchecked.bin > /dev/null 2>/ctl/err; echo $? > /ctl/rc' >/dev/null 2>"$WORK/uvjob.err" &
  uvjob=$!
}
# log_says TEXT: waits (10 s at most) for TEXT in the unchecked image's server log.
log_says() {
  for _ in $(seq 200); do grep -q "$1" "$cache/$uv.log" 2>/dev/null && return 0; sleep 0.05; done
  fail "the server's log does not say '$1': $(cat "$cache/$uv.log" 2>&1)"
}
unchecked_job "oras://$reg/lazy/unchecked:1"
log_says "and the blob matches its digest (read without a chunk table)"
expect_eq "the entry is marked checked" CTRLAZY1 "$(head -c 8 "$cache/$uv.have")"
touch "$WORK/uvctl/go"; wait "$uvjob" || fail "the unchecked job failed: $(cat "$WORK/uvjob.err")"
expect_eq "the job's read" 0 "$(cat "$WORK/uvctl/rc")"
expect_eq "the job's first read" "small file 2" "$(cat "$WORK/uvctl/first")"
as_user "$CTR_BIN" -q cache clean -T lazy >/dev/null
note "the same image served altered (one byte of the blob, by a registry that answers ranges): emptied, EIO"
mkdir -p "$hostile/manifests/lazy/unchecked"
curl -sSf -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$reg/v2/lazy/unchecked/manifests/1" \
  > "$hostile/manifests/lazy/unchecked/1" || fail "could not read the manifest back"
cp "$WORK/oras-config" "$hostile/blobs/sha256:$(sha256sum "$WORK/oras-config" | cut -d' ' -f1)"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 1; open(sys.argv[2], "wb").write(b)' \
  "$WORK/unchecked.sif" "$hostile/blobs/sha256:$uv"
echo '{"ranges": true}' > "$WORK/hostile.json"
python3 "$CTR_SOURCE_DIR/tests/integration/registry/hostile_registry.py" "$hport" "$hostile" "$WORK/hostile.json" \
  "$WORK/hostile.log" 2>/dev/null &
HOSTILE_PID=$!
wait_http "http://127.0.0.1:$hport/v2/" 200 || fail "the registry that answers ranges did not start"
unchecked_job "oras://127.0.0.1:$hport/lazy/unchecked:1"
log_says "is emptied, and every later read gets EIO"
touch "$WORK/uvctl/go"; wait "$uvjob" || true
expect_eq "the job's first read (before the check)" "small file 2" "$(cat "$WORK/uvctl/first")"
[ "$(cat "$WORK/uvctl/rc")" != 0 ] || fail "the job read the altered image after the check failed"
expect_contains "the job's error" "Input/output error" "$(cat "$WORK/uvctl/err")"
expect_eq "no chunk left marked" 0 "$(marked "$uv")"
as_user "$CTR_BIN" -q cache clean -T lazy >/dev/null
printf 'lazy unverified = refuse\n' >> "$CTR_TEST_CONFIG"

note "a SIF on a web server, its chunk table beside it (ctr sif chunks): only with 'lazy images = all'"
mkdir -p "$hostile/files"
cp "$WORK/app.sif" "$WORK/unchecked.sif" "$hostile/files/"
"$CTR_BIN" sif chunks "$WORK/app.sif" > "$hostile/files/app.sif.chunks" || fail "ctr sif chunks"
url=http://127.0.0.1:$hport/files/app.sif
refused_in_one_line "a URL without --lazy" "a URL runs only with --lazy" as_user "$CTR_BIN" exec "$url" true
refused_in_one_line "'lazy images = registry'" "images from a URL are read lazily only with 'lazy images = all'" \
  as_user "$CTR_BIN" exec --lazy "$url" true
printf 'lazy images = all\n' >> "$CTR_TEST_CONFIG"
expect_eq "a file read from the URL" "small file 11" "$(as_user "$CTR_BIN" exec --lazy "$url" cat /data/small/f11 2>"$WORK/err11")"
[ ! -s "$WORK/err11" ] || fail "the URL's launch printed: $(cat "$WORK/err11")"
explain=$(as_user "$CTR_BIN" exec --explain --lazy "$url" true 2>&1) || fail "--explain: $explain"
expect_contains "explain" "lazy:       chunks from $url, each checked" "$explain"
[ "$(marked)" -ge 1 ] || fail "no chunk of the URL's image in the node cache"
[ "$(grep "^GET /files/app.sif " "$WORK/hostile.log" | grep -c "| Range: bytes=")" -ge 1 ] ||
  fail "no range request for the image: $(grep "^GET /files/" "$WORK/hostile.log")"
expect_eq "requests for the whole image" 0 "$(grep "^GET /files/app.sif " "$WORK/hostile.log" | grep -vc "| Range: bytes=" || true)"
refused_in_one_line "no table beside it" "has no chunk table beside it" \
  as_user "$CTR_BIN" exec --lazy "http://127.0.0.1:$hport/files/unchecked.sif" true
# Another image's table beside it: its chunks fail their digests, the launch fails in one line
# (the cache emptied first: chunks cached under that table's digest would serve that image).
as_user "$CTR_BIN" -q cache clean -T lazy >/dev/null
cp "$hostile/files/app.sif.chunks" "$hostile/files/unchecked.sif.chunks"
refused_in_one_line "a table of another image" "does not match" \
  as_user "$CTR_BIN" exec --lazy "http://127.0.0.1:$hport/files/unchecked.sif" true
printf 'lazy images = registry\n' >> "$CTR_TEST_CONFIG"
kill "$HOSTILE_PID"; wait "$HOSTILE_PID" 2>/dev/null || true
as_user "$CTR_BIN" -q cache clean -T lazy >/dev/null

note "'lazy cache max size': the least recently used image goes to make room, never one in use"
printf 'lazy prefetch = yes\n' >> "$CTR_TEST_CONFIG"
head -c 3145728 /dev/urandom > "$tree/data/other.bin"
"$CTR_BIN" -q build "$WORK/other.sif" "$tree" >/dev/null || fail "could not build the second SIF"
"$CTR_BIN" -q push "$WORK/other.sif" "oras://$reg/lazy/other:1" || fail "ctr push of the second image failed"
chmod a+r "$WORK/other.sif"
other=$(sha256sum "$WORK/other.sif" | cut -d' ' -f1)
as_user "$CTR_BIN" exec --lazy "oras://$reg/lazy/app:1" cat /data/big.bin >/dev/null 2>"$WORK/err7" || fail "$(cat "$WORK/err7")"
[ -e "$cache/$digest.have" ] || fail "no cache entry for the first image"
# Room for the second image and half a MiB: the first image's chunks (6 MiB and more read) do not fit beside it.
printf 'lazy cache max size = %sK\n' $(( $(stat -c %s "$WORK/other.sif") / 1024 + 512 )) >> "$CTR_TEST_CONFIG"
out=$(as_user "$CTR_BIN" exec --lazy "oras://$reg/lazy/other:1" cat /data/small/f6 2>"$WORK/err8") || fail "$(cat "$WORK/err8")"
expect_eq "the file" "small file 6" "$out"
[ ! -e "$cache/$digest.have" ] && [ ! -e "$cache/$digest.data" ] || fail "the least recently used image was not removed: $(ls "$cache")"
[ -e "$cache/$other.have" ] || fail "the second image has no cache entry"
# While a job runs the second image, the first has no room and is not prefetched; the second stays.
mkdir -m 777 "$WORK/ctl"
as_user "$CTR_BIN" exec --lazy -B "$WORK/ctl:/ctl" "oras://$reg/lazy/other:1" \
  sh -c 'echo up > /ctl/up; while [ -d /ctl ] && [ ! -e /ctl/done ]; do sleep 0.05; done' >/dev/null 2>"$WORK/err10" &
holder=$!
for _ in $(seq 200); do [ -s "$WORK/ctl/up" ] && break; sleep 0.05; done
[ -s "$WORK/ctl/up" ] || fail "the job holding the second image did not start: $(cat "$WORK/err10")"
# Its server prefetches the rest: then it and the first image do not fit together.
other_chunks=$(( ($(stat -c %s "$WORK/other.sif") + 1048575) / 1048576 ))
for _ in $(seq 200); do [ "$(marked "$other")" = "$other_chunks" ] && break; sleep 0.05; done
expect_eq "the second image's chunks cached while it runs" "$other_chunks" "$(marked "$other")"
out=$(as_user "$CTR_BIN" exec --lazy "oras://$reg/lazy/app:1" cat /data/small/f8 2>"$WORK/err9") || fail "$(cat "$WORK/err9")"
expect_eq "the file" "small file 8" "$out"
expect_contains "the warning" "has no room for all of it within 'lazy cache max size'" "$(cat "$WORK/err9")"
[ -e "$cache/$other.have" ] || fail "an image in use was removed to make room"
touch "$WORK/ctl/done"; wait "$holder" || fail "the job holding the second image failed: $(cat "$WORK/err10")"

assert_nothing_left "lazy launches"
echo "PASS: $TEST_NAME"
