#!/bin/bash
# ctr build OUT RECIPE.def (issue 9): demo.def as root and as the test user, every section,
# an app, multi-stage %files from, a failing %post, --sandbox, --deterministic, Apptainer's
# layout through `ctr inspect`, run-help, build --sandbox DIR IMAGE, and (slow, cached) a
# debootstrap build with apt-get in %post.
. "$(dirname "$0")/lib.sh"
ensure_test_user
ctr=$CTR_BIN
cd "$CTR_SOURCE_DIR"   # demo.def's %setup runs images/demo/make-rootfs.sh from here

note "demo.def as root"
start=$(date +%s.%N)
"$ctr" build "$WORK/demo.sif" images/demo/demo.def 2> "$WORK/demo.err" || { cat "$WORK/demo.err"; fail "demo.def build as root"; }
note "demo.def built in $(echo "$(date +%s.%N) - $start" | bc) s"
expect_contains "phases on stderr" "ctr build: %post" "$(cat "$WORK/demo.err")"
[ -s "$WORK/demo.sif.build.log" ] || fail "no build log beside the output"
expect_contains "run" "Hello from the ctr demo container" "$("$ctr" run "$WORK/demo.sif")"
expect_contains "%post ran" "built by ctr build" "$("$ctr" exec "$WORK/demo.sif" cat /etc/ctr-demo-build)"
expect_contains "labels (from %labels and \$APPTAINER_LABELS)" 'org.label-schema.description: busybox demo image' \
  "$("$ctr" inspect --labels "$WORK/demo.sif")"
expect_contains "definition" "Bootstrap: scratch" "$("$ctr" inspect --deffile "$WORK/demo.sif")"
expect_contains "SIF objects" "JSON.Generic" "$("$ctr" sif list "$WORK/demo.sif")"

note "demo.def as $CTR_TEST_USER"
chmod 777 "$WORK"
as_user sh -c "cd '$CTR_SOURCE_DIR' && '$ctr' build '$WORK/demo-user.sif' images/demo/demo.def" 2> "$WORK/user.err" ||
  { cat "$WORK/user.err"; fail "demo.def build as $CTR_TEST_USER"; }
expect_contains "run (user build)" "Hello from the ctr demo container" "$(as_user "$ctr" run "$WORK/demo-user.sif")"
expect_eq "files %post made belong to root in the image" "0:0" "$("$ctr" exec "$WORK/demo-user.sif" stat -c %u:%g /etc/ctr-demo-build)"

note "every section, an app, --sandbox"
mkdir -p "$WORK/hostdir" && echo "from the host" > "$WORK/hostdir/data.txt"
cat > "$WORK/full.def" <<EOF
Bootstrap: localimage
From: demo.sif

%files
    $WORK/hostdir/data.txt /opt/data.txt

%post
    echo post-was-here > /opt/post.txt
    echo 'export FROM_POST=yes' >> "\$APPTAINER_ENVIRONMENT"

%environment
    export GREETING=hello-env

%runscript
    echo "runscript: \$GREETING" "\$@"

%startscript
    echo start

%labels
    Maintainer ctr-tests
    Version 2

%help
    Help text of full.def.

%test
    test "\$GREETING" = hello-env
    grep -q post-was-here /opt/post.txt

%apprun tool
    echo "tool runs \$*"

%appinstall tool
    echo installed > installed.txt

%applabels tool
    Tool-Version 1.0
EOF
"$ctr" build "$WORK/full.sif" "$WORK/full.def" 2>/dev/null || { tail -20 "$WORK/full.sif.build.log"; fail "full.def build"; }
expect_eq "runscript" "runscript: hello-env a b" "$("$ctr" run "$WORK/full.sif" a b)"
expect_eq "%files" "from the host" "$("$ctr" exec "$WORK/full.sif" cat /opt/data.txt)"
expect_eq "%post + \$APPTAINER_ENVIRONMENT" "yes" "$("$ctr" exec "$WORK/full.sif" sh -c 'echo $FROM_POST')"
expect_eq "app run" "tool runs x" "$("$ctr" run --app tool "$WORK/full.sif" x)"
expect_eq "%appinstall ran in the app's directory" "installed" "$("$ctr" exec "$WORK/full.sif" cat /scif/apps/tool/installed.txt)"
inspect=$("$ctr" inspect --all "$WORK/full.sif")
for want in '"Maintainer": "ctr-tests"' 'Help text of full.def.' 'echo start' '"Tool-Version": "1.0"' 'GREETING=hello-env'; do
  expect_contains "inspect --all" "$want" "$inspect"
