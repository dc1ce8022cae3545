#!/bin/bash
# Start-up benchmark: ctr against unshare, Charliecloud and bubblewrap, in one run.
#
#   bench/startup/run.sh [BUILD_DIR]        (default: build/release)
#
# Environment: BLOCKS (default 10), REPS (default 5), CONC (default 64), OUT (result dir,
# default $BUILD_DIR/bench-startup), BENCH_USER (user to run as when started as root,
# default ctrbench, created if missing), CTR_SUID (a ctr installed with the setuid helper,
# optional: adds kernel-squashfs cases), BEFORE (another ctr, e.g. an earlier build's
# bin/ctr: its held, lingering, cold, Apptainer-layout and directory cases run in the same
# blocks, named before-*).
# Output: two tables (single launches; CONC concurrent launches) and single.json /
# concurrent.json in OUT. Format: docs/benchmark-guide.md.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build/release}" && pwd)
ctr=${CTR_BIN:-$build/bin/ctr}
timer=$build/bin/launch-timer
out=${OUT:-$build/bench-startup}
[ -x "$ctr" ] && [ -x "$timer" ] || { echo "run.sh: build ctr and launch-timer first (cmake --build $build)" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then
  # Containers are an ordinary user's business: measure as one.
  user=${BENCH_USER:-ctrbench}
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  mkdir -p "$out" && chown "$user" "$out"
  d=$build; while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  exec runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" USER="$user" \
    PATH=/usr/bin:/bin BLOCKS="${BLOCKS:-}" REPS="${REPS:-}" CONC="${CONC:-}" OUT="$out" \
    CTR_SUID="${CTR_SUID:-}" CTR_BIN="$ctr" BEFORE="${BEFORE:-}" bash "$0" "$build"
fi

blocks=${BLOCKS:-10}; reps=${REPS:-5}; conc=${CONC:-64}
mkdir -p "$out"
. "$src/bench/startup/work-dir.sh"
. "$src/bench/startup/lib.sh"
work_dir ctr-bench

echo "== preparing images in $work"
sh "$src/images/demo/make-rootfs.sh" rootfs >/dev/null
# An image in Apptainer's layout, as Apptainer builds them: its /.singularity.d/env holds the
# stock templates (same shape as Apptainer's 01-base, 95-apps, 99-base, 99-runtimevars) and
# a %environment of plain exports. ctr applies these without a shell; Apptainer-built images
# were ~1.8x because each launch started the image's /bin/sh to source them.
env_dir=rootfs/.singularity.d/env
printf '#!/bin/sh\n#\n# Custom environment shell code should follow\n#\n' > $env_dir/01-base.sh
printf '#!/bin/sh\nexport CTR_DEMO=1\nexport LC_ALL="C"\n' > $env_dir/90-environment.sh
printf '#!/bin/sh\n\nif test -n "${SCIF_APPNAME:-}"; then\n    export SCIF_APPNAME\n    if test -d "/scif/apps/${SCIF_APPNAME:-}"; then\n        . "/scif/apps/${SCIF_APPNAME:-}/scif/env/90-environment.sh"\n    fi\nfi\n' > $env_dir/95-apps.sh
printf '#!/bin/sh\nif [ -z "$LD_LIBRARY_PATH" ]; then\n    LD_LIBRARY_PATH="/.singularity.d/libs"\nelse\n    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"\nfi\nPS1="Apptainer> "\nexport LD_LIBRARY_PATH PS1\n' > $env_dir/99-base.sh
printf '#!/bin/sh\nif [ -n "${SING_USER_DEFINED_PREPEND_PATH:-}" ]; then\n\tPATH="${SING_USER_DEFINED_PREPEND_PATH}:${PATH}"\nfi\nif [ -n "${SING_USER_DEFINED_APPEND_PATH:-}" ]; then\n\tPATH="${PATH}:${SING_USER_DEFINED_APPEND_PATH}"\nfi\nif [ -n "${SING_USER_DEFINED_PATH:-}" ]; then\n\tPATH="${SING_USER_DEFINED_PATH}"\nfi\nunset SING_USER_DEFINED_PREPEND_PATH \\\n\t  SING_USER_DEFINED_APPEND_PATH \\\n\t  SING_USER_DEFINED_PATH\nexport PATH\n' > $env_dir/99-runtimevars.sh
"$ctr" -q build appt.sif rootfs
cp appt.sif appt-seq.sif; cp appt.sif appt-cold.sif
# The cross-runtime cases use the same tree without that layout.
rm -rf rootfs/.singularity.d rootfs/singularity
mksquashfs rootfs demo.sqfs -quiet -noappend -comp gzip >/dev/null
"$ctr" -q build demo.sif rootfs
cp demo.sif seq.sif     # nothing holds it: launched one after another, joins the lingering holder
cp demo.sif cold.sif    # mounted afresh by every launch ('image linger = 0')
cp demo.sif cold-sqfuse.sif
printf 'image linger = 0\n' > nolinger.conf
printf 'image linger = 0\nsquashfs server = squashfuse\n' > nolinger-squashfuse.conf
cold="CTR_CONFIG=$work/nolinger.conf"   # launch-timer sets it (no env(1) exec)
# The same cold launch served by squashfuse_ll instead of ctr-squashfs.
coldsqfuse="CTR_CONFIG=$work/nolinger-squashfuse.conf"

# Held = an image already mounted on this node by another rank: keep one launch alive.
for img in demo.sif demo.sqfs appt.sif; do
  "$ctr" exec "$img" sleep 100000 & holders+=($!)
done
sleep 1

cases=(
  "unshare-Urm=/usr/bin/unshare -Urm /bin/true"
  "true=/bin/true"
  "ctr-sif-held=$ctr exec demo.sif /bin/true"
  "ctr-sif-seq=$ctr exec seq.sif /bin/true"
  "ctr-sif-cold=$cold $ctr exec cold.sif /bin/true"
  "ctr-sif-cold-squashfuse=$coldsqfuse $ctr exec cold-sqfuse.sif /bin/true"
  "ctr-appt-held=$ctr exec appt.sif /bin/true"
  "ctr-appt-seq=$ctr exec appt-seq.sif /bin/true"
  "ctr-appt-cold=$cold $ctr exec appt-cold.sif /bin/true"
  "ctr-squashfs-held=$ctr exec demo.sqfs /bin/true"
  "ctr-dir=$ctr exec rootfs /bin/true"
)
# The other runtimes where installed (Debian: charliecloud, bubblewrap); said when left out.
others=()
chrun=$(command -v ch-run || true)
bwrap=$(command -v bwrap || true)
if [ -n "$chrun" ]; then
  others+=("ch-run-dir=$chrun $work/rootfs -- /bin/true" "ch-run-squashfs=$chrun $work/demo.sqfs -- /bin/true")
else
  echo "== no ch-run cases: Charliecloud is not installed"
fi
[ -n "$bwrap" ] && others+=("bwrap-dir=$bwrap --unshare-user --ro-bind $work/rootfs / --proc /proc --dev /dev /bin/true") ||
  echo "== no bwrap case: bubblewrap is not installed"
cases+=("${others[@]}")
# The floor of a held launch: join-floor asks the kernel for what a held `ctr exec demo.sif`
# must (join the holder's namespaces, no_new_privs, no capabilities, the seccomp filter, exec)
# and decides nothing.
floor=$(join_floor_case "$build" demo.sif)
[ -n "$floor" ] && cases+=("join-floor=$floor")
concurrent=(
  "unshare-Urm=/usr/bin/unshare -Urm /bin/true"
  "ctr-sif-held=$ctr exec demo.sif /bin/true"
  "ctr-sif-seq=$ctr exec seq.sif /bin/true"
  "ctr-sif-cold=$cold $ctr exec cold.sif /bin/true"
  "ctr-appt-held=$ctr exec appt.sif /bin/true"
  "ctr-appt-seq=$ctr exec appt-seq.sif /bin/true"
  "ctr-dir=$ctr exec rootfs /bin/true"
)
for other in "${others[@]}"; do [ "${other%%=*}" = ch-run-dir ] || concurrent+=("$other"); done
if [ -n "${CTR_SUID:-}" ]; then
  # The installed ctr's own ctr.conf (allow setuid = yes), with linger 0 for the cold cases.
  suid_conf=$(dirname "$(dirname "$CTR_SUID")")/etc/ctr/ctr.conf
  { cat "$suid_conf" 2>/dev/null; printf 'image linger = 0\n'; } > kernel-nolinger.conf
  kcold="CTR_CONFIG=$work/kernel-nolinger.conf"
  for f in kernel kernel-seq kernel-cold; do cp demo.sif $f.sif; cp appt.sif $f-appt.sif; done
  "$CTR_SUID" exec kernel.sif sleep 100000 & holders+=($!)
  "$CTR_SUID" exec kernel-appt.sif sleep 100000 & holders+=($!)
  cases+=("ctr-kernel-held=$CTR_SUID exec kernel.sif /bin/true"
          "ctr-kernel-seq=$CTR_SUID exec kernel-seq.sif /bin/true"
          "ctr-kernel-cold=$kcold $CTR_SUID exec kernel-cold.sif /bin/true"
          "ctr-kernel-appt-held=$CTR_SUID exec kernel-appt.sif /bin/true"
          "ctr-kernel-appt-seq=$CTR_SUID exec kernel-seq-appt.sif /bin/true")
  concurrent+=("ctr-kernel-held=$CTR_SUID exec kernel.sif /bin/true"
               "ctr-kernel-seq=$CTR_SUID exec kernel-seq.sif /bin/true"
               "ctr-kernel-appt-held=$CTR_SUID exec kernel-appt.sif /bin/true")
  sleep 1
fi

if [ -n "${BEFORE:-}" ]; then
  # Another ctr (an earlier build: BEFORE=/path/to/bin/ctr) beside this one in the same
  # blocks, for before/after figures that share the machine's moment. Its holders are its
  # own (the holder key has the squashfs server's path, beside each ctr).
  for img in demo.sif appt.sif; do "$BEFORE" exec "$img" sleep 100000 & holders+=($!); done
  cases+=("before-sif-held=$BEFORE exec demo.sif /bin/true"
          "before-sif-seq=$BEFORE exec seq.sif /bin/true"
          "before-sif-cold=$cold $BEFORE exec cold.sif /bin/true"
          "before-appt-held=$BEFORE exec appt.sif /bin/true"
          "before-dir=$BEFORE exec rootfs /bin/true")
  concurrent+=("before-sif-held=$BEFORE exec demo.sif /bin/true"
               "before-dir=$BEFORE exec rootfs /bin/true")
  sleep 1
fi

echo "== host: $(uname -r), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "== single launches: $blocks blocks x $reps launches per case, randomized order per block"
"$timer" -b "$blocks" -r "$reps" -c 1 -j "$out/single.json" "${cases[@]}"
if [ -n "${BEFORE:-}" ]; then
  for case in sif-held sif-seq sif-cold appt-held dir; do
    read -r _ _ m lo hi < <(/usr/bin/python3 "$src/bench/startup/added_ms.py" "$out/single.json" "$blocks" "$reps" "before-$case" "ctr-$case")
    echo "ctr-$case against before-$case: $m ms (per-block differences from $lo to $hi ms)"
  done
fi
echo
echo "== $conc concurrent launches: $blocks blocks x 1 sample per case (wall time until the last exits)"
"$timer" -b "$blocks" -r 1 -c "$conc" -j "$out/concurrent.json" "${concurrent[@]}"
echo
echo "results: $out/single.json $out/concurrent.json"
