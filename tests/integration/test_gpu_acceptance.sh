#!/bin/bash
# Issue 30: the GPU acceptance script (bench/gpu/acceptance.sh) keeps working between the
# rare runs on a GPU node. Packed from this build, then run as root (it runs ctr as the
# test user) on a fixture driver tree under CTR_HOST_ROOT: real shared libraries of this
# machine listed as the driver's in their own nvliblist, an ld.so cache of them made by
# ldconfig, /proc/driver/nvidia/version, /dev/nvidia0 and nvidiactl. What needs a GPU
# (nvidia-smi, the CUDA device query, the GEMM, STREAM and ResNet-50 figures) must skip
# with its reason; what does not (explain, --gpus, the no-driver error, the --nv launch
# cost, ctr-bench's result and HTML report, acceptance.json) must pass.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_test_user
require_fuse
CTR_BUILD_DIR=${CTR_BUILD_DIR:?CTR_BUILD_DIR must name the build tree (ctest sets it)}
[ -x "$CTR_BUILD_DIR/bin/ctr-gpu-query" ] || skip "ctr-gpu-query was not built (no CUDA toolkit at configure time)"
command -v patchelf >/dev/null || skip "patchelf is not installed (tests/install-deps.sh installs it)"
uid=$(id -u "$CTR_TEST_USER")
trap 'pkill -KILL -U "$uid" || true; [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
script=$CTR_SOURCE_DIR/bench/gpu/acceptance.sh

note "bad input: one line, exit status 2 or 1"
rc=0; out=$("$script" 2>&1) || rc=$?
expect_eq "no arguments: status" 2 "$rc"
expect_contains "no arguments" "usage: acceptance.sh pack BUILD_DIR CARRY_DIR | run CARRY_DIR OUT_DIR" "$out"
rc=0; out=$("$script" run "$WORK/nothing" "$WORK/out0" 2>&1) || rc=$?
expect_eq "run without a carry directory: status" 1 "$rc"
expect_contains "run without a carry directory" "is not a packed carry directory" "$out"

note "pack: the install tree, squashfuse_ll with its libraries, the slim image"
"$script" pack "$CTR_BUILD_DIR" "$WORK/carry" >"$WORK/pack.log" 2>&1 || { cat "$WORK/pack.log"; fail "pack failed"; }
carry=$WORK/carry
for f in ctr/bin/ctr ctr/bin/ctr-bench ctr/libexec/ctr/squashfuse_ll ctr/libexec/ctr/mksquashfs ctr/libexec/ctr/bench/launch-timer \
  ctr/libexec/ctr/bench/ctr-gpu-query ctr/libexec/ctr/bench/ctr-wl-cugemm gpu.sif PACKED; do
  [ -e "$carry/$f" ] || fail "pack: $f is missing"
done
expect_eq "squashfuse_ll's RUNPATH" '$ORIGIN/lib' "$(patchelf --print-rpath "$carry/ctr/libexec/ctr/squashfuse_ll")"
expect_contains "the packed squashfuse_ll starts" "squashfuse 0." "$(env -i "$carry/ctr/libexec/ctr/squashfuse_ll" -V 2>&1 || true)"
expect_contains "the packed squashfuse_ll loads its own libfuse3" "$carry/ctr/libexec/ctr/lib/libfuse3.so.3" "$(ldd "$carry/ctr/libexec/ctr/squashfuse_ll")"
expect_contains "the packed mksquashfs loads its own liblzo2" "$carry/ctr/libexec/ctr/lib/liblzo2.so.2" "$(ldd "$carry/ctr/libexec/ctr/mksquashfs")"
size=$(du -sm "$carry" | cut -f1)
[ "$size" -le 64 ] || fail "the carry directory is $size MB, over what a device machine takes (64 MiB)"
rc=0; out=$("$script" pack "$CTR_BUILD_DIR" "$carry" 2>&1) || rc=$?
expect_eq "pack into a full directory: status" 1 "$rc"
expect_contains "pack into a full directory" "exists and is not empty" "$out"
# The image holds no CUDA or driver library: what CUDA finds in it came from --nv.
"$carry/ctr/bin/ctr" exec "$carry/gpu.sif" sh -c 'ls /lib/x86_64-linux-gnu /usr/local/bin' >"$WORK/ls" 2>&1 ||
  fail "the packed image does not run: $(cat "$WORK/ls")"
grep -q ctr-gpu-query "$WORK/ls" || fail "the image lacks ctr-gpu-query: $(cat "$WORK/ls")"
! grep -qiE 'libcuda|libnvidia|libcudart' "$WORK/ls" || fail "the image holds a CUDA library: $(cat "$WORK/ls")"

note "run on a fixture driver tree, as root through the test user"
node=$WORK/node
make_nvidia_fixture "$node" "$WORK/list/nvliblist.conf" 580.159.04 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libz.so.1
printf 'image linger = 0\ncdi spec dirs = %s/no-cdi\nnvidia library list = %s/list/nvliblist.conf\n' "$WORK" "$WORK" > "$WORK/ctr.conf"
chmod -R a+rX "$WORK"
rc=0
env CTR_ACCEPT_USER="$CTR_TEST_USER" CTR_HOST_ROOT="$node" CTR_CONFIG="$WORK/ctr.conf" TORCH_PYTHON=/usr/bin/python3 \
  LAUNCH_BLOCKS=3 LAUNCH_REPS=3 BENCH_BUDGET_S=60 PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  "$script" run "$carry" "$WORK/out" >"$WORK/run.log" 2>&1 || rc=$?
cat "$WORK/run.log"
expect_eq "run: status (no check failed)" 0 "$rc"
out=$WORK/out
for f in acceptance.json acceptance.md acceptance-steps.tar.gz explain-nv.out ctr-bench-result.json ctr-bench-report.html launch.json; do
  [ -s "$out/$f" ] || fail "run: $f is missing from the output"
done
status_of() { python3 -c 'import json,sys; print({c["name"]: c["status"] for c in json.load(open(sys.argv[1]))["checks"]}.get(sys.argv[2], "absent"))' "$out/acceptance.json" "$1"; }
for c in explain gpus gpus-absent no-driver launch; do expect_eq "check $c" pass "$(status_of "$c")"; done
for c in nvidia-smi device-query bench/gpu-gemm bench/gpu-stream bench/gpu-resnet50; do
  expect_eq "check $c (needs a GPU)" skip "$(status_of "$c")"
done
expect_contains "device-query: the reason" "no usable CUDA device" "$(grep '^device-query' "$WORK/run.log")"
expect_contains "explain: the fixture's libraries, from the ld.so cache" "ld.so cache libopenblas.so.0" "$(cat "$out/explain-nv.out")"
expect_contains "no-driver: the line a user sees" "--nv: no NVIDIA driver on this host" "$(grep '^no-driver' "$WORK/run.log")"
expect_contains "launch: the --nv cost" "--nv adds" "$(grep '^launch' "$WORK/run.log")"
python3 - "$out/acceptance.json" <<'PY' || fail "acceptance.json: $(head -c 2000 "$out/acceptance.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["failed"] == [], r["failed"]
assert r["facts"]["ctr_host_root"], r["facts"]
assert r["bench_report"] == "ctr-bench-report.html"
assert all(c["detail"] for c in r["checks"]), "a check without its detail"
PY
[ -z "$(ls -d /tmp/ctr-gpu-carry.* /tmp/ctr-gpu-out.* 2>/dev/null)" ] || fail "run left its copies in /tmp: $(ls -d /tmp/ctr-gpu-*)"
assert_nothing_left "gpu acceptance"
echo "PASS: $TEST_NAME"
