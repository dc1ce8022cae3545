#!/bin/bash
# Issue 8: --nv and --device as the unprivileged test user. This node has no NVIDIA driver,
# so --nv fails with a clear line (or warns, by policy); a CDI specification written here,
# which binds real host nodes (/dev/zero, /dev/null) as the vendor's device nodes and a
# real file as a driver library, drives the CDI path end to end: device nodes, NVIDIA_VISIBLE_DEVICES
# selection with --contain, mounts at paths the image lacks, the spec's environment, the
# update-ldcache hook as LD_LIBRARY_PATH, and the hooks ctr does not run named by --explain.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_test_user
require_fuse
uid=$(id -u "$CTR_TEST_USER")
trap 'pkill -KILL -U "$uid" || true; rm -rf "$WORK"' EXIT

make_demo_rootfs "$WORK/demo"
"$CTR_BIN" build "$WORK/demo.sif" "$WORK/demo" >/dev/null
mkdir -p "$WORK/cdi" "$WORK/vendor"
echo "vendor library" > "$WORK/vendor/libvendor.so.1"
cat > "$WORK/cdi/nvidia.yaml" <<SPEC
cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - {path: /dev/nvidia0, hostPath: /dev/zero}
- name: "1"
  containerEdits:
    deviceNodes:
    - {path: /dev/nvidia1, hostPath: /dev/null}
containerEdits:
  env: [VENDOR_SPEC=nvidia-test]
  deviceNodes:
  - {path: /dev/nvidiactl, hostPath: /dev/full}
  mounts:
  - {hostPath: $WORK/vendor/libvendor.so.1, containerPath: /opt/vendor/lib/libvendor.so.1, options: [ro, nosuid, nodev, bind]}
  hooks:
  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, update-ldcache, --folder, /opt/vendor/lib]}
  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook, args: [nvidia-cdi-hook, create-symlinks, --link, libvendor.so.1::/opt/vendor/lib/libvendor.so]}
SPEC
cat > "$WORK/cdi/fpga.json" <<'SPEC'
{"cdiVersion": "0.5.0", "kind": "vendor.example/fpga",
 "devices": [{"name": "card0", "containerEdits": {"deviceNodes": [{"path": "/dev/fpga0", "hostPath": "/dev/zero"}]}}]}
SPEC
chmod -R a+rX "$WORK"
conf() { printf 'image linger = 0\n%s\n' "$@" > "$WORK/ctr.conf"; chmod 644 "$WORK/ctr.conf"; CTR_TEST_CONFIG=$WORK/ctr.conf; }

note "--nv on a node without the driver: one clear line, exit 255"
conf "cdi spec dirs = $WORK/no-such-dir"
rc=0; out=$(as_user "$CTR_BIN" exec --nv "$WORK/demo.sif" true 2>&1) || rc=$?
expect_eq "--nv without driver: status" 255 "$rc"
expect_contains "--nv without driver" "--nv: no NVIDIA driver on this host (/proc/driver/nvidia/version is missing" "$out"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "--nv without driver: more than one line: $out"

note "... and with 'missing gpu driver = warn' the container runs, with a warning"
conf "cdi spec dirs = $WORK/no-such-dir" "missing gpu driver = warn"
out=$(as_user "$CTR_BIN" exec --nv "$WORK/demo.sif" echo ran 2>&1) || fail "--nv with warn policy failed: $out"
expect_contains "--nv warn: ran" "ran" "$out"
expect_contains "--nv warn: warning" "running without the GPU ('missing gpu driver = warn')" "$out"
out=$(as_user env APPTAINER_NV=1 "$CTR_BIN" exec "$WORK/demo.sif" true 2>&1)
expect_contains "APPTAINER_NV=1 means --nv" "running without the GPU" "$out"

