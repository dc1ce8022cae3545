# ctr exec as an unprivileged user from a directory, a plain squashfs, a SIF image and a
# Singularity 2 image (.simg):
# identity, default mounts, binds, --contain, --writable-tmpfs, environment, exit codes,
# --explain, and the hand-over (no_new_privs, no capabilities, seccomp) seen from inside.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse

make_demo_rootfs "$WORK/demo"
# Kernel overlayfs in a user namespace cannot copy up a directory owned by an unmapped uid
# or gid (root): --writable-tmpfs writes work where the user owns the directory.
mkdir "$WORK/demo/scratch" && chown "$CTR_TEST_USER:$(id -g "$CTR_TEST_USER")" "$WORK/demo/scratch"
mksquashfs "$WORK/demo" "$WORK/demo.sqfs" -quiet -noappend >/dev/null
"$CTR_BIN" build "$WORK/demo.sif" "$WORK/demo" >/dev/null
# A Singularity 2 image: the squashfs behind a launch line.
{ printf '#!/usr/bin/env run-singularity\n'; cat "$WORK/demo.sqfs"; } > "$WORK/demo.simg"
cc -static -O2 -o "$WORK/probe" "$(dirname "$0")/probe_syscall.c"
mkdir -p "$WORK/data" && echo hello > "$WORK/data/file" && chmod -R a+rwX "$WORK/data"
chmod -R a+rX "$WORK"
uid=$(id -u "$CTR_TEST_USER"); gid=$(id -g "$CTR_TEST_USER")
home=$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)

for img in demo demo.sqfs demo.sif demo.simg; do
  note "image $img"
  out=$(as_user "$CTR_BIN" exec "$WORK/$img" sh -c 'id -u; id -g; pwd; grep "^'"$CTR_TEST_USER"':" /etc/passwd | cut -d: -f3; cat /etc/os-release | head -1')
  expect_eq "$img: uid/gid/cwd/passwd/image" \
    "$(printf '%s\n%s\n%s\n%s\n%s' "$uid" "$gid" "$WORK" "$uid" 'NAME="ctr demo (busybox)"')" "$out"
  set +e; as_user "$CTR_BIN" exec "$WORK/$img" sh -c 'exit 42'; rc=$?; set -e
  expect_eq "$img: exit status" 42 "$rc"
done

img="$WORK/demo.sif"
note "home, /tmp, /proc, /dev, hosts"
out=$(as_user "$CTR_BIN" exec "$img" sh -c 'test -d "$HOME" && echo home=$HOME; touch /tmp/ctr-exec-probe && echo tmp; test -e /proc/self/status && echo proc; test -c /dev/null && echo dev; test -e /etc/hosts && echo hosts')
expect_eq "default mounts" "$(printf 'home=%s\ntmp\nproc\ndev\nhosts' "$home")" "$out"
[ -e /tmp/ctr-exec-probe ] || fail "/tmp is not the host's /tmp"
rm -f /tmp/ctr-exec-probe

note "binds: ro, rw, missing target created, comma list, CTR_BIND"
out=$(as_user "$CTR_BIN" exec -B "$WORK/data:/data:ro" "$img" sh -c 'cat /data/file; (echo x > /data/new) 2>/dev/null && echo writable || echo readonly')
expect_eq "ro bind" "$(printf 'hello\nreadonly')" "$out"
out=$(as_user "$CTR_BIN" exec --bind "$WORK/data:/data" "$img" sh -c 'echo written > /data/new && cat /data/new')
expect_eq "rw bind" written "$out"
[ "$(cat "$WORK/data/new")" = written ] || fail "rw bind did not write through to the host"
out=$(as_user env CTR_BIND="$WORK/data:/d1,$WORK/data:/d2:ro" "$CTR_BIN" exec "$img" sh -c 'cat /d1/file /d2/file')
expect_eq "CTR_BIND comma list" "$(printf 'hello\nhello')" "$out"

note "--contain, --no-home, --pwd, --writable-tmpfs"
out=$(as_user "$CTR_BIN" exec --contain "$img" sh -c 'ls /tmp | wc -l; pwd')
expect_eq "--contain: private /tmp, cwd = home" "$(printf '0\n%s' "$home")" "$out"
# On a held image, --contain's own /dev, /tmp, /dev/shm and home are mounted on a copy of the
# holder's prepared root (the device binds and /dev/fd links made in the new /dev), not on a
# root of the launch's own: each launch still gets empty ones.
as_user "$CTR_BIN" exec --contain "$img" sleep 120 >/dev/null 2>&1 & contained_holder=$!
for _ in $(seq 100); do
  err=$(as_user "$CTR_BIN" -d exec --contain "$img" true 2>&1) || fail "--contain launch: $err"
  [[ $err == *"root: a copy of the prepared root"* ]] && break
  sleep 0.1
