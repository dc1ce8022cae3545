#!/bin/bash
# Issue 57, items 1, 2 and 6 (the server's part): ctr-squashfs reads a SIF that `ctr push`
# put in Debian's docker-registry on 127.0.0.1 lazily (-o lazy=SPEC), as the test user, its
# chunks checked against the chunk table of the ORAS config (docs/design-io.md section 6):
#  - every file reads the same bytes as ctr-squashfs serving the pushed SIF from the disk;
#  - the first read of one small file fetches a small part of the blob (the cache's marks);
#  - a second server on the same cache, with the registry stopped, reads every file: each
#    chunk was fetched once and kept;
#  - a chunk altered in the registry's storage gives EIO to the file that spans it, one log
#    line naming the image, the chunk and the URL (once, however often the kernel asks), no
#    mark in the cache, and the other files still read; a second read fetches it again and
#    fails again, never serving it;
#  - two servers of one image at once fetch each chunk once (the registry's access log);
#  - with prefetch, the rest of the image arrives after one small read, and the server says so;
#  - a server killed mid-read leaves what it kept: the next fetches only the rest;
#  - a full cache disk gives EIO and one line naming the cache, and marks nothing it did not
#    write;
#  - a spec that names no chunk table, or a URL that is not http(s), is refused in one line;
#  - nothing is left behind: no mount, no server.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"
ensure_test_user
require_fuse
server=$(dirname "$CTR_BIN")/ctr-squashfs
[ -x "$server" ] || skip "ctr-squashfs was not built here (it needs libsquashfs-dev and libfuse3-dev)"
command -v python3 >/dev/null || skip "python3 (to compare trees and read JSON) is not installed"
servers=""
trap 'for m in "$WORK"/m? "$WORK/local"; do fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
      kill ${REGISTRY_PID:-} $servers 2>/dev/null || true; wait 2>/dev/null || true
      umount -l "$WORK/full" 2>/dev/null || true; rm -rf "$WORK"' EXIT
start_registry
reg=$REGISTRY
make_user_dir

