#!/bin/bash
# ctr-squashfs, ctr's multithreaded FUSE server for squashfs images (issue 27), checked
# against the tree it was packed from and against squashfuse_ll:
# - mounted by hand (as root, on a plain directory), every file's type, mode, owner, size,
#   times, link count, device number, link target, extended attributes and content equal the
#   source tree's (blocks, tail fragments, a sparse file, a 3,000-entry directory, a 250-byte
#   name, hard links, a FIFO, a device node);
# - 8 concurrent readers over 4 worker threads read every byte right, and 600 reads at random
#   offsets and sizes from 4 threads on a fresh mount (blocks stored as is and compressed,
#   the shared block cache, the read-ahead, the block index of a file of many blocks);
# - a corrupt data block reads as EIO, and the server goes on serving the other files; a
#   file that is no squashfs image is refused in one line before anything is served;
# - as the ordinary user, ctr exec's default server is ctr-squashfs (--explain says so), and
#   the container sees exactly what squashfuse_ll shows it ('squashfs server = squashfuse');
# - nothing is left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
server=$(dirname "$CTR_BIN")/ctr-squashfs
[ -x "$server" ] || skip "ctr-squashfs was not built here (it needs libsquashfs-dev and libfuse3-dev)"
command -v squashfuse_ll >/dev/null || skip "squashfuse_ll (the reference) is not installed"
command -v python3 >/dev/null || skip "python3 (to compare trees) is not installed"
use_linger 0
# A failure between mount_by_hand and unmount_by_hand must not leave the mount or the server.
server_pid=
trap '{ fusermount3 -u "$WORK/m" || umount -l "$WORK/m"; } 2>/dev/null || true
      [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
      wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

note "the image: demo root plus /data with every kind of inode"
tree=$WORK/tree
make_demo_rootfs "$tree"
d=$tree/data
mkdir -p "$d/many" "$d/deep/a/b/c/d" "$d/owned"
head -c 5000000 < <(yes "a line of compressible text for the data blocks") > "$d/big.txt"
head -c 300000 /dev/urandom > "$d/random.bin"
# 80 blocks, stored as is and compressed in turn, and a tail in a fragment: a file of more
# than 64 blocks, whose block starts the server indexes.
{ for _ in $(seq 40); do head -c 131072 /dev/urandom; head -c 131072 < <(yes "compressible"); done
  head -c 1000 /dev/urandom; } > "$d/mixed.bin"
head -c 100 /dev/urandom > "$d/small.bin"
: > "$d/empty"
truncate -s 3M "$d/sparse" && echo end >> "$d/sparse"
for i in $(seq 3000); do echo "file $i" > "$d/many/f$i"; done
ln -s ../data/small.bin "$d/link"
ln -s /nonexistent/target "$d/dangling"
ln "$d/small.bin" "$d/hard"
echo long > "$d/$(printf 'n%.0s' $(seq 250))"
mkfifo "$d/fifo"
mknod "$d/null" c 1 3
echo deep > "$d/deep/a/b/c/d/file"
echo owned > "$d/owned/file"
chown -R 1234:5678 "$d/owned"
chmod 4755 "$d/small.bin"
chmod 700 "$d/deep"
python3 -c "import os, sys; os.setxattr(sys.argv[1], 'user.ctr.test', b'value 1'); os.setxattr(sys.argv[2], 'user.other', b'')" "$d/small.bin" "$d/many"
touch -d '2001-02-03 04:05:06' "$d/many/f7"
mksquashfs "$tree" "$WORK/rich.sqfs" -quiet -noappend -comp zstd >/dev/null
chmod 644 "$WORK/rich.sqfs"

# compare_trees A B: type, mode, owner, size, mtime, link count, rdev, link target, xattrs and
# content of every path, the same in A and B (atime and ctime are not kept by squashfs).
compare_trees() {
  python3 - "$1" "$2" <<'PY'
import hashlib, os, stat, sys
def describe(root):
    out = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(top, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            row = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, int(st.st_mtime),
                   st.st_nlink if not stat.S_ISDIR(st.st_mode) else 0, st.st_rdev]
            if stat.S_ISLNK(st.st_mode):
                row.append(os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                row += [st.st_size, hashlib.sha256(open(p, "rb").read()).hexdigest()]
            if not stat.S_ISLNK(st.st_mode):
                row.append(sorted((k, os.getxattr(p, k, follow_symlinks=False)) for k in os.listxattr(p, follow_symlinks=False)))
            out[rel] = row
    return out
a, b = describe(sys.argv[1]), describe(sys.argv[2])
bad = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
for k in bad[:5]:
    print(f"{k}: {a.get(k)} != {b.get(k)}")
print(f"{len(a)} paths, {len(bad)} differ")
sys.exit(1 if bad else 0)
PY
}

# mount_by_hand IMAGE DIR [OPTIONS]: ctr-squashfs serving IMAGE on DIR, in the background.
server_pid=""
mount_by_hand() {
  mkdir -p "$2"
  "$server" ${3:+-o "$3"} "$1" "$2" 2>"$WORK/server.err" &
  server_pid=$!
  for _ in $(seq 100); do mountpoint -q "$2" && return 0; sleep 0.05; done
  fail "ctr-squashfs did not mount $1: $(cat "$WORK/server.err")"
}
unmount_by_hand() {
  fusermount3 -u "$1"
  wait "$server_pid" || fail "ctr-squashfs exited with status $? after the unmount: $(cat "$WORK/server.err")"
}

note "by hand: the mount equals the source tree"
mount_by_hand "$WORK/rich.sqfs" "$WORK/m"
out=$(compare_trees "$tree" "$WORK/m") || fail "ctr-squashfs differs from the source tree: $out"
echo "$out"
expect_eq "statfs: a squashfs block size" 131072 "$(stat -f -c %S "$WORK/m")"
expect_eq "an absent name" "" "$(ls "$WORK/m/data/absent" 2>/dev/null || true)"
out=$(cat "$WORK/m/data" 2>&1) && fail "read a directory as a file"
out=$(sh -c "echo x > '$WORK/m/data/small.bin'" 2>&1) && fail "a write succeeded on a read-only image"
expect_contains "writes refused" "Read-only file system" "$out"

note "by hand: 8 concurrent readers over 4 threads read every byte right"
unmount_by_hand "$WORK/m"
mount_by_hand "$WORK/rich.sqfs" "$WORK/m" threads=4
sync
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
want=$(cd "$tree/data" && find . -type f ! -name fifo -print0 | sort -z | xargs -0 sha256sum)
pids=()
for i in $(seq 8); do
  (cd "$WORK/m/data" && find . -type f ! -name fifo -print0 | sort -z | xargs -0 sha256sum) > "$WORK/readers.$i" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader failed"; done
for i in $(seq 8); do
  [ "$(cat "$WORK/readers.$i")" = "$want" ] || fail "concurrent reader $i read wrong data: $(diff <(echo "$want") "$WORK/readers.$i" | head -5)"
done
threads=$(ls "/proc/$server_pid/task" | wc -l)
[ "$threads" -ge 2 ] || fail "ctr-squashfs served 8 readers from $threads thread(s)"
note "served by $threads threads"
unmount_by_hand "$WORK/m"

note "by hand: reads at random offsets and sizes (across blocks and into the tail) from 4 threads"
# The server decompresses each block once for all workers and reads ahead: reads that start
# and end anywhere, on a fresh mount (an empty page cache), must still return the source's bytes.
mount_by_hand "$WORK/rich.sqfs" "$WORK/m" threads=4
out=$(python3 - "$tree/data" "$WORK/m/data" <<'PY'
import os, random, sys, threading
src, mnt = sys.argv[1], sys.argv[2]
names = [n for n in ("random.bin", "mixed.bin", "sparse", "big.txt", "small.bin") if os.path.isfile(os.path.join(src, n))]
bad = []
def reader(seed):
    r = random.Random(seed)
    for _ in range(150):
        name = r.choice(names)
        want = open(os.path.join(src, name), "rb").read()
        fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
        try:
            off = r.randint(0, len(want) + 100)
            size = r.choice((1, 4096, 131072, 131073, r.randint(1, 600000)))
            got = os.pread(fd, size, off)
            if got != want[off:off + size]:
                bad.append(f"{name} at {off}+{size}")
        finally:
            os.close(fd)
threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(f"{len(names)} files, 600 reads, {len(bad)} wrong" + (": " + ", ".join(bad[:5]) if bad else ""))
sys.exit(1 if bad or not names else 0)
PY
) || fail "random reads through ctr-squashfs: $out"
note "$out"
unmount_by_hand "$WORK/m"

note "a corrupt data block is EIO, and the server serves the other files"
cp "$WORK/rich.sqfs" "$WORK/corrupt.sqfs"
# big.txt's compressed blocks come first after the superblock (mksquashfs writes files in
# directory order, and /bin, /data/big.txt lead): overwrite a stretch inside them.
off=$(python3 - "$WORK/rich.sqfs" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
# The zstd frames of big.txt: the first frame magic after the demo's /bin files.
print(data.index(b"\x28\xb5\x2f\xfd", 20000) + 64)
PY
)
printf '\xff%.0s' $(seq 256) | dd of="$WORK/corrupt.sqfs" bs=1 seek="$off" conv=notrunc status=none
mount_by_hand "$WORK/corrupt.sqfs" "$WORK/m"
bad=0
for f in "$WORK/m/data/big.txt" "$WORK/m/data/random.bin" "$WORK/m"/bin/*; do
  [ -f "$f" ] || continue
  out=$(cat "$f" 2>&1 >/dev/null) || { bad=$((bad + 1)); expect_contains "corrupt block: $f" "Input/output error" "$out"; }
done
[ "$bad" -ge 1 ] || fail "no file of the corrupted image failed to read (offset $off)"
expect_eq "the server still serves" "file 2999" "$(cat "$WORK/m/data/many/f2999")"
unmount_by_hand "$WORK/m"

note "a file that is no squashfs image: one line, exit 1, nothing mounted"
head -c 65536 /dev/urandom > "$WORK/garbage.img"
mkdir -p "$WORK/g"
set +e
out=$("$server" "$WORK/garbage.img" "$WORK/g" 2>&1)
rc=$?
set -e
expect_eq "garbage: status" 1 "$rc"
expect_eq "garbage: one line" 1 "$(printf '%s\n' "$out" | wc -l)"
expect_contains "garbage" "not a squashfs image" "$out"
mountpoint -q "$WORK/g" && fail "something is mounted on $WORK/g"

note "as the user: ctr exec serves the image with ctr-squashfs, and the container sees what squashfuse_ll shows"
explain=$(as_user "$CTR_BIN" exec --explain "$WORK/rich.sqfs" true)
expect_contains "--explain names the server" "server:     $server (" "$explain"
# A directory's size is left out: squashfuse_ll says 0, ctr-squashfs the listing's size in
# the image, as the kernel's squashfs does.
listing='cd /data && find . 2>/dev/null | sort | while read -r p; do
  if [ -d "$p" ]; then stat -c "%n %F %a %u %g %h %Y" "$p"; else stat -c "%n %F %a %u %g %s %h %Y %t:%T" "$p"; fi
done; find . -type f 2>/dev/null | sort | xargs sha256sum; readlink link; readlink dangling'
via_ctr=$(as_user "$CTR_BIN" exec "$WORK/rich.sqfs" sh -c "$listing")
squashfuse_conf=$WORK/squashfuse.conf
printf 'image linger = 0\nsquashfs server = squashfuse\n' > "$squashfuse_conf"
chmod 644 "$squashfuse_conf"
explain=$(CTR_TEST_CONFIG=$squashfuse_conf as_user "$CTR_BIN" exec --explain "$WORK/rich.sqfs" true)
expect_contains "--explain names squashfuse_ll" "squashfuse_ll ('squashfs server = squashfuse'" "$explain"
via_squashfuse=$(CTR_TEST_CONFIG=$squashfuse_conf as_user "$CTR_BIN" exec "$WORK/rich.sqfs" sh -c "$listing")
[ "$via_ctr" = "$via_squashfuse" ] ||
  fail "the container sees another tree through ctr-squashfs: $(diff <(echo "$via_squashfuse") <(echo "$via_ctr") | head -10)"
expect_contains "a file's content" "$(cd "$d" && sha256sum ./big.txt)" "$via_ctr"
assert_nothing_left "launches through both servers"
assert_no_leftovers
note "ctr-squashfs: ok"