done
"$ctr" build --sandbox "$WORK/full-sandbox" "$WORK/full.def" 2>/dev/null || fail "--sandbox build"
[ -f "$WORK/full-sandbox/opt/post.txt" ] && [ -x "$WORK/full-sandbox/.singularity.d/runscript" ] ||
  fail "--sandbox: the directory lacks what %post and the metadata wrote"
for f in env/01-base.sh env/95-apps.sh env/99-base.sh env/99-runtimevars.sh actions/exec actions/run; do
  [ -f "$WORK/full-sandbox/.singularity.d/$f" ] || fail "--sandbox: no /.singularity.d/$f (every Apptainer image has it)"
done
expect_eq "run a sandbox" "runscript: hello-env" "$("$ctr" run "$WORK/full-sandbox")"

note "multi-stage: %files from an earlier stage"
cat > "$WORK/multi.def" <<'EOF'
Bootstrap: localimage
From: demo.sif
Stage: builder

%post
    echo artifact-of-builder > /artifact

Bootstrap: localimage
From: demo.sif
Stage: final

%files from builder
    /artifact /opt/artifact
EOF
"$ctr" build "$WORK/multi.sif" "$WORK/multi.def" 2>/dev/null || { tail "$WORK/multi.sif.build.log"; fail "multi-stage build"; }
expect_eq "%files from builder" "artifact-of-builder" "$("$ctr" exec "$WORK/multi.sif" cat /opt/artifact)"
"$ctr" exec "$WORK/multi.sif" test -e /artifact && fail "the final stage has the builder's /artifact"

note "%files glob patterns (host and from a stage), %pre on the host"
mkdir -p "$WORK/globsrc/sub"
for f in a.c b.c c.h sub/d.c; do echo "$f" > "$WORK/globsrc/$f"; done
cat > "$WORK/glob.def" <<EOF
Bootstrap: localimage
From: demo.sif
Stage: one

%post
    mkdir -p /out && echo 1 > /out/x1 && echo 2 > /out/x2 && echo 3 > /out/y3

Bootstrap: localimage
From: demo.sif

%pre
    echo "pre ran before the bootstrap: \$(ls -A "\$APPTAINER_ROOTFS" | wc -l) entries in \$APPTAINER_ROOTFS" > "$WORK/pre.out"

%files from one
    /out/x* /opt/fromone/

%files
    $WORK/globsrc/*.c /opt/c/
    $WORK/globsrc/**/*.c /opt/all/
    $WORK/globsrc/c.?
