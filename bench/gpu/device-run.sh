#!/bin/bash
# One call on a lent GPU node (the `device` tool, host-notes.md section 9): what the node is,
# the resource-limit tests on its cgroup v2 (the CI VMs have only v1), then the GPU
# acceptance (acceptance.sh run). Two steps, as for acceptance.sh:
#
#   bench/gpu/device-run.sh pack BUILD_DIR CARRY_DIR   on the build machine (acceptance.sh pack,
#                                                      plus busybox and hog for test_limits)
#   bench/gpu/device-run.sh run CARRY_DIR OUT_DIR      on the node, as root, from the repository root
#
# run writes OUT_DIR/node.txt (kernel, cgroup, namespaces, GPU), OUT_DIR/limits.log
# (tests/integration/test_limits.sh, its exit status last) and OUT_DIR/acceptance.tgz
# (acceptance.sh's whole output folder); the acceptance's table goes to stdout as well.
# Each part runs under its own time limit (LIMITS_S, ACCEPT_S: default 150 and 420 s), so a
# hang in one still leaves the others' results. Acceptance knobs pass through (BENCH_BUDGET_S,
# BENCH_WORKLOADS, LAUNCH_BLOCKS, LAUNCH_REPS).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
die() { echo "device-run.sh: $*" >&2; exit 1; }

pack() {
  [ $# = 2 ] || die "usage: device-run.sh pack BUILD_DIR CARRY_DIR"
  "$here/acceptance.sh" pack "$1" "$2" || exit
  cp /bin/busybox "$2/busybox" || die "pack: /bin/busybox is missing (apt-get install busybox-static)"
  cc -static -O2 -o "$2/hog" "$src/tests/integration/hog.c" || die "pack: cannot build hog.c statically"
  # jq: the tests read ctr's JSON with it (instance list --json).
  . "$src/bench/lib/carry.sh"
  copy_with_libs "$(command -v jq)" "$2/bin"
  echo "added busybox and hog: $(du -sm "$2" | cut -f1) MB in $2"
}

node_facts() {
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -r); $(nproc) CPUs; $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "cgroup mounts:"; grep -E ' - cgroup2? ' /proc/self/mountinfo | cut -d' ' -f5,9,11 | sed 's/^/  /'
  echo "root cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
  echo "subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null)"
  echo "own cgroup: $(cat /proc/self/cgroup)"
  echo "max_user_namespaces: $(cat /proc/sys/user/max_user_namespaces 2>/dev/null)"
  echo "unshare -Urm as root: $(unshare -Urm true 2>&1 && echo ok)"
  echo "/dev/fuse: $(ls -l /dev/fuse 2>&1)"
  echo "filesystems: $(grep -wE 'squashfs|overlay|fuse' /proc/filesystems | tr -s '\t ' ' ' | tr '\n' ';')"
  echo "nvidia-smi: $(PATH=$PATH:/usr/local/nvidia/bin nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n1)"
  echo "busybox: $(ls -l /bin/busybox 2>&1)"
  echo "cc: $(command -v cc gcc 2>&1 | tr '\n' ' ')"
}

run() {
  [ $# = 2 ] || die "usage: device-run.sh run CARRY_DIR OUT_DIR"
  local carry out rc
  carry=$(cd "$1" && pwd) || die "run: no carry directory $1"
  out=$2
  mkdir -p "$out"
  node_facts >"$out/node.txt" 2>&1
  cat "$out/node.txt"

  # test_limits as the CI runs it, but with what the node lacks taken from the carry:
  # busybox for the demo root (/bin/busybox), mksquashfs and squashfuse_ll on PATH, hog built.
  [ -x /bin/busybox ] || cp "$carry/busybox" /bin/busybox
  echo "== test_limits (cgroup v2)"
  PATH=$carry/ctr/libexec/ctr:$carry/bin:$PATH CTR_BIN=$carry/ctr/bin/ctr CTR_SOURCE_DIR=$src CTR_TEST_HOG=$carry/hog \
    timeout --kill-after=10 "${LIMITS_S:-150}" bash "$src/tests/integration/test_limits.sh" >"$out/limits.log" 2>&1
  rc=$?
  echo "exit status $rc" >>"$out/limits.log"
  grep -E '^(--|FAIL|SKIP)' "$out/limits.log"; echo "test_limits: exit status $rc"

  echo "== GPU acceptance"
  local acc=/tmp/acceptance-out
  rm -rf "$acc"; mkdir -p "$acc"
  timeout --kill-after=10 "${ACCEPT_S:-420}" "$carry/acceptance.sh" run "$carry" "$acc"
  rc=$?
  echo "acceptance: exit status $rc"
  cat "$acc/acceptance.md" 2>/dev/null
  tar -C "$acc" -czf "$out/acceptance.tgz" . 2>/dev/null
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) die "usage: device-run.sh pack BUILD_DIR CARRY_DIR | run CARRY_DIR OUT_DIR" ;;
esac
