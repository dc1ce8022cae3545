#!/bin/bash
# Issue 58: a user who follows Apptainer's user guide, as the unprivileged test user, on an
# Apptainer-layout image (images/apptainer-style) whose files carry security.selinux
# attributes, as images built on an SELinux host do (Apptainer's own busybox test image
# among them):
#  - the sandbox workflow: `build --sandbox DIR IMAGE` (only root may write security.*
#    attributes: a user's unpack keeps the user.* ones, as Apptainer's), `exec --writable`,
#    `shell --writable`, and a SIF built back from the sandbox;
#  - an overlay embedded in a SIF (`overlay create IMAGE.sif`): `--writable` writes into
#    the partition (a write at the container's root), a later run sees it read-only, a
#    SIF without one is refused in one line; no FUSE server is left;
#  - `instance start IMAGE NAME ARGS...` on an image built from a definition's
#    %startscript: the ARGS reach it; `help instance start`; `instance list` in
#    Apptainer's columns; `exec instance://NOSUCH` exits 255;
#  - the smaller ones: `--env-file a,b`, APPTAINER_COMMAND, a data set packed as a SIF
#    data partition (`sif new`, `sif add --parttype 3`) bound with image-src=/.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
command -v fuse2fs >/dev/null || skip "fuse2fs is not installed (Debian package fuse2fs)"
command -v fuse-overlayfs >/dev/null || skip "fuse-overlayfs is not installed (Debian package fuse-overlayfs)"
use_linger 0
chmod 755 "$WORK"
make_user_dir
uid=$(id -u "$CTR_TEST_USER")
run() { as_user env -C "$U" "$CTR_BIN" "$@"; }

# The image: Apptainer's layout, security.selinux on a directory, a program and a script,
# a user.* attribute on a file; built by root, as a site builds the images users run.
make_apptainer_rootfs "$WORK/root"
python3 - "$WORK/root" <<'PY'
import os, sys
root = sys.argv[1]
label = b"system_u:object_r:container_file_t:s0\0"
for p in ("etc", "bin/busybox", ".singularity.d/runscript"):
    os.setxattr(os.path.join(root, p), "security.selinux", label, follow_symlinks=False)
os.setxattr(os.path.join(root, "etc/hostname") if os.path.exists(os.path.join(root, "etc/hostname"))
            else os.path.join(root, "etc"), "user.origin", b"guide")
PY
"$CTR_BIN" build "$WORK/guide.sif" "$WORK/root" >/dev/null
chmod 644 "$WORK/guide.sif"
origin_file=/etc
[ -e "$WORK/root/etc/hostname" ] && origin_file=/etc/hostname

note "the image carries security.* attributes: a plain unsquashfs as the user fails on them"
offset=$("$CTR_BIN" sif list "$WORK/guide.sif" | awk -F'|' '/Squashfs/ { split($4, a, "-"); print a[1] + 0 }')
set +e; as_user unsquashfs -n -d "$U/plain" -o "$offset" "$WORK/guide.sif" >/dev/null 2>"$WORK/plain.err"; rc=$?; set -e
[ "$rc" != 0 ] || fail "the fixture carries no attribute a user cannot write: this test would prove nothing"
rm -rf "$U/plain"

note "sandbox: build --sandbox as the user, --writable exec and shell, a SIF built back"
run build --sandbox sb "$WORK/guide.sif" 2>"$WORK/sb.err" >/dev/null || fail "build --sandbox: $(cat "$WORK/sb.err")"
expect_eq "the user.* attribute is kept" guide \
  "$(as_user python3 -c "import os; print(os.getxattr('$U/sb$origin_file', 'user.origin').decode())")"
run exec --writable sb sh -c 'echo written > /etc/written' || fail "exec --writable on the sandbox"
echo 'echo shelled > /etc/shelled' | run shell --writable sb >/dev/null || fail "shell --writable on the sandbox"
run build back.sif sb >/dev/null 2>"$WORK/back.err" || fail "build back.sif sb: $(cat "$WORK/back.err")"
expect_eq "the SIF built back has both" "written shelled" "$(run exec back.sif sh -c 'echo $(cat /etc/written /etc/shelled)')"

