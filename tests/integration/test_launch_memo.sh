# The launch memo (src/cli/launch_memo.hpp): a launch keeps its plan in the user's state
# directory, and the next one with the same command line, working directory, environment and
# ids runs it without planning, while everything it was decided from is as it was. Run as
# the unprivileged test user, with real images, ctr.conf and PATH directories changed under it.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
make_user_dir
make_demo_rootfs "$WORK/demo"
echo one > "$WORK/demo/marker"
mksquashfs "$WORK/demo" "$U/demo.sqfs" -quiet -noappend -all-root >/dev/null
cp "${CTR_TEST_CONFIG:-/dev/null}" "$U/ctr.conf" 2>/dev/null || : > "$U/ctr.conf"
mkdir "$U/bin"
chown -R "$CTR_TEST_USER" "$U"
chmod -R a+rX "$WORK"
uid=$(id -u "$CTR_TEST_USER")
memo_dir=/tmp/ctr-$uid/memo

# launch [VAR=VALUE...] -- ARGS...: ctr -d exec ARGS as the test user in $U, with its own
# ctr.conf and $U/bin first in PATH; stdout and stderr together in $OUT.
launch() {
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  OUT=$(cd "$U" && runuser -u "$CTR_TEST_USER" -- env -i HOME="$U" PATH="$U/bin:/usr/bin:/bin" \
    CTR_CONFIG="$U/ctr.conf" "${vars[@]}" "$CTR_BIN" -d exec "$@" 2>&1) || fail "ctr exec $*: $OUT"
}
kept() { expect_contains "$1" "launch memo: the plan kept in" "$OUT"; }
# The memo the last launch ran or compared.
memo_file() { printf '%s\n' "$OUT" | sed -n 's/.*launch memo: the\( kept\)\? plan \(kept in \)\?\([^ ]*\).*/\3/p' | head -1; }
# The app's own line (grep -x): ctr -d's lines around it hold words of every kind.
app_line() { printf '%s\n' "$OUT" | grep -qx "$2" || fail "$1: no line '$2' in: $OUT"; }
planned() {
  case "$OUT" in *"launch memo: the plan kept in"*) fail "$1: ran a kept plan: $OUT";; esac
  expect_contains "$1" "deciding the plan" "$OUT"
}

note "a launch keeps its plan (once the state directory is there); the next runs it"
rm -rf "$memo_dir"
state_was_there=$([ -d "/tmp/ctr-$uid" ] && echo yes || echo no)
launch -- demo.sqfs cat /marker
planned "first launch"
if [ "$state_was_there" = no ]; then
  expect_contains "first launch" "no private $memo_dir (the first launch makes the state directory)" "$OUT"
  launch -- demo.sqfs cat /marker
  planned "second launch"
fi
expect_contains "the plan is kept" "launch memo: the plan is kept in $memo_dir/launch-" "$OUT"
launch -- demo.sqfs cat /marker
kept "the launch after"
app_line "the kept plan's app ran" one
case "$OUT" in *"deciding the plan"*) fail "a kept plan was planned again: $OUT";; esac
[ "$(stat -c %U:%a "$memo_dir")" = "$CTR_TEST_USER:700" ] || fail "memo directory: $(stat -c %U:%a "$memo_dir")"

note "CTR_LAUNCH_MEMO=check: a kept plan is planned again and must be the same"
launch CTR_LAUNCH_MEMO=check -- demo.sqfs cat /marker
launch CTR_LAUNCH_MEMO=check -- demo.sqfs cat /marker
launch CTR_LAUNCH_MEMO=check -- demo.sqfs cat /marker
expect_contains "check mode compares" "is the one decided now" "$OUT"

note "an image replaced under the same name is planned again, and its content runs"
launch -- demo.sqfs cat /marker
kept "before the image changes"
echo two > "$WORK/demo/marker"
mksquashfs "$WORK/demo" "$U/new.sqfs" -quiet -noappend -all-root >/dev/null
chown "$CTR_TEST_USER" "$U/new.sqfs" && chmod a+r "$U/new.sqfs"
mv "$U/new.sqfs" "$U/demo.sqfs"
launch -- demo.sqfs cat /marker
planned "replaced image"
expect_contains "why" "$U/demo.sqfs changed since the plan was kept" "$OUT"
app_line "the new image ran" two
touch -d '2001-01-01' "$U/demo.sqfs"  # an mtime set back still moves the ctime
launch -- demo.sqfs cat /marker
planned "touched image"

note "ctr.conf changed: planned again"
launch -- demo.sqfs true
launch -- demo.sqfs true
kept "before ctr.conf changes"
echo "# changed" >> "$U/ctr.conf"
launch -- demo.sqfs true
planned "changed ctr.conf"
expect_contains "why" "$U/ctr.conf changed since the plan was kept" "$OUT"

