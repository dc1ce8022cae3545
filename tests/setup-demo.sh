#!/bin/sh
# README command 1: install what building and running need (not the test suite's and the
# benchmarks' packages: README command 2 installs those), build ctr, build the demo image
# from its definition file (images/demo/demo.def: busybox-static, no network) with
# `ctr build`, show it and run a container from it.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"

tests/install-deps.sh --run
# A build/run from before the preset used Ninja cannot be reconfigured with it: start anew.
if [ -f build/run/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/run/CMakeCache.txt; then
  rm -rf build/run
fi
cmake --preset run >/dev/null
cmake --build --preset run -j"$(nproc)" --target ctr ctr-squashfs ctr-topology   # the tests build in run-all.sh
ctr=build/run/bin/ctr

demo=build/demo
mkdir -p "$demo"
echo "== ctr build --force --deterministic $demo/demo.sif images/demo/demo.def"
"$ctr" build --force --deterministic "$demo/demo.sif" images/demo/demo.def
echo "== ctr inspect --ctr-summary $demo/demo.sif"
"$ctr" inspect --ctr-summary "$demo/demo.sif"

# Containers run as an ordinary user; as root on a fresh VM, /dev/fuse may be root-only.
if [ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" = 600 ]; then
  echo "note: /dev/fuse is root-only here; squashfuse inside a user namespace needs it 0666 (as on clusters)"
  chmod 666 /dev/fuse
fi
echo "== ctr run $demo/demo.sif"
"$ctr" run "$demo/demo.sif"
echo "== ctr exec $demo/demo.sif cat /etc/os-release"
"$ctr" exec "$demo/demo.sif" cat /etc/os-release
