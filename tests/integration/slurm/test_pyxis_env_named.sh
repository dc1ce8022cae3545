#!/bin/bash
# pyxis's environment and named-container rules (issue 54, items 4, 6 and 7), as the test
# user on the real cluster: the image's variables win over the job's for the names the image
# sets (Docker's ENV as Apptainer writes it, `${V:-default}`), --container-env keeps the
# job's, LANG/LANGUAGE/LC_ALL are the image's or none; PyTorch's variables from Slurm's for
# an image that declares PYTORCH_VERSION, PMIx's module choices and server directory for a
# pmix step (enroot's hooks); a relative --container-workdir is the root's; NAME:exec needs a step that still
# runs in the container, a step's unnamed container is joined as JOB.STEP, the attaching
# step starts in the container's working directory and is told its mounts are ignored.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
slurm_demo_test
# The demo image with what a Docker image's ENV gives (the lines Apptainer and ctr write).
cp -a "$WORK/demo" "$WORK/envimg"
cat > "$WORK/envimg/.singularity.d/env/10-docker2singularity.sh" <<'E'
export CUDA_VERSION="${CUDA_VERSION:-"12.4.0"}"
export LANG="${LANG:-"C.UTF-8"}"
export PYTORCH_VERSION="${PYTORCH_VERSION:-"2.3.0"}"
E
mksquashfs "$WORK/envimg" "$WORK/envimg.sqfs" -quiet -noappend -all-root >/dev/null
mkdir -m 777 "$WORK/out"
chmod -R a+rX "$WORK"
image=$WORK/demo.sqfs envimg=$WORK/envimg.sqfs
trap 'pkill -u "$(id -u "$CTR_TEST_USER")" -x srun || true; rm -rf "$WORK"' EXIT
# run [VAR=VALUE...] CMD...: as the test user from $WORK; output in $out (without srun's
# lines on a job waiting for its nodes), status in $rc.
run() {
  set +e; out=$(slurm_as_user "$WORK" env "$@" 2>&1); rc=$?; set -e
  out=$(printf '%s\n' "$out" | grep -v '^srun: job [0-9]* \(queued\|has been allocated\)' || true)
}

note "the image's variables win over the job's; --container-env keeps the job's; the job's locale is dropped"
show='echo "$CUDA_VERSION|$MINE|${LANG-unset}|${LC_ALL-unset}"'
run CUDA_VERSION=11.0 MINE=job LANG=de_DE.UTF-8 LC_ALL=de_DE.UTF-8 srun -N1 --container-image="$envimg" sh -c "$show"
expect_eq "the image's CUDA_VERSION and LANG, the job's own variable, no LC_ALL" "12.4.0|job|C.UTF-8|unset" "$out"
run CUDA_VERSION=11.0 MINE=job LANG=de_DE.UTF-8 LC_ALL=de_DE.UTF-8 srun -N1 --container-image="$envimg" \
  --container-env=CUDA_VERSION,LC_ALL sh -c "$show"
expect_eq "--container-env=CUDA_VERSION,LC_ALL" "11.0|job|C.UTF-8|de_DE.UTF-8" "$out"
run LANG=de_DE.UTF-8 srun -N1 --container-image="$image" sh -c 'echo "${LANG-unset}|$CTR_DEMO"'
expect_eq "an image without LANG: none" "unset|1" "$out"

note "PyTorch's variables from Slurm's where the image declares PYTORCH_VERSION (enroot's hook, pyxis)"
torch='echo "$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $((MASTER_PORT - 61000 - SLURM_JOB_ID % 4536)) $OMP_NUM_THREADS"'
run srun -N2 -n4 --container-image="$envimg" sh -c "$torch"
expect_eq "RANK LOCAL_RANK WORLD_SIZE MASTER_ADDR MASTER_PORT OMP_NUM_THREADS" \
  "0 0 4 n1 0 1|1 1 4 n1 0 1|2 0 4 n1 0 1|3 1 4 n1 0 1" "$(printf '%s\n' "$out" | sort | paste -sd '|')"
run srun -N1 --container-image="$image" sh -c 'echo "${RANK-unset}"'
expect_eq "no PyTorch: no RANK" "unset" "$out"

