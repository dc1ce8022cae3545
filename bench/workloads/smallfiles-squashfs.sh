#!/bin/sh
# Serves the ctr-wl-smallfiles dataset from a squashfs image mounted by a FUSE server, so the
# same reader measures "many small files from a dataset image" against a plain directory.
#   smallfiles-squashfs.sh up WORKDIR [--count N] [--size BYTES] [--comp gzip|zstd|lz4|xz]
#                         [--server squashfuse|ctr-squashfs|auto] [--local-copy DIR]
#       WORKDIR/src          the dataset (ctr-wl-smallfiles --prepare; kept if already there)
#       WORKDIR/dataset.sqfs mksquashfs of it
#       WORKDIR/mnt          the image mounted by the server: squashfuse_ll (or squashfuse, the
#                            default), ctr-squashfs (ctr's own), or auto (ctr-squashfs where
#                            it is built or installed, else squashfuse_ll: what ctr chooses)
#       --local-copy DIR     mount DIR/dataset.sqfs, a copy of the image made once (a node's
#                            own disk, as a staged image)
#     then: ctr-wl-smallfiles --read WORKDIR/mnt   (bare, or with WORKDIR/mnt bound into a container)
#   smallfiles-squashfs.sh down WORKDIR [--local-copy DIR]   unmounts; removes mnt, the image,
#       src and the copy
# Both are idempotent. Exit 77 with "skip: ..." when mksquashfs or the server is missing.
set -eu

usage() { sed -n '2,18s/^# \{0,1\}//p' "$0"; }
die() { echo "smallfiles-squashfs: $*" >&2; exit 1; }
skip() { echo "skip: $*" >&2; exit 77; }

case ${1:-} in -h|--help|help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
action=$1 work=$2
shift 2
count=20000 size=16384 comp=zstd server=squashfuse copy=
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --comp) comp=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --local-copy) copy=$2; shift 2 ;;
    --quick) count=2000; shift ;;
    *) usage >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
mounted() { grep -q " $(realpath "$1") " /proc/self/mountinfo 2>/dev/null; }

# ctr's own server: beside ctr in a build tree (BUILD/bin, the scripts in
# BUILD/bench/workloads), or in PREFIX/libexec/ctr (the scripts in PREFIX/libexec/ctr/bench).
find_ctr_squashfs() {
  for p in "$here/../../bin/ctr-squashfs" "$here/../ctr-squashfs"; do
    [ -x "$p" ] && { echo "$p"; return 0; }
  done
  command -v ctr-squashfs
}
find_squashfuse() { command -v squashfuse_ll || command -v squashfuse; }

case $action in
up)
  command -v mksquashfs >/dev/null || skip "mksquashfs not found (squashfs-tools)"
  case $server in
    squashfuse) fuse=$(find_squashfuse) || skip "squashfuse not found" ;;
    ctr-squashfs) fuse=$(find_ctr_squashfs) || skip "ctr-squashfs not found beside $0 (it is built with ctr)" ;;
    auto) fuse=$(find_ctr_squashfs || find_squashfuse) || skip "neither ctr-squashfs nor squashfuse found" ;;
    *) die "--server $server: expected squashfuse, ctr-squashfs or auto" ;;
  esac
  reader=$here/ctr-wl-smallfiles
  [ -x "$reader" ] || reader=$(command -v ctr-wl-smallfiles) || die "ctr-wl-smallfiles not found beside $0"
  mkdir -p "$work/mnt"
  if mounted "$work/mnt"; then
    echo "smallfiles-squashfs: $work/mnt already mounted" >&2
    exit 0
  fi
  "$reader" --prepare "$work/src" --count "$count" --size "$size"
  if [ ! -s "$work/dataset.sqfs" ] ||
     [ -n "$(find "$work/src/.ctr-wl-smallfiles" -newer "$work/dataset.sqfs")" ]; then
    rm -f "$work/dataset.sqfs"
    mksquashfs "$work/src" "$work/dataset.sqfs" -comp "$comp" -noappend -quiet -no-progress >&2 ||
      die "mksquashfs failed"
  fi
  image=$work/dataset.sqfs
  if [ -n "$copy" ]; then
    mkdir -p "$copy"
    if [ ! -s "$copy/dataset.sqfs" ] || [ -n "$(find "$image" -newer "$copy/dataset.sqfs")" ]; then
      cp "$image" "$copy/dataset.sqfs.tmp" || die "cannot copy $image to $copy"
      mv "$copy/dataset.sqfs.tmp" "$copy/dataset.sqfs"
    fi
    image=$copy/dataset.sqfs
  fi
  if [ "$(basename "$fuse")" = ctr-squashfs ]; then
    # ctr's server stays in the foreground (ctr's holder owns it): started in a session of
    # its own, it mounts read-only through fusermount3 and serves until 'down' unmounts.
    setsid "$fuse" "$image" "$work/mnt" </dev/null >"$work/server.log" 2>&1 &
    tries=0
    until mounted "$work/mnt"; do
      kill -0 $! 2>/dev/null || die "$fuse could not mount $image: $(tail -1 "$work/server.log")"
      tries=$((tries + 1))
      [ $tries -le 100 ] || die "$work/mnt is not a mount point 10 s after starting $fuse"
      sleep 0.1
    done
  else
    # allow_other lets a container's processes (other credentials or namespaces) read a
    # mount made by root; a user's mount needs user_allow_other in /etc/fuse.conf for it.
    opts=
    [ "$(id -u)" = 0 ] && opts="-o allow_other"
    # shellcheck disable=SC2086
    "$fuse" $opts "$image" "$work/mnt" || die "$fuse could not mount $image"
    mounted "$work/mnt" || die "$work/mnt is not a mount point after $fuse"
  fi
  echo "smallfiles-squashfs: $image ($(du -h "$image" | cut -f1)) mounted at $work/mnt by $(basename "$fuse")" >&2
  ;;
down)
  if [ -d "$work/mnt" ] && mounted "$work/mnt"; then
    fusermount3 -u "$work/mnt" 2>/dev/null || fusermount -u "$work/mnt" 2>/dev/null ||
      umount "$work/mnt" || die "cannot unmount $work/mnt"
  fi
  if [ -d "$work/mnt" ]; then rmdir "$work/mnt"; fi
  rm -rf "$work/dataset.sqfs" "$work/src" "$work/server.log"
  if [ -n "$copy" ]; then rm -rf "$copy"; fi
  ;;
*) usage >&2; exit 2 ;;
esac