note "a program put in a PATH directory (a FUSE server found first there): planned again"
launch -- demo.sqfs true
kept "before PATH changes"
if grep -qa "$U/bin" "$(memo_file)"; then
  runuser -u "$CTR_TEST_USER" -- touch "$U/bin/unrelated"
  launch -- demo.sqfs true
  planned "changed PATH directory"
  expect_contains "why" "$U/bin changed since the plan was kept" "$OUT"
else
  note "skipped: this launch looked for no FUSE server (the setuid helper mounts the image)"
fi

note "another environment, working directory or command line has a memo of its own"
launch FOO=1 -- demo.sqfs true
planned "new environment"
expect_contains "why" "no plan kept for this launch yet" "$OUT"
launch -- demo.sqfs echo other
planned "new command line"

note "what the key does not hold is never kept"
echo "A=1" > "$U/env" && chown "$CTR_TEST_USER" "$U/env"
launch -- --env-file "$U/env" demo.sqfs true
launch -- --env-file "$U/env" demo.sqfs true
planned "--env-file"
expect_contains "why not" "the plan is not kept: the options read files" "$OUT"
launch PMIX_RANK=3 -- --no-env PMIX_RANK demo.sqfs true
launch PMIX_RANK=4 -- --no-env PMIX_RANK demo.sqfs true
planned "--no-env drops a wiring variable"
expect_contains "why not" "the plan is not kept: the image or --no-env changes the launcher's wiring" "$OUT"
launch -- --explain demo.sqfs true
launch -- --explain demo.sqfs true
planned "--explain"

note "MPI ranks: the launcher's wiring is not in the key; each rank's own is swapped into the kept plan"
ranks() { launch "$@" -- demo.sqfs sh -c 'echo "rank ${PMIX_RANK-none} ${OMPI_COMM_WORLD_RANK-none} ${SLURM_PROCID-none}"'; }
ranks PMIX_RANK=3 OMPI_COMM_WORLD_RANK=3 PMIX_NAMESPACE=job.1
app_line "rank 3" "rank 3 3 none"
ranks PMIX_RANK=4 OMPI_COMM_WORLD_RANK=4 PMIX_NAMESPACE=job.1
kept "another rank of the job"
app_line "rank 4 (kept plan)" "rank 4 4 none"
ranks PMIX_RANK=0 SLURM_PROCID=9 PMIX_NAMESPACE=job.2
kept "a rank of another job, with other wiring variables"
app_line "another job's rank (kept plan)" "rank 0 none 9"
ranks PMIX_RANK=4 OMPI_COMM_WORLD_RANK=4 PMIX_NAMESPACE=job.1 OTHER=1
planned "another environment beside the wiring"

note "a directory image is kept while its root is as it was; an entry added to the root plans again"
echo first-content > "$WORK/demo/marker"
launch -- "$WORK/demo" cat /marker
launch -- "$WORK/demo" cat /marker
kept "directory image"
app_line "directory image's output" first-content
echo second-content > "$WORK/demo/marker"
launch -- "$WORK/demo" cat /marker
kept "directory image, a file's content changed (the plan does not read it)"
app_line "directory image, changed file" second-content
touch "$WORK/demo/new-entry"
launch -- "$WORK/demo" cat /marker
planned "directory image, entry added to its root"
expect_contains "why" "$WORK/demo changed since the plan was kept" "$OUT"
app_line "directory image, planned again" second-content
rm "$WORK/demo/new-entry"

note "a PATH directory the user may not look in is kept as such; allowed to look, planned again"
mkdir -p "$WORK/hidden/bin" && chmod 700 "$WORK/hidden"
launch_path() { OUT=$(cd "$U" && runuser -u "$CTR_TEST_USER" -- env -i HOME="$U" PATH="$WORK/hidden/bin:$U/bin:/usr/bin:/bin" \
  CTR_CONFIG="$U/ctr.conf" "$CTR_BIN" -d exec demo.sqfs true 2>&1) || fail "ctr exec with a hidden PATH directory: $OUT"; }
launch_path
launch_path
kept "a PATH directory the user may not look in"
if grep -qa "$WORK/hidden/bin" "$(memo_file)"; then
  chmod 755 "$WORK/hidden"
  launch_path
  planned "the PATH directory can be looked in now"
  expect_contains "why" "$WORK/hidden/bin changed since the plan was kept" "$OUT"
else
  note "skipped: this launch looked for no FUSE server (the setuid helper mounts the image)"
fi