done
expect_contains "--contain on a held image" "root: a copy of the prepared root" "$err"
out=$(as_user "$CTR_BIN" exec --contain "$img" sh -c 'echo x > /dev/null && test -c /dev/zero && test -c /dev/urandom && echo devices; readlink /dev/fd; find /tmp /dev/shm -mindepth 1 | wc -l; touch /tmp/t /dev/shm/s; ls -d "$HOME"')
expect_eq "--contain on a held image: devices, links, empty /tmp and /dev/shm, home" \
  "$(printf 'devices\n/proc/self/fd\n0\n%s' "$home")" "$out"
out=$(as_user "$CTR_BIN" exec --contain "$img" sh -c 'find /tmp /dev/shm -mindepth 1 | wc -l')
expect_eq "--contain on a held image: the next launch's /tmp and /dev/shm are its own" 0 "$out"
pkill -u "$CTR_TEST_USER" -x sleep || true
wait "$contained_holder" || true
out=$(as_user "$CTR_BIN" exec --no-home --pwd /etc "$img" sh -c 'pwd; test -d "'"$home"'" && echo home || echo nohome')
expect_eq "--no-home --pwd" "$(printf '/etc\nnohome')" "$out"
out=$(as_user "$CTR_BIN" exec "$img" sh -c 'mkdir /newdir 2>/dev/null && echo writable || echo readonly')
expect_eq "root read-only by default" readonly "$out"
out=$(as_user "$CTR_BIN" exec --writable-tmpfs "$img" sh -c 'echo x > /scratch/x && cat /scratch/x')
expect_eq "--writable-tmpfs" x "$out"
as_user "$CTR_BIN" exec "$img" test ! -e /scratch/x || fail "--writable-tmpfs changes leaked into the image"

note "environment"
out=$(as_user env FOO=host CTRENV_BAR=injected "$CTR_BIN" exec --env BAZ=cli "$img" sh -c 'echo $FOO $BAR $BAZ $CTR_DEMO; echo $CTR_CONTAINER')
expect_eq "env pass-through, CTRENV_, --env, image env scripts" "$(printf 'host injected cli 1\n%s' "$img")" "$out"
out=$(as_user env FOO=host "$CTR_BIN" exec --cleanenv "$img" sh -c 'echo "[$FOO]"')
expect_eq "--cleanenv" "[]" "$out"

note "env scripts: applied without a shell when they are plain, sourced by /bin/sh otherwise"
cp -a "$WORK/demo" "$WORK/envdemo"
printf '#!/bin/sh\nif [ -z "$LD_LIBRARY_PATH" ]; then\n    LD_LIBRARY_PATH="/.singularity.d/libs"\nfi\nexport LD_LIBRARY_PATH\n' \
  > "$WORK/envdemo/.singularity.d/env/99-base.sh"
out=$(as_user "$CTR_BIN" -d exec "$WORK/envdemo" sh -c 'echo $CTR_DEMO $LD_LIBRARY_PATH' 2>"$WORK/envdemo.log")
expect_eq "stock-style env scripts" "1 /.singularity.d/libs" "$out"
! grep -q "applying the environment with /bin/sh" "$WORK/envdemo.log" || fail "plain env scripts started a shell: $(cat "$WORK/envdemo.log")"
printf 'export SUB="$(echo sub)"\n' > "$WORK/envdemo/.singularity.d/env/95-sub.sh"
out=$(as_user "$CTR_BIN" -d exec --env CTR_DEMO=cli "$WORK/envdemo" sh -c 'echo $CTR_DEMO $SUB $LD_LIBRARY_PATH' 2>"$WORK/envdemo.log")
expect_eq "env scripts outside the subset, through /bin/sh; --env still wins" "cli sub /.singularity.d/libs" "$out"
grep -q "applying the environment with /bin/sh" "$WORK/envdemo.log" || fail "no shell fallback logged"
# --image-env-first (pyxis's rule): Docker's ENV, as written, gives the image's value over
# the host's; a host variable the image does not set comes back; the same through /bin/sh.
printf 'export CUDA_VERSION="${CUDA_VERSION:-"12.4.0"}"\n' > "$WORK/envdemo/.singularity.d/env/10-docker2singularity.sh"
show='echo $CUDA_VERSION $MINE $SUB'
expect_eq "Apptainer's rule: the host's value" "11.0 job sub" \
  "$(as_user env CUDA_VERSION=11.0 MINE=job "$CTR_BIN" exec "$WORK/envdemo" sh -c "$show")"
