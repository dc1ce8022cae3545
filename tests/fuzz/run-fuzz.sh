#!/bin/bash
# Builds the libFuzzer targets with the "fuzz" preset (clang, ASan + UBSan) and runs each
# on a copy of its seed corpus. Fails on any crash, leak or sanitizer report.
#   FUZZ_SECONDS   time for the SIF reader (default 30: the suite's smoke run; a fuzzing
#                  session gives it minutes, FUZZ_SECONDS=600); ctr verify's checks, the
#                  helper's parser and the ld.so cache reader, the definition-file parser,
#                  the chunk table of an ORAS config and ctr-squashfs's image code get
#                  half each.
#   FUZZ_JOBS      targets run at once (default: nproc) and build jobs
#   FUZZ_TARGETS   the targets to build and run (default: all), e.g. FUZZ_TARGETS=fuzz_squashfs
#   FUZZ_STEP      build (only build the targets), run (only run them, built before) or all
#                  (default): tests/run-all.sh builds them beside the tests and runs them after
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build/fuzz}
seconds=${FUZZ_SECONDS:-30}
# target  corpus-dir  seconds
targets=(
  "fuzz_sif_reader sif $seconds"
  "fuzz_sif_signature sif-signature $(( (seconds + 1) / 2 ))"
  "fuzz_helper_parse helper $(( (seconds + 1) / 2 ))"
  "fuzz_ldcache ldcache $(( (seconds + 1) / 2 ))"
  "fuzz_deffile deffile $(( (seconds + 1) / 2 ))"
  "fuzz_chunk_table chunk-table $(( (seconds + 1) / 2 ))"
)
# ctr-squashfs's image code, where the fuzz build has it (libsquashfs and libfuse3 present);
# its seeds are small images made here by mksquashfs (every kind of inode, two compressors).
squashfs_fuzzer=0
if pkg-config --exists libsquashfs1 fuse3 && command -v mksquashfs >/dev/null; then
  squashfs_fuzzer=1
  targets+=("fuzz_squashfs squashfs $(( (seconds + 1) / 2 ))")
fi

if [ -n "${FUZZ_TARGETS:-}" ]; then
  chosen=()
  for t in "${targets[@]}"; do
    read -r name _ <<<"$t"
    [[ " $FUZZ_TARGETS " == *" $name "* ]] && chosen+=("$t")
  done
  [ "${#chosen[@]}" -gt 0 ] || { echo "run-fuzz.sh: no target of '$FUZZ_TARGETS' can run here" >&2; exit 2; }
  targets=("${chosen[@]}")
fi
names=()
for t in "${targets[@]}"; do read -r name _ <<<"$t"; names+=("$name"); done

# CTR_CONFIG_KEYS_INC: the helper's generated key list from another build of this tree (see
# tests/compile-each-source.sh).
step=${FUZZ_STEP:-all}
case $step in build|run|all) ;; *) echo "run-fuzz.sh: FUZZ_STEP=$step: expected build, run or all" >&2; exit 2;; esac
if [ "$step" != run ]; then
  cmake --preset fuzz -S "$src" -B "$build" -DCTR_CONFIG_KEYS_INC="${CTR_CONFIG_KEYS_INC:-}" >/dev/null
  cmake --build "$build" --target "${names[@]}" -j"${FUZZ_JOBS:-$(nproc)}"
fi
[ "$step" != build ] || exit 0
for name in "${names[@]}"; do
  [ -x "$build/bin/$name" ] || { echo "run-fuzz.sh: $build/bin/$name is not built (FUZZ_STEP=build first)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/ctr-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ "$squashfs_fuzzer" = 1 ]; then
  seeds=$work/squashfs-seeds
  mkdir -p "$seeds/tree/dir/sub" "$work/squashfs-corpus"
  printf 'small file\n' > "$seeds/tree/small"
  head -c 30000 /dev/urandom > "$seeds/tree/dir/blocks"   # blocks stored as is and a fragment tail
  seq 1 3000 > "$seeds/tree/dir/text"                     # compressed blocks and tail
  { head -c 8192 /dev/zero; printf 'after two sparse blocks'; } > "$seeds/tree/dir/sparse"
  ln -s ../small "$seeds/tree/dir/link"
  mkfifo "$seeds/tree/dir/sub/fifo"
  setfattr -n user.fuzz -v seed "$seeds/tree/small" 2>/dev/null || true
  mksquashfs "$seeds/tree" "$work/squashfs-corpus/gzip.sqfs" -quiet -no-progress -noappend -b 4096 >/dev/null
  mksquashfs "$seeds/tree" "$work/squashfs-corpus/xz.sqfs" -quiet -no-progress -noappend -comp xz -b 4096 >/dev/null
fi

# fuzz NAME CORPUS SECONDS: one target on a copy of its seed corpus; its log in $work/NAME.
fuzz() {
  local name=$1 corpus=$2 secs=$3
  mkdir -p "$work/$name/corpus" "$work/$name/artifacts"
  # ctr-squashfs's seeds: the images made above, and the committed hostile ones (issue 51,
  # L7: sizes raised so that libsquashfs would allocate 4 GiB for an inode, a value, a table).
  [ "$corpus" != squashfs ] || cp "$work/squashfs-corpus"/* "$work/$name/corpus/"
  ! compgen -G "$src/tests/fuzz/corpus/$corpus/*" >/dev/null || cp "$src/tests/fuzz/corpus/$corpus"/* "$work/$name/corpus/"
  # ctr verify's seeds: the reference's signed images (DSSE, OpenPGP, legacy), where the
  # conformance fixtures are.
  if [ "$corpus" = sif-signature ] && compgen -G "$src/../shared/fixtures/sif/images/*signed*.sif" >/dev/null; then
    cp "$src/../shared/fixtures/sif/images/"*signed*.sif "$work/$name/corpus/"
  fi
  # ctr-squashfs must not allocate by what an image claims: any allocation over 1 GiB is a
  # crash there, one ASan could not make (allocation-size-too-big) as well as one it made
  # (libFuzzer's malloc limit), so that a claim of 4 GiB or of 2^60 bytes is found alike.
  local asan=${ASAN_OPTIONS:-} limits=()
  if [ "$name" = fuzz_squashfs ]; then
    asan=${asan:+$asan:}max_allocation_size_mb=1024
    limits=(-malloc_limit_mb=1024)
  fi
  ASAN_OPTIONS=$asan "$build/bin/$name" -max_total_time="$secs" -rss_limit_mb=2048 "${limits[@]}" -max_len=65536 \
    -artifact_prefix="$work/$name/artifacts/" "$work/$name/corpus" 2>"$work/$name/log" || true
}

# FUZZ_JOBS targets at a time (default: one per CPU), each for its own time: on 2 cores the
# SIF reader runs beside the others in turn, the same runs in half the wall time.
jobs=${FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  # shellcheck disable=SC2086 # NAME CORPUS SECONDS
  fuzz $t &
done
wait

failed=0
for t in "${targets[@]}"; do
  read -r name _ _ <<<"$t"
  if compgen -G "$work/$name/artifacts/*" >/dev/null || ! grep -q "Done [0-9]* runs" "$work/$name/log"; then
    mkdir -p "$src/build/fuzz-artifacts"
    cp "$work/$name"/artifacts/* "$src/build/fuzz-artifacts/" 2>/dev/null || true
    tail -30 "$work/$name/log" >&2
    echo "$name: FAILED (inputs, if any, in $src/build/fuzz-artifacts)" >&2
    failed=1
  else
    echo "$name: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$work/$name/log"), no crash"
  fi
done
exit $failed
