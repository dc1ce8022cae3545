#!/bin/bash
# Node-local staging (issue 27, item 4), as an ordinary user: --stage (and ctr.conf 'stage
# images = always') copies the image and each dataset image to the user's stage directory
# once, and the holder mounts the copies; a second launch reuses them; a source that changed
# is copied again; concurrent launches make one copy; --no-stage wins; 'stage max size'
# evicts the least recently used copy; `ctr cache list|clean` show and remove them; a stage
# directory others can write is refused in one line with nothing left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
make_demo_squashfs demo
img=$WORK/demo.sqfs
mkdir -p "$WORK/ds/train"
for i in $(seq 20); do echo "sample $i" > "$WORK/ds/train/s$i.txt"; done
mksquashfs "$WORK/ds" "$WORK/data.sqfs" -quiet -noappend -all-root >/dev/null
cp "$img" "$WORK/other.sqfs"
chmod 644 "$img" "$WORK/data.sqfs" "$WORK/other.sqfs"
# The stage directory's parent as /var/tmp is: root's, sticky, anyone may add to it.
mkdir -m 1777 "$WORK/local"
uid=$(id -u "$CTR_TEST_USER")
stage=$WORK/local/stage-$uid

# config LINES...: the test user's ctr.conf (image linger 0, this test's stage directory).
config() {
  CTR_TEST_CONFIG=$WORK/ctr.conf
  printf '%s\n' "image linger = 0" "stage dir = $WORK/local/stage-%u" "$@" > "$CTR_TEST_CONFIG"
  chmod 644 "$CTR_TEST_CONFIG"
}
config
run() { as_user "$CTR_BIN" exec "$@"; }
data="$WORK/data.sqfs:/data:image-src=/"
inode() { stat -c %i "$1"; }

note "--explain: what is staged, where, and why"
explain=$(run --stage --explain --bind "$data" "$img" true)
expect_contains "explain: the image" "staged:     $img -> $stage/" "$explain"
expect_contains "explain: the dataset" "staged:     $WORK/data.sqfs -> $stage/" "$explain"
expect_contains "explain: why" "--stage; copied once per node" "$explain"
json=$(run --stage --explain --json --bind "$data" "$img" true)
expect_eq "json: two copies" 2 "$(jq '.staging.files | length' <<<"$json")"
copy=$(jq -r '.staging.files[0].copy' <<<"$json")
data_copy=$(jq -r '.staging.files[1].copy' <<<"$json")
expect_eq "json: the image mounted is the copy" "$copy" "$(jq -r '.image.path' <<<"$json")"
[ ! -e "$stage" ] || fail "--explain staged something"
expect_eq "no staging without --stage" null "$(run --explain --json "$img" true | jq -c .staging)"

note "the first launch copies, the holder mounts the copies"
expect_eq "reads the image and the dataset" "sample 7" "$(run --stage --bind "$data" "$img" cat /data/train/s7.txt)"
[ -f "$copy" ] && [ -f "$data_copy" ] || fail "no copies in $stage: $(ls -la "$stage")"
cmp -s "$copy" "$img" || fail "the copy differs from the image"
expect_eq "stage directory: the user's, 0700" "$CTR_TEST_USER 700" "$(stat -c '%U %a' "$stage")"
expect_eq "copy: the user's, 0600" "$CTR_TEST_USER 600" "$(stat -c '%U %a' "$copy")"
expect_eq "copy: the source's mtime" "$(stat -c %Y "$img")" "$(stat -c %Y "$copy")"
as_user "$CTR_BIN" exec --stage --bind "$data" "$img" sleep 30 &
launch=$!
for _ in $(seq 100); do [ -n "$(squashfuse_of "$copy")" ] && break; sleep 0.05; done
expect_eq "one server reads the image's copy" 1 "$(squashfuse_of "$copy" | wc -l)"
expect_eq "none reads the shared file" 0 "$(squashfuse_of "$img" | wc -l)"
expect_eq "one server reads the dataset's copy" 1 "$(squashfuse_of "$data_copy" | wc -l)"
first=$(inode "$copy")
expect_eq "a second launch beside it" "sample 2" "$(run --stage --bind "$data" "$img" cat /data/train/s2.txt)"
expect_eq "no second copy" "$first" "$(inode "$copy")"
pkill -u "$CTR_TEST_USER" -x sleep || true
wait "$launch" || true
expect_eq "a later launch reuses the copy" "$first" "$(run --stage "$img" sh -c 'true' && inode "$copy")"