# settled IMAGE: the launch's FUSE servers have ended (fuse2fs holds the image's lock until
# it has written it back) and none of the user's FUSE mounts is left.
settled() {
  local i
  flock -w 10 "$1" true || fail "$1: still locked 10 s after the run"
  servers() { pgrep -u "$uid" -a -x fuse2fs; pgrep -u "$uid" -a -x fuse-overlayfs; }
  for i in $(seq 100); do
    [ -z "$(servers)" ] && break
    sleep 0.05
  done
  [ -z "$(servers)" ] || fail "FUSE servers left: $(servers)"
}

note "an overlay embedded in the SIF: --writable writes into it, later runs read it"
cp "$WORK/guide.sif" "$U/app.sif"
chown "$CTR_TEST_USER" "$U/app.sif"
run overlay create --size 64 app.sif || fail "overlay create app.sif"
expect_contains "--explain: the partition is the writable layer" "layer:    upper/ of ext3 image $U/app.sif" \
  "$(run exec --explain --writable app.sif true)"
ends_within 60 "exec --writable app.sif, a write at the root" run exec --writable app.sif sh -c 'echo persist > /p'
settled "$U/app.sif"
expect_eq "read in the next run, without --writable" persist "$(run exec app.sif cat /p)"
settled "$U/app.sif"
set +e; out=$(run exec app.sif sh -c 'echo x > /q' 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "the partition took a write without --writable"
expect_contains "read-only without --writable" "Read-only file system" "$out"
settled "$U/app.sif"
refused_in_one_line "--writable on a SIF without an overlay partition" "or a SIF with an overlay partition" \
  run exec --writable back.sif true

note "instance start IMAGE NAME ARGS: the %startscript gets ARGS"
cat > "$U/svc.def" <<'D'
Bootstrap: localimage
From: back.sif

%startscript
    echo "started: $1 $2 (${APPTAINER_COMMAND})"
    exec sleep 3600
D
chown "$CTR_TEST_USER" "$U/svc.def"
run build svc.sif svc.def >/dev/null 2>"$WORK/svc.err" || fail "build svc.sif: $(cat "$WORK/svc.err")"
run instance start svc.sif web1 8080 --verbose || fail "instance start with arguments"
log=$(run instance list --json | jq -r '.instances[0].logOutPath')
for _ in $(seq 100); do grep -q started "$log" 2>/dev/null && break; sleep 0.05; done
expect_eq "the startscript's arguments" "started: 8080 --verbose (start)" "$(cat "$log")"
# Apptainer's columns (Go's tabwriter, padding 4): each as wide as its widest cell plus 4.
pid=$(run instance list --json | jq -r '.instances[0].pid')
w=$(( ${#pid} > 3 ? ${#pid} : 3 ))
expect_eq "instance list, as Apptainer's" \
  "$(printf '%-17s%-*s%-6s%s\n%-17s%-*s%-6s%s' 'INSTANCE NAME' $((w + 4)) PID IP IMAGE web1 $((w + 4)) "$pid" '' "$U/svc.sif")" \
  "$(run instance list)"
expect_contains "help instance start" "The instance's name, then the arguments of its startscript" \
  "$(run help instance start)"
set +e; run exec instance://nosuch true 2>/dev/null; rc=$?; set -e
expect_eq "exec instance://nosuch: Apptainer's status" 255 "$rc"
run instance stop web1 2>/dev/null

note "--env-file a,b; APPTAINER_COMMAND; a data partition bound with image-src=/"
printf 'FIRST=1\n' > "$U/a.env"; printf 'SECOND=2\n' > "$U/b.env"
expect_eq "--env-file a comma list" "1 2" "$(run exec --env-file a.env,b.env back.sif sh -c 'echo $FIRST $SECOND')"
expect_eq "APPTAINER_COMMAND of exec" exec "$(run exec back.sif sh -c 'echo $APPTAINER_COMMAND')"
expect_eq "APPTAINER_COMMAND of shell" shell "$(echo 'echo $APPTAINER_COMMAND' | run shell back.sif)"
mkdir -p "$WORK/inputs"
echo "input data" > "$WORK/inputs/file.txt"
mksquashfs "$WORK/inputs" "$WORK/inputs.sqfs" -quiet -noappend -all-root >/dev/null
chmod 644 "$WORK/inputs.sqfs"
run sif new inputs.sif
run sif add --datatype 4 --partfs 1 --parttype 3 --partarch 2 inputs.sif "$WORK/inputs.sqfs"
expect_eq "the data partition at /data" "input data" \
  "$(run exec --bind inputs.sif:/data:image-src=/ back.sif cat /data/file.txt)"

assert_nothing_left "the user guide's workflows"
echo "PASS: $TEST_NAME"
