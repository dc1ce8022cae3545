#!/bin/bash
# Issue 15: Apptainer users switch with no relearning. Each case of the issue (environment
# evaluation, flag variables, container identity, binds, the commands and flags Apptainer
# has) on the Apptainer-style fixture image (images/apptainer-style), as the unprivileged
# test user: a sandbox directory, a SIF through squashfuse, and the SIF through the setuid
# helper. Expected values are Apptainer's, as its e2e tests state them.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"
ensure_test_user
require_fuse
use_linger 0
# The helper cases write the prefix's ctr.conf: it must not outlive this test.
trap 'pkill -KILL -u "$CTR_TEST_USER" || true; rm -f "${CONF:-/nonexistent}"; rm -rf "$WORK"' EXIT

DEFAULT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FIXTURE_PATH=$DEFAULT_PATH:/opt/fixture/bin
USER_UID=$(id -u "$CTR_TEST_USER")
USER_HOME=$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)

make_apptainer_rootfs "$WORK/sandbox"
mkdir -p "$WORK/sandbox/scif/apps/norun/scif"   # an app without a runscript
"$CTR_BIN" build "$WORK/fixture.sif" "$WORK/sandbox" >/dev/null
# A copy without runscript and test, and one with a stand-in /bin/bash (busybox has none).
cp -a "$WORK/sandbox" "$WORK/bare"
rm -f "$WORK/bare/.singularity.d/runscript" "$WORK/bare/.singularity.d/test" "$WORK/bare/singularity"
cp -a "$WORK/sandbox" "$WORK/withbash"
printf '#!/bin/sh\necho "bash $*; SHELL=$SHELL"\n' >"$WORK/withbash/bin/bash"
chmod 755 "$WORK/withbash/bin/bash"
# An image of Singularity < 2.3: no /.singularity.d/env, a legacy /environment.
make_demo_rootfs "$WORK/legacy"
rm -rf "$WORK/legacy/.singularity.d/env"
printf 'LEGACY=from-environment\nexport LEGACY\n' >"$WORK/legacy/environment"

# Bind sources, as Apptainer's e2e bind tests lay them out.
mkdir -p "$WORK/canary" "$WORK/home" "$WORK/data"
touch "$WORK/canary/file" "$WORK/canary/file,comma" "$WORK/canary/file:colon" "$WORK/data/file"
echo custom-home >"$WORK/home/marker"
chmod -R a+rwX "$WORK"

# expect WHAT EXPECTED [ENV=V...] -- CTR-ARGS...: runs ctr as the test user (with the host
# variables given), expects exit 0 and exactly EXPECTED on stdout.
expect() {
  local what=$1 expected=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out
  out=$(as_user env "${envs[@]}" "$CTR" "$@" 2>"$WORK/stderr") ||
    fail "$what [$MODE]: exit $? ($(cat "$WORK/stderr"))"
  expect_eq "$what [$MODE]" "$expected" "$out"
}
# expect_fail WHAT STATUS NEEDLE [ENV=V...] -- CTR-ARGS...: exit STATUS, NEEDLE on stderr.
expect_fail() {
  local what=$1 status=$2 needle=$3; shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local rc=0
  as_user env "${envs[@]}" "$CTR" "$@" >/dev/null 2>"$WORK/stderr" || rc=$?
  expect_eq "$what [$MODE]: status" "$status" "$rc"
  expect_contains "$what [$MODE]: message" "$needle" "$(cat "$WORK/stderr")"
}

