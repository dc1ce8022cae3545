#!/bin/bash
# ctr pull of a ~100 MB image from a local registry against the tools made for each step:
# `skopeo copy docker://... oci:DIR` + `tar -x` of the layers + mksquashfs (what ctr pull
# does, end to end, to a squashfs). Both start with an empty blob cache each repetition.
# Usage: bench/pull/run.sh CTR_BIN [REPETITIONS]   (needs skopeo, docker-registry, mksquashfs)
set -euo pipefail
CTR_BIN=${1:?usage: run.sh CTR_BIN [REPETITIONS]}
REPS=${2:-5}
WORK=$(mktemp -d /tmp/ctr-bench-pull.XXXXXX)
registry_pid=
trap '[ -z "$registry_pid" ] || kill $registry_pid 2>/dev/null || true; rm -rf "$WORK"' EXIT

# The image: two gzip layers, 100 MB of incompressible data in 4 files, and a small one.
mkdir -p "$WORK/root1/data" "$WORK/root2/etc" "$WORK/layout/blobs/sha256"
for i in 1 2 3 4; do head -c 25M /dev/urandom > "$WORK/root1/data/part$i"; done
echo bench > "$WORK/root2/etc/bench"
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); echo "sha256:$d $(stat -c %s "$1")"; mv "$1" "$WORK/layout/blobs/sha256/$d"; }
tar -C "$WORK/root1" -czf "$WORK/l1" . && read -r l1 s1 < <(blob "$WORK/l1")
tar -C "$WORK/root2" -czf "$WORK/l2" . && read -r l2 s2 < <(blob "$WORK/l2")
printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":[]}}' > "$WORK/c"
read -r c cs < <(blob "$WORK/c")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s},{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%s}]}' "$c" "$cs" "$l1" "$s1" "$l2" "$s2" > "$WORK/m"
read -r m ms < <(blob "$WORK/m")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"1"}}]}' "$m" "$ms" > "$WORK/layout/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$WORK/layout/oci-layout"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: 127.0.0.1:%s}\n' "$WORK/registry" "$port" > "$WORK/registry.yml"
docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 & registry_pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.1; done
skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout:1" "docker://127.0.0.1:$port/bench:1"
ref=127.0.0.1:$port/bench:1

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
: > "$WORK/ctr.times"; : > "$WORK/ref.times"
for i in $(seq "$REPS"); do
  rm -rf "$WORK/cache" "$WORK/out.sif"
  sync; t0=$(now)
  CTR_CACHE_DIR=$WORK/cache "$CTR_BIN" -q pull "$WORK/out.sif" "docker://$ref"
  t1=$(now); echo "$t1 - $t0" | bc >> "$WORK/ctr.times"

  rm -rf "$WORK/oci" "$WORK/tree" "$WORK/out.sqfs"
  sync; t0=$(now)
  skopeo copy -q --src-tls-verify=false "docker://$ref" "oci:$WORK/oci:1"
  mkdir "$WORK/tree"
  man=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"][7:])' "$WORK/oci/index.json")
  for l in $(python3 -c 'import json,sys; [print(x["digest"][7:]) for x in json.load(open(sys.argv[1]))["layers"]]' "$WORK/oci/blobs/sha256/$man"); do
    tar -C "$WORK/tree" -xzf "$WORK/oci/blobs/sha256/$l"
  done
  mksquashfs "$WORK/tree" "$WORK/out.sqfs" -noappend -quiet -no-progress >/dev/null
  t1=$(now); echo "$t1 - $t0" | bc >> "$WORK/ref.times"
done
c=$(median < "$WORK/ctr.times"); r=$(median < "$WORK/ref.times")
echo "image: $(( (s1 + s2) / 1000000 )) MB compressed, $REPS repetitions, medians"
echo "ctr pull:                         $c s  ($(tr '\n' ' ' < "$WORK/ctr.times"))"
echo "skopeo copy + tar -x + mksquashfs: $r s  ($(tr '\n' ' ' < "$WORK/ref.times"))"
echo "ratio ctr/reference: $(echo "scale=3; $c / $r" | bc)"
