#!/bin/bash
# The setuid helper's boundary: installed setuid root into a test prefix, run as the
# unprivileged test user, it must refuse everything below with a clear message and leave
# nothing mounted or attached; what it does allow must come out with no privilege left.
#
# Sourced with CTR_HELPER_SOURCE_ONLY=1 (test_helper_handover.sh), it only defines the setup.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY=/usr/bin/python3
HELPER_RUNDIR=/run/ctr-helper

# helper_install PREFIX [all]: configures a build of this tree with CMAKE_INSTALL_PREFIX=PREFIX,
# builds ctr-mount-helper (and with "all", ctr too) and installs it setuid root with
# `cmake --install [--component helper]` (the path the admin guide documents). Its compiled-in
# config and exec target then point into PREFIX. PREFIX and its parents are root-owned (the
# helper checks that chain).
helper_install() {
  PREFIX=$1
  local what=${2:-helper}
  local build="$PREFIX.build"
  # The build under test, when it was configured for this prefix with the setuid install
  # (preset "ci"), is installed as it is: no second build of ctr.
  if [ -f "${CTR_BUILD_DIR:-}/CMakeCache.txt" ] && [ "${CTR_INSTALL_PREFIX:-}" = "$PREFIX" ] &&
     [ "${CTR_INSTALL_SUID_HELPER:-}" = ON ]; then
    build=$CTR_BUILD_DIR
  fi
  exec 9>"$PREFIX.lock"
  flock 9
  mkdir -p "$PREFIX" "$build"
  chmod 755 "$PREFIX" "$build"
  # A build directory left by a run from another checkout (a clean clone in /tmp that is gone
  # since) points at that checkout's sources: it is started afresh for this one.
  if [ "$build" != "${CTR_BUILD_DIR:-}" ] && [ -f "$build/CMakeCache.txt" ] &&
     [ "$(realpath -m "$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")")" != "$(realpath "$CTR_SOURCE_DIR")" ]; then
    rm -rf "$build"
    mkdir -p "$build"
    chmod 755 "$build"
  fi
  # The helper includes the ctr.conf key list that ctr's config library writes: the build under
  # test's copy, not a second build of that library (a minute and a half on two cores).
  local keys=${CTR_BUILD_DIR:-}/src/helper/generated/ctr_config_keys.inc opts=()
  [ "$build" = "${CTR_BUILD_DIR:-}" ] || [ ! -f "$keys" ] || opts=(-DCTR_CONFIG_KEYS_INC="$keys")
  # A helper of its own gives up on a held index lock after 5 s, not 30: the locks test waits
  # for that (test_hardening_helper_locks.sh).
  [ "$build" = "${CTR_BUILD_DIR:-}" ] || opts+=(-DCTR_HELPER_LOCK_TIMEOUT_S=5)
  # An earlier configure of this build that lacks one of these options is configured again.
  local stale=0 o
  for o in "${opts[@]}"; do
    o=${o#-D}
    grep -qx "${o%%=*}:[A-Z]*=${o#*=}" "$build/CMakeCache.txt" 2>/dev/null || stale=1
  done
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$CTR_SOURCE_DIR" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTR_BUILD_TESTS=OFF \
      -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCTR_INSTALL_SUID_HELPER=ON "${opts[@]}" >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log"; fail "cmake configure of the test prefix failed"; }
  elif [ "$stale" = 1 ]; then
    cmake -S "$CTR_SOURCE_DIR" -B "$build" "${opts[@]}" >>"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log"; fail "cmake configure of the test prefix failed"; }
  fi
  local targets=(ctr-mount-helper) install=(--component helper)
  [ "$what" = all ] && targets+=(ctr) && install=()
  cmake --build "$build" -j2 --target "${targets[@]}" >"$build/build.log" 2>&1 ||
    { tail -50 "$build/build.log"; fail "building ${targets[*]} failed"; }
  cmake --install "$build" "${install[@]}" >"$build/install.log" 2>&1 ||
    { cat "$build/install.log"; fail "cmake --install ${install[*]} failed"; }
  exec 9>&-
  HELPER="$PREFIX/libexec/ctr/ctr-mount-helper"
  HELPER_BUILD_BIN="$build/bin/ctr-mount-helper"
  HELPER_LOCK_TIMEOUT_S=$(sed -n 's/^CTR_HELPER_LOCK_TIMEOUT_S:STRING=//p' "$build/CMakeCache.txt")
  CONF="$PREFIX/etc/ctr/ctr.conf"
  [ "$(stat -c %u:%a "$HELPER")" = 0:4755 ] || fail "helper not installed setuid root: $(stat -c %U:%a "$HELPER")"
  mkdir -p "$PREFIX/etc/ctr" "$PREFIX/bin"
  chmod 755 "$PREFIX/etc" "$PREFIX/etc/ctr" "$PREFIX/bin" "$PREFIX/libexec" "$PREFIX/libexec/ctr"
}

