#!/bin/bash
# pyxis's option rules, mount form, remap-root and variables (issue 54, items 2, 3, 6 and 8), as the test user on the real
# cluster: an empty --container-image (which ran the step on the bare node, exit 0) and the
# other empty values are refused at once in srun; a pair given both ways (--container-
# writable with --container-readonly), an option given twice with two values, a name with
# '/' or over 32 characters, refused in one line; the PYXIS_CONTAINER_* variables of a job
# script set the options the command line does not give (IMAGE, WORKDIR, MOUNTS, NAME,
# READONLY/WRITABLE, MOUNT_HOME, REMAP_ROOT, SAVE), the command line winning;
# --container-save writes an image the next step runs; options without a container are
# said to be ignored.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/lib.sh"
slurm_demo_test
mkdir -p "$WORK/data"
echo "from the host" > "$WORK/data/file"
chmod -R a+rX "$WORK"
chmod 777 "$WORK" # --container-save writes there, as the user
image=$WORK/demo.sqfs
trap 'pkill -u "$(id -u "$CTR_TEST_USER")" -x srun || true; rm -rf "$WORK"' EXIT
# run [VAR=VALUE...] CMD...: CMD as the test user from $WORK with these variables; output
# (both streams) in $out, status in $rc.
run() { set +e; out=$(slurm_as_user "$WORK" env "$@" 2>&1); rc=$?; set -e; }
refused() {
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "$1: exit status $rc (0: not refused; 124: it hung): $out"
  expect_contains "$1" "$2" "$out"
  note "refused: $1: $(printf '%s\n' "$out" | grep -m1 'ctr: ')"
}

note "empty values, pairs given both ways, two values, bad names: refused at once in srun"
run srun -N1 --container-image= true
refused "an empty --container-image" "ctr: --container-image: an argument is required"
! printf '%s\n' "$out" | grep -q "queued\|allocated" || fail "an empty image was allocated a step: $out"
run srun -N1 --container-image="$image" --container-workdir= true
refused "an empty --container-workdir" "ctr: --container-workdir: an argument is required"
run srun -N1 --container-image="$image" --container-writable --container-readonly true
refused "writable and readonly" "ctr: both --container-writable and --container-readonly were given"
run srun -N1 --container-image="$image" --container-remap-root --no-container-remap-root true
refused "remap-root both ways" "ctr: both --container-remap-root and --no-container-remap-root were given"
run srun -N1 --container-image="$image" --container-name=a/b true
refused "a name with /" "a name is at most 32 characters, without '/'"
run srun -N1 --container-image="$image" --container-name="$(printf 'n%.0s' $(seq 33))" true
refused "a name of 33 characters" "a name is at most 32 characters"
run srun -N1 --container-image="$image" --container-image=/other.sqfs true
refused "two images" "ctr: --container-image was given twice"
run srun -N1 --container-image="$image" --container-name=n:no_exec true
refused "NAME:no_exec (the differences table)" "ctr: --container-name=n:no_exec: no_exec is not supported"
run srun -N1 --container-image="$image" --container-name=n:sometimes true
refused "an unknown NAME:FLAG" "ctr: --container-name=n:sometimes: the flag must be auto, create or exec"

note "a writable root by default (pyxis's); --container-remap-root changes the image's own files, as an install does"
run srun -N1 --container-image="$image" sh -c 'touch /written && echo yes'
expect_eq "writable by default ($out)" "yes" "$out"
run srun -N1 --container-image="$image" --container-readonly sh -c 'touch /written 2>/dev/null && echo yes || echo no'
expect_eq "--container-readonly ($out)" "no" "$out"
run srun -N1 --container-image="$image" --container-remap-root sh -c \
  'echo added >> /etc/os-release && rm /etc/hostname 2>/dev/null; mkdir -p /usr/local/pkg && chown 0:0 /usr/local/pkg && tail -1 /etc/os-release'
expect_eq "remap-root changes the image's files without --container-writable ($out)" "added" "$out"

