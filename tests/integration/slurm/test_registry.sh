#!/bin/bash
# Registry images under Slurm: `srun --container-image=REGISTRY#NAME:TAG` (pyxis's form) and
# `docker://REF` on both nodes of the real cluster, through ctr's image cache. A registry
# (Debian's docker-registry, filled with skopeo) answers on 127.0.0.1 inside each node's
# network namespace, both serving one storage directory. The four tasks of a step on two
# nodes share one cache here (the nodes share this machine's file system), so the layers
# are fetched once in all: one ctr pulls under the cache's lock, the others wait and run
# what it packed. An oras:// SIF (pushed with ctr push) runs on both nodes. A missing image
# fails the step with ctr's one line. With node-local caches each node fetches an image's
# blobs; with a site store (ctr.conf 'image store dir') a job fetches them once, and the
# next job not at all (the registry's logs count the requests).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../registry/common.sh"
. "$(dirname "$0")/lib.sh"
require_slurm_cluster
command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
command -v docker-registry >/dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
ensure_test_user
require_fuse

# The image: the demo root and a layer with /etc/extra.
mkdir -p "$WORK/root" "$WORK/extra/etc"
make_demo_rootfs "$WORK/root"
rm -rf "$WORK/root/.singularity.d"
echo "from the registry" > "$WORK/extra/etc/extra"
tar -C "$WORK/root" --numeric-owner --owner=0 --group=0 -czf "$WORK/l1.tgz" .
tar -C "$WORK/extra" --numeric-owner --owner=0 --group=0 -czf "$WORK/l2.tgz" .
# Each with a base layer of its own: a layer another image shares may be in a node's
# cache already, which would hide what the store saves.
for v in b c d; do
  cp -a "$WORK/root" "$WORK/root-$v" && echo "$v" > "$WORK/root-$v/etc/base"
  tar -C "$WORK/root-$v" --numeric-owner --owner=0 --group=0 -czf "$WORK/l1-$v.tgz" .
done
layout_image "$WORK/layout" 1 "$WORK/l1.tgz" "$WORK/l2.tgz"
layers=$(python3 -c 'import json,sys; print(" ".join(l["digest"] for l in json.load(open(sys.argv[1]))["layers"]))' "$MANIFEST")
# demo-w: the same files, a config with a WORKDIR (where pyxis starts the tasks).
tar -C "$WORK/root" --numeric-owner --owner=0 --group=0 -czf "$WORK/l1-w.tgz" .
LAYOUT_CONFIG='{"Cmd":["/bin/sh"],"WorkingDir":"/etc"}' layout_image "$WORK/layout-w" 1 "$WORK/l1-w.tgz"
# Three more images (demo-b, demo-c, demo-d) for the store's jobs.
for v in b c d; do
  mkdir -p "$WORK/extra-$v/etc" && echo "image $v" > "$WORK/extra-$v/etc/extra"
  tar -C "$WORK/extra-$v" --numeric-owner --owner=0 --group=0 -czf "$WORK/l2-$v.tgz" .
  layout_image "$WORK/layout-$v" 1 "$WORK/l1-$v.tgz" "$WORK/l2-$v.tgz"
done

