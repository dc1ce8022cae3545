#!/bin/bash
# The GPU acceptance of ctr (issue 30): everything that proves --nv and the GPU workloads on
# a real NVIDIA node, in one go of a few minutes. Two steps:
#
#   bench/gpu/acceptance.sh pack BUILD_DIR CARRY_DIR     on the build machine
#   bench/gpu/acceptance.sh run CARRY_DIR OUT_DIR        on the GPU node
#
# pack installs the build into CARRY_DIR/ctr (relocatable), adds squashfuse_ll and
# mksquashfs with their libraries (RUNPATH $ORIGIN/lib: a GPU node may have neither, and no
# package registry), launch-timer, and builds
# CARRY_DIR/gpu.sif: busybox, glibc and ctr-gpu-query (static CUDA runtime) and no CUDA or
# driver library at all, so that whatever CUDA finds in it came from `ctr exec --nv`.
# About 25 MB: well under what a device machine takes along.
#
# run, as root (it runs ctr as the ordinary user CTR_ACCEPT_USER, default ctrgpu, created
# if missing) or as that user, checks each of these bare and in the container and writes
# OUT_DIR/acceptance.json, OUT_DIR/acceptance.md and ctr-bench's result and HTML report:
#   nvidia-smi        the GPU's name, memory, driver, compute capability, PCI id, UUID
#   device-query      ctr-gpu-query: CUDA's device list, driver and runtime versions
#   explain           `ctr exec --nv --explain`: what was injected and from where
#   gpus              --gpus 0 --contain: that GPU's device nodes, CUDA_VISIBLE_DEVICES
#   gpus-absent       --gpus 64: refused with one line naming the GPU
#   visible-devices   CUDA_VISIBLE_DEVICES=0 from the job reaches CUDA in the container
#   no-driver         --nv where the node has no driver (an empty CTR_HOST_ROOT): one line
#   launch            the warm launch cost of --nv (launch-timer, plain vs --nv, held images)
#   bench             ctr-bench: cuBLAS GEMM FP64/TF32/FP16/BF16 8192^3, GPU STREAM and
#                     PyTorch ResNet-50 training (bf16, synthetic), bare vs `ctr exec --nv`
#                     on the host-stack image, a verdict per figure (delta 2% for GEMM and
#                     ResNet, 3% for STREAM)
# A check that needs what the node lacks (no GPU, no nvidia-smi, no CUDA torch) is skipped
# with the reason; the run exits 1 when a check failed, else 0.
#
# Knobs (environment): CTR_ACCEPT_USER; TORCH_PYTHON (default /opt/torch/.venv/bin/python3
# where it exists, else python3); BENCH_BUDGET_S (ctr-bench's time budget, default 480: on
# an H100 GEMM and STREAM take about 150 s, ResNet-50 about 290 s); BENCH_WORKLOADS (default
# gpu-gemm,gpu-stream,gpu-resnet50: name one to rerun it alone);
# LAUNCH_BLOCKS, LAUNCH_REPS (default 10, 10); CTR_HOST_ROOT and CTR_CONFIG pass through
# (the CI test runs this on a fixture driver tree; docs/benchmark-guide.md, "GPU acceptance").
set -uo pipefail

usage() {
  echo "usage: acceptance.sh pack BUILD_DIR CARRY_DIR | run CARRY_DIR OUT_DIR" >&2
  exit 2
}
die() {
  echo "acceptance.sh: $*" >&2
  exit 1
}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# ---------------------------------------------------------------------------------------
# pack
# ---------------------------------------------------------------------------------------

