# sbatch with --container-image, in #SBATCH lines or on the command line: the batch
# script itself runs in the container (the plugin binds slurmd's copy of it in), its
# exit status is the job's (sbatch --wait returns it); a named container
# (--container-name, --container-writable) is shared by the job's steps and removed at
# the job's end; nothing stays after the jobs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
slurm_demo_test
chmod -R a+rX "$WORK"
mkdir -m 777 "$WORK/out"
uid=$(id -u "$CTR_TEST_USER")
slurm() { slurm_as_user "$WORK/out" "$@"; }

note "#SBATCH --container-image: the script runs in the container"
cat > "$WORK/job.sh" <<S
#!/bin/sh
#SBATCH --container-image=$WORK/demo.sqfs
#SBATCH -o $WORK/out/job.out
echo "in \$(grep ^ID= /etc/os-release) on \$(hostname) as \$(id -un) demo=\$CTR_DEMO"
S
chmod 644 "$WORK/job.sh"
slurm sbatch --wait "$WORK/job.sh" >/dev/null || fail "sbatch --wait failed: $(cat "$WORK/out/job.out" 2>/dev/null)"
out=$(cat "$WORK/out/job.out")
expect_contains "the image's os-release" "in ID=ctr-demo on n" "$out"
expect_contains "as the user, with the image's environment" "as $CTR_TEST_USER demo=1" "$out"

note "sbatch --container-image --wrap: the job's exit status is the script's"
set +e; slurm sbatch --wait --container-image="$WORK/demo.sqfs" -o "$WORK/out/wrap.out" --wrap 'test -x /bin/busybox; exit 5' >/dev/null; rc=$?; set -e
expect_eq "sbatch --wait's exit status" 5 "$rc"

note "sbatch --container-entrypoint: the image's runscript runs the batch script"
make_entrypoint_images
set +e; slurm sbatch --wait --container-entrypoint --container-image="$WORK/entry.sqfs" -o "$WORK/out/entry.out" \
  --wrap 'echo "script $$ $0"; exit 4' >/dev/null; rc=$?; set -e
out=$(cat "$WORK/out/entry.out")
expect_eq "sbatch --wait's exit status: the script's" 4 "$rc"
script=$(printf '%s\n' "$out" | sed -n 's/^script [0-9]* //p')
pid=$(printf '%s\n' "$out" | sed -n 's/^runscript \([0-9]*\): .*/\1/p')
[ -n "$script" ] && [ -n "$pid" ] || fail "--container-entrypoint: the runscript or the script did not run: $out"
expect_eq "the runscript ran the script, in one process" "runscript $pid: $script|script $pid $script" \
  "$(printf '%s\n' "$out" | paste -sd '|')"

note "--container-name: the job's steps share one writable container (a step may name it only), an unnamed step has its own; NAME:create and NAME:exec"
cat > "$WORK/named.sh" <<S
#!/bin/sh
#SBATCH -N1 -o $WORK/out/named.out
srun --container-image=$WORK/demo.sqfs --container-name=c1 --container-writable sh -c 'echo from-step-0 > /shared'
srun --container-name=c1 sh -c 'cat /shared; echo "step \$SLURM_STEP_ID"'
srun --container-image=$WORK/demo.sqfs --container-writable sh -c 'cat /shared 2>/dev/null || echo unnamed-is-fresh'
srun --container-image=$WORK/demo.sqfs --container-name=c1:create true > $WORK/out/create.txt 2>&1
echo "create-rc=\$?" > $WORK/out/flags.txt
srun --container-name=c2:exec true > $WORK/out/exec.txt 2>&1
echo "exec-rc=\$?" >> $WORK/out/flags.txt
srun --container-name=c1: cat /shared > $WORK/out/empty-flag.txt 2>&1
S
chmod 644 "$WORK/named.sh"
slurm sbatch --wait "$WORK/named.sh" >/dev/null || fail "sbatch --wait named.sh failed: $(cat "$WORK/out/named.out" 2>/dev/null)"
# The second step's tasks see its own Slurm variables, not those the container was started with.
# A step that names the container only (pyxis's way) joins it with its image.
expect_eq "the steps' output" "from-step-0 step 1 unnamed-is-fresh" "$(xargs < "$WORK/out/named.out")"
# pyxis's NAME:create (it must not run yet) and NAME:exec (it must run already) fail the step in one line.
grep -q '^create-rc=[1-9]' "$WORK/out/flags.txt" && grep -q '^exec-rc=[1-9]' "$WORK/out/flags.txt" ||
  fail "NAME:create of a running container or NAME:exec of none did not fail: $(cat "$WORK/out/flags.txt")"
expect_contains "NAME:create" "ctr: --container-name=c1:create: the container already runs on this node" "$(cat "$WORK/out/create.txt")"
expect_contains "NAME:exec" "ctr: --container-name=c2:exec: no container of that name runs on this node for this job" \
  "$(cat "$WORK/out/exec.txt")"
expect_eq "NAME: (an empty flag) is NAME:auto, as in pyxis: it joins the running c1" "from-step-0" \
  "$(cat "$WORK/out/empty-flag.txt")"
# The second step found the running container through the join file ctr wrote beside its
# record, without running ctr (slurmd's log has the plugin's line).
grep -q "slurm\.[0-9]*\.n-c1\..* joined through its join file" "$CTR_SLURM_DIR"/log/slurmd-*.log ||
  fail "the second step did not join through the join file: $(grep -h 'ctr:' "$CTR_SLURM_DIR"/log/slurmd-*.log | tail -3)"

note "nothing of the jobs stays: no job cgroup ($(cat "$CTR_SLURM_DIR/proctrack") process tracking), instance, process"
assert_job_cgroups_gone "named containers' job"
for _ in $(seq 100); do [ ! -e "/run/ctr/$uid/ctr/instances" ] && break; sleep 0.1; done
[ ! -e "/run/ctr/$uid/ctr/instances" ] || fail "instance files left: $(ls -a "/run/ctr/$uid/ctr/instances")"
assert_nothing_left "batch jobs"
echo "PASS: $TEST_NAME"