cases() {
  local img=$1
  note "$MODE: environment"
  expect "image PATH (%environment extends it)" "$FIXTURE_PATH" -- exec "$img" sh -c 'echo $PATH'
  expect "APPTAINERENV_APPEND_PATH after %environment" "$FIXTURE_PATH:/foo" APPTAINERENV_APPEND_PATH=/foo -- exec "$img" sh -c 'echo $PATH'
  expect "APPTAINERENV_PREPEND_PATH" "/foo:$FIXTURE_PATH" APPTAINERENV_PREPEND_PATH=/foo -- exec "$img" sh -c 'echo $PATH'
  expect "APPTAINERENV_PATH overrides" "/usr/bin:/bin," APPTAINERENV_PATH=/usr/bin:/bin, -- exec "$img" /bin/sh -c 'echo $PATH'
  expect "--env PATH=\$PATH:/foo appends to the container's" "$FIXTURE_PATH:/foo" -- exec --env 'PATH=$PATH:/foo' "$img" sh -c 'echo $PATH'
  expect "\$(id -u) evaluated" "$USER_UID" 'APPTAINERENV_WHO=$(id -u)' -- exec "$img" sh -c 'echo $WHO'
  expect "\$UID evaluated" "$USER_UID" 'APPTAINERENV_WHO=$UID' -- exec "$img" sh -c 'echo $WHO'
  expect "quoted \$UID keeps its quotes" "\"$USER_UID\"" 'APPTAINERENV_WHO="$UID"' -- exec "$img" sh -c 'echo $WHO'
  expect "\\\$UID stays literal" '$UID' 'APPTAINERENV_WHO=\$UID' -- exec "$img" sh -c 'echo $WHO'
  expect "\\\$(id -u) stays literal" '$(id -u)' 'APPTAINERENV_WHO=\$(id -u)' -- exec "$img" sh -c 'echo $WHO'
  expect "--no-eval" '$(id -u)' 'APPTAINERENV_WHO=$(id -u)' -- exec --no-eval "$img" sh -c 'echo $WHO'
  expect "APPTAINER_NO_EVAL" '\$UID' 'APPTAINERENV_WHO=\$UID' APPTAINER_NO_EVAL=1 -- exec "$img" sh -c 'echo $WHO'
  printf 'X=$HOME/x\n' >"$WORK/envfile"; chmod 644 "$WORK/envfile"
  expect "--env-file values evaluated" "$USER_HOME/x" -- exec --env-file "$WORK/envfile" "$img" sh -c 'echo $X'
  # Apptainer's e2e AppendLiteralDefaultPath / PrependLiteralDefaultPath: "\$PATH" in an
  # env file is the image's PATH, evaluated in the container.
  local image_path; image_path=$(as_user "$CTR" exec "$img" sh -c 'echo $PATH')
  printf 'PATH="\\$PATH:/"\n' >"$WORK/envfile-append"; printf 'PATH="/:\\$PATH"\n' >"$WORK/envfile-prepend"
  chmod 644 "$WORK"/envfile-*
  expect "--env-file PATH=\"\\\$PATH:/\"" "$image_path:/" -- exec --env-file "$WORK/envfile-append" "$img" sh -c 'echo $PATH'
  expect "--env-file PATH=\"/:\\\$PATH\"" "/:$image_path" -- exec --env-file "$WORK/envfile-prepend" "$img" sh -c 'echo $PATH'
  expect "default LD_LIBRARY_PATH" "/.singularity.d/libs" -- exec "$img" sh -c 'echo $LD_LIBRARY_PATH'
  expect "user LD_LIBRARY_PATH gets the libs dir" "/foo:/.singularity.d/libs" -- exec --env LD_LIBRARY_PATH=/foo "$img" sh -c 'echo $LD_LIBRARY_PATH'
  expect "PREPEND_LD_LIBRARY_PATH" "/pre:/.singularity.d/libs" -- exec --env PREPEND_LD_LIBRARY_PATH=/pre "$img" sh -c 'echo $LD_LIBRARY_PATH'
  expect "APPEND_LD_LIBRARY_PATH" "/.singularity.d/libs:/app" -- exec --env APPEND_LD_LIBRARY_PATH=/app "$img" sh -c 'echo $LD_LIBRARY_PATH'
  expect "host variable passes" "bar" FOO=bar -- exec "$img" sh -c 'echo $FOO'
  expect "--no-env" "" FOO=bar BAR=foo -- exec --no-env BAR,FOO "$img" sh -c 'echo $FOO'
  expect "APPTAINER_NOENV" "" FOO=bar APPTAINER_NOENV=FOO,BAR -- exec "$img" sh -c 'echo $FOO'
  expect "--no-env does not stop APPTAINERENV_" "Bar" FOO=bar APPTAINERENV_FOO=Bar -- exec --no-env FOO "$img" sh -c 'echo $FOO'
  expect "--env beats the host" "foo" FOO=bar -- exec --env FOO=foo "$img" sh -c 'echo $FOO'
  expect "multi-line host value" "$(printf 'Hello\nWorld')" "$(printf 'MULTI=Hello\nWorld')" -- exec "$img" sh -c 'echo "$MULTI"'
  expect "invalid host name not passed" "0" 'BASH_FUNC_ml%%=TEST' -- exec "$img" sh -c 'env | grep -c BASH_FUNC || true'
  expect "host APPTAINER_*/SINGULARITY_* not passed" "0" APPTAINER_FOO=x SINGULARITY_BAR=y -- exec "$img" sh -c 'env | grep -c "^APPTAINER_FOO=\|^SINGULARITY_BAR=" || true'
  local abs=$img; [ "${img#/}" = "$img" ] && abs=$WORK/$img
  expect "identity variables" "$abs $abs $(basename "$img") $(basename "$img")" -- exec "$img" sh -c 'echo $APPTAINER_CONTAINER $SINGULARITY_CONTAINER $APPTAINER_NAME $SINGULARITY_NAME'
  expect "APPTAINER_ENVIRONMENT" "/.singularity.d/env/91-environment.sh" -- exec "$img" sh -c 'echo $APPTAINER_ENVIRONMENT'
  expect "PS1 from the image's 99-base.sh" "Fixture> " -- exec "$img" sh -c 'echo "$PS1"'
  expect "identity cannot be overridden" "$(basename "$img")" -- exec --env APPTAINER_NAME=spoof "$img" sh -c 'echo $APPTAINER_NAME'
  if [ -e /etc/localtime ]; then
    expect "/etc/localtime from the host" "$(md5sum </etc/localtime)" -- exec "$img" sh -c 'md5sum </etc/localtime'
  fi

  note "$MODE: flag variables (the flag wins)"
  expect "APPTAINER_BIND" "yes" "APPTAINER_BIND=$WORK/data:/data" -- exec "$img" sh -c 'test -f /data/file && echo yes'
  expect "SINGULARITY_BINDPATH" "yes" "SINGULARITY_BINDPATH=$WORK/data:/data2" -- exec "$img" sh -c 'test -f /data2/file && echo yes'
  expect "APPTAINER_CONTAIN" "0" APPTAINER_CONTAIN=1 -- exec "$img" sh -c 'ls -A /tmp | wc -l'
  expect "APPTAINER_CLEANENV" "" FOO=bar APPTAINER_CLEANENV=true -- exec "$img" sh -c 'echo $FOO'
  expect "SINGULARITY_CLEANENV" "" FOO=bar SINGULARITY_CLEANENV=1 -- exec "$img" sh -c 'echo $FOO'
  expect "APPTAINER_NO_HOME" "absent" APPTAINER_NO_HOME=1 -- exec --pwd / "$img" sh -c "test -d $USER_HOME && echo present || echo absent"
  expect "APPTAINER_PWD" "/opt" APPTAINER_PWD=/opt -- exec "$img" pwd
  expect "--pwd beats APPTAINER_PWD" "/" APPTAINER_PWD=/opt -- exec --pwd / "$img" pwd
  expect "APPTAINER_HOME" "/home/x custom-home" "APPTAINER_HOME=$WORK/home:/home/x" -- exec "$img" sh -c 'echo $HOME $(cat /home/x/marker)'
  expect "APPTAINER_WRITABLE_TMPFS" "written" APPTAINER_WRITABLE_TMPFS=1 -- exec "$img" sh -c 'touch /new && echo written'
  expect "APPTAINER_SHELL" "fixture-tool -c echo hi" APPTAINER_SHELL=/opt/fixture/bin/fixture-tool -- shell "$img" -c 'echo hi'
  expect_fail "a flag variable that is not a boolean" 1 "APPTAINER_CONTAIN='maybe'" APPTAINER_CONTAIN=maybe -- exec "$img" true
  as_user env APPTAINER_DEBUG=1 "$CTR" exec "$img" true 2>"$WORK/stderr" >/dev/null
  grep -q "assembling the root" "$WORK/stderr" || fail "APPTAINER_DEBUG [$MODE]: no debug output: $(cat "$WORK/stderr")"

  note "$MODE: commands"
  expect "run" "fixture runscript: a b" -- run "$img" a b
  expect "test" "fixture test: FIXTURE_ENV=from-environment" -- test "$img"
  expect "--app: its environment" "/scif/apps/tool from-tool" -- exec --app tool "$img" sh -c 'echo $SCIF_APPROOT $TOOL_ENV'
  expect "--app: its bin first in PATH" "tool binary: x" -- exec --app tool "$img" tool-bin x
  expect "run --app" "tool runscript: y" -- run --app tool "$img" y
  expect "test --app" "tool test" -- test --app tool "$img"
  expect_fail "run --app of a missing app" 1 "the image has no app 'nosuch'" -- run --app nosuch "$img"
  expect_fail "run --app of an app without a runscript" 1 "no runscript for the app 'norun'" -- run --app norun "$img"
  # An Apptainer image's 95-apps.sh exits 1 for an app it lacks; ctr says so for any image.
  expect_fail "exec --app of a missing app" 1 "the image has no app 'nosuch'" -- exec --app nosuch "$img" true
  expect "shell: /bin/sh when there is no bash, SHELL set" "/bin/sh" -- shell "$img" -c 'echo $SHELL'
  expect_fail "exec without a command" 1 "no command" -- exec "$img"
  expect_fail "--pwd to a missing directory" 255 "--pwd /nonexistent" -- exec --pwd /nonexistent "$img" true
  expect "--cwd" "/opt" -- exec --cwd /opt "$img" pwd
  expect "--mount" "yes" -- exec --mount "type=bind,source=$WORK/data,destination=/m,readonly" "$img" sh -c 'test -f /m/file && ! touch /m/new 2>/dev/null && echo yes'
  expect "--scratch" "scratched" -- exec --scratch /scr "$img" sh -c 'touch /scr/x && echo scratched'
  rm -rf "$WORK/wd"; mkdir "$WORK/wd"; chmod 777 "$WORK/wd"
  expect "-W with --contain: /tmp from the workdir" "ok" -- exec -W "$WORK/wd" --contain --scratch /scr "$img" sh -c 'touch /tmp/t /scr/s && echo ok'
  [ -f "$WORK/wd/tmp/t" ] && [ -f "$WORK/wd/scratch/scr/s" ] || fail "-W [$MODE]: files not in $WORK/wd: $(find "$WORK/wd")"

  note "$MODE: isolation flags"
  expect "--pid: the app is PID 2 under ctr's init" "2" -- exec --pid "$img" sh -c 'echo $$'
  expect "APPTAINER_PID" "2" APPTAINER_PID=1 -- exec "$img" sh -c 'echo $$'
  expect "--pid: /proc is the namespace's (PID 1 is ctr's init)" "ctr-init" -- exec --pid "$img" cat /proc/1/comm
  expect_fail "--pid: the app's exit status" 7 "" -- exec --pid "$img" sh -c 'exit 7'
  as_user "$CTR" exec --pid "$img" sleep 30 &
  local waiter=$!
  for _ in $(seq 100); do pgrep -u "$CTR_TEST_USER" -x sleep >/dev/null && break; sleep 0.05; done
  kill -TERM "$(pgrep -u "$CTR_TEST_USER" -f "exec --pid $img sleep 30" | head -1)"
  local rc=0; wait "$waiter" || rc=$?
  expect_eq "--pid: SIGTERM forwarded to the app [$MODE]" 143 "$rc"
  local hostipc; hostipc=$(as_user readlink /proc/self/ns/ipc)
  expect "--containall: own IPC and PID namespaces" "different 2" -- exec --containall "$img" sh -c "[ \$(readlink /proc/self/ns/ipc) != '$hostipc' ] && echo different \$\$"
  expect "--pid: ctr's init is PID 1, the app 2" "2" -- exec --pid "$img" sh -c 'echo $$'
  expect "--pid --no-init: the app is PID 1" "1" -- exec --pid --no-init "$img" sh -c 'echo $$'
  expect "APPTAINER_NO_INIT" "1" APPTAINER_NO_INIT=1 -- exec --containall "$img" sh -c 'echo $$'
  local rc=0; as_user "$CTR" exec --pid --no-init "$img" sh -c 'exit 7' || rc=$?
  expect_eq "--no-init: the app's exit status [$MODE]" 7 "$rc"
  expect "--ipc" "different" -- exec --ipc "$img" sh -c "[ \$(readlink /proc/self/ns/ipc) != '$hostipc' ] && echo different"
  expect "--contain: a minimal /dev" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero" -- exec --contain "$img" sh -c 'echo $(ls /dev)'
  expect "--contain: /dev/null works" "ok" -- exec --contain "$img" sh -c 'echo x >/dev/null && head -c1 /dev/zero | wc -c | grep -q 1 && echo ok'
  expect "--hostname" "ctr-test-host" -- exec --hostname ctr-test-host "$img" hostname
  expect "--net: loopback only, up" "lo" -- exec --net "$img" sh -c "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
  expect "--network none" "lo" -- exec --network none "$img" sh -c "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
  # ... and /sys/class/net shows the container's interfaces, not the host's (a new sysfs).
  expect "--network none: /sys/class/net" "lo" -- exec --network none "$img" ls /sys/class/net
  expect_fail "--network bridge" 255 "only 'none'" -- exec --network bridge "$img" true
  # -u/--userns (cwltool probes it): accepted; the container is in a user namespace anyway.
  local hostuserns; hostuserns=$(as_user readlink /proc/self/ns/user)
  expect "--userns: own user namespace" "different" -- exec --userns "$img" sh -c "[ \$(readlink /proc/self/ns/user) != '$hostuserns' ] && echo different"
  expect "-u" "ok" -- exec -u "$img" echo ok
  expect "--sharens (accepted)" "ok" -- exec --sharens "$img" echo ok
  expect "APPTAINER_USERNS" "ok" APPTAINER_USERNS=1 -- exec "$img" echo ok
  expect_fail "APPTAINER_USERNS not a boolean" 1 "APPTAINER_USERNS='sometimes'" APPTAINER_USERNS=sometimes -- exec "$img" true

  note "$MODE: binds"
  local c=$WORK/canary
  # APPTAINER_BIND in the container: the destinations, --bind's then the environment's, for
  # a nested container (Apptainer's regression test issue 5599).
  expect "APPTAINER_BIND in the container" "/mnt,/srv /mnt,/srv" APPTAINER_BIND="$c:/srv" -- exec --bind "$c:/mnt" "$img" sh -c 'echo $APPTAINER_BIND $SINGULARITY_BIND'
  expect "nested bind of a file" "yes" -- exec -B "$c/file:/canary/file2" -B "$c:/canary" "$img" sh -c 'test -f /canary/file2 && echo yes'
  [ -f "$c/file2" ] || fail "nested bind [$MODE]: the target was not created in the host directory (as Apptainer does)"
  rm -f "$c/file2"
  expect "nested binds of directories" "yes" -- exec -B "$c:/canary" -B "$c:/canary/dir2" -B "$c/file:/canary/dir2/nested" "$img" sh -c 'test -f /canary/dir2/nested && echo yes'
  rm -rf "$c/dir2" "$c/nested"
  expect "bind into a custom --home" "yes" -- exec --home "$WORK/home:/home/e2e" -B "$c:/home/e2e/canaryRO" "$img" sh -c 'test -f /home/e2e/canaryRO/file && echo yes'
  rm -rf "$WORK/home/canaryRO"
  expect "bind into a contained /tmp" "yes" -- exec --contain -B "$c:/tmp/c" "$img" sh -c 'test -f /tmp/c/file && echo yes'
  expect "--contain --bind \$PWD/file" "yes" -- exec --contain --bind "$WORK/data/file" "$img" sh -c "test -f $WORK/data/file && echo yes"
  expect "--contain, binds over /home and /var/tmp" "yes" -- exec --contain -B "$c:/home" -B "$c:/var/tmp" "$img" sh -c 'test -f /home/file && test -f /var/tmp/file && echo yes'
  expect "escaped comma and colon" "yes" -- exec -B "$c/file\\,comma:/fc" -B "$c/file\\:colon:/f\\:c" "$img" sh -c 'test -f /fc && test -f /f:c && echo yes'
  expect "file bind through the /var/etc link" "yes" -- exec -B "$c/file:/var/etc/symlink1" "$img" sh -c 'test -f /etc/symlink1 && echo yes'
  expect "file bind through two links" "yes" -- exec -B "$c/file:/var/etc/madness/symlink2" "$img" sh -c 'test -f /madness/symlink2 && echo yes'
  expect "new directory through the /var/etc link" "yes" -- exec -B "$c:/var/etc/new" "$img" sh -c 'test -f /etc/new/file && echo yes'
  expect "new directory through two links" "yes" -- exec -B "$c:/var/etc/madness/new" "$img" sh -c 'test -f /madness/new/file && echo yes'
  expect "bind through the image's /var/run link" "yes" -- exec -B "$c:/var/run/x" "$img" sh -c 'test -f /run/x/file && echo yes'
  # Apptainer regression issue4587: --home X:$HOME started from $HOME keeps X.
  local out
  out=$(as_user sh -c "cd '$USER_HOME' && '$CTR' exec --home '$WORK/home:$USER_HOME' '$img' cat '$USER_HOME/marker'" 2>&1) ||
    fail "--home X:\$HOME from \$HOME [$MODE]: $out"
  expect_eq "--home X:\$HOME from \$HOME [$MODE]" "custom-home" "$out"
}

