#!/bin/bash
# Dataset images (issue 27, item 3), as an ordinary user: --bind FILE:DST:image-src=PATH
# mounts a squashfs or SIF file read-only and binds PATH of it at DST (Apptainer's syntax,
# "image-src=/,ro" too, and through $APPTAINER_BIND); --explain lists each dataset and its
# server; the image's holder mounts it once for every launch of the node (a second launch
# beside the first makes no second server); writes fail; bad input gets one line and
# leaves nothing behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0
make_demo_squashfs demo
img=$WORK/demo.sqfs

note "a data set packed as squashfs, and the same as a SIF"
mkdir -p "$WORK/ds/train/a" "$WORK/ds/val"
for i in $(seq 50); do echo "sample $i" > "$WORK/ds/train/a/s$i.txt"; done
echo "validation" > "$WORK/ds/val/v.txt"
mksquashfs "$WORK/ds" "$WORK/data.sqfs" -quiet -noappend -all-root >/dev/null
"$CTR_BIN" build "$WORK/data.sif" "$WORK/ds" >/dev/null
chmod 644 "$WORK/data.sqfs" "$WORK/data.sif"

run() { as_user "$CTR_BIN" exec "$@"; }

note "--explain: the dataset, where the holder mounts it, and by which server"
explain=$(run --explain --bind "$WORK/data.sqfs:/data:image-src=/" "$img" true)
expect_contains "explain: dataset" "dataset:    $WORK/data.sqfs (squashfs" "$explain"
expect_contains "explain: read-only in the holder" "read-only at " "$explain"
json=$(run --explain --json --bind "$WORK/data.sqfs:/data:image-src=/" "$img" true)
expect_eq "json: one dataset" 1 "$(jq '.datasets | length' <<<"$json")"
expect_eq "json: its path" "$WORK/data.sqfs" "$(jq -r '.datasets[0].path' <<<"$json")"

note "the whole image, a directory of it, a SIF, the options after image-src, APPTAINER_BIND"
expect_eq "image-src=/" "sample 7" "$(run --bind "$WORK/data.sqfs:/data:image-src=/" "$img" cat /data/train/a/s7.txt)"
expect_eq "image-src=/val" "validation" "$(run --bind "$WORK/data.sqfs:/v:image-src=/val" "$img" cat /v/v.txt)"
expect_eq "a SIF" "50" "$(run --bind "$WORK/data.sif:/data:image-src=/train/a" "$img" sh -c 'ls /data | wc -l')"
expect_eq "image-src=/,ro" "validation" "$(run --bind "$WORK/data.sqfs:/d:image-src=/,ro" "$img" cat /d/val/v.txt)"
expect_eq "two datasets and a plain bind" "sample 1 validation" \
  "$(run --bind "$WORK/data.sqfs:/a:image-src=/train/a,$WORK/data.sif:/b:image-src=/val" --bind "$WORK/ds:/plain" "$img" sh -c 'echo $(cat /a/s1.txt /b/v.txt)')"
expect_eq "APPTAINER_BIND" "validation" \
  "$(as_user env APPTAINER_BIND="$WORK/data.sqfs:/data:image-src=/" "$CTR_BIN" exec "$img" cat /data/val/v.txt)"

note "read-only"
out=$(run --bind "$WORK/data.sqfs:/data:image-src=/" "$img" sh -c 'echo x > /data/new' 2>&1) && fail "a dataset took a write"
expect_contains "write refused" "Read-only file system" "$out"

note "one mount per node: a second launch beside the first joins its holder"
as_user "$CTR_BIN" exec --bind "$WORK/data.sqfs:/data:image-src=/" "$img" sleep 30 &
holder_launch=$!
for _ in $(seq 100); do [ -n "$(squashfuse_of "$WORK/data.sqfs")" ] && break; sleep 0.05; done
expect_eq "one server of the dataset" 1 "$(squashfuse_of "$WORK/data.sqfs" | wc -l)"
expect_eq "the second launch reads" "sample 3" "$(run --bind "$WORK/data.sqfs:/data:image-src=/" "$img" cat /data/train/a/s3.txt)"
expect_eq "still one server of the dataset" 1 "$(squashfuse_of "$WORK/data.sqfs" | wc -l)"
pkill -u "$CTR_TEST_USER" -x sleep || true
wait "$holder_launch" || true
assert_nothing_left "dataset launches"

note "bad input: one line each, nothing left"
expect_bad() {  # WHAT EXPECTED-TEXT ARGS...
  local what=$1 want=$2 out rc
  shift 2
  set +e
  out=$(run "$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" != 0 ] || fail "$what: accepted"
  expect_eq "$what: one line ($out)" 1 "$(printf '%s\n' "$out" | wc -l)"
  expect_contains "$what" "$want" "$out"
}
expect_bad "missing file" "No such file or directory" --bind "$WORK/absent.sqfs:/data:image-src=/" "$img" true
expect_bad "a directory" "is a directory" --bind "$WORK/ds:/data:image-src=/" "$img" true
echo "not an image" > "$WORK/text.img"
chmod 644 "$WORK/text.img"
expect_bad "not an image" "not a squashfs or SIF image" --bind "$WORK/text.img:/data:image-src=/" "$img" true
expect_bad "relative image-src" "is not an absolute path in the image" --bind "$WORK/data.sqfs:/data:image-src=val" "$img" true
expect_bad "rw" "mounted read-only, not rw" --bind "$WORK/data.sqfs:/data:image-src=/,rw" "$img" true
expect_bad "id=" "id= (a SIF data partition) is not supported" --bind "$WORK/data.sif:/data:image-src=/,id=2" "$img" true
expect_bad "a path the image lacks" "/nowhere" --bind "$WORK/data.sqfs:/data:image-src=/nowhere" "$img" true
assert_nothing_left "refused dataset launches"
assert_no_leftovers
note "dataset images: ok"
