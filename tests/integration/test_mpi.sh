# mpirun -np 2 ctr exec IMAGE <MPI ping-pong>: ranks share one user namespace (the image
# holder's), so Open MPI's vader transport with CMA single-copy works for 4 MiB messages;
# then hybrid mode with 4 ranks (ring, allreduce, 4 MiB ping-pong). --mpi=bind: test_mpi_bind.
# The ping-pong is host-built with mpicc; the busybox image gets the host's /usr (libraries,
# Open MPI) and /etc/openmpi bound in, which is how a site injects its MPI into an image.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
command -v mpirun >/dev/null && command -v mpicc >/dev/null || skip "Open MPI not installed"
make_demo_rootfs "$WORK/demo"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
mpicc -O2 -o "$WORK/pingpong" "$(dirname "$0")/mpi_pingpong.c"
chmod -R a+rX "$WORK"

binds="/usr,/usr/lib:/lib,/usr/lib64:/lib64,/etc/openmpi"
# CMA forced on: with ranks in different user namespaces vader would fail or hang here.
out=$(as_user env OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=cma OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_base_warn_component_unused=0 \
  timeout 120 mpirun -np 2 "$CTR_BIN" exec -B "$binds" "$WORK/demo.sqfs" "$WORK/pingpong" 2>&1) \
  || fail "mpirun failed: $out"
echo "$out"
expect_contains "4 MiB message" "4194304 bytes" "$out"
expect_contains "ping-pong completed" "pingpong ok" "$out"
case "$out" in *"CMA is not available"*) fail "vader reports CMA unavailable: $out";; esac

# Hybrid with 4 ranks: a ring, an allreduce and a 4 MiB ping-pong (mpi_checks.c) with the
# image's MPI (the host's, bound in as above).
mpicc -O2 -o "$WORK/checks" "$(dirname "$0")/mpi_checks.c"
chmod a+rx "$WORK/checks"
out=$(as_user env OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=cma OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_hwloc_base_binding_policy=none \
  timeout 120 mpirun -np 4 "$CTR_BIN" exec -B "$binds" "$WORK/demo.sqfs" "$WORK/checks" 2>&1) \
  || fail "mpirun -np 4 failed: $out"
echo "$out"
expect_contains "4 ranks" "ranks: 4" "$out"
expect_contains "ring" "ring ok (token 12)" "$out"
expect_contains "allreduce" "allreduce ok (sum 6)" "$out"
expect_contains "4 MiB ping-pong" "pingpong ok 4194304 bytes" "$out"
sleep 0.3
assert_no_leftovers
echo "PASS: $TEST_NAME"