note "--nv: kept once the driver's scan is cached; the driver's files changed, planned again"
# A fixture driver (CTR_HOST_ROOT): its version file, ld.so cache and device nodes are files
# the test can change as a driver upgrade or a new GPU would.
node=$WORK/node
make_nvidia_fixture "$node" "$WORK/nvliblist.conf" 535.104.05 libz.so.1
chmod -R a+rX "$node" "$WORK/nvliblist.conf"
cp "$U/ctr.conf" "$U/nv.conf"
printf 'nvidia library list = %s\ncdi spec dirs = %s\n' "$WORK/nvliblist.conf" "$WORK/cdi" >> "$U/nv.conf"
chown "$CTR_TEST_USER" "$U/nv.conf"
nv() { launch CTR_CONFIG="$U/nv.conf" CTR_HOST_ROOT="$node" "$@" -- --nv --contain demo.sqfs sh -c 'ls /.singularity.d/libs /dev'; }
rm -f "/tmp/ctr-$uid"/nvidia-scan-*.json
nv
planned "--nv, first launch"
expect_contains "why not" "the plan is not kept: --nv scanned the driver in this launch" "$OUT"
nv
expect_contains "--nv, the scan read from its cache" "the plan is kept in" "$OUT"
nv
kept "--nv, the next launch"
app_line "--nv kept plan: the driver's library" libz.so.1
app_line "--nv kept plan: the GPU" nvidia0
nv CTR_LAUNCH_MEMO=check  # another environment: a memo of its own, kept now
nv CTR_LAUNCH_MEMO=check
expect_contains "--nv, check mode" "is the one decided now" "$OUT"
: > "$node/dev/nvidia1"
nv
planned "--nv, a GPU's device node added"
expect_contains "why" "$node/dev changed since the plan was kept" "$OUT"
app_line "--nv, the new GPU" nvidia1
nv
kept "--nv, after the new GPU"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  fixture" > "$node/proc/driver/nvidia/version"
nv
planned "--nv, another driver version"
expect_contains "why" "$node/proc/driver/nvidia/version changed since the plan was kept" "$OUT"
nv
nv
kept "--nv, the new driver's scan cached"
rm -f "/tmp/ctr-$uid"/nvidia-scan-*.json
nv
planned "--nv, the scan's cache removed"
nv
expect_contains "why" "nvidia-scan-" "$OUT"
nv
kept "--nv, the scan cached again"
mkdir "$WORK/cdi"
nv
planned "--nv, a CDI spec directory made"
expect_contains "why" "$WORK/cdi changed since the plan was kept" "$OUT"
rmdir "$WORK/cdi"

note "CTR_LAUNCH_MEMO=off: nothing read or kept"
before=$(ls "$memo_dir" | wc -l)
launch CTR_LAUNCH_MEMO=off -- demo.sqfs true
launch CTR_LAUNCH_MEMO=off -- demo.sqfs true
planned "memo off"
expect_eq "memos with CTR_LAUNCH_MEMO=off" "$before" "$(ls "$memo_dir" | wc -l)"

note "a damaged memo is removed and the launch planned"
launch -- demo.sqfs cat /marker  # ctr.conf and PATH changed since this one was kept
launch -- demo.sqfs cat /marker
kept "before damage"
file=$(memo_file)
truncate -s -7 "$file"
launch -- demo.sqfs cat /marker
planned "damaged memo"
expect_contains "why" "is unreadable" "$OUT"
app_line "the app ran" two

note "check mode fails a kept plan that differs from the one decided now"
launch CTR_LAUNCH_MEMO=check -- demo.sqfs cat /marker
launch CTR_LAUNCH_MEMO=check -- demo.sqfs cat /marker
expect_contains "check mode compares" "is the one decided now" "$OUT"
file=$(memo_file)
# The plan is the file's last part: change the last "/marker" in it (the app's argument).
python3 - "$file" <<'EOF'
import sys
p = sys.argv[1]
b = open(p, 'rb').read()
i = b.rindex(b'/marker')
open(p, 'wb').write(b[:i] + b'/markex' + b[i + 7:])
EOF
set +e
out=$(cd "$U" && runuser -u "$CTR_TEST_USER" -- env -i HOME="$U" PATH="$U/bin:/usr/bin:/bin" CTR_CONFIG="$U/ctr.conf" \
  CTR_LAUNCH_MEMO=check "$CTR_BIN" -d exec demo.sqfs cat /marker 2>&1)
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a differing kept plan passed the check: $out"
expect_contains "check failure" "the kept plan differs from the one decided now" "$out"

note "at most 64 memos are kept, the oldest removed"
for i in $(seq 70); do launch N=$i -- demo.sqfs true; launch N=$i -- demo.sqfs true; done
count=$(ls "$memo_dir" | grep -c '^launch-')
[ "$count" -le 64 ] || fail "$count memos kept"
[ -z "$(ls "$memo_dir" | grep -v '^launch-' || true)" ] || fail "temporary files left: $(ls "$memo_dir")"

assert_nothing_left "launch memo"
echo "PASS: $TEST_NAME"
