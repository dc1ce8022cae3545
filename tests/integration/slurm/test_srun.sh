# srun --container-image on a real two-node Slurm cluster (cluster.sh, brought up once
# for the Slurm tests): the plugin starts one container per node and step, as the job's
# user, and the tasks join it, so slurmstepd execs each task itself: hostnames and ranks
# are Slurm's, the image's files are seen, --container-mounts and --container-workdir
# apply, the task's exit status and signals are its own, a bad image fails the step with
# ctr's one line (never a hang), two jobs on a node share no image holder (`srun ctr exec`),
# and nothing stays after the steps, their job cgroups included.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
slurm_demo_test
mkdir -p "$WORK/data" "$WORK/rw"
echo "from the host" > "$WORK/data/x"
chmod -R a+rX "$WORK"
chmod 777 "$WORK/rw"
uid=$(id -u "$CTR_TEST_USER")
slurm() { slurm_as_user "$WORK" "$@"; }

note "srun -N2 -n4 --container-image: both nodes, four ranks, the image's files"
out=$(slurm srun -N2 -n4 --container-image="$WORK/demo.sqfs" \
  sh -c 'echo "$(hostname) $SLURM_PROCID $CTR_DEMO $(grep ^ID= /etc/os-release)"')
printf '%s\n' "$out"
expect_eq "four tasks" 4 "$(printf '%s\n' "$out" | wc -l)"
expect_eq "both nodes" "n1 n2" "$(printf '%s\n' "$out" | awk '{print $1}' | sort -u | xargs)"
expect_eq "ranks 0-3" "0 1 2 3" "$(printf '%s\n' "$out" | awk '{print $2}' | sort | xargs)"
expect_eq "the image's environment and os-release" 4 "$(printf '%s\n' "$out" | grep -c ' 1 ID=ctr-demo$')"

note "the task is slurmstepd's child (ctr does not stand between), in the container's root"
parent=$(slurm srun -N1 -n1 --container-image="$WORK/demo.sqfs" sh -c 'cat /proc/$PPID/comm; ls /bin/busybox')
expect_contains "the task's parent" "slurmstepd" "$parent"
expect_contains "the image's busybox" "/bin/busybox" "$parent"

note "--container-mounts, --container-workdir"
expect_eq "bind" "from the host" "$(slurm srun -N1 -n1 --container-image="$WORK/demo.sqfs" \
  --container-mounts="$WORK/data:/data:ro" cat /data/x)"
expect_eq "workdir" "/data" "$(slurm srun -N1 -n1 --container-image="$WORK/demo.sqfs" \
  --container-mounts="$WORK/data:/data" --container-workdir=/data pwd)"
expect_eq "the submit directory is the tasks' working directory" "$WORK" \
  "$(slurm srun -N1 -n1 --container-image="$WORK/demo.sqfs" pwd)"

note "exit status: the task's own"
set +e; slurm srun -N2 -n2 --container-image="$WORK/demo.sqfs" sh -c 'exit 3'; rc=$?; set -e
expect_eq "srun's exit status" 3 "$rc"

note "an image whose environment scripts need /bin/sh: the tasks get what they export"
# (a command substitution: ctr does not interpret it, the shell runs it once for the
# container's record, and the tasks, which join without a shell, get its result)
cp -a "$WORK/demo" "$WORK/shenv"
mkdir -p "$WORK/shenv/.singularity.d/env"
printf 'export FROM_SHELL="$(echo from-a-shell)"\n' > "$WORK/shenv/.singularity.d/env/90-environment.sh"
mksquashfs "$WORK/shenv" "$WORK/shenv.sqfs" -quiet -noappend -all-root >/dev/null
chmod 644 "$WORK/shenv.sqfs"
expect_eq "the script's variable in the tasks" "from-a-shell from-a-shell" \
  "$(slurm srun -N2 -n2 --container-image="$WORK/shenv.sqfs" sh -c 'echo $FROM_SHELL' | xargs)"

note "pyxis's options that name the defaults are taken, --container-remap-root too"
expect_eq "--no-container-entrypoint --container-mount-home --no-container-remap-root" "ID=ctr-demo" \
  "$(slurm srun -N1 -n1 --no-container-entrypoint --container-mount-home --no-container-remap-root \
     --container-image="$WORK/demo.sqfs" grep ^ID= /etc/os-release)"
# --container-remap-root is ctr's --fakeroot: root in the container, the image's files root's.
expect_eq "--container-remap-root" "0 root 0" \
  "$(slurm srun -N1 -n1 --container-remap-root --container-image="$WORK/demo.sqfs" sh -c 'echo $(id -u) $(stat -c %U /usr) $(id -g)')"

