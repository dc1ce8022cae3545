#!/bin/bash
# README command 2 (and CI, via .ci/run): the whole test suite. Installs what is missing,
# builds with warnings as errors, runs unit, conformance and integration tests, compiles
# every source on its own as a plain (non-unity) build does (tests/compile-each-source.sh),
# then the fuzzers (FUZZ_SECONDS, default 30, for the SIF reader; half that for the others)
# under ASan+UBSan.
#
# The tests run one at a time, which leaves a core idle most of the time: the two checking
# builds (every source on its own, the fuzzers' ASan build) run beside them at idle CPU
# priority (SCHED_IDLE: they get only what the tests leave), which takes about five minutes
# off CI's half hour on two cores. Their output is printed when they are waited for.
#
# Every stage runs and reports its result even when an earlier one failed (a stage that
# needs an earlier one's output says so); the exit status is non-zero if any stage failed.
# Tests that skip print the reason; the summary lists every skipped test with it.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
jobs=$(nproc)
start=$(date +%s)
results=()
failed=0

# record NAME RC SECONDS [NOTE]: "NAME: passed|FAILED (exit N) in S s[ NOTE]".
record() {
  if [ "$2" = 0 ]; then
    results+=("$1: passed in $3 s${4:+ $4}")
  else
    results+=("$1: FAILED (exit $2) in $3 s${4:+ $4}")
    failed=1
  fi
}

# stage NAME CMD...: runs CMD and records its result.
stage() {
  local name=$1; shift
  local t0=$(date +%s) rc=0
  echo "== $name"
  "$@" || rc=$?
  record "$name" "$rc" $(( $(date +%s) - t0 ))
  return "$rc"
}
not_run() { results+=("$1: NOT RUN ($2)"); failed=1; }

# Stages beside the others, at idle CPU (and I/O) priority.
idle() {
  local prio=(nice -n 19)
  if chrt --idle 0 true 2>/dev/null; then prio=(chrt --idle 0); fi
  if ionice -c 3 true 2>/dev/null; then prio+=(ionice -c 3); fi
  "${prio[@]}" "$@"
}
# Each in a process group of its own (job control on while it starts), so that an
# interrupted run stops them with their compilers.
stop_beside() {
  local i
  for i in "${!beside_pids[@]}"; do
    [ -n "${beside_pids[$i]}" ] || continue
    kill -TERM -- "-${beside_pids[$i]}" 2>/dev/null
    rm -f "${beside_logs[$i]}" "${beside_logs[$i]}.end"
  done
  return 0
}
trap stop_beside EXIT
beside_names=() beside_pids=() beside_logs=() beside_t0=()
# beside NAME CMD...: starts CMD in the background (idle priority, output to a log); its
# result is recorded by wait_beside.
beside() {
  local name=$1; shift
  local log
  log=$(mktemp /tmp/ctr-run-all.XXXXXX)
  set -m
  { idle "$@"; local rc=$?; date +%s >"$log.end"; exit "$rc"; } >"$log" 2>&1 &
  set +m
  beside_names+=("$name") beside_pids+=("$!") beside_logs+=("$log") beside_t0+=("$(date +%s)")
}
# wait_beside NAME: waits for that stage, prints its output, records its result (the time is
# its own, from its start: it overlapped the stages run meanwhile).
wait_beside() {
  local i rc=0
  for i in "${!beside_names[@]}"; do
    [ "${beside_names[$i]}" = "$1" ] || continue
    wait "${beside_pids[$i]}" || rc=$?
    beside_pids[i]=""
    local log=${beside_logs[$i]} end
    end=$(cat "$log.end" 2>/dev/null || date +%s)
    echo "== $1 (beside the tests)"
    cat "$log"
    rm -f "$log" "$log.end"
    record "$1" "$rc" $(( end - beside_t0[i] )) "(beside the tests, at idle priority)"
    return "$rc"
  done
}

