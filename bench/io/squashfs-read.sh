#!/bin/bash
# Reading files from an image: `tar cf /dev/null /data` inside the container, kernel
# squashfs (setuid helper) against squashfuse: cold (fresh mount, page cache dropped) and
# warm (the image held mounted by another launch, as by a job's other ranks, and read once).
#
#   sudo bench/io/squashfs-read.sh CTR_SQUASHFUSE CTR_KERNEL [SOURCE_DIR]
#
# CTR_SQUASHFUSE: a ctr whose config mounts images with a FUSE server (its default, 'squashfs
# server = auto', takes ctr-squashfs; 'squashfs server = squashfuse' measures squashfuse_ll
# itself); CTR_KERNEL: a ctr
# installed with the setuid helper and 'allow setuid = yes' that accepts images owned by
# the benchmark user ('setuid image owners = self'). SOURCE_DIR (default /usr/share/doc) is
# packed into a SIF. Root is needed to drop the page cache; launches run as BENCH_USER
# (default ctrbench). ROUNDS (default 5) rounds, each running both drivers in random order.
# Output: one line per sample, then the median seconds per case and the ratio
# squashfuse / kernel (above 1: kernel squashfs is faster).
set -euo pipefail
fuse_ctr=${1:?usage: squashfs-read.sh CTR_SQUASHFUSE CTR_KERNEL [SOURCE_DIR]}
kernel_ctr=${2:?usage: squashfs-read.sh CTR_SQUASHFUSE CTR_KERNEL [SOURCE_DIR]}
source_dir=${3:-/usr/share/doc}
rounds=${ROUNDS:-5}
user=${BENCH_USER:-ctrbench}
[ "$(id -u)" = 0 ] || { echo "squashfs-read.sh: run as root (it drops the page cache)" >&2; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
[ -c /dev/fuse ] && chmod 666 /dev/fuse

work=$(mktemp -d /tmp/ctr-read.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/data" "$work/root/bin"
cp -a "$source_dir"/. "$work/root/data/"
cp /bin/busybox "$work/root/bin/busybox"
for a in sh tar true sleep; do ln -s busybox "$work/root/bin/$a"; done
"$fuse_ctr" -q build "$work/fuse.sif" "$work/root"
cp "$work/fuse.sif" "$work/kernel.sif"
chown "$user" "$work/fuse.sif" "$work/kernel.sif"
echo "image: $(du -sh "$work/root/data" | cut -f1) of files from $source_dir, SIF $(du -h "$work/fuse.sif" | cut -f1)"

# One sample: seconds for `tar cf /dev/null /data` in the container (the launch included).
sample() {  # ctr image
  runuser -u "$user" -- bash -c "cd /tmp; s=\$(date +%s.%N); $1 exec $2 tar cf /dev/null -C / data; e=\$(date +%s.%N); awk -v s=\$s -v e=\$e 'BEGIN {print e - s}'"
}
declare -A samples
for r in $(seq "$rounds"); do
  for c in $(printf 'fuse\nkernel\n' | shuf); do
    ctr=$fuse_ctr; [ "$c" = kernel ] && ctr=$kernel_ctr
    sync; echo 3 >/proc/sys/vm/drop_caches
    t=$(sample "$ctr" "$work/$c.sif"); samples[$c-cold]+="$t "
    printf 'round %d %-6s cold %.3f s\n' "$r" "$c" "$t"
    # Another launch holds the image mounted; one read fills the cache, the next is timed.
    runuser -u "$user" -- bash -c "cd /tmp; exec $ctr exec $work/$c.sif sleep 600" 2>/dev/null & holder=$!
    sleep 1
    sample "$ctr" "$work/$c.sif" >/dev/null
    t=$(sample "$ctr" "$work/$c.sif"); samples[$c-warm]+="$t "
    printf 'round %d %-6s warm %.3f s\n' "$r" "$c" "$t"
    kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true
    # The next cold sample mounts afresh: wait until the holder, which lingers after its last
    # launch ('image linger', 5 s by default), and its FUSE server are gone.
    for _ in $(seq 300); do pgrep -u "$user" >/dev/null || break; sleep 0.1; done
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo
for mode in cold warm; do
  f=$(echo "${samples[fuse-$mode]}" | median); k=$(echo "${samples[kernel-$mode]}" | median)
  printf '%-5s squashfuse %.3f s  kernel %.3f s  ratio squashfuse/kernel %.2f\n' "$mode" "$f" "$k" "$(awk -v f="$f" -v k="$k" 'BEGIN {print f / k}')"
done
