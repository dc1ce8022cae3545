# ctr exec --mpi=bind (issue 8, item 4): the host's MPI, named in ctr.conf, replaces the
# image's after an ABI check. The images are directory images (cheap): busybox, the host's
# glibc files, and an MPI library of the image's own that gcc builds here with the right
# soname and file name and that only says "image MPI" and exits 42. So a run passes only if
# --mpi=bind really put the host's library in its place (the hybrid control shows the
# image's running). mpirun -np 4 runs a ring, an allreduce and a 4 MiB ping-pong over shared
# memory (mpi_checks.c), as the test user: Open MPI host into an Open MPI image, MPICH host
# into an MPICH image (when Debian's mpich is installed), and the refusals: an image library
# of a higher minor in strict mode (relaxed: a warning), an MPICH image with the Open MPI
# host, an image without MPI. Then, as root, two network-namespace hosts (netns-hosts.sh)
# with Open MPI over TCP and --mpi=bind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null || skip "Open MPI (openmpi-bin, libopen-mpi-dev) not installed"
command -v ldconfig >/dev/null || PATH=$PATH:/sbin:/usr/sbin
command -v ldconfig >/dev/null || skip "no ldconfig"
here=$(cd "$(dirname "$0")" && pwd)
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdir=/usr/lib/$multiarch
host_ompi=$(readlink -f "$libdir/libmpi.so.40")
[ -f "$host_ompi" ] || skip "no $libdir/libmpi.so.40"

mpicc.openmpi -O2 -o "$WORK/ompi_prog" "$here/mpi_checks.c"

# fake_mpi PROG SONAME FILE OUT_DIR: a library of SONAME named FILE whose every MPI function
# PROG calls prints "image MPI" and exits 42; the data PROG copies from the MPI library
# (Open MPI's ompi_mpi_comm_world, ...) is there with the size PROG expects.
fake_mpi() {
  local prog=$1 soname=$2 file=$3 out=$4 src=$WORK/fake-$2.c
  {
    printf '#include <stdio.h>\n#include <stdlib.h>\n'
    printf 'static void image_mpi(void) { fputs("image MPI: the image'"'"'s own %s ran\\n", stderr); exit(42); }\n' "$file"
    nm -D --undefined-only "$prog" | awk '$2 ~ /^P?MPI_/ { print "int " $2 "(void) { image_mpi(); return 1; }" }'
    nm -D -S --defined-only "$prog" | awk '$4 ~ /^ompi_/ { print "char " $4 "[0x" $2 "];" }'
  } > "$src"
  mkdir -p "$out"
  gcc -shared -fPIC -o "$out/$file" "$src" -Wl,-soname,"$soname"
}

# base_image DIR: busybox plus the host's glibc (the app and the host MPI use the image's).
base_image() {
  make_demo_rootfs "$1"
  mkdir -p "$1/$libdir" "$1/lib64" "$1/etc"
  for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1 libresolv.so.2 ld-linux-x86-64.so.2; do
    if [ -e "$libdir/$l" ]; then cp -L "$libdir/$l" "$1/$libdir/$l"; fi
  done
  if [ -e /lib64/ld-linux-x86-64.so.2 ]; then cp -L /lib64/ld-linux-x86-64.so.2 "$1/lib64/"; fi
  printf '%s\n' "$libdir" > "$1/etc/ld.so.conf"
  ldconfig -r "$1"
}

# with_mpi DIR SONAME FILE PROG: DIR is a copy of the base image with a fake MPI of its own.
with_mpi() {
  cp -a "$WORK/base" "$1"
  fake_mpi "$4" "$2" "$3" "$1/$libdir"
  ldconfig -r "$1"
}