pack() {
  # copy_with_libs (the carried copy of this script runs without bench/lib)
  . "$here/../lib/carry.sh"
  local build carry
  [ $# = 2 ] || usage
  build=$(cd "$1" 2>/dev/null && pwd) || die "pack: no build directory $1"
  [ -x "$build/bin/ctr" ] || die "pack: $build/bin/ctr is missing (build first: cmake --build $1)"
  [ -x "$build/bin/ctr-gpu-query" ] ||
    die "pack: $build/bin/ctr-gpu-query is missing: this build found no CUDA toolkit (CUDAToolkit_ROOT, default /usr/local/cuda)"
  command -v patchelf >/dev/null || die "pack: patchelf is not installed (apt-get install patchelf)"
  command -v squashfuse_ll >/dev/null || die "pack: squashfuse_ll is not installed (apt-get install squashfuse)"
  command -v mksquashfs >/dev/null || die "pack: mksquashfs is not installed (apt-get install squashfs-tools)"
  [ ! -e "$2" ] || [ -z "$(ls -A "$2")" ] || die "pack: $2 exists and is not empty"
  mkdir -p "$2"
  carry=$(cd "$2" && pwd)
  trap '[ $? = 0 ] || rm -rf "$carry"' EXIT
  cmake --install "$build" --prefix "$carry/ctr" >"$carry/install.log" 2>&1 ||
    { cat "$carry/install.log" >&2; die "pack: cmake --install $build failed"; }
  rm -f "$carry/install.log"
  rm -rf "$carry/ctr/share/doc"
  cp "$build/bin/launch-timer" "$here/../startup/added_ms.py" "$carry/ctr/libexec/ctr/bench/"
  # ctr finds these in its own libexec/ctr before $PATH: squashfuse_ll mounts the images,
  # mksquashfs makes ctr-bench's host-stack image (the node may have neither).
  copy_with_libs "$(command -v squashfuse_ll)" "$carry/ctr/libexec/ctr"
  # ctr-squashfs, installed there, needs libsquashfs and libfuse3.
  [ ! -x "$carry/ctr/libexec/ctr/ctr-squashfs" ] || copy_with_libs "$carry/ctr/libexec/ctr/ctr-squashfs" "$carry/ctr/libexec/ctr"
  copy_with_libs "$(command -v mksquashfs)" "$carry/ctr/libexec/ctr"
  # ctr-bench's HTML report inlines Debian's Vega; the node has no libjs-vega.
  [ -d /usr/share/javascript/vega ] || die "pack: /usr/share/javascript/vega is missing (apt-get install libjs-vega)"
  mkdir -p "$carry/ctr/share/javascript"
  cp -rL /usr/share/javascript/vega "$carry/ctr/share/javascript/"

  # The slim image: busybox (the demo's), the node-independent half of glibc, the query.
  local rootfs=$carry/rootfs lib
  sh "$here/../../images/demo/make-rootfs.sh" "$rootfs" >/dev/null
  mkdir -p "$rootfs/lib/x86_64-linux-gnu" "$rootfs/lib64" "$rootfs/usr/local/bin"
  for lib in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
    cp -L "/lib/x86_64-linux-gnu/$lib" "$rootfs/lib/x86_64-linux-gnu/"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$rootfs/lib64/"
  cp "$build/bin/ctr-gpu-query" "$rootfs/usr/local/bin/"
  "$carry/ctr/bin/ctr" build "$carry/gpu.sif" "$rootfs" >/dev/null || die "pack: ctr build of the image failed"
  rm -rf "$rootfs"
  cp "$here/acceptance.sh" "$carry/"
  {
    echo "packed $(date -u +%FT%TZ) on $(hostname) from $build"
    git -C "$here" describe --always --dirty 2>/dev/null | sed 's/^/revision /'
  } >"$carry/PACKED"
  trap - EXIT
  echo "packed $(du -sm "$carry" | cut -f1) MB into $carry"
}

# ---------------------------------------------------------------------------------------
# run: helpers
# ---------------------------------------------------------------------------------------

# check NAME STATUS DETAIL: one line of the verdicts (STATUS pass, fail or skip).
check() {
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$out/checks.tsv"
  printf '%-16s %-5s %s\n' "$1" "$2" "$3"
}

# capture NAME CMD...: runs CMD with a time limit; stdout to NAME.out, stderr to NAME.err;
# returns its status.
capture() {
  local name=$1
  shift
  timeout --kill-after=10 "${CAPTURE_TIMEOUT:-120}" "$@" >"$out/$name.out" 2>"$out/$name.err"
}

# skip_reason FILE: the "skip: ..." line a program printed for exit status 77.
skip_reason() { grep -m1 '^skip: ' "$1" | cut -c7-; }

first_line() { head -n1 "$1" | cut -c1-300; }

check_nvidia_smi() {
  local q=name,memory.total,driver_version,compute_cap,pci.bus_id,uuid
  if ! command -v nvidia-smi >/dev/null; then
    check nvidia-smi skip "nvidia-smi is not on this node's PATH ($PATH)"
    return
  fi
  if ! capture smi-bare nvidia-smi --query-gpu=$q --format=csv,noheader; then
    check nvidia-smi skip "bare nvidia-smi failed: $(first_line "$out/smi-bare.err")"
    return
  fi
  if ! capture smi-ctr "$ctr" exec --nv "$image" nvidia-smi --query-gpu=$q --format=csv,noheader; then
    check nvidia-smi fail "in the container: $(first_line "$out/smi-ctr.err")"
  elif cmp -s "$out/smi-bare.out" "$out/smi-ctr.out"; then
    check nvidia-smi pass "same both ways: $(first_line "$out/smi-bare.out")"
  else
    check nvidia-smi fail "bare '$(first_line "$out/smi-bare.out")', container '$(first_line "$out/smi-ctr.out")'"
  fi
}

check_device_query() {
  local rc=0
  capture query-bare "$query" || rc=$?
  if [ $rc = 77 ]; then
    check device-query skip "bare: $(skip_reason "$out/query-bare.err")"
    return
  elif [ $rc != 0 ]; then
    check device-query fail "bare: exit $rc: $(first_line "$out/query-bare.err")"
    return
  fi
  rc=0
  capture query-ctr "$ctr" exec --nv "$image" /usr/local/bin/ctr-gpu-query || rc=$?
  if [ $rc != 0 ]; then
    check device-query fail "in the container: exit $rc: $(first_line "$out/query-ctr.err")"
  elif cmp -s "$out/query-bare.out" "$out/query-ctr.out"; then
    check device-query pass "same both ways: $(first_line "$out/query-bare.out")"
  else
    check device-query fail "bare and container differ (query-bare.out, query-ctr.out)"
  fi
}

check_explain() {
  if ! capture explain-nv "$ctr" exec --nv --contain --explain "$image" true; then
    check explain fail "ctr exec --nv --explain: $(first_line "$out/explain-nv.err")"
    return
  fi
  local libs bins devs
  libs=$(grep -c ' /.singularity.d/libs/' "$out/explain-nv.out")
  bins=$(grep -Ec ' /usr/bin/nvidia-[a-z-]+ ' "$out/explain-nv.out")
  devs=$(grep -Ec ' /dev/nvidia' "$out/explain-nv.out")
  # A toolkit's link stub or a forward-compat libcuda must never stand in for the driver's.
  local wrong
  wrong=$(grep ' /.singularity.d/libs/' "$out/explain-nv.out" | grep -Eo '/[^ ]*/(stubs|compat)/[^ ]*' | head -n1)
  if [ -n "$wrong" ]; then
    check explain fail "--nv injects $wrong (a CUDA stub or forward-compat library, not the driver's)"
  elif [ "$libs" -gt 0 ]; then
    check explain pass "--nv --contain injects $libs driver libraries, $bins programs, $devs device nodes (explain-nv.out)"
  else
    check explain fail "--nv --explain lists no driver library (explain-nv.out)"
  fi
}

check_gpus() {
  local probe='echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"; ls /dev | grep "^nvidia[0-9]" | tr "\n" " "'
  if ! capture gpus "$ctr" exec --gpus 0 --contain "$image" sh -c "$probe"; then
    check gpus fail "--gpus 0 --contain: $(first_line "$out/gpus.err")"
  elif grep -q '^CUDA_VISIBLE_DEVICES=0$' "$out/gpus.out" && grep -q '^nvidia0 $' "$out/gpus.out"; then
    check gpus pass "--gpus 0 --contain: CUDA_VISIBLE_DEVICES=0, /dev/nvidia0 only"
  else
    check gpus fail "--gpus 0 --contain: $(tr '\n' ' ' <"$out/gpus.out")"
  fi
  local rc=0
  capture gpus-absent "$ctr" exec --gpus 64 "$image" true || rc=$?
  if [ $rc != 0 ] && [ "$(wc -l <"$out/gpus-absent.err")" = 1 ] && grep -q 'no GPU 64' "$out/gpus-absent.err"; then
    check gpus-absent pass "exit $rc: $(first_line "$out/gpus-absent.err")"
  else
    check gpus-absent fail "exit $rc: $(tr '\n' ' ' <"$out/gpus-absent.err")"
  fi
  rc=0
  capture visible "$ctr" exec --nv --env CUDA_VISIBLE_DEVICES=0 "$image" /usr/local/bin/ctr-gpu-query || rc=$?
  if [ $rc = 77 ]; then
    check visible-devices skip "$(skip_reason "$out/visible.err")"
  elif [ $rc != 0 ]; then
    check visible-devices fail "exit $rc: $(first_line "$out/visible.err")"
  elif grep -q '"cuda_visible_devices":"0".*"device_count":1,' "$out/visible.out"; then
    check visible-devices pass "CUDA_VISIBLE_DEVICES=0: CUDA sees 1 device"
  else
    check visible-devices fail "CUDA_VISIBLE_DEVICES=0: $(first_line "$out/visible.out")"
  fi
}

check_no_driver() {
  local empty=$work/no-driver rc=0
  mkdir -p "$empty"
  CTR_HOST_ROOT=$empty capture no-driver "$ctr" exec --nv "$image" true || rc=$?
  if [ $rc != 0 ] && [ "$(wc -l <"$out/no-driver.err")" = 1 ] && grep -q 'no NVIDIA driver' "$out/no-driver.err"; then
    check no-driver pass "exit $rc: $(first_line "$out/no-driver.err")"
  else
    check no-driver fail "exit $rc: $(tr '\n' ' ' <"$out/no-driver.err")"
  fi
}

# The warm launch cost of --nv: two copies of the image, each held by a running container
# (as ranks 2..N of a job find it), timed alternately by launch-timer.
check_launch() {
  local holders=() p rc=0
  cp "$image" "$work/plain.sif"
  cp "$image" "$work/nv.sif"
  "$ctr" exec "$work/plain.sif" sleep 100000 &
  holders+=($!)
  "$ctr" exec --nv "$work/nv.sif" sleep 100000 &
  holders+=($!)
  sleep 1
  capture launch "$timer" -b "$LAUNCH_BLOCKS" -r "$LAUNCH_REPS" -c 1 -j "$out/launch.json" \
    "plain=$ctr exec $work/plain.sif /bin/true" "nv=$ctr exec --nv $work/nv.sif /bin/true" || rc=$?
  for p in "${holders[@]}"; do kill "$p" 2>/dev/null; done
  wait "${holders[@]}" 2>/dev/null
  if [ $rc != 0 ]; then
    check launch fail "launch-timer: exit $rc: $(first_line "$out/launch.err")"
    return
  fi
  local plain nv added lo hi
  read -r plain nv added lo hi < <("$python" "$(dirname "$timer")/added_ms.py" "$out/launch.json" "$LAUNCH_BLOCKS" "$LAUNCH_REPS" plain nv)
  check launch pass "warm launch $plain ms plain, $nv ms with --nv: --nv adds $added ms (per-block $lo to $hi)"
}

# cuBLAS: where the node keeps libcublas.so.13 (the toolkit, else a Python venv's wheel).
cublas_dir() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib "$(dirname "$(dirname "$python")")"/lib/python3*/site-packages/nvidia/cu13/lib \
    "$(dirname "$(dirname "$python")")"/lib/python3*/site-packages/nvidia/cublas/lib; do
    [ -e "$d/libcublas.so.13" ] && { echo "$d"; return; }
  done
}

