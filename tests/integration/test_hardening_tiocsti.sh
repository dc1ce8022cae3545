#!/bin/bash
# Issue 14, item 3: a program in a container cannot push keystrokes into the terminal ctr
# was started from (TIOCSTI; TIOCLINUX can paste the console selection), with or without
# -C, on the native ABI and with the request's upper 32 bits set; the ioctls a terminal
# program and a shell's job control need (TIOCGWINSZ, TIOCGPGRP, TIOCSPGRP) keep working,
# and an interactive `ctr shell` still has job control. Runs as the unprivileged test user
# with a real pseudo-terminal (script(1)) as the caller's terminal.
. "$(dirname "$0")/lib.sh"
ensure_test_user
command -v script >/dev/null || skip "script(1) (util-linux) is missing: no way to give ctr a terminal"
[ -e /dev/ptmx ] || skip "no /dev/ptmx: no pseudo-terminals on this machine"

make_demo_rootfs "$WORK/demo"
chmod -R a+rX "$WORK"

cat >"$WORK/tiocsti.c" <<'EOF'
/* Prints NAME=ERRNO (0 = the call succeeded) for what a keystroke injector and a shell do
 * with the terminal on fd 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static int result(long rc) { return rc < 0 ? errno : 0; }
int main(void) {
  char c = ' ';
  struct winsize ws;
  pid_t pgrp = tcgetpgrp(0);
  printf("isatty=%d\n", isatty(0));
  printf("tiocsti=%d\n", result(ioctl(0, TIOCSTI, &c)));
  printf("tiocsti_upper_bits=%d\n", result(syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, &c)));
  printf("tioclinux=%d\n", result(ioctl(0, TIOCLINUX, &c)));
  printf("tiocgwinsz=%d\n", result(ioctl(0, TIOCGWINSZ, &ws)));
  printf("tiocgpgrp=%d\n", pgrp < 0 ? errno : 0);
  printf("tiocspgrp=%d\n", pgrp < 0 ? errno : result(tcsetpgrp(0, pgrp)));
  return 0;
}
EOF
cc -static -O2 -o "$WORK/tiocsti" "$WORK/tiocsti.c"
chmod 755 "$WORK/tiocsti"

# on_tty CMD...: runs CMD as the test user with a new pseudo-terminal as its controlling
# terminal and stdin (the terminal a user types ctr into); prints its output without CRs.
on_tty() { as_user script -qec "$*" /dev/null </dev/null | tr -d '\r'; }
# (Injected keystrokes are echoed by the terminal: tolerate blanks before a field.)
field() { sed -n "s/^[[:space:]]*$1=//p" <<<"$2"; }

note "control: the probe on the terminal, without ctr"
out=$(on_tty "$WORK/tiocsti")
note "$(echo "$out" | tr '\n' ' ')"
expect_eq "probe stdin is a terminal" 1 "$(field isatty "$out")"
legacy=$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || echo 1)
# EIO (5) is the kernel's own refusal with dev.tty.legacy_tiocsti = 0; either way, not EPERM.
case "$(field tiocsti "$out")" in
  0) note "TIOCSTI works on this host's terminals (dev.tty.legacy_tiocsti = $legacy): the attack is live";;
  5) note "dev.tty.legacy_tiocsti = 0: the kernel refuses TIOCSTI (EIO); the filter's EPERM still shows";;
  *) fail "control: TIOCSTI on the controlling terminal gave errno $(field tiocsti "$out"), expected 0 or EIO";;
esac
expect_eq "control: TIOCGWINSZ" 0 "$(field tiocgwinsz "$out")"

for opts in "" "-C"; do
  note "RefusesKeystrokeInjection: ctr exec $opts"
  out=$(on_tty "$CTR_BIN" exec $opts -B "$WORK/tiocsti:/tiocsti" "$WORK/demo" /tiocsti)
  note "$(echo "$out" | tr '\n' ' ')"
  expect_eq "exec $opts: stdin is the caller's terminal" 1 "$(field isatty "$out")"
  expect_eq "exec $opts: TIOCSTI refused with EPERM" 1 "$(field tiocsti "$out")"
  expect_eq "exec $opts: TIOCSTI with upper bits set refused with EPERM" 1 "$(field tiocsti_upper_bits "$out")"
  expect_eq "exec $opts: TIOCLINUX refused with EPERM" 1 "$(field tioclinux "$out")"
  expect_eq "exec $opts: TIOCGWINSZ works" 0 "$(field tiocgwinsz "$out")"
  expect_eq "exec $opts: TIOCGPGRP works" 0 "$(field tiocgpgrp "$out")"
  expect_eq "exec $opts: TIOCSPGRP works" 0 "$(field tiocspgrp "$out")"
done

note "KeepsShellJobControl: an interactive ctr shell backgrounds and foregrounds a job"
out=$(as_user script -qec "$CTR_BIN shell $WORK/demo" /dev/null < <(
  sleep 1; echo 'sleep 2 &'; sleep 0.5; echo 'jobs'; sleep 0.2; echo 'fg'; sleep 2.5
  echo 'echo job-control-$((40 + 2))'; sleep 0.5; echo 'exit') 2>&1 | tr -d '\r')
echo "$out" | sed 's/^/   /'
case "$out" in *"job control turned off"*|*"can't access tty"*) fail "ctr shell lost job control";; esac
expect_contains "jobs lists the background job" "Running" "$out"
# The terminal echoes what was typed; only the shell's own output has the sum.
expect_contains "shell went on after fg" "job-control-42" "$out"

echo "PASS: $TEST_NAME"