note "--container-remap-root: root with its namespace's capabilities (a tmpfs mount works), none without"
run srun -N1 --container-image="$image" --container-remap-root sh -c \
  'id -u; grep ^CapEff: /proc/self/status; mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo mounted'
expect_contains "uid 0 ($out)" "0" "$(printf '%s\n' "$out" | head -1)"
! printf '%s\n' "$out" | grep -q "^CapEff:.*0000000000000000$" || fail "remap-root without capabilities: $out"
expect_contains "a tmpfs mount as root in the container ($out)" "mounted" "$out"
run srun -N1 --container-image="$image" grep ^CapEff: /proc/self/status
expect_contains "no capability without remap-root ($out)" "0000000000000000" "$out"

note "--container-unshare=net,ipc,uts: namespaces of the container's own; pid refused; --container-entrypoint-log taken"
interfaces="awk -F: 'NR > 2 {gsub(/ /, \"\", \$1); print \$1}' /proc/net/dev | sort | xargs"
run srun -N1 --container-image="$image" sh -c "$interfaces"
expect_eq "the node's interfaces without it ($out)" "eth0 lo" "$out"
run srun -N1 --container-image="$image" readlink /proc/self/ns/ipc
node_ipc=$out
run srun -N1 --container-image="$image" --container-unshare=net,ipc,uts sh -c "$interfaces; readlink /proc/self/ns/ipc"
expect_eq "loopback only" "lo" "$(printf '%s\n' "$out" | head -1)"
[ "$(printf '%s\n' "$out" | tail -1)" != "$node_ipc" ] || fail "unshare=ipc: the node's IPC namespace ($node_ipc): $out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_UNSHARE=net srun -N1 sh -c "$interfaces"
expect_eq "PYXIS_CONTAINER_UNSHARE ($out)" "lo" "$out"
run srun -N1 --container-image="$image" --container-unshare=pid true
refused "unshare=pid" "'pid' is not one of net, ipc, uts (a PID namespace would hide the step's tasks from Slurm)"
run srun -N1 --container-image="$image" --container-entrypoint-log true
expect_eq "--container-entrypoint-log is taken ($out)" 0 "$rc"

note "--container-mounts in pyxis's form: relative sources, several entries, '+' flags, tmpfs"
run srun -N1 --container-image="$image" --container-mounts=./data:/data:ro+rbind,tmpfs:/scratchdir,.:./job \
  sh -c 'cat /data/file; touch /data/x 2>/dev/null && echo rw || echo ro; touch /scratchdir/y && echo scratch; ls /job/data'
expect_eq "the mounts ($out)" "from the host
ro
scratch
file" "$out"
run srun -N1 --container-image="$image" --container-mounts=umount:/dev/shm true
refused "an umount: source" "umount: is enroot's"
run srun -N1 --container-image="$image" --container-mounts=/tmp:/t:noexec true
refused "a flag ctr cannot give" "flag 'noexec' is not supported"
run srun -N1 --container-image="$image" --container-mounts=/tmp:../../x true
refused "a target that walks out of the root" "the target ../../x has a '..'"
run srun -N1 --container-image="$image" --container-mounts=/nonexistent:/x true
refused "a missing source (on the node)" "ctr: --container-image=$image: bind source /nonexistent does not exist"

note "PYXIS_CONTAINER_* variables set what the command line does not"
run PYXIS_CONTAINER_IMAGE="$image" srun -N1 sh -c 'grep ^ID= /etc/os-release'
expect_eq "PYXIS_CONTAINER_IMAGE ($out)" "ID=ctr-demo" "$out"
run PYXIS_CONTAINER_IMAGE=/nonexistent.sqfs srun -N1 --container-image="$image" sh -c 'grep ^ID= /etc/os-release'
expect_eq "the command line's image wins ($out)" "ID=ctr-demo" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_WORKDIR=/etc PYXIS_CONTAINER_MOUNTS="$WORK/data:/data" \
  srun -N1 sh -c 'echo "$(pwd) $(cat /data/file)"'