EOF
"$ctr" build "$WORK/glob.sif" "$WORK/glob.def" 2>/dev/null || { tail -20 "$WORK/glob.sif.build.log"; fail "glob.def build"; }
expect_eq "*.c into a directory" "a.c b.c" "$("$ctr" exec "$WORK/glob.sif" ls /opt/c | tr '\n' ' ' | sed 's/ $//')"
expect_eq "**/*.c at any depth" "a.c b.c d.c" "$("$ctr" exec "$WORK/glob.sif" ls /opt/all | tr '\n' ' ' | sed 's/ $//')"
expect_eq "a match without destination keeps its path" "c.h" "$("$ctr" exec "$WORK/glob.sif" cat "$WORK/globsrc/c.h")"
expect_eq "%files from a stage with a pattern" "x1 x2" "$("$ctr" exec "$WORK/glob.sif" ls /opt/fromone | tr '\n' ' ' | sed 's/ $//')"
# $WORK is world-writable here (the test user writes into it), so the scratch directory is
# not made beside the output but in a private temporary directory (scratch.hpp).
expect_contains "%pre ran on the host with an empty root" "pre ran before the bootstrap: 0 entries in /" "$(cat "$WORK/pre.out")"
expect_contains "%pre: the stage's root in the scratch directory" "/.glob.sif.build." "$(cat "$WORK/pre.out")"
case "$(cat "$WORK/pre.out")" in *"in $WORK/"*) fail "scratch beside an output in a world-writable directory";; esac
explain=$("$ctr" build --explain "$WORK/glob-explain.sif" "$WORK/glob.def")
expect_contains "--explain lists the matches" "$WORK/globsrc/b.c -> /opt/c/" "$explain"
printf 'Bootstrap: localimage\nFrom: demo.sif\n\n%%files\n    %s/globsrc/*.f90 /opt/\n' "$WORK" > "$WORK/nomatch.def"
set +e
err=$("$ctr" build "$WORK/nomatch.sif" "$WORK/nomatch.def" 2>&1); status=$?
err2=$("$ctr" build --explain "$WORK/nomatch.sif" "$WORK/nomatch.def" 2>&1); status2=$?
set -e
[ "$status" != 0 ] && [ "$status2" != 0 ] || fail "a pattern that matches nothing did not fail the build ($status, --explain $status2)"
expect_contains "no match: file, line, pattern" "nomatch.def:5: %files source: '$WORK/globsrc/*.f90' matches nothing" "$err"
expect_contains "no match under --explain" "matches nothing" "$err2"
[ ! -e "$WORK/nomatch.sif" ] && [ -z "$(find "$WORK" -maxdepth 1 -name '.nomatch*')" ] || fail "a failed glob build left files"
printf 'Bootstrap: localimage\nFrom: demo.sif\n\n%%files\n    %s/globsrc/*.c /opt/one-file\n' "$WORK" > "$WORK/multi-dest.def"
set +e; err=$("$ctr" build "$WORK/multi-dest.sif" "$WORK/multi-dest.def" 2>&1); status=$?; set -e
[ "$status" != 0 ] || fail "two matches onto one file name did not fail"
expect_contains "several matches need a directory" "matches 2 paths, so its destination must be a directory" "$err"

note "progress: plain lines when not a terminal, one updating line on a terminal"
expect_contains "plain phase lines" "$(printf 'ctr build: %%post\nctr build: metadata')" "$(cat "$WORK/demo.err")"
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
  script -qec "'$ctr' build '$WORK/tty.sif' '$WORK/full.def'" /dev/null > "$WORK/tty.out" 2>&1 ||
    { cat -v "$WORK/tty.out"; fail "build on a terminal"; }
  grep -q $'\r\033\\[Kctr build: %post \\[' "$WORK/tty.out" || fail "no updating phase line on a terminal: $(cat -v "$WORK/tty.out" | head -5)"
  grep -q 'ctr build: built ' "$WORK/tty.out" || fail "no final line on a terminal: $(cat -v "$WORK/tty.out" | tail -3)"
  ! grep -q '^ctr build: %post.$' "$WORK/tty.out" || fail "phases as plain lines on a terminal"
else
  note "script(1) cannot make a terminal here: the terminal path is not checked"
fi

note "a failing %post: its status, its output, nothing left behind"
printf 'Bootstrap: localimage\nFrom: demo.sif\n\n%%post\n    echo marker-before-failure\n    exit 3\n' > "$WORK/fail.def"
set +e
err=$("$ctr" build "$WORK/fail.sif" "$WORK/fail.def" 2>&1)
status=$?
set -e
expect_eq "exit status of the failed %post" 3 "$status"
expect_contains "output tail in the error" "marker-before-failure" "$err"
expect_contains "log named in the error" "fail.sif.build.log" "$err"
[ ! -e "$WORK/fail.sif" ] || fail "a failed build left its output"
left=$(find "$WORK" -maxdepth 1 -name '.*build*' | head -3)
[ -z "$left" ] || fail "a failed build left temporary directories: $left"
! grep -q "$WORK" /proc/self/mountinfo || fail "mounts left under $WORK: $(grep "$WORK" /proc/self/mountinfo)"