# Images whose layout only matters once: the directory forms.
CTR=$CTR_BIN MODE=directory
expect "run without a runscript: /bin/sh \"\$@\"" "via-sh" -- run "$WORK/bare" -c 'echo via-sh'
expect "test without a test script: exit 0" "" -- test "$WORK/bare"
expect "shell: /bin/bash --norc when present" "bash --norc; SHELL=/bin/bash" -- shell "$WORK/withbash"
expect "shell -s" "/bin/sh" -- shell -s /bin/sh "$WORK/withbash" -c 'echo $SHELL'
expect "legacy /environment" "from-environment" -- exec "$WORK/legacy" sh -c 'echo $LEGACY'
expect "PS1 fallback" "Apptainer> " -- exec "$WORK/legacy" sh -c 'echo "$PS1"'

MODE=directory cases "$WORK/sandbox"
MODE=squashfuse cases "$WORK/fixture.sif"
assert_nothing_left "squashfuse and directory cases"

helper_runtime "(the directory and squashfuse cases passed)"
write_conf "allow setuid = yes" "image driver = setuid" "image linger = 0"
unset CTR_TEST_CONFIG  # the prefix's ctr.conf above, not the linger one
driver=$(as_user "$PREFIX/bin/ctr" exec --explain --json "$WORK/fixture.sif" true | python3 -c 'import json, sys; print(json.load(sys.stdin)["driver"])')
expect_eq "the helper cases go through the setuid helper" setuid-helper "$driver"
CTR=$PREFIX/bin/ctr MODE=setuid-helper cases "$WORK/fixture.sif"
assert_nothing_left "setuid helper cases"
