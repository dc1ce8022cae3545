# srun --mpi=pmix -N2 -n4 --container-image: a 4-rank MPI job across the two nodes of the
# test cluster, each rank a task in its node's step container (hybrid: the image's MPI,
# here the host's Open MPI bound into the busybox image, as test_mpi does): slurmstepd is
# the PMIx server, its rendezvous directory (TmpFS), its server directory (in slurmd's
# spool) and PMIX_* variables reach the tasks.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
require_slurm_cluster
command -v mpicc >/dev/null || skip "Open MPI not installed"
slurm_client srun --mpi=list 2>&1 | grep -q pmix ||
  skip "Slurm has no pmix plugin here"
ensure_test_user
require_fuse
make_demo_squashfs demo
mpicc -O2 -o "$WORK/checks" "$CTR_SOURCE_DIR/tests/integration/mpi_checks.c"
chmod -R a+rX "$WORK"

# Shared memory between ranks of one node in one container: single copy off, as for
# ranks in separate launches (host-notes, gotcha 2); PSM (absent here) not tried.
out=$(slurm_as_user "$WORK" env OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mtl=^psm \
  srun --mpi=pmix -N2 -n4 --container-image="$WORK/demo.sqfs" \
  --container-mounts=/usr,/usr/lib:/lib,/usr/lib64:/lib64,/etc/openmpi "$WORK/checks" 2>&1) || fail "srun failed: $out"
echo "$out"
expect_contains "4 ranks" "ranks: 4" "$out"
expect_contains "ring across both nodes" "ring ok (token 12)" "$out"
expect_contains "allreduce" "allreduce ok (sum 6)" "$out"
expect_contains "4 MiB ping-pong" "pingpong ok 4194304 bytes" "$out"
# The server's directory (PMIX_SERVER_TMPDIR, in slurmd's spool) is bound in: the ranks'
# PMIx clients map its files without an error.
! printf '%s\n' "$out" | grep -q "PMIX ERROR" || fail "the ranks' PMIx printed errors: $out"
echo "PASS: $TEST_NAME"
