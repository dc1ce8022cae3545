#!/bin/bash
# Issue 51, L7: ctr-squashfs never allocates what a hostile image claims. libsquashfs sizes
# a file's block list, a link's target, a directory's index and an extended attribute's
# value by the size the image gives and allocates before reading; a 40 KB image whose
# fields were raised made every lookup ask for 4 GiB (VmPeak 4.3 GB). Here a small real
# image (mksquashfs, its inode and xattr tables uncompressed so that a script can find the
# fields) gets those sizes raised, and:
# - mounted by hand (as root), each hostile inode reads as EIO, the server's VmPeak stays
#   under 1 GiB, and it goes on serving the sound files;
# - an xattr descriptor count no image of this size can hold is refused at mount, in one line;
# - as the unprivileged user through ctr, the container sees EIO for each and the sound file's
#   content, and the user's ctr-squashfs stays under 1 GiB too; nothing is left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
server=$(dirname "$CTR_BIN")/ctr-squashfs
[ -x "$server" ] || skip "ctr-squashfs was not built here (it needs libsquashfs-dev and libfuse3-dev)"
command -v python3 >/dev/null || skip "python3 (to patch the image) is not installed"
use_linger 0
server_pid=
trap '{ fusermount3 -u "$WORK/m" || umount -l "$WORK/m"; } 2>/dev/null || true
      [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
      wait 2>/dev/null || true; rm -rf "$WORK"' EXIT  # the launch below ends within its timeout
# 4 GiB is what each hostile field asks for; the server's own peak is about 220 MB.
max_peak_kb=$((1 << 20))

note "the image: the demo root plus /l7 with an inode of each kind whose size is raised"
tree=$WORK/tree
make_demo_rootfs "$tree"
l7=$tree/l7
mkdir -p "$l7/big"
echo sound > "$l7/good"
ln -s L7-LINK-TARGET "$l7/link"
head -c 5000 /dev/urandom > "$l7/ext" && ln "$l7/ext" "$l7/ext-link"  # hard linked: an extended file inode
echo attr > "$l7/attr"
python3 -c "import os, sys; os.setxattr(sys.argv[1], 'user.l7', b'L7-XATTR-VALUE')" "$l7/attr"
# A listing of more than one meta data block (8 KiB): an extended directory with an index.
for i in $(seq 300); do : > "$l7/big/L7-index-entry-$(printf %04d "$i")-padding-to-fill-the-listing"; done
mksquashfs "$tree" "$WORK/sound.sqfs" -noI -noX -noappend -quiet -no-progress -all-root >/dev/null
# Copies with the fields raised: hostile.sqfs (four inodes), xattr-count.sqfs.
python3 - "$WORK/sound.sqfs" "$WORK" <<'PY'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())
# The superblock: block size, then the tables' starts.
block_size, = struct.unpack_from("<I", data, 12)
xattr_start, inode_start, dir_start = struct.unpack_from("<QQQ", data, 56)
def in_inodes(needle):
    return data.index(needle, inode_start, dir_start)
def write(name, fields):
    copy = bytearray(data)
    for at, fmt, value in fields:
        struct.pack_into(fmt, copy, at, value)
    open(f"{out}/{name}.sqfs", "wb").write(copy)