check_bench() {
  local d=$work/descriptors cublas rc=0 env_line=""
  mkdir -p "$d"
  cublas=$(cublas_dir)
  [ -z "$cublas" ] || env_line="env: {LD_LIBRARY_PATH: \"$cublas\"}"
  cat >"$d/gpu-gemm.yaml" <<EOF
name: gpu-gemm
description: cuBLAS GEMM 8192^3 in FP64, TF32, FP16 and BF16 (TFLOP/s; delta 2%)
command: ["{bindir}/ctr-wl-cugemm", "--sizes", "8192", "--precisions", "fp64,tf32,fp16,bf16"]
blocks: 10
timeout_s: 300
$env_line
EOF
  cat >"$d/gpu-stream.yaml" <<EOF
name: gpu-stream
description: GPU memory bandwidth through cudaMemcpy (10^9 B/s; delta 3%)
command: ["{bindir}/ctr-wl-custream"]
blocks: 10
timeout_s: 120
EOF
  cat >"$d/gpu-resnet50.yaml" <<EOF
name: gpu-resnet50
description: PyTorch ResNet-50 training, synthetic 224 px images, batch 128, bf16 autocast, one GPU (images/s; delta 2%)
command: ["$python", "{bindir}/ctr-wl-resnet", "--gpu", "--model", "resnet50", "--image-size", "224", "--batch", "128", "--warmup", "10", "--steps", "30"]
binds: ["$(dirname "$query")"]
blocks: 10
timeout_s: 300
EOF
  CAPTURE_TIMEOUT=$((BENCH_BUDGET_S + 90)) capture bench "$bench" run --ctr "$ctr" --ctr-args "--nv" \
    --workloads "$BENCH_WORKLOADS" --workload-file "$d/gpu-gemm.yaml" \
    --workload-file "$d/gpu-stream.yaml" --workload-file "$d/gpu-resnet50.yaml" \
    --no-cold-start --budget "$BENCH_BUDGET_S" --out "$out/ctr-bench-result.json" --workdir "$work/bench" || rc=$?
  if [ ! -s "$out/ctr-bench-result.json" ]; then
    check bench fail "ctr-bench run: exit $rc, no result: $(tail -n1 "$out/bench.err")"
    return
  fi
  capture report "$bench" report --out-dir "$out" "$out/ctr-bench-result.json" ||
    check report fail "ctr-bench report: $(first_line "$out/report.err")"
  # One check per FOM; a workload that skipped is one skip with its reason.
  "$python" - "$out/ctr-bench-result.json" <<'PY' >>"$out/bench-checks.tsv"
import json, sys
r = json.load(open(sys.argv[1]))
def g(x):
    return f"{x:.4g}" if isinstance(x, (int, float)) else "n/a"
for w in r.get("workloads", []):
    if w["status"] != "ok" or not w["foms"]:
        status = "skip" if w["status"] == "skipped" else "fail"
        print(f"bench/{w['name']}\t{status}\t{w['status']}: {w.get('reason') or ''}")
        continue
    for f in w["foms"]:
        a = f.get("analysis") or {}
        v = a.get("verdict") or "ERROR"
        status = {"PASS": "pass", "FAIL": "fail", "ERROR": "fail"}.get(v, "note")
        m, ov, ci = a.get("median") or {}, a.get("overhead"), a.get("ci")
        text = f"{v}: bare {g(m.get('A'))}, container {g(m.get('B'))} {f.get('unit', '')}"
        if isinstance(ov, (int, float)):
            text += f", overhead {ov * 100:+.1f}%"
        if isinstance(ci, list) and len(ci) == 2 and None not in ci:
            text += f" [{ci[0] * 100:+.1f}%, {ci[1] * 100:+.1f}%]"
        text += f", {a.get('n_pairs')} pairs"
        if a.get("note"):
            text += f"; {a['note']}"
        print(f"bench/{w['name']}/{f['name']}\t{status}\t{text}")
PY
  [ -s "$out/bench-checks.tsv" ] || check bench fail "ctr-bench ran no workload (exit $rc): $(tail -n1 "$out/bench.err")"
  local name status detail
  while IFS=$'\t' read -r name status detail; do check "$name" "$status" "$detail"; done <"$out/bench-checks.tsv"
}