expect_eq "--image-env-first: the image's value" "12.4.0 job sub" \
  "$(as_user env CUDA_VERSION=11.0 MINE=job "$CTR_BIN" exec --image-env-first "$WORK/envdemo" sh -c "$show")"
expect_eq "--explain names what is kept from the scripts" "11.0" \
  "$(as_user env CUDA_VERSION=11.0 "$CTR_BIN" exec --image-env-first --explain --json "$WORK/envdemo" true | jq -r '.host_fallback.CUDA_VERSION')"

note "command lookup: execvp's rules in the container's PATH, one exec per candidate"
rm "$WORK/envdemo/.singularity.d/env/95-sub.sh"  # plain scripts again: ctr itself looks the command up
mkdir -p "$WORK/envdemo/opt/a" "$WORK/envdemo/opt/b"
printf '#!/bin/sh\necho from-a\n' > "$WORK/envdemo/opt/a/tool" && chmod 644 "$WORK/envdemo/opt/a/tool"
printf '#!/bin/sh\necho from-b "$0"\n' > "$WORK/envdemo/opt/b/tool" && chmod 755 "$WORK/envdemo/opt/b/tool"
printf 'echo plain "$0" "$1"\n' > "$WORK/envdemo/opt/b/plain" && chmod 755 "$WORK/envdemo/opt/b/plain"
chmod -R a+rX "$WORK/envdemo/opt"
for pid in "" --pid; do
  out=$(as_user "$CTR_BIN" exec $pid --env PATH=/opt/a:/opt/b "$WORK/envdemo" tool)
  expect_eq "a non-executable match is skipped ($pid)" "from-b /opt/b/tool" "$out"
  out=$(as_user "$CTR_BIN" exec $pid --env PATH=/opt/a:/opt/b "$WORK/envdemo" plain arg)
  expect_eq "a script without #! runs with /bin/sh ($pid)" "plain /opt/b/plain arg" "$out"
  set +e; err=$(as_user "$CTR_BIN" exec $pid "$WORK/envdemo" /opt/a/tool 2>&1); rc=$?; set -e
  expect_eq "not executable: status ($pid)" 255 "$rc"
  expect_eq "not executable: one line ($pid)" \
    "ctr: error: command '/opt/a/tool' in the container is not an executable file (permission denied)" "$err"
  set +e; err=$(as_user "$CTR_BIN" exec $pid --env PATH=/opt/a "$WORK/envdemo" missing 2>&1); rc=$?; set -e
  expect_eq "not found: status ($pid)" 255 "$rc"
  expect_eq "not found: one line ($pid)" "ctr: error: command 'missing' not found in the container" "$err"
done

note "hand-over: no_new_privs, capabilities, seccomp"
out=$(as_user "$CTR_BIN" exec "$img" sh -c 'grep -E "^(NoNewPrivs|CapEff|CapPrm|CapBnd|Seccomp):" /proc/self/status | tr -d "\t"')
expect_eq "status" "$(printf 'CapPrm:0000000000000000\nCapEff:0000000000000000\nCapBnd:0000000000000000\nNoNewPrivs:1\nSeccomp:2')" "$out"
out=$(as_user "$CTR_BIN" exec -B "$WORK/probe:/probe" "$img" /probe)
expect_eq "keyctl refused by seccomp" "errno=1" "$out"

