#!/bin/bash
# The recipes in images/ (issue 9): every one parses and its %files sources exist
# (`ctr build --explain`, patterns expanded, from the repository root as the recipes say),
# and mpi.def builds on the debootstrap base that test_build_def caches in this run and runs
# its MPI ping-pong with the image's mpirun. bench.def and pytorch.def are not built here
# (minutes of downloads: see docs/user-guide-images.md, "The images/ recipes").
. "$(dirname "$0")/lib.sh"
ctr=$CTR_BIN
cd "$CTR_SOURCE_DIR"   # relative %files sources start here

note "every recipe parses and its %files sources exist"
count=0
for def in images/*/*.def; do
  out=$("$ctr" build --explain "$WORK/explain.sif" "$def" 2>&1) || { echo "$out"; fail "$def: --explain failed"; }
  expect_contains "$def: a bootstrap step" "== bootstrap" "$out"
  count=$((count + 1))
done
[ "$count" -ge 4 ] || fail "expected demo, mpi, bench and pytorch recipes, found $count"
expect_contains "mpi.def's pattern expanded" "tests/integration/mpi_pingpong.c -> /opt/ctr-mpi/src/" \
  "$("$ctr" build --explain "$WORK/x.sif" images/mpi/mpi.def)"
bench=$("$ctr" build --explain "$WORK/x.sif" images/bench/bench.def)
for src in gemm.c stream.c osu.c smallfiles.c wl_report.c wl_report.h ctr-wl-fio ctr-wl-resnet; do
  expect_contains "bench.def brings $src" "bench/workloads/$src -> " "$bench"
done

# ---- mpi.def built for real: on the cached debootstrap base, %post's apt-get and mpicc.
ensure_test_user
use_linger 0
export CTR_CONFIG=$CTR_TEST_CONFIG  # root's launches too: no lingering holder at the end
command -v mmdebstrap >/dev/null || skip "mmdebstrap is not installed (the recipes parse)"
timeout 10 bash -c "exec 3<>/dev/tcp/deb.debian.org/80" 2>/dev/null || skip "the Debian mirror is unreachable (the recipes parse)"
export CTR_CACHE_DIR=/tmp/ctr-build-test-cache-0   # root's, test_build_def's: the bookworm base is made once per run
mkdir -p -m 700 "$CTR_CACHE_DIR"
note "mpi.def"
start=$(date +%s)
"$ctr" build "$WORK/mpi.sif" images/mpi/mpi.def 2> "$WORK/mpi.err" || { cat "$WORK/mpi.err"; tail -20 "$WORK/mpi.sif.build.log"; fail "mpi.def build"; }
note "mpi.def built in $(( $(date +%s) - start )) s ($(du -m "$WORK/mpi.sif" | cut -f1) MiB)"
expect_contains "%test ran (mpirun -np 2 in the build)" "ctr build: %test" "$(cat "$WORK/mpi.err")"
out=$("$ctr" exec "$WORK/mpi.sif" mpirun -np 2 --oversubscribe mpi_pingpong)
expect_contains "mpirun -np 2 in mpi.sif" "pingpong ok" "$out"
expect_contains "labels" "org.label-schema.name: ctr-mpi" "$("$ctr" inspect "$WORK/mpi.sif")"
echo "PASS: $TEST_NAME"