# helper_runtime [RAN]: ctr and the helper, built for and installed setuid into the runtime
# test prefix (the CI build's own prefix, else /tmp/ctr-suid-rt), so that `$PREFIX/bin/ctr
# exec` goes through the real helper; skips where loop devices or kernel squashfs are
# missing (RAN, appended to the reason, says what did run).
helper_runtime() {
  require_loop_squashfs "${1:-}"
  local rt_prefix=/tmp/ctr-suid-rt
  [ "${CTR_INSTALL_SUID_HELPER:-}" = ON ] && [ -n "${CTR_INSTALL_PREFIX:-}" ] && rt_prefix=$CTR_INSTALL_PREFIX
  helper_install "${CTR_HELPER_RT_PREFIX:-$rt_prefix}" all
}

# write_conf LINES...: the root-owned 0644 config the helper reads.
write_conf() {
  printf '%s\n' "$@" >"$CONF"
  chown root:root "$CONF"
  chmod 644 "$CONF"
}

# Stand-in for `ctr __holder` at the helper's compiled-in exec target (PREFIX/bin/ctr): it
# reports what the helper handed over. Used until the runtime's __holder is installed there.
install_probe_target() {
  cat >"$PREFIX/bin/ctr" <<'EOF'
#!/bin/sh
[ "$1" = __holder ] || { echo "probe: bad argv: $*"; exit 99; }
mnt=/run/ctr-helper/mnt; shift  # the helper's compiled-in mount point (CTR_HELPER_RUNDIR/mnt)
case "$1" in
  report)
    grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status
    # mountinfo: ... mountpoint options [optional...] - fstype source superoptions
    echo "mountopts: $(awk -v m="$mnt" '$5 == m {i = 7; while ($i != "-") i++; print $6, $(i+1), $(i+2), $(i+3)}' /proc/self/mountinfo)"
    echo "marker: $(cat "$mnt/marker" 2>&1)"
    echo "stdin: $(readlink /proc/$$/fd/0) stderr: $(readlink /proc/$$/fd/2)"
    # The syscalls themselves, not mount(8)/umount(8) (which are setuid and have rules of their own).
    /usr/bin/python3 - "$mnt" <<'PYEOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
m = sys.argv[1].encode()
def show(what, rc):
    print(what + ":", "allowed" if rc == 0 else "refused (" + os.strerror(ctypes.get_errno()) + ")")
show("umount", libc.umount2(m, 0))
show("umount-detach", libc.umount2(m, 2))
show("remount-rw", libc.mount(None, m, None, 32, None))                 # MS_REMOUNT
show("remount-bind-rw", libc.mount(None, m, None, 32 | 4096, None))     # MS_REMOUNT|MS_BIND
show("remount-bind-suid", libc.mount(None, m, None, 32 | 4096 | 1, None))  # ro, but without nosuid,nodev
PYEOF
    touch "$mnt/x" 2>/dev/null && echo "write: allowed" || echo "write: refused"
    echo "env: $(env | tr '\n' ' ')"
    echo "fds: $(ls /proc/self/fd | tr '\n' ' ')"
    echo "argv: $*";;
  marker) cat "$mnt/marker";;
  fdcheck) r=; for fd in 0 1 2; do r="$r$fd:$(readlink /proc/$$/fd/$fd) "; done; echo "$r" >"$2";;
  hold) echo HELD; exec sleep "$2";;
  true) exit 0;;
  tar) exec tar cf /dev/null -C "$mnt" .;;
  tarread) tar cf - -C "$mnt" . | cat >/dev/null;;
  *) echo "probe: args: $*";;
