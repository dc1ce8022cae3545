#!/bin/bash
# Builds the SIF reader fuzzer with the "fuzz" preset and runs it for FUZZ_SECONDS
# (default 60) on a copy of the seed corpus. Fails on any crash, leak or sanitizer report.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build/fuzz}
seconds=${FUZZ_SECONDS:-60}
cmake --preset fuzz -S "$src" -B "$build" >/dev/null
cmake --build "$build" --target fuzz_sif_reader -j"${FUZZ_JOBS:-2}"
work=$(mktemp -d /tmp/ctr-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$src"/tests/fuzz/corpus/sif/* "$work/"
mkdir -p "$work/artifacts"
# -rss_limit_mb keeps a huge allocation from passing silently; artifacts land in $work.
"$build/bin/fuzz_sif_reader" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$work/artifacts/" "$work"
if compgen -G "$work/artifacts/*" >/dev/null; then
  mkdir -p "$src/build/fuzz-artifacts" && cp "$work"/artifacts/* "$src/build/fuzz-artifacts/"
  echo "fuzz_sif_reader: crash inputs copied to $src/build/fuzz-artifacts" >&2
  exit 1
fi
echo "fuzz_sif_reader: no crash in ${seconds}s"