note "--container-entrypoint: the image's runscript runs the step's command, as the task itself"
make_entrypoint_images
set +e
out=$(slurm srun -N1 -n1 --container-entrypoint --container-image="$WORK/entry.sqfs" \
  sh -c 'echo "app $$ $SLURM_TASK_PID $0 $1 ${CTR_ENTRYPOINT_ARG0-unset} $(cat /proc/$PPID/comm)"; exit 3' a b 2>&1)
rc=$?
set -e
printf '%s\n' "$out"
expect_eq "srun's exit status: the app's" 3 "$rc"
pid=$(printf '%s\n' "$out" | sed -n 's/^runscript \([0-9]*\): .*/\1/p')
[ -n "$pid" ] || fail "--container-entrypoint: the runscript did not run: $out"
expect_contains "the runscript's arguments: the step's command" "runscript $pid: sh -c echo " "$out"
# One pid from the runscript to the app, Slurm's task pid, a child of slurmstepd; the
# shim's variable is gone.
expect_eq "the app: the task's pid, its arguments, its parent" "app $pid $pid a b unset slurmstepd" \
  "$(printf '%s\n' "$out" | grep '^app ')"
expect_eq "--container-entrypoint on both nodes, two tasks each" 4 \
  "$(slurm srun -N2 -n4 --container-entrypoint --container-image="$WORK/entry.sqfs" hostname | grep -c '^runscript ')"
expect_eq "without the option the command runs as given" "direct" \
  "$(slurm srun -N1 -n1 --container-image="$WORK/entry.sqfs" echo direct)"
