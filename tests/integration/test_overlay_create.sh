#!/bin/bash
# `ctr overlay create` (Apptainer's `overlay create`) as an ordinary user: an ext3 image of
# the size asked for, sparse or fully allocated, whose upper/ and work/ are the user's (root's
# with --fakeroot) and which holds each --create-dir under upper/; the same added to a SIF as
# an overlay partition, after which the SIF still runs. Refused in one line, exit 255, with
# nothing left behind: a size below 64 MiB, an existing file, a relative --create-dir, a SIF
# that has an overlay already or is signed; a failing mkfs.ext3 or SIF append leaves no file
# and the SIF as it was, byte for byte.
. "$(dirname "$0")/lib.sh"
create_test_user
MKFS=$(PATH=$PATH:/usr/sbin:/sbin command -v mkfs.ext3) || skip "mkfs.ext3 is not installed (e2fsprogs)"
DEBUGFS=$(PATH=$PATH:/usr/sbin:/sbin command -v debugfs) || skip "debugfs is not installed (e2fsprogs)"
make_user_dir
uid=$(id -u "$CTR_TEST_USER")
gid=$(id -g "$CTR_TEST_USER")
ctr() { as_user "$CTR_BIN" "$@"; }

# expect_refused WHAT NEEDLE CMD...: exit status 255, one line on stderr containing NEEDLE.
expect_refused() {
  local what=$1 needle=$2 rc=0; shift 2
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  expect_eq "$what: exit status" 255 "$rc"
  expect_eq "$what: stderr lines" 1 "$(wc -l <"$WORK/err")"
  expect_contains "$what" "$needle" "$(cat "$WORK/err")"
}
# ls_dir IMAGE PATH: "NAME UID GID MODE" for each entry of PATH in the image (debugfs -R 'ls -l').
ls_dir() {
  "$DEBUGFS" -R "ls -l $2" "$1" 2>/dev/null | awk 'NF >= 9 && $NF != "." && $NF != ".." { print $NF, $4, $5, $2 }'
}
listing() { ls -A "$U" | tr '\n' ' '; }

note "the default image: 64 MiB, fully allocated, upper/ and work/ the user's"
ctr overlay create "$U/default.img"
expect_eq "size" $((64 * 1024 * 1024)) "$(stat -c %s "$U/default.img")"
[ "$(stat -c %b "$U/default.img")" -ge $((64 * 1024 * 1024 / 512)) ] ||
  fail "not fully allocated: $(stat -c '%b blocks of %B bytes' "$U/default.img")"
expect_eq "owner and mode of the file" "$CTR_TEST_USER 600" "$(stat -c '%U %a' "$U/default.img")"
"$DEBUGFS" -R features "$U/default.img" 2>/dev/null | grep -q has_journal || fail "no journal: not ext3"
root=$(ls_dir "$U/default.img" /)
expect_contains "upper" "upper $uid $gid 40755" "$root"
expect_contains "work" "work $uid $gid 40755" "$root"

note "--size 128 --sparse: a sparse 128 MiB file"
ctr overlay create --size 128 --sparse "$U/sparse.img"
expect_eq "size" $((128 * 1024 * 1024)) "$(stat -c %s "$U/sparse.img")"
[ "$(stat -c %b "$U/sparse.img")" -lt $((64 * 1024 * 1024 / 512)) ] ||
  fail "not sparse: $(stat -c '%b blocks of %B bytes' "$U/sparse.img")"

note "--create-dir: each directory under upper/, the user's"
ctr overlay create --create-dir /usr/local/testing --create-dir /data "$U/dirs.img"
expect_contains "usr" "usr $uid $gid 40755" "$(ls_dir "$U/dirs.img" /upper)"
expect_contains "data" "data $uid $gid 40755" "$(ls_dir "$U/dirs.img" /upper)"
expect_contains "testing" "testing $uid $gid 40755" "$(ls_dir "$U/dirs.img" /upper/usr/local)"

note "--fakeroot: the layout is root's"
ctr overlay create --fakeroot --create-dir /opt/x "$U/fakeroot.img"
expect_contains "upper" "upper 0 0 40755" "$(ls_dir "$U/fakeroot.img" /)"
expect_contains "work" "work 0 0 40755" "$(ls_dir "$U/fakeroot.img" /)"
expect_contains "create-dir" "x 0 0 40755" "$(ls_dir "$U/fakeroot.img" /upper/opt)"

note "refusals: one line, exit 255, nothing made"
as_user sh -c "echo precious > $U/existing"
before=$(listing)
expect_refused "--size 1" "at least 64 MiB" ctr overlay create --size 1 "$U/small.img"
expect_refused "relative --create-dir" "--create-dir usr/local: not an absolute path" \
  ctr overlay create --create-dir usr/local "$U/rel.img"