# Filled through a registry on the host's loopback, then served from the same storage by
# one registry in each node's namespace (same port: each namespace has its own loopback).
pids=()
conf=$CLUSTER/etc/plugstack.conf
base=$(cat "$conf")
cleanup() {
  printf '%s\n' "$base" > "$conf"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
start_registry
pids+=("$REGISTRY_PID")
skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout:1" "docker://$REGISTRY/demo:1"
for v in b c d w; do skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout-$v:1" "docker://$REGISTRY/demo-$v:1"; done
# A SIF pushed with ctr push oras:// beside it (Apptainer's ORAS layout).
make_demo_rootfs "$WORK/sif-root"
"$CTR_BIN" -q build "$WORK/demo.sif" "$WORK/sif-root" >/dev/null || fail "could not build the demo SIF"
CTR_CACHE_DIR=$WORK/root-cache "$CTR_BIN" -q push "$WORK/demo.sif" "oras://$REGISTRY/demo-sif:1" || fail "ctr push oras://"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true
port=${REGISTRY##*:}
for n in n1 n2; do
  printf 'version: 0.1\nlog: {level: info}\nstorage: {filesystem: {rootdirectory: %s/registry}}\nhttp: {addr: 127.0.0.1:%s}\n' \
    "$WORK" "$port" > "$WORK/registry-$n.yml"
  nsenter --net=/run/netns/"$n" docker-registry serve "$WORK/registry-$n.yml" > "$WORK/registry-$n.log" 2>&1 &
  pids+=($!)
done
for n in n1 n2; do
  for _ in $(seq 50); do
    nsenter --net=/run/netns/"$n" curl -s -o /dev/null "http://127.0.0.1:$port/v2/" && break
    sleep 0.1
  done
done

# The test user's ctr.conf: its cache in $WORK (sticky, so the cache stays private).
chmod 1777 "$WORK"
printf 'image linger = 0\nimage cache dir = %s/cache-%%u\n' "$WORK" > "$WORK/ctr.conf"
chmod 644 "$WORK/ctr.conf"
cache=$WORK/cache-$(id -u "$CTR_TEST_USER")
# The plugin runs ctr with the site's configuration, not the job's CTR_CONFIG: plugstack.conf's env=.
printf '%s env=CTR_CONFIG=%s\n' "$base" "$WORK/ctr.conf" > "$conf"
slurm() { slurm_as_user "$WORK" "$@"; }
# blob_fetches [REPOSITORY]: how many times the nodes' registries sent a blob of REPOSITORY
# (demo: its layers only, as counted before the store's part).
blob_fetches() {
  local total=0 d
  if [ -n "${1:-}" ]; then
    cat "$WORK"/registry-n?.log | grep -c "GET /v2/$1/blobs/sha256:.*200" || true
    return
  fi
  for d in $layers; do total=$(( total + $(cat "$WORK"/registry-n?.log | grep -c "GET /v2/demo/blobs/$d.*200" || true) )); done
  echo "$total"
}

note "srun -N2 -n4 --container-image=127.0.0.1:$port#demo:1: both nodes, the image's files, pulled once"
out=$(slurm srun -N2 -n4 --container-image="127.0.0.1:$port#demo:1" sh -c 'echo "$(hostname) $(cat /etc/extra)"')
printf '%s\n' "$out"
expect_eq "four tasks" 4 "$(printf '%s\n' "$out" | grep -c 'from the registry$')"
expect_eq "both nodes" "n1 n2" "$(printf '%s\n' "$out" | awk '{print $1}' | sort -u | xargs)"
expect_eq "one image in the cache" 1 "$(find "$cache/images" -name 'sha256-*.sif' | wc -l)"
expect_eq "each layer fetched once" "$(echo $layers | wc -w)" "$(blob_fetches)"

lines=$(slurm srun -N2 -n4 --container-image="127.0.0.1:$port#demo:1" true 2>&1 | grep -c "^ctr: imported docker image: 127.0.0.1:$port#demo:1$" || true)
expect_eq "pyxis's 'imported docker image' line, once per node" 2 "$lines"

note "docker://: the cached image, no layer fetched again"
expect_eq "docker:// reference" "from the registry" \
  "$(slurm srun -N1 -n1 --container-image="docker://127.0.0.1:$port/demo:1" cat /etc/extra)"
expect_eq "still each layer once" "$(echo $layers | wc -w)" "$(blob_fetches)"

note "the working directory: the image's WORKDIR, else the submit directory (workdir=auto); pyxis's / (workdir=image)"
out=$(slurm srun -N2 -n2 --container-image="127.0.0.1:$port#demo-w:1" sh -c 'echo "$(hostname) $(pwd)"')
expect_eq "the image's WORKDIR on both nodes" "n1 /etc
n2 /etc" "$(printf '%s\n' "$out" | sort)"
expect_eq "no WORKDIR: the submit directory" "$WORK" "$(slurm srun -N1 --container-image="127.0.0.1:$port#demo:1" pwd)"
expect_eq "--container-workdir wins" "/tmp" "$(slurm srun -N1 --container-image="127.0.0.1:$port#demo-w:1" --container-workdir=/tmp pwd)"
printf '%s env=CTR_CONFIG=%s workdir=image\n' "$base" "$WORK/ctr.conf" > "$conf"
expect_eq "workdir=image, no WORKDIR: /" "/" "$(slurm srun -N1 --container-image="127.0.0.1:$port#demo:1" pwd)"
expect_eq "workdir=image, WORKDIR" "/etc" "$(slurm srun -N1 --container-image="127.0.0.1:$port#demo-w:1" pwd)"
printf '%s env=CTR_CONFIG=%s workdir=submit\n' "$base" "$WORK/ctr.conf" > "$conf"
expect_eq "workdir=submit: the submit directory" "$WORK" "$(slurm srun -N1 --container-image="127.0.0.1:$port#demo-w:1" pwd)"
printf '%s env=CTR_CONFIG=%s\n' "$base" "$WORK/ctr.conf" > "$conf"

note "oras://: a SIF ctr pushed, read lazily on both nodes (each node's own cache, chunks by range requests)"
printf 'lazy cache dir = %s/node-local/lazy-%%u\nlazy prefetch = no\n' "$CLUSTER" >> "$WORK/ctr.conf"
sif_digest=sha256:$(sha256sum "$WORK/demo.sif" | cut -d' ' -f1)
rm -rf "$CLUSTER"/tmp/n?/lazy-"$(id -u "$CTR_TEST_USER")"
out=$(slurm srun -N2 -n2 --container-image="oras://127.0.0.1:$port/demo-sif:1" sh -c '. /etc/os-release; echo "$(hostname) $ID"')
expect_eq "both nodes ran the pushed SIF" "n1 ctr-demo
n2 ctr-demo" "$(printf '%s\n' "$out" | sort)"
for n in n1 n2; do
  [ -s "$CLUSTER/tmp/$n/lazy-$(id -u "$CTR_TEST_USER")/${sif_digest#sha256:}.have" ] ||
    fail "node $n has no lazy cache entry for the image: $(ls -R "$CLUSTER/tmp/$n" 2>&1 | head -20)"
done
ranges=$(cat "$WORK"/registry-n?.log | grep -c "GET /v2/demo-sif/blobs/$sif_digest.*206" || true)
[ "$ranges" -ge 2 ] || fail "expected range requests for the SIF from both nodes, got $ranges"
expect_eq "the SIF never fetched whole" 0 "$(cat "$WORK"/registry-n?.log | grep -c "GET /v2/demo-sif/blobs/$sif_digest.*200" || true)"
note "'lazy images = no' on the nodes: pulled whole"
printf 'lazy images = no\n' >> "$WORK/ctr.conf"
expect_eq "the SIF runs" "ctr-demo" "$(slurm srun -N1 -n1 --container-image="oras://127.0.0.1:$port/demo-sif:1" sh -c '. /etc/os-release; echo $ID')"
expect_eq "fetched whole once" 1 "$(cat "$WORK"/registry-n?.log | grep -c "GET /v2/demo-sif/blobs/$sif_digest.*200" || true)"
printf 'image linger = 0\nimage cache dir = %s/cache-%%u\n' "$WORK" > "$WORK/ctr.conf"
rm -rf "$CLUSTER"/tmp/n?/lazy-"$(id -u "$CTR_TEST_USER")"

note "an image the registry lacks: the step fails with ctr's line"
set +e; err=$(slurm srun -N1 -n1 --container-image="127.0.0.1:$port#nope:1" true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "missing registry image: srun exit status $rc (124: it hung)"
expect_contains "ctr's message names the image" "docker://127.0.0.1:$port/nope:1" "$err"

note "node-local caches: without a store each node fetches; with one (issue 53, item 5) the job fetches once"
# Each node's cache on its own disk (cluster.sh: DIR/node-local is the node's own), as a
# site keeps it; the site store in $WORK, which both nodes see as they would a parallel
# file system.
blobs_per_image=$(( $(ls "$WORK/layout-b/blobs/sha256" | wc -l) - 1 ))  # the config and the layers
printf 'image linger = 0\nimage cache dir = %s/node-local/cache-%%u\n' "$CLUSTER" > "$WORK/ctr.conf"
out=$(slurm srun -N2 -n4 --container-image="127.0.0.1:$port#demo-b:1" sh -c 'echo "$(hostname) $(cat /etc/extra)"')
expect_eq "four tasks ran demo-b" 4 "$(printf '%s\n' "$out" | grep -c 'image b$')"
expect_eq "no store: each node fetched each blob" $(( 2 * blobs_per_image )) "$(blob_fetches demo-b)"
mkdir -m 1777 "$WORK/store"
printf 'image store dir = %s/store\n' "$WORK" >> "$WORK/ctr.conf"
out=$(slurm srun -N2 -n4 --container-image="127.0.0.1:$port#demo-c:1" sh -c 'echo "$(hostname) $(cat /etc/extra)"')
expect_eq "four tasks ran demo-c" 4 "$(printf '%s\n' "$out" | grep -c 'image c$')"
expect_eq "both nodes" "n1 n2" "$(printf '%s\n' "$out" | awk '{print $1}' | sort -u | xargs)"
expect_eq "with the store: each blob fetched once for the job" "$blobs_per_image" "$(blob_fetches demo-c)"
expect_eq "one entry in the store" 1 "$(find "$WORK/store" -name 'sha256-*.json' | wc -l)"
# The next job, on nodes whose caches were emptied: the store serves it, the registry only
# the manifests.
rm -rf "$CLUSTER"/tmp/n?/cache-"$(id -u "$CTR_TEST_USER")"
expect_eq "the next job" "image c
image c" "$(slurm srun -N2 -n2 --container-image="127.0.0.1:$port#demo-c:1" cat /etc/extra)"
expect_eq "no blob fetched again" "$blobs_per_image" "$(blob_fetches demo-c)"
note "blobs of demo-b (no store, 2 nodes): $(blob_fetches demo-b); of demo-c (store, 2 jobs on 2 nodes): $(blob_fetches demo-c)"

note "no site store, the plugin's job store (job_store=DIR): the job fetches once, its epilog removes the store"
mkdir -m 755 "$WORK/jobstore"
printf 'image linger = 0\nimage cache dir = %s/node-local/cache-%%u\n' "$CLUSTER" > "$WORK/ctr.conf"
printf '%s env=CTR_CONFIG=%s job_store=%s\n' "$base" "$WORK/ctr.conf" "$WORK/jobstore" > "$conf"
rm -rf "$CLUSTER"/tmp/n?/cache-"$(id -u "$CTR_TEST_USER")"
out=$(slurm srun -N2 -n4 --container-image="127.0.0.1:$port#demo-d:1" sh -c 'echo "$(hostname) $(cat /etc/extra)"')
expect_eq "four tasks ran demo-d" 4 "$(printf '%s\n' "$out" | grep -c 'image d$')"
expect_eq "the job store: each blob fetched once for the job" "$blobs_per_image" "$(blob_fetches demo-d)"
slurm_wait_no_jobs "$CTR_TEST_USER" 20
expect_eq "the epilogs removed the job's store" "" "$(ls "$WORK/jobstore")"
printf '%s env=CTR_CONFIG=%s\n' "$base" "$WORK/ctr.conf" > "$conf"

slurm_wait_no_jobs "$CTR_TEST_USER" 20
assert_nothing_left "registry steps"
echo "PASS: $TEST_NAME"