set +e; err=$(slurm srun -N1 -n1 --container-entrypoint --container-image="$WORK/norunscript.sqfs" true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "--container-entrypoint without a runscript: srun exit status $rc"
expect_eq "an image without a runscript: ctr's line" \
  "ctr: --container-entrypoint: the image has no /.singularity.d/runscript" "$(printf '%s\n' "$err" | grep '^ctr: ')"

note "GPUs: a step allocated one gets the node's NVIDIA driver by default (--nv)"
# The cluster's nodes have one "GPU" each (gres.conf: /dev/null stands in for its device);
# the driver is a fixture node (CTR_HOST_ROOT, as in test_devices) with a ctr.conf that lists
# its libraries, both given to the plugin's ctr by plugstack.conf (env=: the job's
# environment does not choose ctr's configuration).
node=$WORK/node
make_nvidia_fixture "$node" "$WORK/list/nvliblist.conf" 535.104.05 libopenblas.so.0
printf 'nvidia library list = %s\ncdi spec dirs = %s\n' "$WORK/list/nvliblist.conf" "$WORK/no-cdi" > "$WORK/gpu.conf"
chmod -R a+rX "$WORK"
conf=$CLUSTER/etc/plugstack.conf
base=$(cat "$conf")
trap 'printf "%s\n" "$base" > "$conf"; rm -rf "$WORK"' EXIT
printf '%s env=CTR_HOST_ROOT=%s env=CTR_CONFIG=%s\n' "$base" "$node" "$WORK/gpu.conf" > "$conf"
gpu_env="--export=ALL"
out=$(slurm srun -N1 -n1 --gpus=1 "$gpu_env" --container-image="$WORK/demo.sqfs" \
  sh -c 'ls /.singularity.d/libs; echo "cuda=$CUDA_VISIBLE_DEVICES"') || fail "a step with a GPU: $out"
expect_contains "--gpus=1: the driver's libraries" "libopenblas.so.0" "$out"
expect_contains "--gpus=1: Slurm's CUDA_VISIBLE_DEVICES" "cuda=0" "$out"
out=$(slurm srun -N1 -n1 "$gpu_env" --container-image="$WORK/demo.sqfs" \
  sh -c 'ls /.singularity.d/libs 2>/dev/null | grep -c openblas || true')
expect_eq "no GPU allocated: no driver" 0 "$out"
expect_contains "--container-nv without a GPU: the driver" "libopenblas.so.0" \
  "$(slurm srun -N1 -n1 "$gpu_env" --container-nv --container-image="$WORK/demo.sqfs" ls /.singularity.d/libs)"
printf '%s\n' "$base" > "$conf"

note "a bad image fails the step with ctr's line, at once"
set +e; err=$(slurm srun -N1 -n1 --container-image="$WORK/missing.sif" true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "bad image: srun exit status $rc (124: it hung)"
expect_contains "ctr's message, its own prefix once" "ctr: --container-image=$WORK/missing.sif: " "$err"
! printf '%s\n' "$err" | grep -q "ctr: error:" || fail "ctr's prefix twice: $err"
expect_contains "names the file" "missing.sif" "$err"

note "signals from scancel reach the task"
rm -f "$WORK/rw/"*
slurm srun -N1 -n1 --container-image="$WORK/demo.sqfs" sh -c \
  "trap 'echo usr1 > $WORK/rw/got; exit 42' USR1; touch $WORK/rw/ready; while :; do sleep 0.1; done" &
srun_pid=$!
for _ in $(seq 200); do [ -e "$WORK/rw/ready" ] && break; sleep 0.05; done
[ -e "$WORK/rw/ready" ] || fail "the task did not start"
job=$(slurm_client squeue -h -u "$CTR_TEST_USER" -o %i | head -1)
slurm_client scancel -s USR1 "$job"
for _ in $(seq 200); do [ -e "$WORK/rw/got" ] && break; sleep 0.05; done
[ -e "$WORK/rw/got" ] || fail "SIGUSR1 did not reach the task"
set +e; wait "$srun_pid"; rc=$?; set -e
expect_eq "srun's exit status after the task's trap" 42 "$rc"

note "two jobs on one node share no image holder: the end of one (its cgroup's processes killed) leaves the other's container whole"
# `srun ctr exec` in each job, no plugin: the first launch's holder is in its step's cgroup.
# With a shared holder, job B's app lost its root when job A's step ended (SIGBUS, 135).
rm -f "$WORK/rw/"*
# The jobs before this one may still be completing (their epilogs): each job's id is the
# newest once it runs.
slurm_wait_no_jobs "$CTR_TEST_USER" 30 || fail "earlier jobs did not end: $(slurm_client squeue -h)"
slurm srun -w n1 -N1 -n1 "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c \
  "touch $WORK/rw/a; while [ ! -e $WORK/rw/end-a ]; do sleep 0.05; done" &
job_a=$!
for _ in $(seq 200); do [ -e "$WORK/rw/a" ] && break; sleep 0.05; done
job_a_id=$(slurm_client squeue -h -u "$CTR_TEST_USER" -o %i | sort -n | tail -1)
slurm srun -w n1 -N1 -n1 "$CTR_BIN" exec "$WORK/demo.sqfs" sh -c \
  "touch $WORK/rw/b; while [ ! -e $WORK/rw/a-ended ]; do sleep 0.05; done; grep ^ID= /etc/os-release" \
  > "$WORK/rw/b.out" 2>&1 &
job_b=$!
for _ in $(seq 200); do [ -e "$WORK/rw/b" ] && break; sleep 0.05; done
[ -e "$WORK/rw/a" ] && [ -e "$WORK/rw/b" ] || fail "the two jobs' apps did not start"
job_b_id=$(slurm_client squeue -h -u "$CTR_TEST_USER" -o %i | sort -n | tail -1)
# (Under linuxproc a daemonised holder outlives its step, and sharing one is safe.)
if [ "$(cat "$CTR_SLURM_DIR/proctrack")" = cgroup ]; then
  holder_jobs=$(for p in $(ps -u "$uid" -o pid=,stat=,comm= | awk '$2 !~ /Z/ && $3 == "ctr-holder" {print $1}'); do grep -o ':freezer:.*/job_[0-9]*' "/proc/$p/cgroup"; done |
    sed 's/.*job_//' | sort -n | xargs)
  expect_eq "the jobs whose cgroups have a holder" "$job_a_id $job_b_id" "$holder_jobs"
fi
touch "$WORK/rw/end-a"
wait "$job_a" || fail "job A failed"
for _ in $(seq 200); do [ -z "$(slurm_client squeue -h -j "$job_a_id" 2>/dev/null)" ] && break; sleep 0.05; done
# Job A's holder ended with its step, cleanly: the plugin's task_exit sent it SIGTERM before
# Slurm killed the step's cgroup (a SIGKILLed holder leaves its pid file, and costs the step
# Slurm's 1 s wait for the cgroup to empty).
for f in /tmp/ctr-"$uid"/*.pid; do
  [ -e "$f" ] || continue
  read -r pid _ < "$f" || continue
  st=$(ps -o stat= -p "$pid" 2>/dev/null || true)
  [ -n "$st" ] && [ "${st#Z}" = "$st" ] || fail "a dead holder's state file: $f (pid $pid)"
done
touch "$WORK/rw/a-ended"
set +e; wait "$job_b"; rc=$?; set -e
expect_eq "job B's exit status after job A ended" 0 "$rc"
expect_eq "job B still reads its image" "ID=ctr-demo" "$(cat "$WORK/rw/b.out")"
assert_job_cgroups_gone "jobs of srun ctr exec"

note "nothing of the steps stays: no instance, no job cgroup, no process, no mount"
for _ in $(seq 100); do
  [ -z "$(ls "/run/ctr/$uid/ctr/instances" 2>/dev/null)" ] && break
  sleep 0.1
done
[ ! -e "/run/ctr/$uid/ctr/instances" ] || fail "instance files left: $(ls -a "/run/ctr/$uid/ctr/instances")"
assert_job_cgroups_gone "Slurm steps"
assert_nothing_left "Slurm steps"
echo "PASS: $TEST_NAME"
