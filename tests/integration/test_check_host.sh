#!/bin/bash
# Issue 8, item 5: `ctr check --host [--json]` as the unprivileged test user: the inventory
# agrees with the kernel's own figures (/proc/meminfo, nproc), the hwloc topology comes from
# ctr-topology, the Open MPI of this machine is found in the ld.so cache with its ABI, and
# the text form says the same. ctr itself must not load libhwloc (it is on every launch's path).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
create_test_user
json=$(as_user "$CTR_BIN" check --host --json) || fail "check --host --json failed: $json"
get() { printf '%s' "$json" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
expect_eq "memory from /proc/meminfo" "$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024 ))" "$(get 'd["memory_total_bytes"]')"
expect_eq "online cpus" "$(nproc --all)" "$(get 'd["online_cpus"]')"
expect_eq "topology from hwloc: PUs" "$(hwloc-calc --number-of pu machine:0 2>/dev/null || nproc --all)" "$(get 'd["topology"]["pus"]')"
expect_eq "topology: NUMA nodes" "$(ls -d /sys/devices/system/node/node[0-9]* | wc -l)" "$(get 'd["topology"]["numa_nodes"]')"
if [ -e /proc/driver/nvidia/version ]; then
  [ "$(get 'd["nvidia"]["driver"]')" != None ] || fail "the NVIDIA driver is loaded but not reported"
else
  expect_eq "no NVIDIA driver here" None "$(get 'd["nvidia"]["driver"]')"
fi
if grep -q 'libmpi.so.40 ' <(ldconfig -p); then
  expect_contains "Open MPI in the ld.so cache" "libmpi.so.40 Open MPI" "$(get '" ".join(l["soname"]+" "+l["abi"] for l in d["mpi"]["libraries"])')"
fi
expect_eq "the mode is the one ctr check decides" "$(as_user "$CTR_BIN" check --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])')" "$(get 'd["ctr"]["mode"]')"
text=$(as_user "$CTR_BIN" check --host)
for want in "memory:" "nvidia:" "rdma:" "mpi:" "topology: " "ctr:      "; do expect_contains "text form" "$want" "$text"; done
if grep -q hwloc <(ldd "$CTR_BIN"); then fail "ctr links libhwloc: every launch would load it"; fi
# Every rank's launch loads what ctr needs: libc alone (libstdc++ and libgcc are linked in;
# a libm function, even one nlohmann's CBOR reader calls, would load libm every time).
needed=$(readelf -d "$CTR_BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^ld-linux' | tr '\n' ' ')
expect_eq "the shared libraries ctr needs" "libc.so.6 " "$needed"
# Nor does a launch construct the standard streams before main (ctr/standard_streams.hpp): no
# object linked into ctr may hold <iostream>'s static std::ios_base::Init (a new #include
# <iostream>, or a static library whose sources include it, as yaml-cpp's did).
if nm "$CTR_BIN" >/dev/null 2>&1; then
  ioinit=$(nm -C "$CTR_BIN" | grep -c ' std::__ioinit$' || true)
  expect_eq "objects in ctr that construct the standard streams before main" 0 "$ioinit"
else
  note "SKIP part: $CTR_BIN has no symbol table (stripped): the streams' static start-up is not looked for"
fi
echo "PASS: $TEST_NAME"
