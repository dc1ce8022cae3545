# Instances (ctr instance start|list|stop|stats, exec|run instance://NAME), as an ordinary
# user: the startscript runs in the background with its output in the instance's log;
# launches join the instance's namespaces (one PID namespace: they see its processes)
# and get their own exit status and signals; a second start of a name, a bad name, an
# unknown instance and options a join cannot change are refused in one line; --no-pid
# --stay keeps the instance in ctr's own process; stop ends
# every process in the instance (SIGKILL after its timeout), a killed keeper's record is
# dropped; save writes the instance's root as an image that runs; and 48 instances started
# in parallel stop with nothing left.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0
make_apptainer_rootfs "$WORK/svc"
cat > "$WORK/svc/.singularity.d/startscript" <<'S'
#!/bin/sh
echo "service started: $* FIXTURE_ENV=$FIXTURE_ENV"
exec sleep 3600
S
# An app with its own %appstart (instance start --app tool runs it, as Apptainer does).
mkdir -p "$WORK/svc/scif/apps/tool/scif"
printf '#!/bin/sh\necho "appstart of tool: $*"\nexec sleep 3600\n' > "$WORK/svc/scif/apps/tool/scif/startscript"
chmod 755 "$WORK/svc/scif/apps/tool/scif/startscript"
mksquashfs "$WORK/svc" "$WORK/svc.sqfs" -quiet -noappend -all-root >/dev/null
chmod -R a+rX "$WORK"
mkdir -m 777 "$WORK/rw"
uid=$(id -u "$CTR_TEST_USER")
# What an interrupted earlier run left (no process of the user lives) is not this run's.
if [ -z "$(live_processes_of "$uid")" ]; then rm -rf "/tmp/ctr-$uid/instances"; fi

note "start: the startscript runs with its arguments and the image's environment, output in its log"
as_user "$CTR_BIN" instance start "$WORK/svc.sqfs" svc1 one two
list=$(as_user "$CTR_BIN" instance list --json)
expect_eq "one instance listed" 1 "$(jq '.instances | length' <<<"$list")"
expect_eq "its name" svc1 "$(jq -r '.instances[0].instance' <<<"$list")"
expect_eq "its image" "$WORK/svc.sqfs" "$(jq -r '.instances[0].img' <<<"$list")"
keeper=$(jq -r '.instances[0].pid' <<<"$list")
out=$(jq -r '.instances[0].logOutPath' <<<"$list")
for _ in $(seq 100); do grep -q "service started" "$out" 2>/dev/null && break; sleep 0.05; done
expect_contains "startscript output" "service started: one two FIXTURE_ENV=from-environment" "$(cat "$out")"
expect_contains "plain list" "svc1" "$(as_user "$CTR_BIN" instance list)"