note "--nv through a CDI spec for nvidia.com/gpu, --contain: only the selected GPUs"
conf "cdi spec dirs = $WORK/cdi"
probe='for n in /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl; do [ -e $n ] && echo "has $n"; done
       head -c 4 /dev/nvidia0 | od -An -tx1; cat /opt/vendor/lib/libvendor.so.1
       echo "LD=$LD_LIBRARY_PATH SPEC=$VENDOR_SPEC"'
out=$(as_user "$CTR_BIN" exec --nv --contain "$WORK/demo.sif" sh -c "$probe" 2>&1) || fail "--nv via CDI failed: $out"
for want in "has /dev/nvidia0" "has /dev/nvidia1" "has /dev/nvidiactl" "00 00 00 00" "vendor library" \
            "LD=/opt/vendor/lib SPEC=nvidia-test"; do
  expect_contains "--nv via CDI" "$want" "$out"
done
out=$(as_user env NVIDIA_VISIBLE_DEVICES=1 "$CTR_BIN" exec --nv --contain "$WORK/demo.sif" sh -c "$probe" 2>&1) || true
expect_contains "NVIDIA_VISIBLE_DEVICES=1" "has /dev/nvidia1" "$out"
case "$out" in *"has /dev/nvidia0"*) fail "NVIDIA_VISIBLE_DEVICES=1 still has /dev/nvidia0: $out";; esac

note "--gpus 1 --contain: that GPU only, numbered in PCI order; a GPU the node lacks is refused"
out=$(as_user "$CTR_BIN" exec --gpus 1 --contain "$WORK/demo.sif" sh -c "$probe; echo CUDA=\$CUDA_VISIBLE_DEVICES/\$CUDA_DEVICE_ORDER" 2>&1) || fail "--gpus 1: $out"
expect_contains "--gpus 1" "has /dev/nvidia1" "$out"
expect_contains "--gpus 1: CUDA" "CUDA=1/PCI_BUS_ID" "$out"
case "$out" in *"has /dev/nvidia0"*) fail "--gpus 1 still has /dev/nvidia0: $out";; esac
rc=0; out=$(as_user "$CTR_BIN" exec --gpus 0,5 "$WORK/demo.sif" true 2>&1) || rc=$?
expect_eq "--gpus 0,5" "ctr: error: --gpus 0,5: this node has no GPU 5 (it has 2: 0-1)" "$out"

note "--explain says where the devices come from and which hooks ctr left out"
out=$(as_user "$CTR_BIN" exec --nv --contain --explain "$WORK/demo.sif" true)
expect_contains "explain: source" "devices:    CDI, nvidia.com/gpu=0, nvidia.com/gpu=1" "$out"
expect_contains "explain: spec" "CDI spec: $WORK/cdi/nvidia.yaml" "$out"
expect_contains "explain: skipped hook" "left out: CDI hook skipped (createContainer: /usr/bin/nvidia-cdi-hook create-symlinks" "$out"
expect_contains "explain: host mount" "/opt/vendor/lib/libvendor.so.1 (ro) [host] from CDI $WORK/cdi/nvidia.yaml (for every nvidia.com/gpu device)" "$out"
expect_contains "explain: device line" "/dev/nvidia1 (rw) [host] from CDI $WORK/cdi/nvidia.yaml:8 device 1" "$out"