note "a source that changed is copied again"
touch -d '2001-01-01' "$img"
run --stage "$img" true
[ "$(inode "$copy")" != "$first" ] || fail "the copy was not made again after the source changed"
expect_eq "copy: the new mtime" "$(stat -c %Y "$img")" "$(stat -c %Y "$copy")"

note "concurrent first launches: one copy"
rm -rf "$stage"
out=$(for i in 1 2 3 4 5 6; do as_user "$CTR_BIN" -v exec --stage --bind "$data" "$img" cat /data/train/s$i.txt 2>&1 & done; wait)
expect_eq "every launch read its file" 6 "$(grep -c '^sample ' <<<"$out")"
expect_eq "one copy of each file made" 2 "$(grep -c 'info: staged ' <<<"$out")"
expect_eq "nothing half-made" "2 lock" "$(ls -A "$stage" | grep -vc lock) $(ls -A "$stage" | grep lock)"

note "ctr.conf: 'stage images = always', --no-stage, 'stage max size'"
rm -rf "$stage"
config "stage images = always"
run "$img" true
[ -f "$copy" ] || fail "'stage images = always' did not stage"
rm -rf "$stage"
run --no-stage "$img" true
[ ! -e "$copy" ] || fail "--no-stage staged"
config "stage images = always" "stage max size = 1500K"
run "$img" true
other_copy=$(run --explain --json "$WORK/other.sqfs" true | jq -r '.staging.files[0].copy')
run "$WORK/other.sqfs" true
[ -f "$other_copy" ] || fail "the second image was not staged"
[ ! -e "$copy" ] || fail "the least recently used copy was kept past 'stage max size'"
out=$(run --explain --bind "$WORK/other.sqfs:/o:image-src=/" "$img" true 2>&1)
expect_contains "too large together: a warning" "is not staged: with the launch's other copies it passes 'stage max size'" "$out"

note "ctr cache list|clean: the staged copies"
expect_contains "cache list" "There are 1 staged copies using" "$(as_user "$CTR_BIN" cache list)"
expect_contains "cache list -T stage -v (the name cut at 22, as Apptainer's)" "$(basename "$other_copy" | cut -c1-22)" "$(as_user "$CTR_BIN" cache list -T stage -v)"
expect_eq "cache list --json" "$other_copy" "$(as_user "$CTR_BIN" cache list --json | jq -r '.stage.copies[0].copy')"
expect_contains "cache clean" "1 staged copy" "$(as_user "$CTR_BIN" cache clean)"
[ ! -e "$other_copy" ] || fail "cache clean left the staged copy"

note "bad input: one line, nothing left"
# refused WHAT TEXT: a launch of the image fails in one line containing TEXT.
refused() {
  local out rc
  set +e; out=$(run "$img" true 2>&1); rc=$?; set -e
  [ "$rc" != 0 ] || fail "$1: accepted"
  expect_eq "$1: one line ($out)" 1 "$(printf '%s\n' "$out" | wc -l)"
  expect_contains "$1" "$2" "$out"
}
config "stage images = always"
rm -rf "$stage"
as_user mkdir "$stage"
chmod 777 "$stage"
# Anyone could have put files into it: a private one of the user's beside it serves instead
# (issue 51: a per-user name that is not the user's alone never stops a launch).
set +e; out=$(run "$img" echo ran 2>"$WORK/e-open"); rc=$?; set -e
[ "$rc" = 0 ] && [ "$out" = ran ] || fail "a stage directory anyone can write: $rc: $out $(cat "$WORK/e-open")"
expect_contains "the user is told" "$stage is writable by others (mode 0777): using $stage-" "$(cat "$WORK/e-open")"
[ -z "$(ls -A "$stage")" ] || fail "something was put into the directory anyone can write: $(ls -A "$stage")"
rm -rf "$stage" "$stage"-*
chmod 755 "$WORK/local"
refused "a stage directory that cannot be made" "stage directory $stage: Permission denied"
assert_nothing_left "staged launches"
assert_no_leftovers
note "staging: ok"