# The ci tree runs the suite; the deb tree (installed under /usr) is what test_deb_package
# packs with cpack and installs. The two differ only in the install paths (one generated
# source, src/common/configured.cpp.in) once the deb tree has -Werror too, so a compiler
# cache in build/ccache serves the deb tree's other objects from the ci tree's: about four
# minutes less on two cores. Paths are hashed relative to the checkout (CCACHE_BASEDIR).
build() {
  local cache=()
  if command -v ccache >/dev/null; then
    export CCACHE_DIR=$src/build/ccache CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1 \
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
    cache=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake --preset ci "${cache[@]}" >/dev/null && cmake --build --preset ci -j"$jobs" &&
    cmake --preset deb -DCTR_WERROR=ON "${cache[@]}" >/dev/null && cmake --build --preset deb -j"$jobs"
}

# Skipped tests and their reasons, from ctest's log: integration scripts print
# "SKIP: name: reason", unit tests "SKIP: Suite.Test: reason" (tests/unit/platform_probes.hpp).
print_skips() {
  local log=build/ci/Testing/Temporary/LastTest.log
  [ -f "$log" ] || return 0
  local skips
  skips=$(grep -E '^SKIP: ' "$log" | sort -u)
  if [ -n "$skips" ]; then
    echo "== skipped tests and why"
    echo "$skips"
  fi
}

# The ten slowest tests, from ctest's JUnit file: the suite must stay within CI's 30 minutes
# on two cores, and this says where its time goes.
junit=$src/build/ci/Testing/ctest-junit.xml
print_slowest() {
  [ -f "$junit" ] || return 0
  echo "== slowest tests"
  python3 - "$junit" <<'PY' || true
import sys, xml.etree.ElementTree as ET
cases = [(float(c.get("time", 0)), c.get("name")) for c in ET.parse(sys.argv[1]).getroot().iter("testcase")]
total = sum(t for t, _ in cases)
for t, name in sorted(cases, reverse=True)[:10]:
    print(f"  {t:6.0f} s  {name}")
print(f"  ({len(cases)} tests, {total:.0f} s in all)")
PY
}

each="every source compiled on its own (the plain build's configuration, -fsyntax-only)"
fuzz="fuzzers (${FUZZ_SECONDS:-30} s for the SIF reader, half for the others; ASan+UBSan)"
if stage "install dependencies" tests/install-deps.sh; then
  if stage "build (presets ci: Release, -Werror; deb: the Debian packages)" build; then
    # The helper's generated ctr.conf key list, written by the ci build: the checking builds
    # take it rather than building ctr's config library again to write it.
    keys=$src/build/ci/src/helper/generated/ctr_config_keys.inc
    if [ -f "$keys" ]; then export CTR_CONFIG_KEYS_INC=$keys; fi
    # A packager's plain build (no preset, no unity sources) compiles every file on its own.
    beside "$each" tests/compile-each-source.sh "$src/build/each"
    [ "${SKIP_FUZZ:-0}" = 1 ] || FUZZ_STEP=build beside "fuzzers' build" bash tests/fuzz/run-fuzz.sh
    stage "unit, conformance and integration tests" ctest --preset ci -j1 --timeout 900 --output-junit "$junit"
    print_skips
    print_slowest
    wait_beside "$each"
    if [ "${SKIP_FUZZ:-0}" = 1 ]; then
      results+=("fuzzers: skipped (SKIP_FUZZ=1)")
    elif wait_beside "fuzzers' build"; then
      FUZZ_STEP=run stage "$fuzz" bash tests/fuzz/run-fuzz.sh
    else
      not_run "$fuzz" "their build failed"
    fi
  else
    not_run "unit, conformance and integration tests" "the build failed"
    # These two build on their own: they still say whether the sources compile there.
    stage "$each" tests/compile-each-source.sh "$src/build/each"
    if [ "${SKIP_FUZZ:-0}" != 1 ]; then stage "$fuzz" bash tests/fuzz/run-fuzz.sh; fi
  fi
else
  not_run "build" "dependencies missing"
  not_run "tests" "dependencies missing"
  not_run "fuzzers" "dependencies missing"
fi

echo "== summary ($(( $(date +%s) - start )) s)"
printf '  %s\n' "${results[@]}"
if [ "$failed" = 0 ]; then
  echo "== all stages passed"
else
  echo "== some stages FAILED"
fi
exit "$failed"