esac
EOF
  chown root:root "$PREFIX/bin/ctr"
  chmod 755 "$PREFIX/bin/ctr"
}

# make_squashfs OUT MARKER: a tiny squashfs whose /marker says MARKER.
make_squashfs() {
  local src; src=$(mktemp -d "$WORK/sq.XXXXXX")
  chmod 755 "$src"
  echo "$2" >"$src/marker"
  mkdir "$src/bin"
  mksquashfs "$src" "$1" -noappend -quiet -all-root >/dev/null
  rm -rf "$src"
}

# make_sif OUT SQUASHFS [key=value...]: a SIF with one primary system partition holding
# SQUASHFS; keys override fields to craft bad files: offset, size, fstype, parttype,
# dtotal, doff, primaries (number of primary descriptors), data (replace partition bytes).
make_sif() {
  "$PY" - "$@" <<'EOF'
import struct, sys
out, sq = sys.argv[1], sys.argv[2]
opt = dict(a.split("=", 1) for a in sys.argv[3:])
data = open(sq, "rb").read()
if "data" in opt: data = opt["data"].encode().ljust(len(data), b"\0")
doff, total = 4096, 48
data_off = doff + total * 585
part_off = (data_off + 4095) // 4096 * 4096
hdr = bytearray(128)
hdr[0:31] = b"#!/usr/bin/env run-singularity\n"
hdr[32:42] = b"SIF_MAGIC\0"; hdr[42:45] = b"01\0"; hdr[45:48] = b"02\0"
struct.pack_into("<qqqqqq", hdr, 80, total - 1, int(opt.get("dtotal", total)),
                 int(opt.get("doff", doff)), total * 585, data_off, part_off + len(data) - data_off)
descs = bytearray(total * 585)
for i in range(int(opt.get("primaries", 1))):
    d = memoryview(descs)[i * 585:(i + 1) * 585]
    struct.pack_into("<iBIIIqqq", d, 0, 0x4004, 1, i + 1, 0xF0000001, 0,
                     int(opt.get("offset", part_off)), int(opt.get("size", len(data))), len(data))
    struct.pack_into("<ii", d, 201, int(opt.get("fstype", 1)), int(opt.get("parttype", 2)))
    d[209:212] = b"02\0"
f = open(out, "wb")
f.write(hdr); f.write(b"\0" * (doff - 128)); f.write(descs)
f.write(b"\0" * (part_off - data_off)); f.write(data)
EOF
}

# Runs the installed helper as the test user; output in $OUT, status in $RC.
run_helper() {
  set +e
  OUT=$(as_user "$HELPER" "$@" 2>&1)
  RC=$?
  set -e
}

# expect_refused WHAT NEEDLE ARGS...: the helper exits 255 naming the problem, and nothing
# is left mounted or attached. refused_while_held: the same while other launches hold devices.
refused_while_held() {
  local what=$1 needle=$2; shift 2
  run_helper "$@"
  [ "$RC" = 255 ] || fail "$what: expected refusal (255), got $RC: $OUT"
  expect_contains "$what" "$needle" "$OUT"
  note "refused: $what: ${OUT#ctr-mount-helper: }"
}
expect_refused() {
  refused_while_held "$@"
  no_leftovers "$1"
}

# Nothing attached or mounted (autoclear runs when a mount namespace dies, give it a moment).
no_leftovers() {
  local i
  for i in $(seq 50); do
    [ -z "$(losetup -a 2>/dev/null)" ] && break
    sleep 0.1
  done
  [ -z "$(losetup -a 2>/dev/null)" ] || fail "$1: loop devices left attached: $(losetup -a)"
  ! grep -q "$HELPER_RUNDIR" /proc/self/mountinfo || fail "$1: helper mount visible on the host"
  assert_no_leftovers
}