note "the image: the demo root, 6 MiB of random bytes in one file and 400 small files, pushed by ctr push"
push_lazy_app
manifest=$(curl -sSf -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$reg/v2/lazy/app/manifests/1") ||
  fail "no manifest for lazy/app:1"
read -r config_digest layer_digest layer_size < <(python3 -c '
import json, sys
m = json.loads(sys.argv[1])
print(m["config"]["digest"], m["layers"][0]["digest"], m["layers"][0]["size"])' "$manifest")
curl -sSf "http://$reg/v2/lazy/app/blobs/$config_digest" > "$WORK/config.json" || fail "no config blob"
# The squashfs partition's offset in the SIF ("ID |GROUP |LINK |START-END |TYPE").
chmod -R a+rX "$WORK"
offset=$("$CTR_BIN" sif list "$WORK/app.sif" | awk -F'|' '/FS \(Squashfs\/\*System/ {split($4, r, "-"); print r[1] + 0}')
[ -n "$offset" ] && [ "$offset" -gt 0 ] || fail "no squashfs partition in $("$CTR_BIN" sif list "$WORK/app.sif")"

# spec FILE CACHE-DIR [URL]: the spec ctr would write for this blob (no prefetch; PREFETCH=1:
# with it), and the cache directory as ctr makes it (the user's, 0700).
spec() {
  [ -d "$2" ] || install -d -m 700 -o "$CTR_TEST_USER" "$2"
  python3 - "$1" "$2" "${3:-http://$reg/v2/lazy/app/blobs/$layer_digest}" "$layer_digest" "$WORK/config.json" "${PREFETCH:-0}" <<'EOF'
import json, sys
out, cache, url, digest, config, prefetch = sys.argv[1:]
spec = {"name": "oras://lazy/app:1", "url": url, "authorization": "", "tokenUrl": "", "tokenAuthorization": "",
        "digest": digest, "cacheDir": cache, "prefetch": prefetch == "1",
        "chunks": json.load(open(config))}
open(out, "w").write(json.dumps(spec))
EOF
  chown "$CTR_TEST_USER" "$1"
}
# A FUSE mount without allow_other is its user's alone (root's stat of it fails too).
mounted() { grep -q " $1 fuse" /proc/mounts; }
# serve SPEC MOUNTPOINT: the lazy server as the test user (its own FUSE mount, fusermount3).
serve() {
  mkdir -p "$2" && chown "$CTR_TEST_USER" "$2"
  as_user "$server" -o "lazy=$1,offset=$offset,threads=4" - "$2" 2>"$2.err" &
  servers="$servers $!"
  server_of[$2]=$!
  for _ in $(seq 100); do mounted "$2" && return 0; sleep 0.05; done
  fail "ctr-squashfs did not mount the lazy image: $(cat "$2.err")"
}
# unserve MOUNTPOINT: unmounts it and waits for its server to end (it may still hold files of
# its cache for a moment after the unmount: a tmpfs cache is busy until then).
declare -A server_of
unserve() {
  as_user fusermount3 -u "$1"
  [ -z "${server_of[$1]:-}" ] || wait "${server_of[$1]}" 2>/dev/null || true
}
# marked CACHE: how many chunks the cache entry marks as fetched and checked.
marked() { python3 -c 'import sys; print(open(sys.argv[1], "rb").read()[64:].count(1))' "$1/${layer_digest#sha256:}.have"; }
chunks=$(( (layer_size + 1048575) / 1048576 ))

note "a first read fetches a small part of the blob"
spec "$WORK/spec1.json" "$U/cache"
serve "$WORK/spec1.json" "$WORK/m1"
expect_eq "a small file" "small file 7" "$(as_user cat "$WORK/m1/data/small/f7")"
first=$(marked "$U/cache")
note "after one small file: $first of $chunks chunks fetched"
[ "$first" -ge 1 ] && [ "$first" -le $(( chunks / 2 )) ] || fail "$first of $chunks chunks fetched for one small file"
expect_eq "cache directory mode" 700 "$(stat -c %a "$U/cache")"
expect_eq "cache entry owner" "$CTR_TEST_USER" "$(stat -c %U "$U/cache/${layer_digest#sha256:}.data")"

note "every file: the same bytes as the SIF served from the disk"
mkdir -p "$WORK/local" && chown "$CTR_TEST_USER" "$WORK/local"
as_user "$server" -o "offset=$offset" "$WORK/app.sif" "$WORK/local" 2>"$WORK/local.err" & servers="$servers $!"
for _ in $(seq 100); do mounted "$WORK/local" && break; sleep 0.05; done
mounted "$WORK/local" || fail "ctr-squashfs did not mount the local SIF: $(cat "$WORK/local.err")"
as_user diff -r --no-dereference "$WORK/local" "$WORK/m1" >"$WORK/diff.out" 2>&1 ||
  fail "lazy read differs: $(head -5 "$WORK/diff.out")"
expect_eq "chunks fetched after reading everything" "$chunks" "$(marked "$U/cache")"
unserve "$WORK/m1"

note "a second server with the registry stopped reads every file from the cache"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true
serve "$WORK/spec1.json" "$WORK/m2"
as_user diff -r --no-dereference "$WORK/local" "$WORK/m2" >"$WORK/diff.out" 2>&1 ||
  fail "read from the cache differs: $(head -5 "$WORK/diff.out")"
unserve "$WORK/m2"
start_registry_again() {
  docker-registry serve "$WORK/registry.yml" >>"$WORK/registry.log" 2>&1 &
  REGISTRY_PID=$!
  wait_http "http://$reg/v2/" 200 || fail "docker-registry did not start again"
}
start_registry_again

note "a chunk altered in the registry: EIO for the file over it, not cached, the rest reads"
blob=$WORK/registry/docker/registry/v2/blobs/sha256/${layer_digest:7:2}/${layer_digest#sha256:}/data
[ -f "$blob" ] || fail "no blob at $blob"
# The byte in the middle of big.bin's stored bytes (random data is stored as is): find it
# in the partition by its content.
at=$(python3 - "$blob" "$tree/data/big.bin" <<'EOF'
import sys
blob = open(sys.argv[1], "rb").read()
big = open(sys.argv[2], "rb").read()
middle = 3 * 1048576
at = blob.find(big[middle:middle + 64])
print(at if at >= 0 else "")
EOF
)
[ -n "$at" ] || fail "big.bin's bytes are not stored as is in the blob"
bad_chunk=$(( at / 1048576 ))
cp "$blob" "$WORK/blob.orig"
printf '\xff' | dd of="$blob" bs=1 seek="$at" conv=notrunc status=none
cmp -s "$blob" "$WORK/blob.orig" && fail "the stored blob did not change (its byte was 0xff already)"
spec "$WORK/spec3.json" "$U/cache3"
serve "$WORK/spec3.json" "$WORK/m3"
out=$(as_user cat "$WORK/m3/data/big.bin" 2>&1 >/dev/null) && fail "a file over an altered chunk read without error"
expect_contains "the reader's error" "Input/output error" "$out"
grep -q "chunk $bad_chunk of $chunks from http://$reg/v2/lazy/app/blobs/$layer_digest does not match its digest" "$WORK/m3.err" ||
  fail "no log line naming the chunk: $(cat "$WORK/m3.err")"
expect_eq "log lines about it" 1 "$(grep -c "chunk $bad_chunk of" "$WORK/m3.err")"
python3 -c 'import sys; sys.exit(open(sys.argv[1], "rb").read()[64 + int(sys.argv[2])])' \
  "$U/cache3/${layer_digest#sha256:}.have" "$bad_chunk" || fail "the altered chunk is marked as cached"
expect_eq "another file still reads" "small file 399" "$(as_user cat "$WORK/m3/data/small/f399")"
out=$(as_user cat "$WORK/m3/data/big.bin" 2>&1 >/dev/null) && fail "the altered chunk was served on a second read"
expect_eq "log lines after a second read (once a chunk)" 1 "$(grep -c "chunk $bad_chunk of" "$WORK/m3.err")"
unserve "$WORK/m3"
cp "$WORK/blob.orig" "$blob"  # the registry's blob as pushed again, for what follows

# range_gets: the registry's 206 answers for the blob so far (its access log).
range_gets() { grep -c "GET /v2/lazy/app/blobs/$layer_digest HTTP/1.1\" 206" "$WORK/registry.log" || true; }

note "two servers of one image at once on one node: each chunk fetched once"
before=$(range_gets)
spec "$WORK/spec5.json" "$U/cache5"
serve "$WORK/spec5.json" "$WORK/m5"
serve "$WORK/spec5.json" "$WORK/m6"
as_user sh -c "find '$WORK/m5' -type f -exec cat {} + >/dev/null" & r1=$!
as_user sh -c "find '$WORK/m6' -type f -exec cat {} + >/dev/null" & r2=$!
wait "$r1" || fail "reading every file through the first server failed"
wait "$r2" || fail "reading every file through the second server failed"
expect_eq "range requests for both servers together" "$chunks" "$(( $(range_gets) - before ))"
expect_eq "chunks cached" "$chunks" "$(marked "$U/cache5")"
unserve "$WORK/m5"; unserve "$WORK/m6"

note "a server killed mid-read: the next one fetches only what was not kept"
spec "$WORK/spec7.json" "$U/cache7"
serve "$WORK/spec7.json" "$WORK/m7"
as_user cat "$WORK/m7/data/small/f1" >/dev/null
as_user cat "$WORK/m7/data/big.bin" >/dev/null &
reader=$!
sleep 0.05
pkill -KILL -u "$CTR_TEST_USER" -f "lazy=$WORK/spec7.json" || true
wait "$reader" 2>/dev/null || true
fusermount3 -u "$WORK/m7" 2>/dev/null || umount -l "$WORK/m7" 2>/dev/null || true
kept=$(marked "$U/cache7")
before=$(range_gets)
serve "$WORK/spec7.json" "$WORK/m8"
as_user diff -r --no-dereference "$WORK/local" "$WORK/m8" >"$WORK/diff.out" 2>&1 ||
  fail "after a killed server: $(head -5 "$WORK/diff.out")"
note "$kept of $chunks chunks were kept when the server was killed"
expect_eq "range requests of the next server" "$(( chunks - kept ))" "$(( $(range_gets) - before ))"
unserve "$WORK/m8"

note "prefetch: after one small read, the rest of the image arrives while the link is idle"
PREFETCH=1 spec "$WORK/spec10.json" "$U/cache10"
serve "$WORK/spec10.json" "$WORK/m0"
as_user cat "$WORK/m0/data/small/f2" >/dev/null
for _ in $(seq 200); do [ "$(marked "$U/cache10")" = "$chunks" ] && break; sleep 0.05; done
expect_eq "chunks cached by the prefetch" "$chunks" "$(marked "$U/cache10")"
grep -q "all $chunks chunks cached" "$U/cache10/${layer_digest#sha256:}.log" ||
  fail "the prefetch did not say it was done: $(cat "$U/cache10/${layer_digest#sha256:}.log" 2>&1)"
as_user diff -r --no-dereference "$WORK/local" "$WORK/m0" >"$WORK/diff.out" 2>&1 ||
  fail "after the prefetch: $(head -5 "$WORK/diff.out")"
unserve "$WORK/m0"

note "the cache's disk full (3 MiB): EIO for what does not fit, one line naming the cache, nothing marked"
install -d -m 700 -o "$CTR_TEST_USER" "$WORK/full"
mount -t tmpfs -o size=3m,mode=700,uid="$(id -u "$CTR_TEST_USER")" tmpfs "$WORK/full" ||
  skip "cannot mount a tmpfs here (for the full cache disk)"
spec "$WORK/spec9.json" "$WORK/full"
serve "$WORK/spec9.json" "$WORK/m9"
out=$(as_user cat "$WORK/m9/data/big.bin" 2>&1 >/dev/null) && fail "a read past a full cache disk succeeded"
expect_contains "the reader's error" "Input/output error" "$out"
grep -q "cannot write chunk [0-9]* to the lazy cache $WORK/full: No space left on device: EIO" "$WORK/m9.err" ||
  fail "no log line naming the full cache: $(cat "$WORK/m9.err")"
python3 - "$WORK/full/${layer_digest#sha256:}" "$WORK/app.sif" <<'EOF' || fail "a chunk is marked that the cache does not hold"
import sys
have = open(sys.argv[1] + ".have", "rb").read()[64:]
data, sif = open(sys.argv[1] + ".data", "rb").read(), open(sys.argv[2], "rb").read()
bad = [i for i, mark in enumerate(have) if mark == 1 and data[i << 20:(i + 1) << 20] != sif[i << 20:(i + 1) << 20]]
print(f"-- {have.count(1)} of {len(have)} chunks marked in the full cache, each holding the image's bytes")
sys.exit(1 if bad or have.count(1) == len(have) else 0)
EOF
expect_eq "a small file still reads" "small file 5" "$(as_user cat "$WORK/m9/data/small/f5" 2>&1)"
unserve "$WORK/m9"
umount "$WORK/full"

note "specs without a chunk table or with another scheme: refused in one line"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["chunks"]={}; json.dump(s, open(sys.argv[2],"w"))' \
  "$WORK/spec1.json" "$WORK/bad1.json"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["url"]="file:///etc/passwd"; json.dump(s, open(sys.argv[2],"w"))' \
  "$WORK/spec1.json" "$WORK/bad2.json"
chown "$CTR_TEST_USER" "$WORK"/bad*.json
mkdir -p "$WORK/m4" && chown "$CTR_TEST_USER" "$WORK/m4"
for bad in bad1 bad2; do
  set +e; out=$(as_user "$server" -o "lazy=$WORK/$bad.json,offset=$offset" - "$WORK/m4" 2>&1); rc=$?; set -e
  [ "$rc" = 1 ] || fail "$bad: expected status 1, got $rc: $out"
  expect_eq "$bad: one line" 1 "$(printf '%s\n' "$out" | wc -l)"
  mounted "$WORK/m4" && fail "$bad: mounted"
  note "$bad: $out"
done

unserve "$WORK/local"
for pid in $servers; do wait "$pid" 2>/dev/null || true; done
grep -q " $WORK/m" /proc/mounts && fail "a mount is left: $(grep " $WORK/m" /proc/mounts)"
pgrep -u "$CTR_TEST_USER" -f ctr-squashfs >/dev/null && fail "a server is left"
echo "PASS: $TEST_NAME"