note "a site's seccomp profile in Docker/OCI JSON (ctr.conf 'seccomp profile')"
cat > "$WORK/site-seccomp.json" <<'JSON'
{"defaultAction": "SCMP_ACT_ALLOW",
 "syscalls": [{"names": ["keyctl"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38,
               "comment": "ENOSYS, so that the test sees this profile and not the default"}]}
JSON
printf 'seccomp profile = %s\n' "$WORK/site-seccomp.json" > "$WORK/ctr-seccomp.conf"
chmod 644 "$WORK/site-seccomp.json" "$WORK/ctr-seccomp.conf"
out=$(CTR_TEST_CONFIG=$WORK/ctr-seccomp.conf as_user "$CTR_BIN" exec -B "$WORK/probe:/probe" "$img" /probe)
expect_eq "keyctl refused by the site's JSON profile" "errno=38" "$out"
if [ -r /usr/share/containers/seccomp.json ]; then
  # Podman's default (containers-common): default-deny, archMap, includes/excludes by caps.
  printf 'seccomp profile = /usr/share/containers/seccomp.json\n' > "$WORK/ctr-seccomp.conf"
  out=$(CTR_TEST_CONFIG=$WORK/ctr-seccomp.conf as_user "$CTR_BIN" exec -B "$WORK/probe:/probe" "$img" sh -c 'echo ok; /probe')
  expect_eq "Podman's default-deny profile runs a shell and, unlike ctr's default, allows keyctl" "$(printf 'ok\nerrno=0')" "$out"
else
  note "skip: Podman's /usr/share/containers/seccomp.json is not installed (containers-common)"
fi
printf '{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["keyctl"], "action": "SCMP_ACT_BLOCK"}]}\n' > "$WORK/site-seccomp.json"
printf 'seccomp profile = %s\n' "$WORK/site-seccomp.json" > "$WORK/ctr-seccomp.conf"
set +e; err=$(CTR_TEST_CONFIG=$WORK/ctr-seccomp.conf as_user "$CTR_BIN" exec "$img" true 2>&1); rc=$?; set -e
expect_eq "a bad profile: one line" \
  "ctr: error: seccomp profile: $WORK/site-seccomp.json: syscalls[0].action: unknown action 'SCMP_ACT_BLOCK'" "$err"
[ "$rc" -ne 0 ] || fail "a bad profile: exit status 0"

note "-d: one summary line of the launch's steps, just before the hand-over"
err=$(as_user "$CTR_BIN" -d exec "$img" true 2>&1 >/dev/null)
line=$(printf '%s\n' "$err" | grep "launch steps:" || true)
expect_eq "-d: one summary line" 1 "$(printf '%s\n' "$line" | grep -c "launch steps:")"
for step in "start-up and command line" "planning the launch" "joining the shared image mount" "hand-over" "ms since ctr started"; do
  expect_contains "-d summary names '$step'" "$step" "$line"
done

note "--explain (text and JSON) runs nothing"
out=$(as_user "$CTR_BIN" exec --explain -B "$WORK/data:/data:ro" "$img" true)
expect_contains "--explain" "bind $WORK/data -> /data (ro) [user]" "$out"
out=$(as_user "$CTR_BIN" exec --explain --json "$img" true)
expect_contains "--explain --json" '"driver": "squashfuse"' "$out"
expect_contains "--explain: the .simg's squashfs after its launch line" \
  "squashfs, squashfs at offset 31" "$(as_user "$CTR_BIN" exec --explain "$WORK/demo.simg" true)"

note "--no-mount: Apptainer's names of default mounts, and a default bind's destination"
# Mount points, less those that only show the image where it lacks a mount target: the
# underlays (with --no-mount tmp, the image's own /tmp becomes one, to hold the working
# directory) and the image's entries bound into them (the mounts from the image's server
# other than "/").
mounted() {
  as_user "$CTR_BIN" exec "$@" sh -c 'awk '\''{ i = 7; while ($i != "-") i++; mp[NR] = $5; src[NR] = $(i + 2)
      if ($5 == "/") img = $(i + 2) }
    END { for (n = 1; n <= NR; n++) if (src[n] != "ctr-underlay" && (src[n] != img || mp[n] == "/")) print mp[n] }'\'' \
    /proc/self/mountinfo' | sort -u | xargs
}
all=$(mounted "$img")
for d in /tmp /var/tmp /etc/hosts "$home" /sys; do
  [[ " $all " == *" $d "* ]] || fail "$d is not mounted by default: $all"
done
some=$(mounted --no-mount tmp,home,/etc/hosts,sys "$img")
for d in /tmp /var/tmp /etc/hosts "$home" /sys; do
  [[ " $some " != *" $d "* ]] || fail "--no-mount left $d mounted: $some"
done
[[ " $some " == *" /etc/localtime "* ]] || fail "--no-mount /etc/hosts took /etc/localtime too: $some"
expect_eq "APPTAINER_NO_MOUNT=proc: no /proc" 0 \
  "$(as_user env APPTAINER_NO_MOUNT=proc "$CTR_BIN" exec "$img" sh -c 'ls /proc | wc -l')"
expect_contains "--explain lists what is left out" "left out (--no-mount): /tmp /var/tmp" \
  "$(as_user "$CTR_BIN" exec --explain --no-mount tmp "$img" true)"
set +e; err=$(as_user "$CTR_BIN" exec --no-mount floppy "$img" true 2>&1); rc=$?; set -e
expect_eq "an unknown word: exit 1" 1 "$rc"
expect_contains "names it" "--no-mount 'floppy': expected proc, sys" "$err"

note "run and shell"
out=$(as_user "$CTR_BIN" run "$img" echo arg)
expect_contains "run uses the runscript" "Hello from the ctr demo container" "$out"
expect_contains "run passes arguments" "arg" "$out"
out=$(echo 'echo in-shell $0' | as_user "$CTR_BIN" shell "$img")
expect_eq "shell" "in-shell /bin/sh" "$out"

sleep 0.2
assert_no_leftovers
echo "PASS: $TEST_NAME"