# The result: acceptance.json (facts, every check, the bench result's path) and a Markdown
# table for the docs.
write_result() {
  "$python" - "$out" <<'PY'
import json, os, platform, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name)
    return open(p).read().strip() if os.path.exists(p) else None
def load(name):
    t = read(name)
    try:
        return json.loads(t) if t else None
    except json.JSONDecodeError:
        return None
checks = []
for line in open(os.path.join(out, "checks.tsv")):
    name, status, detail = line.rstrip("\n").split("\t", 2)
    checks.append({"name": name, "status": status, "detail": detail})
facts = load("facts.json") or {}
result = {
    "facts": facts,
    "device_query": {"bare": load("query-bare.out"), "container": load("query-ctr.out")},
    "nvidia_smi": {"bare": read("smi-bare.out"), "container": read("smi-ctr.out")},
    "checks": checks,
    "failed": [c["name"] for c in checks if c["status"] == "fail"],
    "bench_result": "ctr-bench-result.json" if os.path.exists(os.path.join(out, "ctr-bench-result.json")) else None,
    "bench_report": "ctr-bench-report.html" if os.path.exists(os.path.join(out, "ctr-bench-report.html")) else None,
}
json.dump(result, open(os.path.join(out, "acceptance.json"), "w"), indent=2)
with open(os.path.join(out, "acceptance.md"), "w") as md:
    md.write(f"GPU acceptance on {facts.get('gpu') or 'no GPU'}, {facts.get('host', '')}\n\n")
    md.write("| check | status | detail |\n|---|---|---|\n")
    for c in checks:
        md.write(f"| {c['name']} | {c['status']} | {c['detail'].replace('|', '/')} |\n")
