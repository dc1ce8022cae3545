# Sourced by the bench/startup scripts (after they set $ctr): what several of them do alike.

# as_bench_user BUILD VAR...: containers are an ordinary user's business, so a script started
# as root measures as one. As root: creates BENCH_USER (default ctrbench), opens /dev/fuse
# and BUILD's path to it, and runs this script again as that user with CTR_BIN=$ctr and each
# named VAR passed on; it does not return. As anyone else: returns at once.
as_bench_user() {
  [ "$(id -u)" = 0 ] || return 0
  local build=$1 user=${BENCH_USER:-ctrbench} d v vars=()
  shift
  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user"
  [ -c /dev/fuse ] && chmod 666 /dev/fuse
  d=$build; while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  for v in "$@"; do vars+=("$v=${!v:-}"); done
  exec runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" USER="$user" PATH=/usr/bin:/bin \
    "${vars[@]}" CTR_BIN="$ctr" bash "$0" "$build"
}

# make_big_signed_sif OUT SIZE_MB KEY ROOTFS: a SIF of ROOTFS plus SIZE_MB MiB of random
# (incompressible) data, stored uncompressed, signed with the PEM private key KEY: what a
# cold execution-control check must read and hash in full.
make_big_signed_sif() {
  local out=$1 size_mb=$2 key=$3 rootfs=$4 tmp
  tmp=$(mktemp -d "$(dirname "$out")/big.XXXXXX")
  mkdir "$tmp/tree" && cp -a "$rootfs/." "$tmp/tree/"
  head -c "$((size_mb << 20))" /dev/urandom > "$tmp/tree/data"
  mksquashfs "$tmp/tree" "$tmp/big.sqfs" -quiet -noappend -noI -noD -noF -noX -all-root >/dev/null
  "$ctr" -q build "$out" "$tmp/big.sqfs"
  rm -rf "$tmp"
  "$ctr" sign --key "$key" "$out" >/dev/null
  chmod 644 "$out"
}

# step_medians NAME RUNS CTR-EXEC-ARGS...: ctr's own step times (`ctr -d`'s "launch steps:"
# line) over RUNS launches, the median of each step, on one line: "NAME: STEP MS; ...".
step_medians() {
  local name=$1 runs=$2 line step med tsv
  shift 2
  tsv=$(mktemp)
  # "launch steps: STEP 0.154 ms, STEP 0.551 ms, ...; total 3.844 ms since ctr started" -> "STEP<tab>MS"
  for _ in $(seq "$runs"); do "$ctr" -d exec "$@" 2>&1 | grep 'launch steps:' || true; done |
    sed 's/.*launch steps: //; s/ since ctr started//; s/; /, /' | tr ',' '\n' | sed 's/^ *//' |
    sed -n 's/^\(.*\) \([0-9.]*\) ms$/\1\t\2/p' > "$tsv"
  line="$name:"
  while IFS= read -r step; do
    med=$(awk -F'\t' -v s="$step" '$1 == s { print $2 }' "$tsv" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    line="$line $step $med;"
  done < <(cut -f1 "$tsv" | awk '!seen[$0]++')
  rm -f "$tsv"
  echo "$line"
}

# join_floor_case BUILD IMAGE: the join-floor command line (bench/startup/join_floor.c) for
# IMAGE's holder, which must be alive: the holder's record and its cached seccomp filter, as
# `ctr -d exec IMAGE` names them. Prints nothing, and says why on stderr, where it cannot.
join_floor_case() {
  local build=$1 image=$2 debug key bpf
  debug=$("$ctr" -d exec "$image" /bin/true 2>&1) || true
  key=$(sed -n 's/.*reusing the mounted image \([0-9a-f]*\)$/\1/p' <<<"$debug" | head -1)
  bpf=$(sed -n 's/.*seccomp filter from \(\/.*\.bpf\)$/\1/p' <<<"$debug" | head -1)
  if [ -z "$key" ] || [ -z "$bpf" ] || [ ! -x "$build/bin/join-floor" ]; then
    echo "== no join-floor case: $image's launch named no held image and cached seccomp filter in its -d output, or join-floor is not built" >&2
    return 0
  fi
  echo "$build/bin/join-floor $(dirname "$bpf")/$key.pid $bpf /bin/true"
}

# nv_fixture WORK: an NVIDIA driver as ctr sees one on a GPU node, for machines without a GPU
# (nv-overhead.sh, launch-text.sh): under WORK/node (use it as CTR_HOST_ROOT) 60 real shared
# libraries of this machine, an ld.so cache of them made by ldconfig, 8 GPU device files and
# a driver version file; WORK/list.conf lists the libraries and WORK/ctr.conf (use it as
# CTR_CONFIG) names that list. Prints how many libraries it listed.
nv_fixture() {
  local work=$1 root=$1/node lib soname dev n=0 ldconfig
  ldconfig=$(PATH=$PATH:/usr/sbin:/sbin command -v ldconfig)
  mkdir -p "$root/usr/lib64" "$root/etc" "$root/proc/driver/nvidia" "$root/dev/nvidia-caps" "$root/usr/bin"
  : > "$work/list.conf"
  for lib in /usr/lib/x86_64-linux-gnu/lib*.so.[0-9]*; do
    [ -f "$lib" ] && [ ! -L "$lib" ] || continue
    soname=$(objdump -p "$lib" 2>/dev/null | awk '/SONAME/ {print $2}')
    case "$soname" in lib*.so.*) ;; *) continue;; esac
    [ -e "$root/usr/lib64/$soname" ] && continue
    cp "$lib" "$root/usr/lib64/$soname"
    echo "${soname%%.so.*}.so" >> "$work/list.conf"
    n=$((n + 1)); [ "$n" = 60 ] && break
  done
  echo /usr/lib64 > "$root/etc/ld.so.conf"
  unshare -r "$ldconfig" -r "$root" -C /etc/ld.so.cache -f /etc/ld.so.conf -X 2>/dev/null ||
    "$ldconfig" -r "$root" -C /etc/ld.so.cache -f /etc/ld.so.conf -X
  echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  fixture" > "$root/proc/driver/nvidia/version"
  for dev in nvidiactl nvidia-uvm nvidia-uvm-tools nvidia-modeset nvidia0 nvidia1 nvidia2 nvidia3; do : > "$root/dev/$dev"; done
  printf 'nvidia library list = %s\nimage linger = 5\ncdi spec dirs = %s/no-cdi\n' "$work/list.conf" "$work" > "$work/ctr.conf"
  echo "$n"
}
