#!/bin/sh
# Runs every workload once in --quick mode, bare, and checks the output contract: exit 0
# with one JSON line {"workload":..., "foms":[...], "info":{...}} on stdout, or exit 77
# with "skip: <reason>" on stderr. Exits 1 when any program breaks the contract.
#   selftest.sh BUILD_DIR     (the programs are in BUILD_DIR/bench/workloads)
#   selftest.sh PROGRAM_DIR   (an installed PREFIX/libexec/ctr/bench)
# MPI programs run under mpirun -np 2; as root the OMPI_ALLOW_RUN_AS_ROOT pair is set.
set -u

[ $# -eq 1 ] || { echo "usage: selftest.sh BUILD_DIR|PROGRAM_DIR" >&2; exit 2; }
if [ -d "$1/bench/workloads" ]; then wl=$(cd "$1/bench/workloads" && pwd)
elif [ -x "$1/smallfiles-squashfs.sh" ]; then wl=$(cd "$1" && pwd)
else echo "selftest: neither $1/bench/workloads nor workload programs in $1" >&2; exit 2
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ctr-wl-selftest.XXXXXX")
trap '"$wl/smallfiles-squashfs.sh" down "$scratch/sq" >/dev/null 2>&1; rm -rf "$scratch"' EXIT INT TERM
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_base_warn_component_unused=0
failures=0

# check_json FILE: the last line starting {"workload": must satisfy the contract.
check_json() {
  python3 - "$1" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('{"workload":')]
assert len(lines) == 1, f"{len(lines)} JSON lines on stdout"
d = json.loads(lines[0])
assert isinstance(d["workload"], str) and isinstance(d["info"], dict), "workload/info"
assert d["foms"], "no FOMs"
for f in d["foms"]:
    assert set(f) == {"name", "value", "unit", "direction", "delta"}, f"FOM keys {sorted(f)}"
    assert isinstance(f["value"], (int, float)) and f["value"] > 0, f"{f['name']} = {f['value']}"
    assert f["direction"] in ("higher", "lower"), f["direction"]
    assert 0 < f["delta"] < 1, f["delta"]
names = [f["name"] for f in d["foms"]]
assert len(set(names)) == len(names), "duplicate FOM names"
print("  " + ", ".join(f"{f['name']}={f['value']:.4g}" for f in d["foms"]))
PY
}

# run NAME COMMAND...: runs it with a time limit and judges its exit code and output.
run() {
  name=$1
  shift
  start=$(date +%s.%N)
  timeout 120 "$@" >"$scratch/out" 2>"$scratch/err"
  rc=$?
  secs=$(awk "BEGIN { print $(date +%s.%N) - $start }")
  case $rc in
    0)
      if check_json "$scratch/out" >"$scratch/check" 2>&1; then
        printf 'ok    %-22s %5.1fs\n' "$name" "$secs"
        cat "$scratch/check"
      else
        printf 'FAIL  %-22s bad output: %s\n' "$name" "$(tail -1 "$scratch/check")"
        head -c 2000 "$scratch/out"
        failures=$((failures + 1))
      fi ;;
    77)
      if grep -q '^skip: ' "$scratch/err"; then
        printf 'skip  %-22s %s\n' "$name" "$(grep '^skip: ' "$scratch/err" | head -1 | cut -c7-)"
      else
        printf 'FAIL  %-22s exit 77 without a "skip:" line\n' "$name"
        failures=$((failures + 1))
      fi ;;
    *)
      printf 'FAIL  %-22s exit %d\n' "$name" "$rc"
      tail -5 "$scratch/err"
      failures=$((failures + 1)) ;;
  esac
}

# built NAME: present in the build tree (CMake drops a program whose dependency is absent).
built() {
  [ -x "$wl/$1" ] && return 0
  printf 'skip  %-22s not built (its dependency was not found at configure time)\n' "$1"
  return 1
}