expect_eq "WORKDIR and MOUNTS ($out)" "/etc from the host" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_WORKDIR=/etc srun -N1 --container-workdir=/tmp pwd
expect_eq "the command line's workdir wins ($out)" "/tmp" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_READONLY=1 srun -N1 sh -c 'touch /written 2>/dev/null && echo yes || echo no'
expect_eq "READONLY=1: a read-only root ($out)" "no" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_WRITABLE=true srun -N1 --container-readonly sh -c 'touch /written 2>/dev/null && echo yes || echo no'
expect_eq "the command line's --container-readonly wins ($out)" "no" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_REMAP_ROOT=1 srun -N1 id -u
expect_eq "REMAP_ROOT=1 ($out)" "0" "$out"
home_mounts="awk -v h=/home/$CTR_TEST_USER '\$5 == h' /proc/self/mountinfo | wc -l"
run PYXIS_CONTAINER_IMAGE="$image" srun -N1 sh -c "$home_mounts"
expect_eq "the home is mounted by default ($out)" "1" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_MOUNT_HOME=no srun -N1 sh -c "$home_mounts"
expect_eq "MOUNT_HOME=no: no home ($out)" "0" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_NAME=fromvar srun -N1 sh -c 'touch /tmp/mark; grep ^ID= /etc/os-release'
expect_eq "NAME ($out)" "ID=ctr-demo" "$out"
run PYXIS_CONTAINER_IMAGE="$image" PYXIS_CONTAINER_WRITABLE=maybe srun -N1 true
expect_contains "a value that is no boolean is said" "PYXIS_CONTAINER_WRITABLE=maybe: expected 1 or 0" "$out"

note "--container-save (and PYXIS_CONTAINER_SAVE): the container's root saved after the step, a usable image"
run srun -N1 --container-image="$image" --container-writable --container-save=./saved.sqsh \
  sh -c 'echo made-in-step > /made; mkdir -p /opt/new/dir'
expect_contains "the exported line" "ctr: exported container" "$out"
run srun -N1 --container-image=./saved.sqsh sh -c 'cat /made; test -d /opt/new/dir && echo dir'
expect_eq "the saved image: what the step wrote" "made-in-step
dir" "$out"
# The container's mounts are not in it: its /etc/passwd is the image's, not the one with the
# user's entry that ctr bound over it, and the submit directory ($WORK) is not there.
unsquashfs -q -d "$WORK/unpacked" "$WORK/saved.sqsh" etc/passwd "${WORK#/}" >/dev/null
cmp -s "$WORK/unpacked/etc/passwd" "$WORK/demo/etc/passwd" || fail "the saved /etc/passwd is not the image's"
[ ! -e "$WORK/unpacked$WORK/saved.sqsh" ] || fail "the saved image has the submit directory's files"
run PYXIS_CONTAINER_IMAGE=./saved.sqsh PYXIS_CONTAINER_WRITABLE=1 PYXIS_CONTAINER_SAVE="$WORK/again.sqsh" srun -N1 \
  sh -c 'echo second > /second'
run srun -N1 --container-image="$WORK/again.sqsh" cat /made /second
expect_eq "PYXIS_CONTAINER_SAVE" "made-in-step
second" "$out"
! ls -a "$WORK" | grep -q '^\.ctr-save-' || fail "a save left its temporary file: $(ls -a "$WORK")"
run srun -N1 --container-image="$image" --container-save=./dir/ true
refused "a directory to save to" "ctr: --container-save=./dir/: the target is a directory"
run PYXIS_CONTAINER_IMAGE= srun -N1 true
refused "an empty PYXIS_CONTAINER_IMAGE" "ctr: --container-image: an argument is required"

note "container options without a container: said to be ignored, the step runs bare"
run srun -N1 --container-workdir=/tmp --container-writable sh -c 'echo bare'
expect_eq "the step ran" 0 "$rc"
expect_contains "workdir ignored" "ctr: ignoring --container-workdir: neither --container-image nor --container-name was given" "$out"
expect_contains "writable ignored" "ctr: ignoring --container-writable" "$out"

slurm_wait_no_jobs "$CTR_TEST_USER" 20
assert_nothing_left "pyxis options"
echo "PASS: $TEST_NAME"