# helper_fixture: everything the tests share, as root.
helper_fixture() {
  ensure_test_user
  command -v losetup >/dev/null || skip "losetup missing"
  grep -qw squashfs /proc/filesystems || modprobe squashfs 2>/dev/null || skip "no squashfs in the kernel"
  [ -e /dev/loop-control ] || skip "no /dev/loop-control"
  [ -z "$(losetup -a)" ] || skip "loop devices already attached on this host: $(losetup -a)"
  helper_install "${CTR_HELPER_TEST_PREFIX:-/tmp/ctr-suid-prefix}"
  install_probe_target
  TUID=$(id -u "$CTR_TEST_USER")
  TGID=$(id -g "$CTR_TEST_USER")
  IMAGES="$WORK/images"
  mkdir -p "$IMAGES"
  chmod 755 "$IMAGES"
  make_squashfs "$IMAGES/good.sqfs" good
  make_sif "$IMAGES/good.sif" "$IMAGES/good.sqfs"
  chmod 644 "$IMAGES"/*
  write_conf "allow setuid = yes"
}

[ "${CTR_HELPER_SOURCE_ONLY:-}" = 1 ] && return 0

helper_fixture

note "baseline: the installed helper mounts a readable root-owned image"
run_helper "$IMAGES/good.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "baseline SIF launch failed ($RC): $OUT"
run_helper "$IMAGES/good.sqfs" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "baseline squashfs launch failed ($RC): $OUT"
no_leftovers baseline

note "RefusesWhenNotSetuid"
set +e; OUT=$(as_user "$HELPER_BUILD_BIN" "$IMAGES/good.sif" 2>&1); RC=$?; set -e
[ "$RC" = 255 ] || fail "non-setuid helper: got $RC: $OUT"
expect_contains "non-setuid helper" "not installed setuid root" "$OUT"

note "RefusesImageUserCannotRead"
cp "$IMAGES/good.sif" "$IMAGES/secret.sif"
chmod 600 "$IMAGES/secret.sif"
expect_refused "unreadable image" "Permission denied" "$IMAGES/secret.sif" marker
ln -s "$IMAGES/secret.sif" "$WORK/link-to-secret.sif"
expect_refused "symlink to unreadable image" "Permission denied" "$WORK/link-to-secret.sif" marker
expect_refused "missing image" "No such file" "$IMAGES/missing.sif" marker
expect_refused "directory as image" "not a regular file" "$IMAGES" marker
expect_refused "root-only /etc/shadow" "Permission denied" /etc/shadow marker
expect_refused "readable non-image /etc/passwd" "neither a SIF nor a squashfs" /etc/passwd marker
# A dataset image is opened and checked as the image is, and before anything is attached.
expect_refused "unreadable dataset image" "open dataset image $IMAGES/secret.sif as uid $TUID: Permission denied" \
  --dataset "$IMAGES/secret.sif" "$IMAGES/good.sif" marker
expect_refused "root-only /etc/shadow as a dataset" "Permission denied" --dataset "/etc/shadow" "$IMAGES/good.sif" marker
expect_refused "non-image dataset" "dataset image /etc/passwd: " --dataset "/etc/passwd" "$IMAGES/good.sif" marker

note "RefusesImageOutsideAllowedDirectories"
mkdir -p "$WORK/allowed" "$WORK/other"
chmod 755 "$WORK/allowed" "$WORK/other"
cp -p "$IMAGES/good.sif" "$WORK/allowed/a.sif"
cp -p "$IMAGES/good.sif" "$WORK/other/b.sif"
ln -s "$WORK/other/b.sif" "$WORK/allowed/link.sif"
write_conf "allow setuid = yes" "setuid image directories = $WORK/allowed"
run_helper "$WORK/allowed/a.sif" marker
[ "$RC" = 0 ] || fail "image inside the allowed directory refused: $OUT"
expect_refused "image outside allowed directories" "is not under any 'setuid image directories'" "$WORK/other/b.sif" marker
expect_refused "symlink from allowed dir to outside" "is not under any" "$WORK/allowed/link.sif" marker
expect_refused "dot-dot escape" "is not under any" "$WORK/allowed/../other/b.sif" marker
mkdir -p "$WORK/allow"
write_conf "allow setuid = yes" "setuid image directories = $WORK/allow"
expect_refused "a directory name prefix is not containment" "is not under any" "$WORK/allowed/a.sif" marker

note "RefusesDisallowedOwner"
cp "$IMAGES/good.sif" "$IMAGES/mine.sif"
chown "$CTR_TEST_USER" "$IMAGES/mine.sif"
write_conf "allow setuid = yes"
expect_refused "image owned by the user, owners = root" "owner uid $TUID is not in 'setuid image owners'" "$IMAGES/mine.sif" marker
write_conf "allow setuid = yes" "setuid image owners = daemon"
expect_refused "root image, owners = daemon" "owner uid 0" "$IMAGES/good.sif" marker
write_conf "allow setuid = yes" "setuid image owners = self"
run_helper "$IMAGES/mine.sif" marker
[ "$RC" = 0 ] || fail "owners = self refused the user's own image: $OUT"
write_conf "allow setuid = yes" "setuid formats = squashfs"
expect_refused "sif not in setuid formats" "format sif is not in 'setuid formats'" "$IMAGES/good.sif" marker

note "RefusesUnsafeConfig"
write_conf "allow setuid = no"
expect_refused "allow setuid = no" "allow setuid = no" "$IMAGES/good.sif" marker
write_conf "# nothing"
expect_refused "allow setuid missing (default no)" "allow setuid = no" "$IMAGES/good.sif" marker
write_conf "allow setuid = maybe"
expect_refused "bad allow setuid value" "expected yes or no" "$IMAGES/good.sif" marker
write_conf "allow setuid = yes" "max loop devices = 0"
expect_refused "bad max loop devices" "max loop devices" "$IMAGES/good.sif" marker
write_conf "allow setuid = yes"
chown "$CTR_TEST_USER" "$CONF"
expect_refused "config owned by the user" "is not owned by root" "$IMAGES/good.sif" marker
chown root "$CONF"; chmod 666 "$CONF"
expect_refused "config writable by others" "writable by group or others" "$IMAGES/good.sif" marker
chmod 664 "$CONF"
expect_refused "config writable by group" "writable by group or others" "$IMAGES/good.sif" marker
chmod 644 "$CONF"
chmod 777 "$PREFIX/etc/ctr"
expect_refused "config directory writable by others" "$PREFIX/etc/ctr is writable by group or others" "$IMAGES/good.sif" marker
chmod 755 "$PREFIX/etc/ctr"
chown "$CTR_TEST_USER" "$PREFIX/etc"
expect_refused "config parent owned by the user" "$PREFIX/etc is not owned by root" "$IMAGES/good.sif" marker
chown root "$PREFIX/etc"
mv "$CONF" "$CONF.real"; ln -s "$CONF.real" "$CONF"
expect_refused "config is a symlink" "Too many levels of symbolic links" "$IMAGES/good.sif" marker
rm "$CONF"; mv "$CONF.real" "$CONF"
mv "$CONF" "$CONF.away"
expect_refused "config missing" "No such file" "$IMAGES/good.sif" marker
mv "$CONF.away" "$CONF"

note "RefusesCraftedImages"
write_conf "allow setuid = yes"
sz=$(stat -c %s "$IMAGES/good.sqfs")
craft() { make_sif "$IMAGES/$1" "$IMAGES/good.sqfs" "${@:2}"; chmod 644 "$IMAGES/$1"; }
craft off-eof.sif offset=$((1 << 40))
expect_refused "SIF partition offset past the end" "lies outside" "$IMAGES/off-eof.sif" marker
craft size-eof.sif size=$((sz + 4096))
expect_refused "SIF partition size past the end" "lies outside" "$IMAGES/size-eof.sif" marker
craft neg.sif offset=-4096
expect_refused "SIF negative partition offset" "lies outside" "$IMAGES/neg.sif" marker
craft wrap.sif size=-1
expect_refused "SIF partition size wrapping around" "lies outside" "$IMAGES/wrap.sif" marker
craft table.sif dtotal=100000000
expect_refused "SIF descriptor count absurd" "out of range" "$IMAGES/table.sif" marker
craft doff.sif doff=$((1 << 50))
expect_refused "SIF descriptor table past the end" "descriptor table lies outside" "$IMAGES/doff.sif" marker
craft notsq.sif data=hsqtNOTSQUASHFS
expect_refused "crafted non-squashfs partition" "no squashfs magic" "$IMAGES/notsq.sif" marker
craft ext3.sif fstype=2
expect_refused "primary partition of another fs type" "not squashfs" "$IMAGES/ext3.sif" marker
craft noprim.sif parttype=3
expect_refused "SIF without primary partition" "no primary system partition" "$IMAGES/noprim.sif" marker
craft two.sif primaries=2
expect_refused "SIF with two primary partitions" "more than one primary" "$IMAGES/two.sif" marker
craft small.sif size=200
expect_refused "squashfs larger than its partition" "does not fit" "$IMAGES/small.sif" marker
used=$("$PY" -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(), 40)[0])" "$IMAGES/good.sqfs")
head -c $((used - 1)) "$IMAGES/good.sqfs" >"$IMAGES/trunc.sqfs"; chmod 644 "$IMAGES/trunc.sqfs"
expect_refused "truncated squashfs" "does not fit" "$IMAGES/trunc.sqfs" marker
"$PY" -c "import sys; d=bytearray(open(sys.argv[1],'rb').read()); d[28]=3; open(sys.argv[2],'wb').write(d)" \
  "$IMAGES/good.sqfs" "$IMAGES/v3.sqfs"; chmod 644 "$IMAGES/v3.sqfs"
expect_refused "squashfs version 3" "version 3 is not 4" "$IMAGES/v3.sqfs" marker

note "RefusesBadArguments"
expect_refused "no arguments" "usage" 
expect_refused "very long image path" "too long" "$(printf 'a%.0s' $(seq 5000))" marker
expect_refused "very long holder argument" "too long" "$IMAGES/good.sif" "$(printf 'a%.0s' $(seq 5000))"
expect_refused "too many arguments" "too many arguments" "$IMAGES/good.sif" $(seq 200)
expect_refused "a dataset without a file" "--dataset needs an absolute path" --dataset
expect_refused "a relative dataset path" "--dataset needs an absolute path" --dataset "good.sif" "$IMAGES/good.sif"
expect_refused "a dataset without an image" "no image after" --dataset "$IMAGES/good.sif"
expect_refused "too many datasets" "more than 16 --dataset" \
  $(for i in $(seq 17); do echo --dataset "$IMAGES/good.sif"; done) "$IMAGES/good.sif"
expect_refused "empty image path" "empty image path" "" marker
# argc == 0 (execve with an empty argv; CVE-2021-4034 in pkexec): must not read envp as argv.
cat >"$WORK/argc0.c" <<'EOF'
#include <unistd.h>
int main(int argc, char **argv) {
  (void)argc;
  char *args[] = {NULL};
  char *env[] = {"/tmp/evil.sif", "marker", NULL};
  execve(argv[1], args, env);
  return 127;
}
EOF
gcc -O2 -o "$WORK/argc0" "$WORK/argc0.c"
set +e; OUT=$(as_user "$WORK/argc0" "$HELPER" 2>&1); RC=$?; set -e
[ "$RC" = 255 ] && [[ "$OUT" == *usage* ]] || fail "argc == 0: got $RC: $OUT"

note "IgnoresCallerEnvironment"
cat >"$WORK/preload.c" <<'EOF'
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
  char p[256];
  snprintf(p, sizeof p, "%s/preload-ran-euid-%u", PRELOAD_DIR, (unsigned)geteuid());
  FILE *f = fopen(p, "w");
  if (f) fclose(f);
}
EOF
mkdir -p "$WORK/preload"; chmod 777 "$WORK/preload"
gcc -shared -fPIC -DPRELOAD_DIR="\"$WORK/preload\"" -o "$WORK/libpreload.so" "$WORK/preload.c"
chmod 755 "$WORK/libpreload.so"
# Sanity: the library does run when preloaded into an ordinary program.
as_user env LD_PRELOAD="$WORK/libpreload.so" /bin/true
[ -e "$WORK/preload/preload-ran-euid-$TUID" ] || fail "preload library does not work at all"
rm -f "$WORK/preload"/*
mkdir -p "$WORK/gconv"; chmod 755 "$WORK/gconv"
set +e
OUT=$(as_user env LD_PRELOAD="$WORK/libpreload.so" LD_LIBRARY_PATH="$WORK" LD_AUDIT="$WORK/libpreload.so" \
  GCONV_PATH="$WORK/gconv" LC_ALL=xx_XX.UTF-8 LANG=xx_XX LANGUAGE=xx NLSPATH="$WORK/%N" \
  MALLOC_CHECK_=3 TMPDIR=/nonexistent IFS=x "$HELPER" "$IMAGES/good.sif" report 2>&1)
RC=$?
set -e
[ "$RC" = 0 ] || fail "helper with hostile environment: $RC: $OUT"
[ -z "$(ls -A "$WORK/preload")" ] || fail "LD_PRELOAD library ran: $(ls "$WORK/preload")"
expect_contains "environment handed over" "env: PATH=/usr/local/bin:/usr/bin:/bin " "$OUT"
no_leftovers environment

note "SurvivesClosedStandardFds"
# Nothing the helper opens (config, image, loop device) may become fd 0, 1 or 2. glibc
# reopens closed standard fds of a setuid program on /dev/full or /dev/null (read-only, so
# writes fail, as they would have for the caller), and the helper checks it again.
mkdir -p "$WORK/fds"; chmod 777 "$WORK/fds"
set +e
as_user sh -c "exec \"$HELPER\" \"$IMAGES/good.sif\" fdcheck $WORK/fds/all <&- >&- 2>&-"
RC=$?
OUT2=$(as_user sh -c "exec \"$HELPER\" /nonexistent.sif <&- >&- 2>&-" 2>&1)
RC2=$?
set -e
[ "$RC" = 0 ] || fail "closed 0,1,2: a good launch failed ($RC)"
note "target's fds after a launch with 0,1,2 closed: $(cat "$WORK/fds/all")"
for fd in 0 1 2; do
  case "$(cat "$WORK/fds/all")" in *"$fd:/dev/null "*|*"$fd:/dev/full "*) ;;
    *) fail "fd $fd of the target is not /dev/null or /dev/full: $(cat "$WORK/fds/all")";; esac
done
[ "$RC2" = 255 ] && [ -z "$OUT2" ] || fail "closed fds: refusal wrote somewhere ($RC2): $OUT2"
[ "$(cat "$CONF")" = "allow setuid = yes" ] || fail "config changed: $(cat "$CONF")"
no_leftovers "closed fds"

note "RefusesImageSwapRace"
# The user swaps a path between a readable image and a root-only one while launching.
make_squashfs "$IMAGES/root-only.sqfs" secret
chmod 600 "$IMAGES/root-only.sqfs"
make_squashfs "$IMAGES/readable.sqfs" good
chmod 644 "$IMAGES/readable.sqfs"
mkdir -p "$WORK/race"; chown "$CTR_TEST_USER" "$WORK/race"
cat >"$WORK/swap.sh" <<EOF
cd $WORK/race
while :; do
  ln -sfn $IMAGES/readable.sqfs a.tmp && mv -T a.tmp img
  ln -sfn $IMAGES/root-only.sqfs b.tmp && mv -T b.tmp img
  ln -sfn /etc/shadow c.tmp && mv -T c.tmp img
done
EOF
as_user sh "$WORK/swap.sh" &
swapper=$!
sleep 0.2
mounted=0 secret=0
for i in $(seq 300); do
  set +e
  o=$(as_user "$HELPER" "$WORK/race/img" marker 2>&1)
  set -e
  case "$o" in good) mounted=$((mounted + 1));; *secret*) secret=1;; esac
done
pkill -KILL -U "$CTR_TEST_USER" -f "$WORK/swap.sh" 2>/dev/null || true
wait "$swapper" 2>/dev/null || true
[ "$secret" = 0 ] || fail "the root-only image was mounted through a swapped path"
note "race: 300 launches, $mounted mounted the readable image, none the root-only one"
no_leftovers race

note "MaxLoopDevices"
write_conf "allow setuid = yes" "max loop devices = 1"
make_squashfs "$IMAGES/other.sqfs" other
chmod 644 "$IMAGES/other.sqfs"
as_user "$HELPER" "$IMAGES/good.sif" hold 30 >"$WORK/hold1" 2>&1 &
h1=$!
for i in $(seq 100); do grep -q HELD "$WORK/hold1" && break; sleep 0.05; done
grep -q HELD "$WORK/hold1" || fail "first held launch did not start: $(cat "$WORK/hold1")"
[ "$(losetup -a | wc -l)" = 1 ] || fail "expected one loop device: $(losetup -a)"
expect_line=$(losetup -a)
note "attached: $expect_line"
run_helper "$IMAGES/other.sqfs" marker
[ "$RC" = 255 ] || fail "second image beyond max loop devices was not refused: $OUT"
expect_contains "max loop devices" "'max loop devices = 1' (per user) reached" "$OUT"
note "refused: second image: ${OUT#ctr-mount-helper: }"
run_helper "$IMAGES/good.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "same image should reuse the attached loop device: $OUT"
[ "$(losetup -a)" = "$expect_line" ] || fail "reuse attached another device: $(losetup -a)"
pkill -KILL -P "$h1" 2>/dev/null || true
pkill -KILL -u "$CTR_TEST_USER" sleep 2>/dev/null || true
wait "$h1" 2>/dev/null || true
no_leftovers "max loop devices"
write_conf "allow setuid = yes"

note "SignalsMidWay"
# The user signals the helper at points spread over its run; blocked signals wait until
# it is unprivileged, SIGSTOP/SIGKILL land anywhere. Nothing may be left either way.
cat >"$WORK/signals.sh" <<EOF
for sig in TERM INT HUP QUIT USR1 STOP KILL; do
  for d in 0 0.001 0.002 0.004 0.008 0.015 0.03; do
    "$HELPER" "$IMAGES/good.sif" hold 5 >/dev/null 2>&1 & p=\$!
    [ "\$d" = 0 ] || sleep "\$d"
    kill -s \$sig \$p 2>/dev/null
    [ \$sig = STOP ] && { sleep 0.02; kill -s KILL \$p 2>/dev/null; }
    sleep 0.01; kill -s KILL \$p 2>/dev/null
    wait \$p 2>/dev/null
  done
done
EOF
as_user sh "$WORK/signals.sh" || true
no_leftovers signals

note "HandsOverWithoutPrivilege (probe target at the compiled-in ctr path)"
run_helper "$IMAGES/good.sif" report a "b c"
[ "$RC" = 0 ] || fail "report launch failed: $OUT"
echo "$OUT" | sed 's/^/   /'
expect_contains "uid" "Uid:	$TUID	$TUID	$TUID	$TUID" "$OUT"
expect_contains "gid" "Gid:	$TGID	$TGID	$TGID	$TGID" "$OUT"
expect_contains "CapEff" "CapEff:	0000000000000000" "$OUT"
expect_contains "CapPrm" "CapPrm:	0000000000000000" "$OUT"
expect_contains "CapAmb" "CapAmb:	0000000000000000" "$OUT"
expect_contains "NoNewPrivs" "NoNewPrivs:	1" "$OUT"
mo=$(echo "$OUT" | sed -n 's/^mountopts: //p')
case "$mo" in "ro,nosuid,nodev,"*" squashfs /dev/loop"*" ro,"*) ;; *) fail "mount options: $mo";; esac
expect_contains "marker" "marker: good" "$OUT"
for op in umount umount-detach remount-rw remount-bind-rw remount-bind-suid; do
  expect_contains "$op" "$op: refused (Operation not permitted)" "$OUT"
done
expect_contains "write" "write: refused" "$OUT"
expect_contains "argv passthrough" "argv: report a b c" "$OUT"
no_leftovers handover

echo "PASS: $TEST_NAME"
