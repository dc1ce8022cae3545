#!/bin/bash
# check.sh BUILD_DIR LOWER UPPER HEADER: module LOWER compiles a file that includes a header of
# its own (the control), and fails to compile one that includes UPPER's HEADER, because that
# header is not on LOWER's include path (tests/layering/CMakeLists.txt).
set -u
build=$1 lower=$2 upper=$3 header=$4

if ! out=$(cmake --build "$build" --target "layering_${lower}_own" 2>&1); then
  printf '%s\n' "$out"
  echo "FAIL: module $lower cannot compile a file that includes its own header (the control)"
  exit 1
fi
if out=$(cmake --build "$build" --target "layering_${lower}_sees_${upper}" 2>&1); then
  echo "FAIL: module $lower compiled '#include \"$header\"', a header of module $upper above it or beside it"
  exit 1
fi
if ! grep -qF "$header: No such file or directory" <<<"$out"; then
  printf '%s\n' "$out"
  echo "FAIL: module $lower did not compile '#include \"$header\"', but not because the header was out of reach"
  exit 1
fi
echo "ok: module $lower cannot include $header (module $upper)"