size_at = data.index(struct.pack("<Q", 5000), inode_start, dir_start)
assert struct.unpack_from("<H", data, size_at - 24)[0] == 9, "/l7/ext is not an extended file inode"
write("hostile", [
    (in_inodes(b"L7-LINK-TARGET") - 4, "<I", 0xFFFFFFFF),          # the link's target size
    (size_at, "<Q", block_size << 30),                               # the file's size: 2^30 blocks
    (in_inodes(b"L7-index-entry-") - 4, "<I", 0xFFFFFFF0),          # an index entry's name size
    (data.index(b"L7-XATTR-VALUE", inode_start) - 4, "<I", 0xFFFFFFF0),  # the xattr value's size
])
write("xattr-count", [(xattr_start + 8, "<I", 0xFFFFFFFF)])          # 2^32 xattr descriptors
PY
chmod 644 "$WORK"/*.sqfs

# mount_by_hand IMAGE DIR: ctr-squashfs (2 threads) serving IMAGE on DIR, in the background.
mount_by_hand() {
  mkdir -p "$2"
  "$server" -o threads=2 "$1" "$2" 2>"$WORK/server.err" &
  server_pid=$!
  for _ in $(seq 100); do mountpoint -q "$2" && return 0; sleep 0.05; done
  fail "ctr-squashfs did not mount $1: $(cat "$WORK/server.err")"
}
# peak_kb PID: the process's peak virtual size (a calloc of 4 GiB counts there even when it
# is freed at once).
peak_kb() { awk '/^VmPeak:/ { print $2 }' "/proc/$1/status"; }
# eio WHAT COMMAND...: COMMAND fails with an I/O error.
eio() {
  local what=$1 out; shift
  out=$("$@" 2>&1) && fail "$what: succeeded: $out"
  expect_contains "$what" "Input/output error" "$out"
}

note "by hand: each hostile inode is EIO, and nothing near 4 GiB is allocated"
m=$WORK/m
mount_by_hand "$WORK/hostile.sqfs" "$m"
before=$(peak_kb "$server_pid")
eio "a link target of 4 GiB" readlink -v "$m/l7/link"
eio "a file of 2^30 blocks" stat "$m/l7/ext"
eio "a directory index name of 4 GiB" ls "$m/l7/big"
eio "an xattr value of 4 GiB" python3 -c "import os, sys; os.getxattr(sys.argv[1], 'user.l7')" "$m/l7/attr"
peak=$(peak_kb "$server_pid")
note "ctr-squashfs VmPeak: $before kB after mounting, $peak kB after the hostile lookups"
[ "$peak" -lt "$max_peak_kb" ] || fail "ctr-squashfs allocated what the image claims: VmPeak $peak kB (limit $max_peak_kb kB)"
expect_eq "the sound file, after them" sound "$(cat "$m/l7/good")"
expect_eq "a sound link" busybox "$(readlink "$m/bin/sh")"
fusermount3 -u "$m"
wait "$server_pid" || fail "ctr-squashfs exited with status $? after the unmount: $(cat "$WORK/server.err")"
server_pid=

note "by hand: 2^32 xattr descriptors are refused at mount, in one line"
set +e
out=$("$server" "$WORK/xattr-count.sqfs" "$m" 2>&1)
rc=$?
set -e
expect_eq "xattr count: status" 1 "$rc"
expect_eq "xattr count: one line" 1 "$(printf '%s\n' "$out" | wc -l)"
expect_contains "xattr count" "extended attribute table" "$out"
mountpoint -q "$m" && fail "something is mounted on $m"

note "as the user through ctr: the container sees EIO, and the user's server stays small"
# The container reports, then waits a little, so that its server can be looked at.
script='for p in /l7/link /l7/ext /l7/big; do stat "$p" >/dev/null 2>&1 && echo "$p: readable" || echo "$p: error"; done
  ls /l7/big 2>&1 | head -1; cat /l7/good; echo done; sleep 4'
as_user timeout -s KILL 60 "$CTR_BIN" exec "$WORK/hostile.sqfs" sh -c "$script" >"$WORK/container.out" 2>&1 &
ctr_pid=$!
for _ in $(seq 400); do grep -q '^done$' "$WORK/container.out" 2>/dev/null && break; sleep 0.05; done
grep -q '^done$' "$WORK/container.out" || fail "the container did not report: $(cat "$WORK/container.out")"
pids=$(squashfuse_of "$WORK/hostile.sqfs")
[ -n "$pids" ] || fail "no FUSE server of the test user serves $WORK/hostile.sqfs"
for p in $pids; do
  peak=$(peak_kb "$p")
  note "the user's $(cat "/proc/$p/comm") (pid $p): VmPeak $peak kB"
  [ "$peak" -lt "$max_peak_kb" ] || fail "the user's server allocated what the image claims: VmPeak $peak kB"
done
wait "$ctr_pid" || fail "ctr exec failed: $(cat "$WORK/container.out")"
out=$(cat "$WORK/container.out")
expect_eq "what the container sees" "/l7/link: error
/l7/ext: error
/l7/big: error
ls: /l7/big: Input/output error
sound
done" "$out"
assert_nothing_left "the hostile image through ctr"
assert_no_leftovers
echo "PASS: $TEST_NAME"
