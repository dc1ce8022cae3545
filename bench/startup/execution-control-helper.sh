#!/bin/bash
# What ctr.conf's execution control costs a launch through the setuid helper (issue 55,
# item 5; docs/design-signing.md section 3), in one run, as root:
#  - warm: an ordinary user launches a signed SIF (root's) through the installed helper with
#    'image linger = 0', so every launch attaches and mounts it and the helper runs each time,
#    under a whitelist whose verdicts are kept (the user's, and the helper's in
#    /run/ctr-helper/verified), against the same launch with no rule; interleaved blocks
#    (launch-timer). Each case puts its ctr.conf in place with a bind mount in a mount
#    namespace of its own (unshare -m), so the file's identity, which kept verdicts record,
#    does not change between launches; both cases pay that alike.
#  - cold: a signed SIF of SIZE_MB (default 1024) of incompressible data: its first launch
#    under the rule (read and hashed by ctr as the user, then by the helper's check as
#    nobody) against its second (both verdicts kept).
#
#   bench/startup/execution-control-helper.sh PREFIX [BUILD_DIR]   (as root)
#
# PREFIX: where `cmake --install` put ctr and the setuid helper (configured with
# -DCMAKE_INSTALL_PREFIX=PREFIX -DCTR_INSTALL_SUID_HELPER=ON; the test suite's helper tests
# leave one in the CI preset's prefix, /tmp/ctr-ci-prefix). BUILD_DIR has launch-timer
# (default build/release). Environment: BLOCKS (default 20), REPS (default 10), SIZE_MB
# (0: no cold case), BENCH_USER (default ctrbench). Needs openssl, mksquashfs, losetup.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$(cd "${1:?usage: execution-control-helper.sh PREFIX [BUILD_DIR]}" && pwd)
build=$(cd "${2:-$src/build/release}" && pwd)
ctr=$prefix/bin/ctr
conf=$prefix/etc/ctr/ctr.conf
timer=$build/bin/launch-timer
die() { echo "execution-control-helper.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root (it installs ctr.conf files for the helper and starts launches as $BENCH_USER)"
[ -x "$timer" ] || die "no launch-timer in $build/bin: build it first"
[ -x "$ctr" ] && [ "$(stat -c %u:%a "$prefix/libexec/ctr/ctr-mount-helper" 2>/dev/null)" = 0:4755 ] ||
  die "no ctr with a setuid helper installed in $prefix"
[ -z "$(losetup -a)" ] || die "loop devices are attached on this host: the helper's launches would share them"
command -v openssl >/dev/null || die "needs openssl"
user=${BENCH_USER:-ctrbench}
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
home=$(getent passwd "$user" | cut -d: -f6)
blocks=${BLOCKS:-20}; reps=${REPS:-10}; size_mb=${SIZE_MB:-1024}
work=$(mktemp -d /tmp/ctr-bench-ecl-helper.XXXXXX)
chmod 755 "$work"
saved=
[ -f "$conf" ] && saved=$work/saved.conf && cp -p "$conf" "$saved"
cleanup() {
  if [ -n "$saved" ]; then cp -p "$saved" "$conf"; else rm -f "$conf"; fi
  for f in "$work"/*.sif; do [ -f "$f" ] && rm -f "/run/ctr-helper/verified/$(stat -c %d-%i "$f")"; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
mkdir -p "$(dirname "$conf")"
. "$src/bench/startup/lib.sh"

openssl genpkey -algorithm ed25519 -out key.pem 2>/dev/null
openssl pkey -in key.pem -pubout -out key.pub.pem
chmod 644 key.pub.pem
sh "$src/images/demo/make-rootfs.sh" rootfs >/dev/null
"$ctr" -q build signed.sif rootfs
"$ctr" sign --key key.pem signed.sif >/dev/null
chmod 644 signed.sif
printf 'allow setuid = yes\nimage driver = setuid\nimage linger = 0\n' > off.conf
{ cat off.conf; printf 'execution rule = whitelist\ntrusted key = %s/key.pub.pem\n' "$work"; } > on.conf
chmod 644 off.conf on.conf
cp off.conf "$conf" && chmod 644 "$conf"
# case.sh CONF IMAGE: one launch by the bench user with CONF as the installed ctr.conf.
cat > case.sh <<EOF
#!/bin/sh
exec unshare -m sh -c 'mount --bind "\$0" "$conf" && exec runuser -u "$user" -- env HOME="$home" "$ctr" exec "\$1" /bin/true' "\$@"
EOF
chmod 755 case.sh
sh case.sh "$work/on.conf" "$work/signed.sif"  # keeps both verdicts
[ -f "/run/ctr-helper/verified/$(stat -c %d-%i signed.sif)" ] || die "the helper kept no verdict: is this ctr built with its check?"

echo "== host: $(uname -r), $(nproc) cores"
echo "== warm: signed SIF through the setuid helper, linger 0, $blocks blocks x $reps launches, randomized order per block"
"$timer" -b "$blocks" -r "$reps" -c 1 -j warm.json \
  "no-rule=/bin/sh $work/case.sh $work/off.conf $work/signed.sif" \
  "whitelist-kept=/bin/sh $work/case.sh $work/on.conf $work/signed.sif"
read -r a b added low high < <(python3 "$src/bench/startup/added_ms.py" warm.json "$blocks" "$reps" no-rule whitelist-kept)
echo "warm: no rule ${a} ms, whitelist (kept verdicts) ${b} ms: adds ${added} ms (per-block ${low} .. ${high})"

if [ "$size_mb" -gt 0 ]; then
  echo "== cold: a signed SIF of $size_mb MiB (incompressible) through the helper: first launch (verified twice) and second (kept)"
  make_big_signed_sif "$work/big.sif" "$size_mb" key.pem rootfs
  t0=$(date +%s%N); sh case.sh "$work/on.conf" "$work/big.sif"; t1=$(date +%s%N)
  sh case.sh "$work/on.conf" "$work/big.sif"; t2=$(date +%s%N)
  sh case.sh "$work/off.conf" "$work/big.sif"; t3=$(date +%s%N)
  echo "cold: $(stat -c %s big.sif) bytes: first launch $(( (t1 - t0) / 1000000 )) ms (verified by ctr and by the helper's check), second $(( (t2 - t1) / 1000000 )) ms (kept verdicts), without a rule $(( (t3 - t2) / 1000000 )) ms"
fi
