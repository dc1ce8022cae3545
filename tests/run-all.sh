#!/bin/sh
# README command 2 (and CI, via .ci/run): the whole test suite. Installs what is missing,
# builds with warnings as errors, runs unit, conformance and integration tests, then the
# fuzzers for FUZZ_SECONDS (default 60) each under ASan+UBSan.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
jobs=$(nproc)

tests/install-deps.sh
start=$(date +%s)

echo "== build (preset ci: Release, -Werror)"
cmake --preset ci >/dev/null
cmake --build --preset ci -j"$jobs"

echo "== unit, conformance and integration tests"
ctest --preset ci -j1 --timeout 900

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzzers (${FUZZ_SECONDS:-60} s each, ASan+UBSan)"
  bash tests/fuzz/run-fuzz.sh
fi

echo "== all tests passed in $(( $(date +%s) - start )) s"