note "a pmix step: PMIX_MCA_psec and PMIX_MCA_gds from the server's modules (enroot's hook)"
if slurm_client srun --mpi=list 2>&1 | grep -q pmix; then
  run srun -N1 --mpi=pmix --container-image="$image" sh -c \
    'echo "$PMIX_MCA_psec=$PMIX_SECURITY_MODE $PMIX_MCA_gds=$PMIX_GDS_MODULE"'
  psec=${out%% *} gds=${out#* }
  [ -n "${psec%%=*}" ] && [ "${psec%%=*}" = "${psec#*=}" ] && [ -n "${gds%%=*}" ] && [ "${gds%%=*}" = "${gds#*=}" ] ||
    fail "PMIX_MCA_psec/gds are not the server's modules: $out"
  # PMIX_SERVER_TMPDIR is in slurmd's spool directory, which the container has as a bind.
  run srun -N1 --mpi=pmix --container-image="$image" sh -c \
    'spool=${PMIX_SERVER_TMPDIR%/}; spool=${spool%/*}; test -d "$PMIX_SERVER_TMPDIR" && awk -v d="$spool" '"'"'$5 == d'"'"' /proc/self/mountinfo | wc -l'
  expect_eq "slurmd's spool directory bound in ($out)" 1 "$out"
else
  note "skipped: this Slurm has no pmix plugin"
fi

note "a relative --container-workdir is the container root's (pyxis)"
run srun -N1 --container-image="$image" --container-workdir=../tmp pwd
expect_eq "--container-workdir=../tmp" "/tmp" "$out"
run srun -N1 --container-image="$image" --container-workdir=etc pwd
expect_eq "--container-workdir=etc" "/etc" "$out"

note "NAME:exec needs a running step; JOB.STEP joins a step's unnamed container; the attaching step's cwd and mounts"
cat > "$WORK/attach.sh" <<S
#!/bin/bash
#SBATCH -N1 -o $WORK/out/attach.out
out=$WORK/out
srun --container-image=$image --container-name=w true
srun --container-name=w:exec true > \$out/exec-ended.txt 2>&1
echo "exec-ended=\$?" > \$out/rc.txt
srun --overlap --container-name=w sh -c 'touch /tmp/w-running.\$SLURM_JOB_ID; sleep 8' &
srun --overlap --container-image=$image --container-writable sh -c 'echo unnamed > /mark; echo \$SLURM_STEP_ID > \$0; sleep 8' \$out/step &
for _ in \$(seq 100); do [ -s \$out/step ] && [ -e /tmp/w-running.\$SLURM_JOB_ID ] && break; sleep 0.1; done
cd /tmp
srun --overlap --container-name=w:exec --container-mounts=/tmp:/x sh -c 'pwd; test -e /x || echo no-x' > \$out/exec-running.txt 2>&1
echo "exec-running=\$?" >> \$out/rc.txt
srun --overlap --container-name=\$SLURM_JOB_ID.\$(cat \$out/step):exec cat /mark > \$out/jobstep.txt 2>&1
echo "jobstep=\$?" >> \$out/rc.txt
rm -f /tmp/w-running.\$SLURM_JOB_ID
wait
S
chmod 644 "$WORK/attach.sh"
slurm_as_user "$WORK/out" sbatch --wait "$WORK/attach.sh" >/dev/null ||
  fail "sbatch --wait attach.sh failed: $(cat "$WORK/out/attach.out" "$WORK"/out/*.txt 2>/dev/null)"
expect_eq "exit statuses" "exec-ended=255 exec-running=0 jobstep=0" "$(xargs < "$WORK/out/rc.txt")"
expect_contains "NAME:exec once its step ended" \
  "ctr: --container-name=w:exec: no container of that name runs on this node for this job (in a step that still runs)" \
  "$(cat "$WORK/out/exec-ended.txt")"
expect_eq "the attached step: the container's working directory, its mounts ignored" \
  "ctr: ignoring --container-mounts when attaching to a running container|$WORK/out|no-x" \
  "$(paste -sd '|' "$WORK/out/exec-running.txt")"
expect_eq "JOB.STEP: the unnamed step's container" "unnamed" "$(cat "$WORK/out/jobstep.txt")"

slurm_wait_no_jobs "$CTR_TEST_USER" 30 || fail "jobs left"
assert_job_cgroups_gone "the attach job"
assert_nothing_left "pyxis environment and named containers"
echo "PASS: $TEST_NAME"
