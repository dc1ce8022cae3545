#!/bin/bash
# The site image store on a job's first launch (issue 53, item 7). A "node" is a node-local
# image cache of its own (CTR_CACHE_DIR); a job step on N nodes is N `ctr exec docker://REF
# true` started together, one per node, against a real registry on 127.0.0.1
# (docker-registry, its access log counting requests and bytes). For each image size and N:
#   no store    every node pulls and packs the image
#   store       'image store dir' set, empty: one node fills it, the others wait for it
# with the time until the last node's launch has run and the blob requests and bytes the
# registry served. Then, per size, a node's first launch from a warm store (in place and
# copied: 'image store copy = never|always') against a launch from its own warm cache, as
# ratios (the reference measured in the same run).
#
# Usage: bench/pull/store.sh CTR_BIN [SIZES] [NODES] [REPS]
#   SIZES  comma list of image sizes (default 1G,4G), NODES (default 2,4,8), REPS for the
#   warm-launch ratios (default 5). Needs skopeo, docker-registry, python3. Disk: about
#   SIZE x (2 N + 3) at the largest N (each node keeps the layer and the SIF).
set -euo pipefail
CTR_BIN=$(realpath "${1:?usage: store.sh CTR_BIN [SIZES] [NODES] [REPS]}")
SOURCE_DIR=$(realpath "$(dirname "$0")/../..")
SIZES=${2:-1G,4G}
NODES=${3:-2,4,8}
REPS=${4:-5}
for tool in skopeo docker-registry python3; do
  command -v "$tool" >/dev/null || { echo "store.sh: $tool is missing" >&2; exit 2; }
done
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ctr-bench-store.XXXXXX")
registry_pid=
trap '[ -z "$registry_pid" ] || kill $registry_pid 2>/dev/null || true; rm -rf "$WORK"' EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog: {level: info}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
  "$WORK/registry" "$port" > "$WORK/registry.yml"
docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 & registry_pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.1; done

# make_image NAME SIZE: the demo root (busybox, images/demo) and SIZE of incompressible data
# in 4 files, one gzip -1 layer, pushed as NAME:1.
make_image() {
  local name=$1 size=$2 dir=$WORK/img-$1 layout=$WORK/layout-$1 part
  mkdir -p "$dir/data" "$layout/blobs/sha256"
  sh "$SOURCE_DIR/images/demo/make-rootfs.sh" "$dir" >/dev/null
  part=$(( $(numfmt --from=iec "$size") / 4 ))
  for i in 1 2 3 4; do head -c "$part" /dev/urandom > "$dir/data/part$i"; done
  blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); echo "sha256:$d $(stat -c %s "$1")"; mv "$1" "$layout/blobs/sha256/$d"; }
  tar -C "$dir" --numeric-owner --owner=0 --group=0 -cf - . | gzip -1 > "$WORK/l" && read -r l s < <(blob "$WORK/l")
  rm -rf "$dir"
  printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":[]}}' > "$WORK/c"
  read -r c cs < <(blob "$WORK/c")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' \
    "$c" "$cs" "$l" "$s" > "$WORK/m"
  read -r m ms < <(blob "$WORK/m")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"1"}}]}' \
    "$m" "$ms" > "$layout/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  skopeo copy -q --dest-tls-verify=false "oci:$layout:1" "docker://127.0.0.1:$port/$name:1"
  rm -rf "$layout"
}

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# served FROM-LINE: blob requests (200) and their bytes in the registry's log after that line.
served() {
  tail -n +"$1" "$WORK/registry.log" | python3 -c '
import re, sys
n = b = 0
for line in sys.stdin:
    m = re.search(r"\"GET /v2/[^ ]*/blobs/sha256:[0-9a-f]+ HTTP/[0-9.]+\" 200 ([0-9]+)", line)
    if m: n += 1; b += int(m.group(1))
print(n, b)'
}
conf() {  # conf [STORE COPY]: the ctr.conf of a run
  printf 'image linger = 0\nimage cache max size = 1T\npull max blob size = 1T\npull max total size = 1T\npull max unpacked size = 1T\n' > "$WORK/ctr.conf"
  [ -z "${1:-}" ] || printf 'image store dir = %s\nimage store copy = %s\n' "$1" "$2" >> "$WORK/ctr.conf"
}
launch() {  # launch NODE: a node's launch of the image
  CTR_CONFIG=$WORK/ctr.conf CTR_CACHE_DIR=$WORK/node-$1 "$CTR_BIN" -q exec "$ref" true
}
# job N: N launches at once on N fresh nodes; prints the seconds until the last one ran.
job() {
  local n=$1 i t0 pids=()
  rm -rf "$WORK"/node-*
  sync; t0=$(now)
  for i in $(seq "$n"); do launch "$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || { echo "store.sh: a launch failed" >&2; exit 1; }; done
  echo "$(now) - $t0" | bc
}

echo "| image | nodes | store | time to the last node's first exec (s) | blob requests | bytes served | bytes / image |"
echo "|---|---|---|---|---|---|---|"
IFS=, read -r -a sizes <<< "$SIZES"
IFS=, read -r -a nodes <<< "$NODES"
warm_rows=()
for size in "${sizes[@]}"; do
  name=bench-$(echo "$size" | tr 'A-Z' 'a-z')
  make_image "$name" "$size"
  ref=docker://127.0.0.1:$port/$name:1
  image_bytes=$(find "$WORK/registry" -path '*/blobs/sha256/*/data' -newer "$WORK/registry.yml" -printf '%s\n' | paste -sd+ - | bc)
  touch "$WORK/registry.yml"
  for n in "${nodes[@]}"; do
    for mode in none store; do
      rm -rf "$WORK/store"; mkdir -m 1777 "$WORK/store"
      if [ "$mode" = store ]; then conf "$WORK/store" never; else conf; fi
      from=$(( $(wc -l < "$WORK/registry.log") + 1 ))
      t=$(job "$n")
      read -r reqs bytes < <(served "$from")
      printf '| %s | %s | %s | %.1f | %s | %s | %.2f |\n' "$size" "$n" "$mode" "$t" "$reqs" "$bytes" \
        "$(echo "$bytes / $image_bytes" | bc -l)"
    done
  done
  # Warm: the store filled (the last job). A node that never ran the image, against the
  # reference: a launch from a node's own warm cache, measured in turn with it.
  conf "$WORK/store" always
  rm -rf "$WORK/node-ref"; launch ref
  for copy in never always; do
    : > "$WORK/first"; : > "$WORK/cached"
    for _ in $(seq "$REPS"); do
      conf "$WORK/store" "$copy"
      rm -rf "$WORK"/node-warm
      sync; t0=$(now); launch warm; echo "$(now) - $t0" | bc >> "$WORK/first"
      conf "$WORK/store" always
      t0=$(now); launch ref; echo "$(now) - $t0" | bc >> "$WORK/cached"
    done
    first=$(median < "$WORK/first"); cached=$(median < "$WORK/cached")
    warm_rows+=("$(printf '| %s | %s | %.3f | %.3f | %.2f |' "$size" "$copy" "$first" "$cached" "$(echo "$first / $cached" | bc -l)")")
  done
  rm -rf "$WORK"/node-* "$WORK/store"
done
echo
echo "| image | image store copy | first launch from the warm store (s, median) | launch from the node's cache (s) | ratio |"
echo "|---|---|---|---|---|"
printf '%s\n' "${warm_rows[@]}"
