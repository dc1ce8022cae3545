# The site's policy in plugstack.conf and the options --container-env and --container-mpi,
# as the test user on the real cluster: image_dir= resolves a bare image name, a step
# without an image fails when container_required= asks for one (batch scripts too with
# `all`), allow= refuses the options it does not name (at once in srun, and where the step
# runs when the submit host let one through), an unknown --container-mpi value and an
# unknown plugstack.conf argument are refused with a line naming them, --container-env
# keeps the job's value of the variables it names, a ctr= that is not there is named in
# the step's one line, and the step's container holds exactly the job user's uid, gid and
# groups; ctr.conf's execution control refuses an unsigned SIF's step. Each refusal: one
# line of ours, a failed step, never a hang. slurmstepd and srun read plugstack.conf for every step, so
# each case rewrites it; the trap restores it however the test ends.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
slurm_demo_test
mkdir -p "$WORK/images" "$WORK/data"
mkdir -m 777 "$WORK/out"
cp "$WORK/demo.sqfs" "$WORK/images/app.sqfs"
chmod -R a+rX "$WORK"
uid=$(id -u "$CTR_TEST_USER")
conf=$CLUSTER/etc/plugstack.conf
base=$(cat "$conf")
restore() { printf '%s\n' "$base" > "$conf"; pkill -u "$uid" -x srun || true; rm -rf "$WORK"; }
trap restore EXIT
# policy ARG...: the cluster's plugstack line with these arguments added.
policy() { printf '%s %s\n' "$base" "$*" > "$conf"; }
# run CMD...: CMD as the test user from $WORK; its output (both streams) in $out, status in $rc.
run() { set +e; out=$(slurm_as_user "$WORK" "$@" 2>&1); rc=$?; set -e; }
# refused WHAT LINE: the last run failed (not hung) and said LINE.
refused() {
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "$1: exit status $rc (0: not refused; 124: it hung): $out"
  expect_contains "$1" "$2" "$out"
}
image=$WORK/demo.sqfs

note "image_dir=: a bare name is DIR/NAME, a path is the user's"
policy "image_dir=$WORK/images"
run srun -N1 --container-image=app.sqfs sh -c 'grep ^ID= /etc/os-release'
expect_eq "app.sqfs from image_dir" "ID=ctr-demo" "$out"
run srun -N1 --container-image=./demo.sqfs true
expect_eq "./demo.sqfs from the submit directory ($out)" 0 "$rc"
run srun -N1 --container-image=demo.sqfs true
refused "a bare name not in image_dir" "$WORK/images/demo.sqfs"

note "container_required=steps: a step without --container-image fails, one with it runs"
policy container_required=steps
run srun -N2 -n2 true
refused "a step without an image" \
  "ctr: this cluster runs every job step in a container: give --container-image=IMAGE"
expect_eq "one line of ours per task" 2 "$(printf '%s\n' "$out" | grep -c '^ctr: ')"
run srun -N1 --container-image="$image" true
expect_eq "a step with an image ($out)" 0 "$rc"

note "container_required=all: a batch script without an image fails"
policy container_required=all
run sbatch --wait -o "$WORK/out/bare.out" --wrap true
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a batch script without an image: sbatch --wait's status $rc"
expect_contains "the script's output" "ctr: this cluster runs every batch script in a container" \
  "$(cat "$WORK/out/bare.out")"

note "writable=no: read-only roots unless --container-writable (pyxis's writable default otherwise)"
policy writable=no
run srun -N1 --container-image="$image" sh -c 'touch /w 2>/dev/null && echo rw || echo ro'
expect_eq "writable=no" "ro" "$out"
run srun -N1 --container-image="$image" --container-writable sh -c 'touch /w 2>/dev/null && echo rw || echo ro'
expect_eq "writable=no, --container-writable" "rw" "$out"

note "allow=: a forbidden option is refused in srun at once, the allowed ones work"
policy allow=container-image,container-workdir
run srun -N1 --container-image="$image" --container-mounts="$WORK/data:/data" true
refused "--container-mounts" \
  "ctr: --container-mounts is not allowed by this site's plugstack.conf (allow=container-image,container-workdir)"
run srun -N1 --container-image="$image" --container-workdir=/etc pwd
expect_eq "--container-workdir, allowed" "/etc" "$out"
run srun -N1 --container-image="$image" --container-entrypoint true
refused "--container-entrypoint" \
  "ctr: --container-entrypoint is not allowed by this site's plugstack.conf (allow=container-image,container-workdir)"

note "allow=: an option the submit host let through is refused where the step runs"
policy
run sbatch --parsable -H -o "$WORK/out/held.out" --container-image="$image" \
  --container-mounts="$WORK/data:/data" --wrap 'echo ran'
[ "$rc" = 0 ] || fail "sbatch -H: $out"
job=$out
policy allow=container-image
slurm_client scontrol release "$job"
slurm_wait_no_jobs "$CTR_TEST_USER" 30 || fail "job $job did not end within 30 s"
held=$(cat "$WORK/out/held.out" 2>/dev/null || true)
expect_contains "the batch step's line" "ctr: --container-mounts is not allowed by this site's plugstack.conf" "$held"
case "$held" in *ran*) fail "the script ran despite the refused option: $held" ;; esac

note "--container-mpi: hybrid and bind reach ctr, another value is refused"
policy
run srun -N1 --container-image="$image" --container-mpi=hybrid true
expect_eq "--container-mpi=hybrid ($out)" 0 "$rc"
run srun -N1 --container-image="$image" --container-mpi=bind true
# ctr's --mpi=bind: runs where ctr.conf names the host's MPI, else ctr says it does not.
[ "$rc" = 0 ] || expect_contains "--container-mpi=bind is ctr's --mpi=bind" "--mpi=bind" "$out"
run srun -N1 --container-image="$image" --container-mpi=fast true
refused "--container-mpi=fast" "ctr: --container-mpi=fast: unknown value (bind or hybrid)"