note "SIGINT during %post: the build stops, nothing left behind"
# A duration nothing else on the machine sleeps for: pgrep looks at every process.
printf 'Bootstrap: localimage\nFrom: demo.sif\n\n%%post\n    sleep 3607\n' > "$WORK/slow.def"
"$ctr" build "$WORK/slow.sif" "$WORK/slow.def" 2>/dev/null &
pid=$!
for _ in $(seq 100); do grep -q '+ sleep 3607' "$WORK/slow.sif.build.log" 2>/dev/null && break; sleep 0.1; done
t0=$(date +%s)
kill -INT "$pid"
set +e; wait "$pid"; status=$?; set -e
expect_eq "status after SIGINT" 130 "$status"
# Only ctr got the signal (no terminal's Ctrl-C to the whole group): it must still reach the
# script's sleep, which would otherwise run its hour first.
[ $(( $(date +%s) - t0 )) -le 10 ] || fail "the interrupted build took $(( $(date +%s) - t0 )) s to stop"
for _ in $(seq 100); do pgrep -f '^sleep 3607$' >/dev/null || break; sleep 0.1; done
! pgrep -af '^sleep 3607$' || fail "the interrupted %post's sleep is still running"
[ ! -e "$WORK/slow.sif" ] || fail "an interrupted build left its output"
left=$(find "$WORK" -maxdepth 1 -name '.*build*' | head -3)
[ -z "$left" ] || fail "an interrupted build left temporary directories: $left"
! grep -q "$WORK" /proc/self/mountinfo || fail "mounts left under $WORK: $(grep "$WORK" /proc/self/mountinfo)"

note "a step's background process ends with the step (its own PID namespace)"
printf 'Bootstrap: localimage\nFrom: demo.sif\n\n%%post\n    (sleep 1234 &)\n    cat /proc/1/comm\n' > "$WORK/bg.def"
"$ctr" build "$WORK/bg.sif" "$WORK/bg.def" 2>/dev/null || fail "a %post that leaves a background process"
grep -qx 'ctr-init' "$WORK/bg.sif.build.log" || fail "%post's PID 1 is not ctr's init: $(tail -5 "$WORK/bg.sif.build.log")"
! pgrep -f '^sleep 1234$' >/dev/null || fail "%post's background process outlived the build"

note "--deterministic: the same inputs give the same bytes"
"$ctr" build --deterministic "$WORK/det1.sif" "$WORK/full.def" 2>/dev/null
sleep 1
"$ctr" build --deterministic "$WORK/det2.sif" "$WORK/full.def" 2>/dev/null
expect_eq "sha256 of two deterministic builds" "$(sha256sum < "$WORK/det1.sif")" "$(sha256sum < "$WORK/det2.sif")"
# SOURCE_DATE_EPOCH (reproducible-builds.org) is the time; mksquashfs, which refuses it beside
# its own time options, does not see it.
SOURCE_DATE_EPOCH=1000000000 "$ctr" build --deterministic "$WORK/det3.sif" "$WORK/full.def" 2>"$WORK/det3.err" ||
  fail "--deterministic with SOURCE_DATE_EPOCH: $(tail -3 "$WORK/det3.err")"
SOURCE_DATE_EPOCH=1000000000 "$ctr" build --deterministic "$WORK/det4.sif" "$WORK/full.def" 2>/dev/null
expect_eq "sha256 of two builds at one SOURCE_DATE_EPOCH" "$(sha256sum < "$WORK/det3.sif")" "$(sha256sum < "$WORK/det4.sif")"
[ "$(sha256sum < "$WORK/det1.sif")" != "$(sha256sum < "$WORK/det3.sif")" ] || fail "SOURCE_DATE_EPOCH changed nothing"