note "exec instance://: the instance's root, PID namespace and processes; its own exit status"
ps=$(as_user "$CTR_BIN" exec instance://svc1 ps)
expect_contains "the startscript's process is seen" "sleep 3600" "$ps"
expect_contains "the keeper is PID 1" "    1 " "$ps"
expect_eq "the image's env scripts" from-environment "$(as_user "$CTR_BIN" exec instance://svc1 sh -c 'echo $FIXTURE_ENV')"
expect_eq "APPTAINER_INSTANCE names it, as Apptainer's" "svc1 svc1" \
  "$(as_user "$CTR_BIN" exec instance://svc1 sh -c 'echo $APPTAINER_INSTANCE $SINGULARITY_INSTANCE')"
expect_eq "the caller's --env" yes "$(as_user "$CTR_BIN" exec --env JOINED=yes instance://svc1 sh -c 'echo $JOINED')"
expect_eq "the caller's working directory" "$WORK" "$(as_user "$CTR_BIN" exec instance://svc1 pwd)"
set +e; as_user "$CTR_BIN" exec instance://svc1 sh -c 'exit 7'; rc=$?; set -e
expect_eq "exit status" 7 "$rc"
expect_contains "run instance:// runs the runscript" "fixture runscript: a b" "$(as_user "$CTR_BIN" run instance://svc1 a b)"
stats=$(as_user "$CTR_BIN" instance stats --json svc1)
[ "$(jq '.processes' <<<"$stats")" -ge 2 ] || fail "stats: expected the keeper and the startscript, got $stats"
expect_contains "explain of a join" "join:       instance svc1: keeper pid $keeper" "$(as_user "$CTR_BIN" exec --explain instance://svc1 true)"
expect_eq "explain --json of a start" svc1 "$(as_user "$CTR_BIN" instance start --explain --json "$WORK/svc.sqfs" svc1 | jq -r '.instance.name')"

note "a signal to a joined launch reaches its app"
as_user "$CTR_BIN" exec instance://svc1 sh -c "trap 'exit 42' TERM; touch $WORK/rw/ready; while :; do sleep 0.05; done" &
pid=$!
for _ in $(seq 100); do [ -e "$WORK/rw/ready" ] && break; sleep 0.05; done
[ -e "$WORK/rw/ready" ] || fail "the joined launch did not start"
standin=$(pgrep -u "$CTR_TEST_USER" -f "^$CTR_BIN exec instance://svc1" | head -1)
kill -TERM "$standin"
set +e; wait "$pid"; rc=$?; set -e
expect_eq "exit status after SIGTERM" 42 "$rc"

note "refused, in one line: a running name, bad names, unknown instances, options a join cannot change"
refused() { local what=$1 text=$2; shift 2; refused_in_one_line "$what" "$text" as_user "$@"; }  # WHAT TEXT CMD...
refused "second start" "instance svc1 already exists" "$CTR_BIN" instance start "$WORK/svc.sqfs" svc1
refused "bad name" "bad instance name '../x'" "$CTR_BIN" instance start "$WORK/svc.sqfs" ../x
refused "no name" "no instance name" "$CTR_BIN" instance start "$WORK/svc.sqfs"
refused "unknown instance" "no instance nope is running" "$CTR_BIN" exec instance://nope true
refused "bad reference" "bad instance reference" "$CTR_BIN" exec instance://a/b true
refused "bind into a join" "--bind/--mount/--scratch cannot be used with instance://svc1" \
  "$CTR_BIN" exec -B /tmp:/mnt instance://svc1 true
# Limits (a cgroup for the whole instance, test_limits as root): an ordinary user gets them
# where the node delegates a cgroup v2 subtree, else one line saying why not.
set +e; err=$(as_user "$CTR_BIN" instance start --memory 1G "$WORK/svc.sqfs" svc2 2>&1 >/dev/null); rc=$?; set -e
if [ "$rc" = 0 ]; then
  note "limits: this node delegates cgroups to the user: svc2 started with --memory 1G"
  as_user "$CTR_BIN" instance stop svc2 >/dev/null
else
  expect_eq "limits without delegation: one line" 1 "$(printf '%s\n' "$err" | wc -l)"
  expect_contains "limits without delegation" "cannot apply the resource limits" "$err"
fi
refused "--stats" "instance stats NAME" "$CTR_BIN" instance start --stats "$WORK/s.json" "$WORK/svc.sqfs" svc2
refused "missing image" "svc-missing.sqfs" "$CTR_BIN" instance start "$WORK/svc-missing.sqfs" svc2
refused "stop unknown" "no instance found with name nope" "$CTR_BIN" instance stop nope
cp "$WORK/svc.sqfs" "$WORK/other.sqfs"
chmod a+r "$WORK/other.sqfs"
refused "--reuse with another image" "--reuse takes only an instance of the same image" \
  "$CTR_BIN" instance start --reuse "$WORK/other.sqfs" svc1
as_user "$CTR_BIN" instance start --reuse --pid-file "$WORK/rw/reuse.pid" "$WORK/svc.sqfs" svc1 ||
  fail "--reuse of a running instance of the same image"
expect_eq "--reuse --pid-file: the running keeper" "$keeper" "$(cat "$WORK/rw/reuse.pid" 2>&1)"
expect_eq "--reuse: the same keeper" "$keeper" "$(as_user "$CTR_BIN" instance list --json svc1 | jq -r '.instances[0].pid')"
expect_eq "nothing of a failed start listed" 1 "$(as_user "$CTR_BIN" instance list --json | jq '.instances | length')"

note "stop: every process of the instance ends, a joined launch with it"
as_user "$CTR_BIN" exec instance://svc1 sleep 300 &
pid=$!
for _ in $(seq 100); do as_user "$CTR_BIN" exec instance://svc1 ps | grep -q "sleep 300" && break; sleep 0.05; done
as_user "$CTR_BIN" instance stop svc1
set +e; wait "$pid"; rc=$?; set -e
expect_eq "the joined launch was ended by SIGTERM" 143 "$rc"
expect_eq "no instance listed" 0 "$(as_user "$CTR_BIN" instance list --json | jq '.instances | length')"
assert_nothing_left "stop"
[ ! -e "/tmp/ctr-$uid/instances" ] || fail "instance files left: $(ls -a "/tmp/ctr-$uid/instances")"

note "stop -t: a process that ignores SIGTERM is killed after the timeout"
as_user "$CTR_BIN" instance start "$WORK/svc.sqfs" stubborn
as_user "$CTR_BIN" exec instance://stubborn sh -c "trap '' TERM; touch $WORK/rw/stubborn; while :; do sleep 1; done" &
pid=$!
for _ in $(seq 100); do [ -e "$WORK/rw/stubborn" ] && break; sleep 0.05; done
start=$(date +%s%N)
as_user "$CTR_BIN" instance stop -t 1 stubborn 2>/dev/null
took=$(( ($(date +%s%N) - start) / 1000000 ))
set +e; wait "$pid"; rc=$?; set -e
expect_eq "killed" 137 "$rc"
[ "$took" -ge 900 ] || fail "stop -t 1 returned after ${took} ms, before its timeout"
assert_nothing_left "stop -t"

note "a keeper killed from outside: its record is dropped, nothing stays"
as_user "$CTR_BIN" instance start "$WORK/svc.sqfs" doomed
kill -KILL "$(as_user "$CTR_BIN" instance list --json | jq -r '.instances[0].pid')"
for _ in $(seq 100); do [ "$(as_user "$CTR_BIN" instance list --json | jq '.instances | length')" = 0 ] && break; sleep 0.05; done
expect_eq "no instance listed" 0 "$(as_user "$CTR_BIN" instance list --json | jq '.instances | length')"
assert_nothing_left "killed keeper"

note "--app NAME: the app's %appstart runs; an app without one is refused"
as_user "$CTR_BIN" instance start --app tool "$WORK/svc.sqfs" appsvc x y
log=$(as_user "$CTR_BIN" instance list --json | jq -r '.instances[] | select(.instance == "appsvc") | .logOutPath')
for _ in $(seq 50); do grep -q appstart "$log" 2>/dev/null && break; sleep 0.1; done
expect_eq "the app's startscript, with the arguments" "appstart of tool: x y" "$(head -1 "$log")"
as_user "$CTR_BIN" instance stop appsvc >/dev/null
refused "an app the image lacks" "the image has no app 'nosuch'" "$CTR_BIN" instance start --app nosuch "$WORK/svc.sqfs" appsvc2
assert_nothing_left "--app instances"

note "instance run: the runscript (with the arguments) is the instance's program, output in its log"
as_user "$CTR_BIN" instance run "$WORK/svc.sqfs" runsvc r1 r2
log=$(as_user "$CTR_BIN" instance list --json | jq -r '.instances[] | select(.instance == "runsvc") | .logOutPath')
for _ in $(seq 50); do grep -q 'fixture runscript' "$log" 2>/dev/null && break; sleep 0.1; done
expect_eq "the runscript, with the arguments" "fixture runscript: r1 r2" "$(head -1 "$log")"
expect_eq "the instance stays after it" runsvc "$(as_user "$CTR_BIN" instance list --json | jq -r '.instances[].instance' | grep -x runsvc)"
as_user "$CTR_BIN" instance stop runsvc >/dev/null
assert_nothing_left "instance run"

note "--no-pid: a keeper in the host's PID namespace; --join-info says how to join it"
info=$(as_user "$CTR_BIN" instance start --no-pid --join-info "$WORK/svc.sqfs" nopid)
keeper=$(sed -n 's/^keeper=//p' <<<"$info")
[ -n "$keeper" ] && kill -0 "$keeper" || fail "--join-info: no live keeper in: $info"
expect_eq "the namespaces to enter" "ns=user ns=mnt" "$(grep -o '^ns=[a-z]*' <<<"$info" | xargs)"
expect_contains "the compiled seccomp filter" "seccomp=/tmp/ctr-$uid/instances/nopid.bpf" "$info"
expect_contains "the image's environment" "set=FIXTURE_ENV=from-environment" "$info"
expect_eq "a launch into it is in the host's PID namespace" "$(readlink /proc/self/ns/pid)" \
  "$(as_user "$CTR_BIN" exec instance://nopid readlink /proc/self/ns/pid)"
# Its processes are those in its mount namespace (not the host's PID namespace's): the
# keeper and its startscript, and a launch that joins it.
as_user "$CTR_BIN" exec instance://nopid sleep 30 &
joined=$!
for _ in $(seq 100); do pgrep -u "$CTR_TEST_USER" -f '^sleep 30$' >/dev/null && break; sleep 0.05; done
stats=$(as_user "$CTR_BIN" instance stats --json nopid)
pkill -u "$CTR_TEST_USER" -f '^sleep 30$' || true; wait "$joined" 2>/dev/null || true
n=$(jq '.processes' <<<"$stats")
[ "$n" -ge 3 ] && [ "$n" -le 5 ] || fail "--no-pid stats: expected the keeper, the startscript and the joined sleep, got $stats"
as_user "$CTR_BIN" instance stop nopid 2>/dev/null
assert_nothing_left "--no-pid"

note "--no-pid --stay: ctr itself keeps the instance, closes its output once ready, stays"
# The Slurm plugin's unnamed step container: no forked keeper. The join information comes
# on stdout, then ctr closes its output (the reader sees EOF) and keeps running as the
# keeper; SIGTERM ends it and its files; a start that fails leaves nothing, no process.
as_user "$CTR_BIN" instance start --no-pid --stay --join-info --no-startscript "$WORK/svc.sqfs" stay \
  > "$WORK/rw/stay.out" 2> "$WORK/rw/stay.err" &
stayer=$!
for _ in $(seq 100); do kill -0 "$stayer" 2>/dev/null || break; grep -q '^keeper=' "$WORK/rw/stay.out" && break; sleep 0.1; done
keeper=$(sed -n 's/^keeper=//p' "$WORK/rw/stay.out")
[ -n "$keeper" ] || fail "--stay: no join information: $(cat "$WORK/rw/stay.out" "$WORK/rw/stay.err")"
expect_eq "the keeper is the ctr that was started (named ctr-instance now)" ctr-instance "$(cat "/proc/$keeper/comm")"
[ "$(ps -o ppid= -p "$keeper" | tr -d ' ')" != 1 ] || fail "--stay: the keeper was reparented (forked and left)"
expect_eq "its output closed (nothing more on stderr)" "" "$(cat "$WORK/rw/stay.err")"
expect_eq "a launch joins it" "FIXTURE_ENV=from-environment" \
  "$(as_user "$CTR_BIN" exec instance://stay sh -c 'echo FIXTURE_ENV=$FIXTURE_ENV')"
expect_eq "listed with its pid" "$keeper" \
  "$(as_user "$CTR_BIN" instance list --json stay | jq -r '.instances[0].pid')"
kill -TERM "$keeper"
for _ in $(seq 100); do [ -e "/tmp/ctr-$uid/instances/stay.json" ] || break; sleep 0.1; done
wait "$stayer" 2>/dev/null || true
[ ! -e "/tmp/ctr-$uid/instances/stay.json" ] || fail "--stay: SIGTERM left the record"
refused "--stay without --no-pid" "give --no-pid too" "$CTR_BIN" instance start --stay "$WORK/svc.sqfs" stay2
# Fails in the container, after pivot_root: its files are removed through the directory
# it opened on the host.
refused "--stay with a working directory the container lacks" "--pwd /no/such/dir" \
  "$CTR_BIN" instance start --no-pid --stay --join-info --pwd /no/such/dir "$WORK/svc.sqfs" stay3
[ ! -e "/tmp/ctr-$uid/instances/stay3.lock" ] || fail "--stay: a failed start left $(ls "/tmp/ctr-$uid/instances")"
assert_nothing_left "--stay"

note "save: the instance's root (image and writes, not its mounts) as an image; bad targets refused"
as_user "$CTR_BIN" instance start --writable-tmpfs "$WORK/svc.sqfs" saved
as_user "$CTR_BIN" exec instance://saved sh -c 'echo written > /written; mkdir /made-dir'
as_user "$CTR_BIN" instance save saved "$WORK/rw/saved.sqfs" || fail "instance save"
expect_eq "the saved image runs, with what was written" "written" \
  "$(as_user "$CTR_BIN" exec "$WORK/rw/saved.sqfs" sh -c 'cat /written; test -d /made-dir || echo no-dir')"
unsquashfs -q -d "$WORK/unpacked" "$WORK/rw/saved.sqfs" etc/passwd "${WORK#/}" >/dev/null
cmp -s "$WORK/unpacked/etc/passwd" "$WORK/svc/etc/passwd" || fail "the saved /etc/passwd is not the image's (ctr's bind was saved)"
[ ! -e "$WORK/unpacked$WORK/rw" ] || fail "the saved image has a bound directory's files"
refused "a directory target" "instance save: 'x/' names a directory" "$CTR_BIN" instance save saved x/
refused "an unknown instance" "no instance found with name nosuch" "$CTR_BIN" instance save nosuch "$WORK/rw/x.sqfs"
refused "an unwritable target" "mksquashfs failed writing /x.sqfs" "$CTR_BIN" instance save saved /x.sqfs
[ -z "$(ls -A "$WORK/rw" | grep '^\.ctr-save-')" ] || fail "a save left its temporary file: $(ls -a "$WORK/rw")"
as_user "$CTR_BIN" instance stop saved >/dev/null
assert_nothing_left "instance save"

note "48 instances started in parallel, each joined, stopped with --all"
for i in $(seq 48); do as_user "$CTR_BIN" instance start "$WORK/svc.sqfs" "par$i" & done
failed=0
for job in $(jobs -p); do wait "$job" || failed=$((failed + 1)); done
expect_eq "failed starts" 0 "$failed"
expect_eq "instances listed" 48 "$(as_user "$CTR_BIN" instance list --json 'par*' | jq '.instances | length')"
for i in $(seq 48); do as_user "$CTR_BIN" exec "instance://par$i" sh -c "echo par$i" > "$WORK/rw/out$i" & done
wait
for i in $(seq 48); do expect_eq "join of par$i" "par$i" "$(cat "$WORK/rw/out$i")"; done
as_user "$CTR_BIN" instance stop --all 2>/dev/null
expect_eq "instances after stop --all" 0 "$(as_user "$CTR_BIN" instance list --json | jq '.instances | length')"
assert_nothing_left "48 instances"
[ ! -e "/tmp/ctr-$uid/instances" ] || fail "instance files left: $(ls -a "/tmp/ctr-$uid/instances")"
echo "PASS: $TEST_NAME"