t0=$(date +%s)
for p in ctr-wl-gemm ctr-wl-stream ctr-wl-osu ctr-wl-fio ctr-wl-smallfiles ctr-wl-resnet ctr-wl-dlio ctr-wl-cugemm ctr-wl-custream; do
  if [ -x "$wl/$p" ] && ! "$wl/$p" --help >/dev/null 2>&1; then
    # MPI programs need MPI_Init to print help; a singleton start is enough.
    printf 'FAIL  %-22s --help\n' "$p"
    failures=$((failures + 1))
  fi
done

built ctr-wl-gemm && run gemm "$wl/ctr-wl-gemm" --quick
built ctr-wl-stream && OMP_PROC_BIND=spread OMP_PLACES=cores run stream "$wl/ctr-wl-stream" --quick
if built ctr-wl-osu; then
  if command -v mpirun >/dev/null; then
    run osu-np2 mpirun -np 2 "$wl/ctr-wl-osu" --quick
  else
    printf 'skip  %-22s no mpirun\n' osu-np2
  fi
fi
built ctr-wl-fio && run fio "$wl/ctr-wl-fio" --quick --dir "$scratch"
built ctr-wl-smallfiles && run smallfiles-dir "$wl/ctr-wl-smallfiles" --quick --dir "$scratch"
if built ctr-wl-smallfiles; then
  "$wl/smallfiles-squashfs.sh" up "$scratch/sq" --quick >"$scratch/sq.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    run smallfiles-squashfs "$wl/ctr-wl-smallfiles" --read "$scratch/sq/mnt" --epochs 1
    "$wl/smallfiles-squashfs.sh" down "$scratch/sq" || { echo "FAIL  smallfiles-squashfs.sh down"; failures=$((failures + 1)); }
  elif [ $rc = 77 ]; then
    printf 'skip  %-22s %s\n' smallfiles-squashfs "$(grep '^skip: ' "$scratch/sq.log" | cut -c7-)"
  else
    printf 'FAIL  %-22s smallfiles-squashfs.sh up: %s\n' smallfiles-squashfs "$(tail -1 "$scratch/sq.log")"
    failures=$((failures + 1))
  fi
fi
# One thread per process: on a shared 2-core machine, spinning OpenMP threads of two
# processes make a step 30x slower.
if built ctr-wl-resnet; then
  OMP_NUM_THREADS=1 run resnet "$wl/ctr-wl-resnet" --quick
  if command -v mpirun >/dev/null; then
    run resnet-np2 mpirun -np 2 -x OMP_NUM_THREADS=1 -x MASTER_PORT="${MASTER_PORT:-29517}" "$wl/ctr-wl-resnet" --quick
  fi
fi
# dl-io: the DataLoader over a tree the smallfiles generator made; one changed byte must fail it.
if built ctr-wl-dlio && built ctr-wl-smallfiles; then
  "$wl/ctr-wl-smallfiles" --prepare "$scratch/tree" --count 2000 --size 16384 2>/dev/null
  run dl-io "$wl/ctr-wl-dlio" --quick --data "$scratch/tree"
  if [ "$rc" = 0 ]; then
    printf 'X' | dd of="$scratch/tree/0001/0001234.bin" bs=1 seek=9000 conv=notrunc 2>/dev/null
    "$wl/ctr-wl-dlio" --quick --data "$scratch/tree" >/dev/null 2>"$scratch/err"
    rc=$?
    if [ $rc != 1 ] || ! grep -q 'content other than' "$scratch/err"; then
      echo "FAIL  dl-io with a changed file exited $rc: $(tail -1 "$scratch/err")"
      failures=$((failures + 1))
    fi
  fi
fi
built ctr-wl-cugemm && run cugemm "$wl/ctr-wl-cugemm" --quick
built ctr-wl-custream && run custream "$wl/ctr-wl-custream" --quick

# A real failure must not look like a skip.
if built ctr-wl-gemm; then
  "$wl/ctr-wl-gemm" --sizes nonsense >/dev/null 2>&1
  rc=$?
  if [ $rc = 0 ] || [ $rc = 77 ]; then
    echo "FAIL  gemm --sizes nonsense exited $rc"
    failures=$((failures + 1))
  fi
fi

echo "selftest: $failures failure(s) in $(($(date +%s) - t0)) s"
[ $failures = 0 ]