note "SIF input: unpacked and repacked"
"$ctr" build "$WORK/repacked.sif" "$WORK/demo.sif" 2>/dev/null
expect_contains "repacked runs" "Hello from the ctr demo container" "$("$ctr" run "$WORK/repacked.sif")"

note "run-help: the image's %help, or Apptainer's line without one"
expect_contains "run-help" "The ctr demo image: busybox" "$("$ctr" run-help "$WORK/demo.sif")"
make_demo_rootfs "$WORK/nohelp"
rm -f "$WORK/nohelp/.singularity.d/runscript.help"
"$ctr" build "$WORK/nohelp.sif" "$WORK/nohelp" >/dev/null
expect_eq "run-help without %help" "No help sections were defined for this image" "$("$ctr" run-help "$WORK/nohelp.sif")"

note "build --sandbox DIR IMAGE: unpacked; setuid bits dropped; an existing DIR only with --force"
cp /bin/true "$WORK/nohelp/bin/setuid-true" && chmod 4755 "$WORK/nohelp/bin/setuid-true"
"$ctr" build --force "$WORK/setuid.sif" "$WORK/nohelp" >/dev/null
"$ctr" build --sandbox "$WORK/unpacked" "$WORK/setuid.sif" 2> "$WORK/unpack.err" || fail "build --sandbox from a SIF: $(cat "$WORK/unpack.err")"
expect_contains "says what it dropped" "1 setuid/setgid bits" "$(cat "$WORK/unpack.err")"
expect_eq "the setuid bit is gone" 755 "$(stat -c %a "$WORK/unpacked/bin/setuid-true")"
expect_contains "the sandbox runs" "ctr demo" "$("$ctr" exec "$WORK/unpacked" head -1 /etc/os-release)"
err=$("$ctr" build --force --sandbox --deterministic --mksquashfs-args='-comp lz4' "$WORK/unpacked2" "$WORK/setuid.sif" 2>&1) ||
  fail "build --sandbox with SIF options: $err"