note "--container-env: the job's value of a listed variable stays, the image's wins otherwise"
run env CTR_DEMO=from-job srun -N1 --container-image="$image" sh -c 'echo $CTR_DEMO'
expect_eq "the image's value by default" 1 "$out"
run env CTR_DEMO=from-job srun -N1 --container-image="$image" --container-env=OTHER,CTR_DEMO sh -c 'echo $CTR_DEMO'
expect_eq "the job's value of a listed variable" from-job "$out"
run srun -N1 --container-image="$image" --container-env=CTR_DEMO sh -c 'echo $CTR_DEMO'
expect_eq "listed, but not in the job: the image's" 1 "$out"

note "ctr.conf's execution control (env=CTR_CONFIG=...): an unsigned SIF's step fails in one line, a signed one runs"
if [ -f "$CTR_FIXTURES_DIR/sif/keys/ed25519-private.pem" ]; then
  cp "$CTR_FIXTURES_DIR"/sif/keys/ed25519-p*.pem "$WORK/"
  "$CTR_BIN" -q build "$WORK/unsigned.sif" "$WORK/demo" >/dev/null
  cp "$WORK/unsigned.sif" "$WORK/signed.sif"
  "$CTR_BIN" sign --key "$WORK/ed25519-private.pem" "$WORK/signed.sif" >/dev/null
  printf 'image linger = 0\nexecution rule = whitelist\ntrusted key = %s\n' "$WORK/ed25519-public.pem" > "$WORK/ecl.conf"
  chmod -R a+rX "$WORK"
  policy "env=CTR_CONFIG=$WORK/ecl.conf"
  run srun -N1 --container-image="$WORK/unsigned.sif" true
  refused "an unsigned SIF under whitelist" \
    "$WORK/unsigned.sif: refused by ctr.conf's execution rule (whitelist for every image, $WORK/ecl.conf): the image is not signed"
  run srun -N1 --container-image="$WORK/signed.sif" sh -c 'grep ^ID= /etc/os-release'
  expect_eq "the signed SIF's step ($out)" "ID=ctr-demo" "$out"
  policy
else
  note "skipped: no signing keys in the fixtures"
fi

note "an unknown plugstack.conf argument or value fails the step with a line naming it"
# slurmd reads plugstack.conf for each job's epilog too: no job may end while it is bad.
slurm_wait_no_jobs "$CTR_TEST_USER" 30 || fail "jobs left before the bad plugstack.conf"
policy colour=blue
run srun -N1 --container-image="$image" true
refused "an unknown argument" "ctr: unknown plugstack.conf argument 'colour=blue'"
policy container_required=sometimes
run srun -N1 --container-image="$image" true
refused "a bad value" "ctr: plugstack.conf argument 'container_required=sometimes'"
policy writable=maybe
run srun -N1 --container-image="$image" true
refused "a bad writable= value" "ctr: plugstack.conf argument 'writable=maybe': the value is yes or no"
policy workdir=elsewhere
run srun -N1 --container-image="$image" true
refused "a bad workdir= value" "ctr: plugstack.conf argument 'workdir=elsewhere': the value is auto, image or submit"
policy ctr=/nonexistent/ctr
run srun -N1 --container-image="$image" true
refused "a ctr= that is not there (the child's own line, after it became the user)" \
  "ctr: cannot run /nonexistent/ctr (No such file or directory): set ctr=PATH in plugstack.conf"
policy
run srun -N1 --container-image="$image" true
expect_eq "the restored plugstack.conf ($out)" 0 "$rc"

note "the step's container runs as the job's user: uid, gid and groups, no way back"
# The plugin starts ctr from slurmstepd (root) with raw set*id calls in a child that shares
# slurmstepd's memory: the keeper must hold exactly the user's credentials.
slurm_as_user "$WORK" srun -N1 --container-image="$image" sleep 2 >/dev/null 2>&1 &
step=$!
keeper=
for _ in $(seq 80); do keeper=$(pgrep -r S,R,D -u "$uid" -x ctr-instance | head -1) && [ -n "$keeper" ] && break; sleep 0.1; done
[ -n "$keeper" ] || fail "no keeper of the user's during the step"
status=$(cat "/proc/$keeper/status")
gid=$(id -g "$CTR_TEST_USER")
expect_eq "the keeper's uids (real, effective, saved, fs)" "$uid $uid $uid $uid" \
  "$(awk '/^Uid:/ {print $2, $3, $4, $5}' <<<"$status")"
expect_eq "the keeper's gids" "$gid $gid $gid $gid" "$(awk '/^Gid:/ {print $2, $3, $4, $5}' <<<"$status")"
expect_eq "the keeper's groups: the user's" "$(id -G "$CTR_TEST_USER" | tr ' ' '\n' | sort -n | xargs)" \
  "$(awk '/^Groups:/ {$1 = ""; print}' <<<"$status" | tr ' ' '\n' | sed '/^$/d' | sort -n | xargs)"
wait "$step" || fail "the step with a sleep failed"

note "nothing of the steps stays"
slurm_wait_no_jobs "$CTR_TEST_USER" 30 || fail "jobs left"
for _ in $(seq 100); do [ ! -e "/run/ctr/$uid/ctr/instances" ] && break; sleep 0.1; done
[ ! -e "/run/ctr/$uid/ctr/instances" ] || fail "instance files left: $(ls -a "/run/ctr/$uid/ctr/instances")"
assert_nothing_left "policy steps"
echo "PASS: $TEST_NAME"