expect_refused "'..' in --create-dir" "'..' is not allowed" ctr overlay create --create-dir /a/../../b "$U/up.img"
expect_refused "an existing file" "$U/existing: already exists" ctr overlay create "$U/existing"
expect_eq "the existing file is untouched" precious "$(cat "$U/existing")"
expect_refused "an existing overlay image" "$U/default.img: already exists" ctr overlay create "$U/default.img"
expect_eq "nothing left behind" "$before" "$(listing)"

note "a failing mkfs.ext3 leaves no file and no scratch directory"
mkdir -p "$WORK/badbin"
printf '#!/bin/sh\necho "mkfs.ext3: no space left" >&2\nexit 1\n' >"$WORK/badbin/mkfs.ext3"
chmod 755 "$WORK/badbin" "$WORK/badbin/mkfs.ext3"
expect_refused "failing mkfs" "no space left" as_user env PATH="$WORK/badbin:/usr/bin:/bin" "$CTR_BIN" overlay create "$U/failed.img"
expect_eq "nothing left behind" "$before" "$(listing)"

note "a SIF: the overlay becomes a partition (Ext3, Overlay), and the SIF still runs"
make_demo_rootfs "$WORK/demo"
"$CTR_BIN" build "$WORK/demo.sif" "$WORK/demo" >/dev/null
as_user cp "$WORK/demo.sif" "$U/demo.sif"
objects_before=$(ctr sif list "$U/demo.sif" | wc -l)
ctr overlay create --size 64 "$U/demo.sif"
list=$(ctr sif list "$U/demo.sif")
expect_eq "one more object" $((objects_before + 1)) "$(wc -l <<<"$list")"
expect_contains "overlay partition" "FS (Ext3/Overlay/amd64)" "$list"
id=$(awk '/Ext3\/Overlay/ { print $1 }' <<<"$list" | tr -d '|')
info=$(ctr sif info "$id" "$U/demo.sif")
expect_contains "its name" "demo.sif.ext3" "$info"
ctr sif dump "$id" "$U/demo.sif" >"$WORK/part.ext3"
expect_eq "partition size" $((64 * 1024 * 1024)) "$(stat -c %s "$WORK/part.ext3")"
expect_contains "upper in the partition" "upper $uid $gid 40755" "$(ls_dir "$WORK/part.ext3" /)"

note "a SIF with an overlay, or signed, is refused and left as it was"
sum=$(sha256sum <"$U/demo.sif")
expect_refused "second overlay" "already has an overlay partition (id $id)" ctr overlay create "$U/demo.sif"
expect_eq "SIF unchanged" "$sum" "$(sha256sum <"$U/demo.sif")"
as_user cp "$WORK/demo.sif" "$U/signed.sif"
head -c 64 /dev/urandom >"$WORK/sig" && chmod 644 "$WORK/sig"
ctr sif add --datatype 5 --signhash 1 --signentity 0123456789abcdef0123456789abcdef01234567 --linkid 1 \
  "$U/signed.sif" "$WORK/sig"
sum=$(sha256sum <"$U/signed.sif")
expect_refused "signed SIF" "is signed" ctr overlay create "$U/signed.sif"
expect_eq "signed SIF unchanged" "$sum" "$(sha256sum <"$U/signed.sif")"

note "a SIF append that fails half way (file size limit) leaves the SIF byte-identical"
as_user cp "$WORK/demo.sif" "$U/limited.sif"
sum=$(sha256sum <"$U/limited.sif")
rc=0
as_user bash -c "trap '' XFSZ; ulimit -f $((64 * 1024 + 64)); exec $CTR_BIN overlay create --sparse $U/limited.sif" \
  2>"$WORK/err" || rc=$?
expect_eq "exit status" 255 "$rc"
expect_eq "one line" 1 "$(wc -l <"$WORK/err")"
expect_eq "SIF unchanged" "$sum" "$(sha256sum <"$U/limited.sif")"
expect_eq "no scratch left behind" "" "$(ls -A "$U" | grep '^\.' || true)"

note "through the apptainer name: the same command, Apptainer's exit statuses"
mkdir -p "$WORK/bin" && ln -s "$CTR_BIN" "$WORK/bin/apptainer"
rc=0
as_user "$WORK/bin/apptainer" overlay create --size 1 "$U/a.img" 2>/dev/null || rc=$?
expect_eq "size 1 through apptainer" 255 "$rc"
as_user "$WORK/bin/apptainer" overlay create "$U/a.img"
[ -f "$U/a.img" ] || fail "apptainer overlay create made no image"
rc=0
as_user "$WORK/bin/apptainer" overlay create --bogus "$U/b.img" 2>/dev/null || rc=$?
expect_eq "an unknown flag is a usage error" 1 "$rc"

# The SIF with its overlay partition still runs, where this machine can run containers.
if (require_fuse && require_kernel_mount_api && require_userns_overlay) >/dev/null 2>&1; then
  note "the SIF with an overlay partition still runs"
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  as_user env -C "$U" "$CTR_BIN" exec "$U/demo.sif" true || fail "ctr exec of the SIF with an overlay failed"
else
  note "not run here: ctr exec of the SIF (no FUSE, mount API or unprivileged overlayfs)"
fi