expect_contains "SIF options are said to be ignored" "--mksquashfs-args shapes a SIF's squashfs" "$err"
expect_contains "--deterministic too, for an image" "--deterministic shapes a SIF" "$err"
set +e; err=$("$ctr" build --sandbox "$WORK/unpacked" "$WORK/setuid.sif" 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "an existing sandbox was replaced without --force"
expect_contains "names it" "$WORK/unpacked: already exists" "$err"
as_user "$ctr" build --force --sandbox "$WORK/user-unpacked" "$WORK/demo-user.sif" 2>/dev/null || fail "build --sandbox as $CTR_TEST_USER"
expect_contains "the user's sandbox runs" "built by ctr build" "$(as_user "$ctr" exec "$WORK/user-unpacked" cat /etc/ctr-demo-build)"
[ -z "$(find "$WORK" -maxdepth 1 -name '.*unpack*')" ] || fail "scratch directories left: $(find "$WORK" -maxdepth 1 -name '.*unpack*')"

# ---- slow: debootstrap (mmdebstrap), apt-get install in %post, as root and as the user.
command -v mmdebstrap >/dev/null || skip "mmdebstrap is not installed (the rest passed)"
mirror_host=deb.debian.org
timeout 10 bash -c "exec 3<>/dev/tcp/$mirror_host/80" 2>/dev/null || skip "the Debian mirror $mirror_host is unreachable (the rest passed)"
# Root's cache, kept between runs: bootstrapped once. A cache is its user's alone (a base
# tarball another user could write into would be root's next image), so the user's build
# below gets a copy of root's base in a cache of its own.
export CTR_CACHE_DIR=/tmp/ctr-build-test-cache-0
[ ! -d /tmp/ctr-build-test-cache ] || rm -rf /tmp/ctr-build-test-cache  # the shared one of earlier runs
mkdir -p -m 700 "$CTR_CACHE_DIR"
cat > "$WORK/deb.def" <<'EOF'
Bootstrap: debootstrap
OSVersion: bookworm

%post
    apt-get update -qq
    apt-get install -y --no-install-recommends hello

%test
    hello
EOF
note "--update and --section: a definition over an existing sandbox, or some of its sections only"
cat > "$WORK/upd1.def" <<EOF
Bootstrap: localimage
From: $WORK/demo.sif

%files
    $WORK/hostdir/data.txt /opt/first.txt

%post
    echo one >> /post.log

%environment
    export WHICH=first

%labels
    Which first
EOF
sed 's/one/two/; s/WHICH=first/WHICH=second/; s/Which first/Which second/; s|/opt/first.txt|/opt/second.txt|' \
  "$WORK/upd1.def" > "$WORK/upd2.def"
chmod 644 "$WORK"/upd[12].def
"$ctr" build --sandbox "$WORK/upd" "$WORK/upd1.def" 2>/dev/null || fail "the sandbox to update"
"$ctr" build --update --sandbox --section post "$WORK/upd" "$WORK/upd2.def" 2>"$WORK/upd.err" ||
  { cat "$WORK/upd.err"; fail "build --update --section post"; }
expect_eq "--section post: %post ran over the sandbox" "one two" "$(echo $(cat "$WORK/upd/post.log"))"
[ ! -e "$WORK/upd/opt/second.txt" ] || fail "--section post copied %files"
expect_eq "--section post: %environment left" first "$("$ctr" exec "$WORK/upd" sh -c 'echo $WHICH')"
expect_contains "--section post: labels left" '"Which": "first"' "$(cat "$WORK/upd/.singularity.d/labels.json")"
"$ctr" build -u -s --section files,environment,labels "$WORK/upd" "$WORK/upd2.def" 2>/dev/null || fail "--section files,environment,labels"
expect_eq "--section files: copied" "from the host" "$(cat "$WORK/upd/opt/second.txt")"
expect_eq "--section environment" second "$("$ctr" exec "$WORK/upd" sh -c 'echo $WHICH')"
expect_contains "--section labels" '"Which": "second"' "$(cat "$WORK/upd/.singularity.d/labels.json")"
expect_eq "--section files,...: %post not run" "one two" "$(echo $(cat "$WORK/upd/post.log"))"
"$ctr" build --update --sandbox "$WORK/upd" "$WORK/upd2.def" 2>/dev/null || fail "build --update (every section)"
expect_eq "--update: every section, no bootstrap" "one two two" "$(echo $(cat "$WORK/upd/post.log"))"
expect_bad_build() {  # WHAT TEXT ARGS...
  local what=$1 want=$2 out rc
  shift 2
  set +e; out=$("$ctr" build "$@" 2>&1); rc=$?; set -e
  [ "$rc" != 0 ] || fail "$what: accepted"
  expect_eq "$what: one line ($out)" 1 "$(printf '%s\n' "$out" | grep -c .)"
  expect_contains "$what" "$want" "$out"
}
expect_bad_build "--update of a SIF" "give --sandbox and an existing directory" --update "$WORK/demo.sif" "$WORK/upd2.def"
expect_bad_build "--update of a missing sandbox" "is missing" --update --sandbox "$WORK/nothing" "$WORK/upd2.def"
expect_bad_build "--section unknown" "--section postt: expected setup, post, files" --section postt --sandbox "$WORK/x" "$WORK/upd2.def"
expect_bad_build "--update from a directory" "apply to definition files" --update --sandbox "$WORK/upd" "$WORK/hostdir"
[ ! -e "$WORK/nothing" ] && [ ! -e "$WORK/x" ] || fail "a refused build left its output"

note "--mksquashfs-args: given to mksquashfs; -v shows the squashfs's compression"
out=$("$ctr" -v build --mksquashfs-args '-comp lz4 -b 65536' "$WORK/lz4.sif" "$WORK/upd1.def" 2>/dev/null) ||
  fail "build --mksquashfs-args"
expect_contains "verbose summary" "lz4 compressed, data block size 65536" "$out"
expect_eq "the lz4 image runs" "first" "$("$ctr" exec "$WORK/lz4.sif" sh -c 'echo $WHICH')"
note "--update --sandbox DIR IMAGE: the image's files over DIR, DIR's own kept"
"$ctr" build --update --sandbox "$WORK/upd" "$WORK/lz4.sif" 2>/dev/null || fail "build --update --sandbox from an image"
expect_eq "the image's files replace the sandbox's" "one" "$(cat "$WORK/upd/post.log")"
expect_eq "the sandbox's own files stay" "from the host" "$(cat "$WORK/upd/opt/second.txt")"
note "%test sees the tree read-only (a scratch /tmp); --writable-tmpfs lets it write, and nothing stays"
printf 'Bootstrap: localimage\nFrom: %s\n\n%%%%test\n    echo scratch > /tmp/t && cat /tmp/t\n    touch /var/test\n' \
  "$WORK/demo.sif" > "$WORK/wt.def"
set +e; "$ctr" build "$WORK/wt.sif" "$WORK/wt.def" 2>/dev/null; rc=$?; set -e
[ "$rc" != 0 ] || fail "%test wrote into the tree without --writable-tmpfs"
grep -q 'Read-only file system' "$WORK/wt.sif.build.log" || fail "%test's write did not fail as read-only: $(tail -5 "$WORK/wt.sif.build.log")"
[ ! -e "$WORK/wt.sif" ] || fail "a failed %test left its image"
"$ctr" build --writable-tmpfs "$WORK/wt.sif" "$WORK/wt.def" 2>/dev/null || fail "build --writable-tmpfs: $(tail -5 "$WORK/wt.sif.build.log")"
"$ctr" exec "$WORK/wt.sif" test ! -e /var/test || fail "what %test wrote went into the image"

note "debootstrap + apt-get as root"
start=$(date +%s)
"$ctr" build "$WORK/deb.sif" "$WORK/deb.def" 2>"$WORK/deb.err" ||
  { tail -20 "$WORK/deb.sif.build.log"; fail "debootstrap build as root: $(tail -3 "$WORK/deb.err")"; }
note "built in $(( $(date +%s) - start )) s"
expect_eq "hello from apt" "Hello, world!" "$("$ctr" exec "$WORK/deb.sif" hello)"

note "debootstrap + apt-get as $CTR_TEST_USER with subordinate ids"
added=
if ! grep -q "^$CTR_TEST_USER:" /etc/subuid; then echo "$CTR_TEST_USER:300000:65536" >> /etc/subuid; added=1; fi
if ! grep -q "^$CTR_TEST_USER:" /etc/subgid; then echo "$CTR_TEST_USER:300000:65536" >> /etc/subgid; added=1; fi
cleanup_ids() { [ -z "$added" ] || sed -i "/^$CTR_TEST_USER:300000:65536\$/d" /etc/subuid /etc/subgid; rm -rf "$WORK" "${user_cache:-}"; }
trap cleanup_ids EXIT
user_cache=/tmp/ctr-build-test-cache-$(id -u "$CTR_TEST_USER")  # not in $WORK: others may rename there
rm -rf "$user_cache"
install -d -o "$CTR_TEST_USER" -m 700 "$user_cache" "$user_cache/debootstrap"
install -o "$CTR_TEST_USER" -m 600 "$CTR_CACHE_DIR"/debootstrap/*.tar "$user_cache/debootstrap/"
as_user env CTR_CACHE_DIR="$user_cache" "$ctr" build "$WORK/deb-user.sif" "$WORK/deb.def" 2>"$WORK/deb-user.err" ||
  { tail -20 "$WORK/deb-user.sif.build.log"; fail "debootstrap build as $CTR_TEST_USER: $(tail -3 "$WORK/deb-user.err")"; }
expect_eq "hello from apt (user build)" "Hello, world!" "$(as_user "$ctr" exec "$WORK/deb-user.sif" hello)"
left=$(find "$WORK" -maxdepth 1 -name '.*build*' | head -3)
[ -z "$left" ] || fail "temporary directories left: $left"
echo "PASS: $TEST_NAME"