note "building the images (directory images; busybox, glibc, a fake image MPI)"
base_image "$WORK/base"
ompi_version=${host_ompi##*/libmpi.so.}             # 40.30.4
ompi_major=${ompi_version%%.*}
with_mpi "$WORK/ompi-img" "libmpi.so.$ompi_major" "libmpi.so.$ompi_major.0.0" "$WORK/ompi_prog"
with_mpi "$WORK/ompi-newer" "libmpi.so.$ompi_major" "libmpi.so.$ompi_major.99.0" "$WORK/ompi_prog"

# Open MPI's companions, its component and help directories (the DT_NEEDED closure is
# resolved by ctr), as a site would write it.
cat > "$WORK/ompi.conf" <<EOF
image linger = 0
mpi library = libmpi.so.$ompi_major, libopen-rte.so.$ompi_major, libopen-pal.so.$ompi_major
mpi path = /etc/openmpi, $libdir/openmpi, /usr/share/openmpi
EOF
for d in "$libdir/pmix2" "$libdir/pmix" /usr/share/pmix; do
  if [ -d "$d" ]; then echo "mpi path = $d" >> "$WORK/ompi.conf"; fi
done
libpmix=$(ldconfig -p | awk '$1 ~ /^libpmix\.so\.[0-9]+$/ && !n++ { print $1 }')
if [ -n "$libpmix" ]; then echo "mpi dependency = $libpmix" >> "$WORK/ompi.conf"; fi
sed 's/^image linger = 0$/image linger = 0\nmpi abi check = relaxed/' "$WORK/ompi.conf" > "$WORK/ompi-relaxed.conf"
chmod -R a+rX "$WORK"

ompi_env="OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=cma
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_hwloc_base_binding_policy=none"
# shellcheck disable=SC2086
ompi_run() { as_user env CTR_CONFIG="$WORK/ompi.conf" $ompi_env timeout 120 mpirun.openmpi -np 4 "$@" 2>&1; }

note "hybrid (no --mpi=bind): the image's own MPI runs, and here it is the fake"
out=$(ompi_run "$CTR_BIN" exec "$WORK/ompi-img" "$WORK/ompi_prog") && fail "the fake image MPI passed: $out"
expect_contains "the image's library ran" "image MPI: the image's own libmpi.so.$ompi_major.0.0 ran" "$out"

note "--mpi=bind: the host's Open MPI in place of the image's, 4 ranks"
t0=$(date +%s.%N)
out=$(ompi_run "$CTR_BIN" exec --mpi=bind "$WORK/ompi-img" "$WORK/ompi_prog") || fail "mpirun --mpi=bind failed: $out"
t1=$(date +%s.%N)
echo "$out"
expect_contains "the host's Open MPI ran" "library: Open MPI v" "$out"
expect_contains "four ranks" "ranks: 4" "$out"
expect_contains "ring" "ring ok (token 12)" "$out"
expect_contains "allreduce" "allreduce ok (sum 6)" "$out"
expect_contains "4 MiB ping-pong" "pingpong ok 4194304 bytes" "$out"
case "$out" in *"image MPI"*|*"CMA is not available"*) fail "unexpected: $out";; esac
note "mpirun -np 4 with --mpi=bind took $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s"

note "--explain names what is injected and where it came from"
out=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" exec --mpi=bind --explain "$WORK/ompi-img" /bin/true) || fail "$out"
expect_contains "mpi line" "mpi:        bind: the host's Open MPI replaces the image's libmpi.so.$ompi_major" "$out"
expect_contains "replacement" "replace: libmpi.so.$ompi_major <- $host_ompi" "$out"
expect_contains "a dependency with its provenance" "/.singularity.d/mpi/libhwloc.so" "$out"
expect_contains "dependency provenance" "from DT_NEEDED of libopen-pal.so.$ompi_major" "$out"
expect_contains "the admin's path" "$libdir/openmpi -> $libdir/openmpi (ro) [host, skipped if absent] from ctr.conf 'mpi path'" "$out"