PY
}

run_checks() {
  local carry
  carry=$(cd "$1" && pwd)
  out=$2
  work=$(mktemp -d /tmp/ctr-gpu-acceptance.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  ctr=$carry/ctr/bin/ctr
  bench=$carry/ctr/bin/ctr-bench
  timer=$carry/ctr/libexec/ctr/bench/launch-timer
  query=$carry/ctr/libexec/ctr/bench/ctr-gpu-query
  image=$carry/gpu.sif
  LAUNCH_BLOCKS=${LAUNCH_BLOCKS:-10} LAUNCH_REPS=${LAUNCH_REPS:-10} BENCH_BUDGET_S=${BENCH_BUDGET_S:-480}
  BENCH_WORKLOADS=${BENCH_WORKLOADS:-gpu-gemm,gpu-stream,gpu-resnet50}
  # The report's Vega: the packed copy unless the node has its own or the caller named one.
  if [ -z "${CTR_BENCH_VEGA_DIR:-}" ] && [ ! -d /usr/share/javascript/vega ] && [ -d "$carry/ctr/share/javascript/vega" ]; then
    export CTR_BENCH_VEGA_DIR=$carry/ctr/share/javascript/vega
  fi
  python=${TORCH_PYTHON:-}
  [ -n "$python" ] || { [ -x /opt/torch/.venv/bin/python3 ] && python=/opt/torch/.venv/bin/python3; }
  [ -n "$python" ] || python=$(command -v python3) || die "run: no python3 on this node"
  # Where NVIDIA's installers and GPU cloud images keep nvidia-smi, when PATH lacks it: ctr
  # looks for the driver's programs on PATH too.
  local d
  for d in /usr/local/nvidia/bin /opt/nvidia/bin; do
    command -v nvidia-smi >/dev/null || { [ -x "$d/nvidia-smi" ] && PATH=$PATH:$d; }
  done
  : >"$out/checks.tsv"
  cd "$work" || die "run: cannot enter $work"
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  "$python" - "$out/facts.json" "$gpu" "$("$ctr" --version 2>&1)" "$(cat "$carry/PACKED" 2>/dev/null)" "$python" <<'PY'
import json, os, platform, sys
name, gpu, ctr, packed, python = sys.argv[1:6]
osr = dict(l.rstrip().split("=", 1) for l in open("/etc/os-release") if "=" in l)
json.dump({"gpu": gpu or None, "host": f"{osr.get('PRETTY_NAME', '?').strip(chr(34))}, kernel {platform.release()}, {os.cpu_count()} CPUs",
           "user": os.getuid(), "ctr": ctr, "packed": packed, "torch_python": python,
           "ctr_host_root": os.environ.get("CTR_HOST_ROOT")}, open(name, "w"), indent=2)
PY
  echo "GPU acceptance: ${gpu:-no GPU seen by nvidia-smi}; $("$ctr" --version 2>&1 | head -n1); as uid $(id -u)"
  check_nvidia_smi
  check_device_query
  check_explain
  check_gpus
  check_no_driver
  check_launch
  check_bench
  write_result
  ! grep -q $'\tfail\t' "$out/checks.tsv"
}

run() {
  [ $# = 2 ] || usage
  [ -x "$1/ctr/bin/ctr" ] && [ -f "$1/gpu.sif" ] || die "run: $1 is not a packed carry directory (acceptance.sh pack)"
  mkdir -p "$2" || die "run: cannot create $2"
  local out_dir t0=$SECONDS rc=0
  out_dir=$(cd "$2" && pwd)
  if [ "$(id -u)" != 0 ]; then
    run_checks "$1" "$out_dir"
    return
  fi
  # As root: run everything as an ordinary user, from a copy it can read, into a staging
  # directory it owns; the files come back to OUT_DIR at the end.
  local user=${CTR_ACCEPT_USER:-ctrgpu} copy stage
  id "$user" >/dev/null 2>&1 || useradd -m "$user" || die "run: cannot create the user $user"
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  copy=$(mktemp -d /tmp/ctr-gpu-carry.XXXXXX)
  stage=$(mktemp -d /tmp/ctr-gpu-out.XXXXXX)
  cp -a "$1/." "$copy/"
  cp "$here/acceptance.sh" "$copy/acceptance.sh"
  chmod -R a+rX "$copy"
  chmod 755 "$copy"
  chown "$user" "$stage"
  runuser -u "$user" -- env PATH="$PATH" HOME="$(getent passwd "$user" | cut -d: -f6)" \
    ${CTR_HOST_ROOT:+CTR_HOST_ROOT=$CTR_HOST_ROOT} ${CTR_CONFIG:+CTR_CONFIG=$CTR_CONFIG} \
    ${TORCH_PYTHON:+TORCH_PYTHON=$TORCH_PYTHON} ${BENCH_BUDGET_S:+BENCH_BUDGET_S=$BENCH_BUDGET_S} \
    ${BENCH_WORKLOADS:+BENCH_WORKLOADS=$BENCH_WORKLOADS} ${CTR_BENCH_VEGA_DIR:+CTR_BENCH_VEGA_DIR=$CTR_BENCH_VEGA_DIR} \
    ${LAUNCH_BLOCKS:+LAUNCH_BLOCKS=$LAUNCH_BLOCKS} ${LAUNCH_REPS:+LAUNCH_REPS=$LAUNCH_REPS} \
    bash "$copy/acceptance.sh" run "$copy" "$stage" || rc=$?
  cp -r "$stage/." "$out_dir/"
  # Every step's output in one file too, for callers that bring back only a few files.
  tar -czf "$out_dir/acceptance-steps.tar.gz" -C "$stage" . 2>/dev/null || true
  rm -rf "$copy" "$stage"
  echo "acceptance: $((SECONDS - t0)) s; results in $out_dir (acceptance.json, acceptance.md, ctr-bench-report.html)"
  return $rc
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