note "--device takes any CDI kind (JSON spec); unknown names are one-line errors"
out=$(as_user "$CTR_BIN" exec --contain --device vendor.example/fpga=card0 "$WORK/demo.sif" sh -c 'head -c 2 /dev/fpga0 | od -An -tx1')
expect_contains "--device fpga" "00 00" "$out"
note "... a node the spec puts elsewhere than its host path needs a private /dev (never written into the host's)"
rc=0; out=$(as_user "$CTR_BIN" exec --device vendor.example/fpga=card0 "$WORK/demo.sif" true 2>&1) || rc=$?
expect_eq "remapped node without --contain" "ctr: error: the CDI device node /dev/fpga0 (host /dev/zero) needs a private /dev: add --contain" "$out"
[ ! -e /dev/fpga0 ] || fail "a node was created in the host's /dev"
rc=0; out=$(as_user "$CTR_BIN" exec --device vendor.example/fpga=card9 "$WORK/demo.sif" true 2>&1) || rc=$?
expect_eq "--device unknown: status" 255 "$rc"
expect_eq "--device unknown" "ctr: error: --device vendor.example/fpga=card9: no device 'card9' of kind vendor.example/fpga (there are: card0)" "$out"
rc=0; out=$(as_user "$CTR_BIN" exec --device amd.com/gpu=0 "$WORK/demo.sif" true 2>&1) || rc=$?
expect_contains "--device unknown kind" "no CDI specification for 'amd.com/gpu' in $WORK/cdi" "$out"

note "a broken spec beside the good ones is skipped with a warning"
echo 'cdiVersion: [' > "$WORK/cdi/broken.yaml"; chmod 644 "$WORK/cdi/broken.yaml"
out=$(as_user "$CTR_BIN" exec --contain --device vendor.example/fpga=card0 "$WORK/demo.sif" echo ok 2>&1)
expect_contains "broken spec: still runs" "ok" "$out"
expect_contains "broken spec: warning" "CDI spec skipped: $WORK/cdi/broken.yaml: not valid YAML" "$out"
note "--nv without CDI, on a fixture node (CTR_HOST_ROOT): the driver's glibc needs against the image's glibc"
node=$WORK/node
make_nvidia_fixture "$node" "$WORK/list/nvliblist.conf" 535.104.05 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0
# An image whose glibc is 2.17: a libc.so.6 that defines the GLIBC_2.17 version node, as
# CentOS 7's does (made here with a linker version script; only its version table matters).
mkdir -p "$WORK/old/lib64"; cp -a "$WORK/demo/." "$WORK/old/"
printf 'GLIBC_2.2.5 { global: ctr_old_a; local: *; };\nGLIBC_2.17 { global: ctr_old_b; } GLIBC_2.2.5;\n' > "$WORK/v.map"
printf 'int ctr_old_a(void) { return 1; }\nint ctr_old_b(void) { return 2; }\n' > "$WORK/v.c"
cc -shared -fPIC -nostdlib -Wl,-soname,libc.so.6 -Wl,--version-script="$WORK/v.map" -o "$WORK/old/lib64/libc.so.6" "$WORK/v.c"
mkdir -p "$WORK/new/lib64"; cp -a "$WORK/demo/." "$WORK/new/"; cp /lib/x86_64-linux-gnu/libc.so.6 "$WORK/new/lib64/libc.so.6"
chmod -R a+rX "$WORK"
conf "cdi spec dirs = $WORK/no-cdi" "nvidia library list = $WORK/list/nvliblist.conf"
needs=$(as_user env CTR_HOST_ROOT="$node" "$CTR_BIN" exec --nv --explain "$WORK/old" true | grep 'NVIDIA driver 535.104.05')
expect_contains "explain: glibc needs" "needs glibc >= 2." "$needs"
rc=0; out=$(as_user env CTR_HOST_ROOT="$node" "$CTR_BIN" exec --nv "$WORK/old" true 2>&1) || rc=$?
expect_eq "old glibc: status" 255 "$rc"
expect_contains "old glibc" "ctr: error: the host's NVIDIA driver 535.104.05 needs glibc 2." "$out"
expect_contains "old glibc: the image's" "but the image has glibc 2.17 (/lib64/libc.so.6)" "$out"
out=$(as_user env CTR_HOST_ROOT="$node" "$CTR_BIN" exec --nv "$WORK/new" sh -c 'ls /.singularity.d/libs') || fail "new glibc: $out"
expect_contains "new glibc: libraries injected" "libopenblas.so.0" "$out"
assert_nothing_left "devices"
echo "PASS: $TEST_NAME"
