#!/bin/bash
# Issue 24, F6: a container of the host's root (uid 0 mapped to itself) kept write access to
# the host's kernel interfaces: `echo ... > /proc/sys/kernel/core_pattern` worked (a known
# way to full host root), and a root app left its --memory/--pids-limit cgroup by writing its
# pid to the parent's cgroup.procs. Now /proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus,
# /proc/fs and /sys (the cgroup tree with it) are read-only there, in every way a root
# container gets its root (the holder's ready namespace, an own copy with a bind, a PID
# namespace's fresh procfs); 'root kernel interfaces = writable' in ctr.conf gives the
# host's back (checked by writing back the values already there).
. "$(dirname "$0")/lib.sh"
require_root
ensure_test_user
require_fuse
use_linger 0
export CTR_CONFIG=$CTR_TEST_CONFIG
CTR=$CTR_BIN

make_demo_squashfs demo
# probe.sh PATH...: for each, "PATH: written" or "PATH: refused: ERROR". The value already
# there is written back; write-only files (drop_caches, sysrq-trigger) are only opened for
# writing (no command reaches them), which a read-only mount refuses just the same.
cat >"$WORK/probe.sh" <<'EOF'
for p in "$@"; do
  case "$p" in
    */drop_caches|*/sysrq-trigger) err=$( (: >"$p") 2>&1 ) ;;
    *) v=$(cat "$p") && err=$( (printf '%s\n' "$v" >"$p") 2>&1 ) ;;
  esac
  if [ $? = 0 ]; then echo "$p: written"; else echo "$p: refused: ${err##*: }"; fi
done
EOF
chmod -R a+rX "$WORK"
cd "$WORK"

PATHS=(/proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/sys/net/core/somaxconn /proc/sysrq-trigger
       /sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan /sys/kernel/mm/ksm/run)
present=()
for p in "${PATHS[@]}"; do if [ -e "$p" ]; then present+=("$p"); fi; done
irq=$(ls /proc/irq 2>/dev/null | grep -m1 '^[0-9]' || true)
if [ -n "$irq" ]; then present+=("/proc/irq/$irq/smp_affinity"); fi
note "probing ${present[*]}"

# expect_all VERDICT WHAT OUTPUT: every probed path got VERDICT ("refused" means EROFS).
expect_all() {
  local p line
  for p in "${present[@]}"; do
    line=$(printf '%s\n' "$3" | grep "^$p: " || true)
    case "$1:$line" in
      "refused:$p: refused: Read-only file system"|"written:$p: written") ;;
      *) fail "$2: $p: expected $1, got '${line:-nothing}' (all: $(echo $3))";;
    esac
  done
  note "$2: all $1"
}

note "RootsContainerCannotWriteTheKernelInterfaces"
out=$("$CTR" exec demo.sqfs sh probe.sh "${present[@]}" 2>&1) || fail "probe: $out"
expect_all refused "root, the holder's ready namespace" "$out"
out=$("$CTR" exec --explain demo.sqfs true)
expect_contains "--explain" "kernel:     read-only: /proc/sys /proc/sysrq-trigger /proc/irq /proc/bus /proc/fs /sys" "$out"
expect_contains "--explain: /sys read-only" "bind /sys -> /sys (ro)" "$out"
# An own copy of the prepared root (a user bind), and a PID namespace's fresh /proc.
out=$("$CTR" exec -B "$WORK:/mnt" demo.sqfs sh /mnt/probe.sh "${present[@]}" 2>&1) || fail "probe with -B: $out"
expect_all refused "root, with a bind (own copy of the prepared root)" "$out"
out=$("$CTR" exec --pid demo.sqfs sh probe.sh "${present[@]}" 2>&1) || fail "probe with --pid: $out"
expect_all refused "root, with --pid (a fresh procfs)" "$out"
out=$("$CTR" exec --writable-tmpfs --contain -B "$WORK:/mnt" demo.sqfs sh /mnt/probe.sh "${present[@]}" 2>&1) ||
  fail "probe with --writable-tmpfs --contain: $out"
expect_all refused "root, --writable-tmpfs --contain (own root)" "$out"

note "RootAppCannotLeaveItsLimitsCgroup"
if ! plan=$("$CTR" exec --memory 256M --pids-limit 64 --explain demo.sqfs true 2>&1); then
  note "SKIP part: no cgroup for limits here: $plan"
else
  backend=$(printf '%s\n' "$plan" | sed -n 's/^cgroup: *\(cgroup v[12]\).*/\1/p')
  [ -n "$backend" ] || fail "no cgroup backend in --explain: $plan"
  # The parents of the launch's cgroups, one per hierarchy ("  memory: DIR/ctr-N", v2: "  DIR/ctr-N").
  parents=$(printf '%s\n' "$plan" | sed -n '/^cgroup:/,/^[a-z]/p' | awk '/^  / {d = $NF; sub(/\/[^\/]*$/, "", d); print d}' | sort -u)
  [ -n "$parents" ] || fail "no cgroup directories in --explain: $plan"
  note "$backend; parents: $(echo $parents)"
  out=$("$CTR" exec --memory 256M --pids-limit 64 demo.sqfs sh -c '
    for d in "$@"; do
      if err=$( (echo $$ >"$d/cgroup.procs") 2>&1 ); then echo "left for $d"; else echo "stayed: ${err##*: }"; fi
    done
    grep -c "/ctr-[0-9]*$" /proc/self/cgroup' sh $parents 2>&1) || fail "escape probe: $out"
  note "$(echo $out)"
  case "$out" in *"left for"*) fail "$backend: a root app moved itself out of its limits' cgroup: $out";; esac
  expect_contains "$backend: cgroup.procs of the parent" "stayed: Read-only file system" "$out"
  [ "$(printf '%s\n' "$out" | tail -1)" -ge 1 ] || fail "$backend: the app is in no ctr cgroup any more: $out"
fi

note "AdminOptOutGivesTheHostsBack"
printf 'image linger = 0\nroot kernel interfaces = writable\n' >"$WORK/writable.conf"
chmod 644 "$WORK/writable.conf"
out=$(CTR_CONFIG=$WORK/writable.conf "$CTR" exec --explain demo.sqfs true)
expect_contains "--explain with the opt-out" "'root kernel interfaces = writable'" "$out"
writable=()
for p in "${present[@]}"; do case "$p" in */drop_caches|*/sysrq-trigger|/proc/irq/*) ;; *) writable+=("$p");; esac; done
out=$(CTR_CONFIG=$WORK/writable.conf "$CTR" exec demo.sqfs sh probe.sh "${writable[@]}" 2>&1) || fail "probe: $out"
present=("${writable[@]}")
expect_all written "root, 'root kernel interfaces = writable'" "$out"

note "UsersContainerIsUnchanged"
out=$(as_user "$CTR" exec --explain "$WORK/demo.sqfs" true)
expect_contains "--explain as the user" "kernel:     /proc/sys and /sys bound as they are (uid $(id -u "$CTR_TEST_USER") cannot write them)" "$out"
expect_contains "--explain as the user: /sys" "bind /sys -> /sys (rw)" "$out"
assert_nothing_left "root kernel interfaces"
echo "PASS: $TEST_NAME"