note "ctr check --host lists the configured host MPI and its ABI"
json=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" check --host --json) || fail "check --host: $json"
got=$(printf '%s' "$json" | python3 -c 'import json,sys; m=json.load(sys.stdin)["mpi"]["configured_host_mpi"]; print(m["abi"], m["abi_check"], m["libraries"][0]["soname"], m["libraries"][0]["version"])')
expect_eq "configured host MPI" "Open MPI strict libmpi.so.$ompi_major $ompi_version" "$got"
text=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" check --host) || fail "check --host: $text"
expect_contains "text form" "host MPI for --mpi=bind: Open MPI (libmpi.so.$ompi_major $ompi_version" "$text"

note "in the container the image's library path is the host's file, and LD_LIBRARY_PATH starts with the MPI directory"
out=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" exec --mpi=bind "$WORK/ompi-img" \
  sh -c "md5sum $libdir/libmpi.so.$ompi_major; echo LD=\$LD_LIBRARY_PATH") || fail "$out"
expect_contains "bound over" "$(md5sum < "$host_ompi" | cut -d' ' -f1)" "$out"
expect_contains "library path" "LD=/.singularity.d/mpi" "$out"

note "strict: an image library of a higher minor than the host's is refused, naming both"
out=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" exec --mpi=bind "$WORK/ompi-newer" /bin/true 2>&1) \
  && fail "strict mode accepted libmpi.so.$ompi_major.99.0 over ${host_ompi##*/}: $out"
echo "$out"
expect_contains "host's file" "${host_ompi##*/}" "$out"
expect_contains "image's file" "libmpi.so.$ompi_major.99.0" "$out"
expect_contains "versions" "(host $ompi_version, image $ompi_major.99.0)" "$out"
[ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "expected one line, got: $out"
note "relaxed: the same image runs, with a warning"
out=$(as_user env CTR_CONFIG="$WORK/ompi-relaxed.conf" "$CTR_BIN" exec --mpi=bind "$WORK/ompi-newer" \
  md5sum "$libdir/libmpi.so.$ompi_major" 2>&1) || fail "relaxed mode refused: $out"
expect_contains "warning" "replaced anyway ('mpi abi check = relaxed')" "$out"
expect_contains "bound over" "$(md5sum < "$host_ompi" | cut -d' ' -f1)" "$out"

note "an image without MPI is refused"
out=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" exec --mpi=bind "$WORK/base" /bin/true 2>&1) \
  && fail "an image without MPI was accepted: $out"
expect_contains "no MPI" "it has no MPI library" "$out"
note "no host MPI configured: refused before anything starts"
printf 'image linger = 0\n' > "$WORK/none.conf"
chmod 644 "$WORK/none.conf"
out=$(as_user env CTR_CONFIG="$WORK/none.conf" "$CTR_BIN" exec --mpi=bind "$WORK/ompi-img" /bin/true 2>&1) \
  && fail "--mpi=bind without a host MPI was accepted: $out"
expect_contains "not configured" "--mpi=bind: no host MPI is configured" "$out"

if command -v mpicc.mpich >/dev/null && command -v mpiexec.hydra >/dev/null; then
  host_mpich=$(readlink -f "$libdir/libmpich.so.12")
  mpicc.mpich -O2 -o "$WORK/mpich_prog" "$here/mpi_checks.c"
  with_mpi "$WORK/mpich-img" libmpich.so.12 libmpich.so.12.0.0 "$WORK/mpich_prog"
  printf 'image linger = 0\nmpi library = libmpich.so.12\n' > "$WORK/mpich.conf"
  chmod -R a+rX "$WORK"
  mpich_run() { as_user env CTR_CONFIG="$WORK/mpich.conf" timeout 120 mpiexec.hydra -n 4 "$@" 2>&1; }

  note "MPICH, hybrid: the image's MPI (here the host's /usr bound in, as test_mpi.sh does) under hydra, PMI fd kept"
  out=$(mpich_run "$CTR_BIN" exec -B /usr,$libdir:/lib/$multiarch "$WORK/base" "$WORK/mpich_prog") || fail "MPICH hybrid: $out"
  expect_contains "MPICH ran" "library: MPICH Version:" "$out"
  expect_contains "ring" "ring ok (token 12)" "$out"
  expect_contains "allreduce" "allreduce ok (sum 6)" "$out"
  expect_contains "pingpong" "pingpong ok 4194304 bytes" "$out"

  note "MPICH, --mpi=bind: the host's ${host_mpich##*/} in place of the image's libmpich.so.12.0.0"
  out=$(mpich_run "$CTR_BIN" exec "$WORK/mpich-img" "$WORK/mpich_prog") && fail "the fake image MPICH passed: $out"
  expect_contains "the image's library ran" "image MPI" "$out"
  out=$(mpich_run "$CTR_BIN" exec --mpi=bind "$WORK/mpich-img" "$WORK/mpich_prog") || fail "MPICH --mpi=bind: $out"
  echo "$out"
  expect_contains "MPICH ran" "library: MPICH Version:" "$out"
  expect_contains "ring" "ring ok (token 12)" "$out"
  expect_contains "allreduce" "allreduce ok (sum 6)" "$out"
  expect_contains "pingpong" "pingpong ok 4194304 bytes" "$out"

  note "an MPICH image with the Open MPI host is refused: the families never mix"
  out=$(as_user env CTR_CONFIG="$WORK/ompi.conf" "$CTR_BIN" exec --mpi=bind "$WORK/mpich-img" /bin/true 2>&1) \
    && fail "Open MPI over an MPICH image was accepted: $out"
  echo "$out"
  expect_contains "names the image's" "MPICH ABI libmpich.so.12.0.0" "$out"
  expect_contains "names the host's" "${host_ompi##*/}" "$out"
  expect_contains "why" "never mixed" "$out"
else
  note "SKIP part: MPICH (mpich, libmpich-dev) not installed: the MPICH cases did not run"
fi

# Two network-namespace "hosts", Open MPI over TCP, --mpi=bind (root only: ip netns).
netns=$CTR_SOURCE_DIR/bench/workloads/netns-hosts.sh
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ! "$netns" status 2>/dev/null; then
  trap '"$netns" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
  if "$netns" up 2>/dev/null; then
    note "two network-namespace hosts, Open MPI over TCP, --mpi=bind (as root)"
    # shellcheck disable=SC2086
    out=$(env CTR_CONFIG="$WORK/ompi.conf" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      OMPI_MCA_btl_base_warn_component_unused=0 timeout 120 mpirun.openmpi -np 4 -H 10.99.0.1:2,10.99.0.2:2 --bind-to none \
      --mca plm_rsh_agent "$netns agent" --mca oob_tcp_if_include 10.99.0.0/24 \
      --mca btl self,vader,tcp --mca btl_tcp_if_include 10.99.0.0/24 --mca pml ob1 \
      -x CTR_CONFIG "$CTR_BIN" exec --mpi=bind "$WORK/ompi-img" "$WORK/ompi_prog" 2>&1) || fail "two-host run: $out"
    echo "$out"
    expect_contains "host's Open MPI" "library: Open MPI v" "$out"
    expect_contains "ring across the hosts" "ring ok (token 12)" "$out"
    expect_contains "allreduce" "allreduce ok (sum 6)" "$out"
    expect_contains "pingpong" "pingpong ok 4194304 bytes" "$out"
    "$netns" down
  else
    note "SKIP part: network namespaces could not be made here"
  fi
else
  note "SKIP part: two-host case needs root, ip and no netns hosts already up"
fi

sleep 0.3
assert_no_leftovers
# The host MPI scan caches this test's configurations made (state directory caches).
rm -f "/tmp/ctr-$(id -u "$CTR_TEST_USER")"/mpi-scan-*.json /tmp/ctr-0/mpi-scan-*.json
echo "PASS: $TEST_NAME"
