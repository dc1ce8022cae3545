# Shared helpers of the Slurm tests: source after ../lib.sh. They run on the cluster the
# fixture integration.slurm.cluster_up brought up (cluster.sh), in $CTR_SLURM_DIR.
CLUSTER=${CTR_SLURM_DIR:?the Slurm cluster directory (ctest sets it)}
SLURM_CLUSTER_SH=$CTR_SOURCE_DIR/tests/integration/slurm/cluster.sh

# Skips (with the fixture's reason) where the cluster could not come up.
require_slurm_cluster() {
  [ ! -e "$CLUSTER/skip" ] || skip "no Slurm cluster: $(cat "$CLUSTER/skip")"
  [ -e "$CLUSTER/etc/slurm.conf" ] || skip "no Slurm cluster (the fixture integration.slurm.cluster_up did not run)"
}

# The start of the tests whose steps run the demo image as the test user: the cluster, the
# user, FUSE, and $WORK/demo.sqfs (make_demo_squashfs).
slurm_demo_test() {
  require_slurm_cluster
  ensure_test_user
  require_fuse
  make_demo_squashfs demo
}

# slurm_client CMD...: a client command (squeue, scancel, srun --mpi=list) as root.
slurm_client() { bash "$SLURM_CLUSTER_SH" client "$CLUSTER" "$@"; }

# slurm_as_user DIR CMD...: CMD (srun, sbatch) as the test user, from DIR, in the cluster's
# client namespace with a login-like environment; 60 s at most (124: it hung).
slurm_as_user() {
  local dir=$1
  shift
  ( cd "$dir" && timeout 60 bash "$SLURM_CLUSTER_SH" client "$CLUSTER" \
      runuser -u "$CTR_TEST_USER" -- env -i HOME="/home/$CTR_TEST_USER" PATH=/usr/bin:/bin \
      SLURM_CONF="$CLUSTER/etc/slurm.conf" "$@" )
}

# slurm_wait_no_jobs USER SECONDS: waits until USER has no job left, completing ones (whose
# epilog still runs) included; non-zero if some remain after SECONDS.
slurm_wait_no_jobs() {
  local i jobs
  for i in $(seq $(($2 * 10))); do
    jobs=$(slurm_client squeue -h -u "$1" -o %i 2>/dev/null) && [ -z "$jobs" ] && return 0
    sleep 0.1
  done
  return 1
}

# make_entrypoint_images: $WORK/entry.sqfs, the demo image whose runscript (its entrypoint)
# prints "runscript PID: ARGS" and execs its arguments, and $WORK/norunscript.sqfs, the demo
# image without a runscript (after slurm_demo_test).
make_entrypoint_images() {
  cp -a "$WORK/demo" "$WORK/entry"
  printf '#!/bin/sh\necho "runscript $$: $*"\nexec "$@"\n' > "$WORK/entry/.singularity.d/runscript"
  chmod 755 "$WORK/entry/.singularity.d/runscript"
  cp -a "$WORK/demo" "$WORK/norunscript"
  rm -f "$WORK/norunscript/.singularity.d/runscript" "$WORK/norunscript/singularity"
  local image
  for image in entry norunscript; do
    mksquashfs "$WORK/$image" "$WORK/$image.sqfs" -quiet -noappend -all-root >/dev/null
    chmod 644 "$WORK/$image.sqfs"
  done
}

# assert_job_cgroups_gone WHAT: no job's cgroup is left on either node once the test user's
# jobs have ended, epilogs included (process tracking by cgroup: Slurm cannot remove a job's
# cgroups while something it started runs there, such as a named container's keeper or a
# lingering image holder; ctr's epilog ends those and removes them). The jobs' slurmstepds
# may still be leaving their cgroups when squeue no longer shows the jobs: 3 s for that,
# less than the 5 s a holder lingers. Trivially true under linuxproc.
assert_job_cgroups_gone() {
  slurm_wait_no_jobs "$CTR_TEST_USER" 30 || fail "$1: the test user's jobs did not end: $(slurm_client squeue -h)"
  local left i
  for i in $(seq 30); do
    left=$(find /sys/fs/cgroup/*/slurm_n1 /sys/fs/cgroup/*/slurm_n2 -mindepth 2 -maxdepth 2 -type d -name 'job_*' 2>/dev/null || true)
    [ -z "$left" ] && break
    sleep 0.1
  done
  [ -z "$left" ] || fail "$1: job cgroups left: $left (processes: $(cat $(printf '%s/cgroup.procs ' $left) 2>/dev/null | xargs -r ps -o pid,user,comm -p))"
}
