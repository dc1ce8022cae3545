#!/bin/bash
# ctr pull from a real registry (Debian's docker-registry on 127.0.0.1, filled with skopeo)
# and the docker-archive, oci-archive and OCI layout imports; as root and as the test user.
# The image is built here from the busybox demo root: no network beyond 127.0.0.1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
command -v docker-registry >/dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
ensure_test_user
require_fuse
use_linger 0

# ---- an OCI layout written by hand: two layers (the demo root; then a whiteout, an
# opaque directory and a hard link) and a config with Env, Entrypoint, Cmd, Labels.
mkdir -p "$WORK/src/base" "$WORK/src/top/etc/opaque" "$WORK/layout/blobs/sha256"
make_demo_rootfs "$WORK/src/base"
rm -rf "$WORK/src/base/.singularity.d"
mkdir -p "$WORK/src/base/etc/opaque" && echo old > "$WORK/src/base/etc/opaque/old"
echo gone > "$WORK/src/base/etc/removed"
echo new > "$WORK/src/top/etc/opaque/new"
: > "$WORK/src/top/etc/.wh.removed"
: > "$WORK/src/top/etc/opaque/.wh..wh..opq"
echo linked > "$WORK/src/top/etc/target" && ln "$WORK/src/top/etc/target" "$WORK/src/top/etc/hardlink"

blob() {  # blob FILE: moves FILE into the layout, prints "digest size"
  local d s; d=$(sha256sum "$1" | cut -d' ' -f1); s=$(stat -c %s "$1")
  mv "$1" "$WORK/layout/blobs/sha256/$d"; echo "sha256:$d $s"
}
tar -C "$WORK/src/base" --numeric-owner --owner=0 --group=0 -czf "$WORK/l1.tgz" .
tar -C "$WORK/src/top" --numeric-owner --owner=0 --group=0 -czf "$WORK/l2.tgz" .
diff1=$(gzip -dc "$WORK/l1.tgz" | sha256sum | cut -d' ' -f1); diff2=$(gzip -dc "$WORK/l2.tgz" | sha256sum | cut -d' ' -f1)
read -r l1 l1s < <(blob "$WORK/l1.tgz"); read -r l2 l2s < <(blob "$WORK/l2.tgz")
cat > "$WORK/config.json" <<JSON
{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/bin:/usr/bin:/bin","GREETING=hello from the image","EMPTY"],
"Entrypoint":["/bin/echo","entry"],"Cmd":["default cmd"],"WorkingDir":"/etc","Labels":{"org.example.name":"demo"}},
"rootfs":{"type":"layers","diff_ids":["sha256:$diff1","sha256:$diff2"]}}
JSON
read -r cfg cfgs < <(blob "$WORK/config.json")
gz=application/vnd.oci.image.layer.v1.tar+gzip
cat > "$WORK/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"$cfg","size":$cfgs},
"layers":[{"mediaType":"$gz","digest":"$l1","size":$l1s},{"mediaType":"$gz","digest":"$l2","size":$l2s}]}
JSON
read -r man mans < <(blob "$WORK/manifest.json")
echo '{"imageLayoutVersion":"1.0.0"}' > "$WORK/layout/oci-layout"
cat > "$WORK/layout/index.json" <<JSON
{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"$man","size":$mans,
"annotations":{"org.opencontainers.image.ref.name":"1"}}]}
JSON

# ---- the registry: a free port on 127.0.0.1, storage in $WORK, killed at exit.
start_registry
trap 'kill $REGISTRY_PID 2>/dev/null || true; wait $REGISTRY_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
reg=$REGISTRY
skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout:1" "docker://$reg/demo:1"

# expect_failure WHAT NEEDLE CMD...: non-zero, one line on stderr holding NEEDLE, no output left.
expect_failure() {
  local what=$1 needle=$2; shift 2
  local rc=0
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" != 0 ] || fail "$what: succeeded"
  expect_eq "$what: stderr lines" 1 "$(grep -vc '^layer \|^-- ' "$WORK/err" || true)"
  expect_contains "$what" "$needle" "$(cat "$WORK/err")"
}
# A failed pull leaves no output and none of its scratch directories (.OUT.pull.XXXXXX).
no_leftovers_in() {
  local left; left=$(ls -A "$1" | grep -e '\.pull\.' -e '\.oci-archive\.' -e '\.docker-archive\.' -e '^bad\.sif$' || true)
  [ -z "$left" ] || fail "left behind in $1: $left"
}

note "pull as root from $reg"
export CTR_CACHE_DIR=$WORK/cache
"$CTR_BIN" pull "$WORK/good.sif" "docker://$reg/demo:1" 2>"$WORK/err" || fail "pull: $(cat "$WORK/err")"
expect_contains "progress lines" "layer 2/2" "$(cat "$WORK/err")"
out=$("$CTR_BIN" exec "$WORK/good.sif" sh -c 'echo "$GREETING"; cat /etc/opaque/* | tr "\n" " "; test -e /etc/removed && echo removed-present; cat /etc/hardlink; test -d /.singularity.d/actions && echo actions')
expect_eq "exec: env, opaque dir, whiteout, hard link, actions" "hello from the image
new linked
actions" "$out"
expect_eq "run: entrypoint + cmd" "entry default cmd" "$("$CTR_BIN" run "$WORK/good.sif")"
expect_eq "run: entrypoint + args" "entry a b" "$("$CTR_BIN" run "$WORK/good.sif" a b)"
expect_contains "labels" 'org.example.name: demo' "$("$CTR_BIN" inspect --labels "$WORK/good.sif")"
# The config's WorkingDir: recorded, where --image-workdir starts (before --pwd, which is where
# an image without one starts); without the option, the current directory as Apptainer's.
expect_eq "WorkingDir recorded" "/etc" "$("$CTR_BIN" exec "$WORK/good.sif" cat /.singularity.d/ctr-workdir)"
expect_eq "--image-workdir: the image's WORKDIR" "/etc" "$(cd /tmp && "$CTR_BIN" exec --image-workdir "$WORK/good.sif" pwd)"
expect_eq "--image-workdir over --pwd" "/etc" "$("$CTR_BIN" exec --image-workdir --pwd /usr "$WORK/good.sif" pwd)"
expect_eq "without --image-workdir: the current directory" "/tmp" "$(cd /tmp && "$CTR_BIN" exec "$WORK/good.sif" pwd)"
expect_contains "--explain: the rule" "unless the image records its WORKDIR in /.singularity.d/ctr-workdir" \
  "$("$CTR_BIN" exec --explain --image-workdir "$WORK/good.sif" true)"

note "second pull: every layer from the cache"
before=$(grep -c 'GET /v2/demo/blobs' "$WORK/registry.log" || true)
cache_inode=$(stat -c %i "$WORK/cache/blobs/sha256/${l1#sha256:}")
touch -d '2 days ago' "$WORK/cache/blobs/sha256/${l1#sha256:}"
"$CTR_BIN" pull --force "$WORK/good.sif" "docker://$reg/demo:1" 2>"$WORK/err"
expect_eq "cached layers" 2 "$(grep -c ': cached' "$WORK/err")"
expect_eq "cache entry not written again" "$cache_inode" "$(stat -c %i "$WORK/cache/blobs/sha256/${l1#sha256:}")"
[ -n "$(find "$WORK/cache/blobs/sha256/${l1#sha256:}" -mtime -1)" ] || fail "the cache entry's time is not its last use"

note "names as Apptainer gives them: --name, NAME_TAG.sif, --dir; the call Snakemake and cwltool make"
mkdir -p "$WORK/names/into"
(cd "$WORK/names" && "$CTR_BIN" -q pull "docker://$reg/demo:1") || fail "pull SOURCE alone"
[ -s "$WORK/names/demo_1.sif" ] || fail "pull SOURCE alone did not write demo_1.sif: $(ls "$WORK/names")"
(cd "$WORK/names" && "$CTR_BIN" -q pull --dir into "docker://$reg/demo:1") || fail "pull --dir"
[ -s "$WORK/names/into/demo_1.sif" ] || fail "pull --dir did not write into/demo_1.sif: $(ls -R "$WORK/names")"
ln -s "$CTR_BIN" "$WORK/singularity"
"$WORK/singularity" pull --name "$WORK/names/snakemake.simg" "docker://$reg/demo:1" 2>"$WORK/err" ||
  fail "singularity pull --name FILE docker://REF (Snakemake's call): $(cat "$WORK/err")"
expect_eq "--name: the image runs" "entry a" "$("$CTR_BIN" run "$WORK/names/snakemake.simg" a)"
expect_failure "pull --name onto an existing file" "snakemake.simg: already exists (use --force" \
  "$WORK/singularity" pull --name "$WORK/names/snakemake.simg" "docker://$reg/demo:1"
"$WORK/singularity" pull --force --name "$WORK/names/snakemake.simg" "docker://$reg/demo:1" 2>"$WORK/err" ||
  fail "pull --force --name: $(cat "$WORK/err")"
expect_failure "pull SOURCE without a transport" "'demo' names no transport" "$CTR_BIN" pull demo
rc=0; out=$("$CTR_BIN" pull a b c 2>&1) || rc=$?
expect_eq "pull with three arguments: a usage error" 1 "$rc"
expect_contains "pull with three arguments" "At Most 2 required but received 3" "$out"
no_leftovers_in "$WORK/names"
rm -rf "$WORK/names"

note "refusals: existing output, bad tag, registry down"
expect_failure "existing output" "already exists (use --force" "$CTR_BIN" pull "$WORK/good.sif" "docker://$reg/demo:1"
expect_failure "bad tag" "manifest unknown: demo:nope not in $reg" "$CTR_BIN" pull "$WORK/bad.sif" "docker://$reg/demo:nope"
dead=$(free_port)
expect_failure "registry down" "cannot reach registry 127.0.0.1:$dead" "$CTR_BIN" pull "$WORK/bad.sif" "docker://127.0.0.1:$dead/demo:1"
no_leftovers_in "$WORK"

note "a corrupted blob: in the cache, then in the registry (same size), then truncated"
printf 'X' | dd of="$WORK/cache/blobs/sha256/${l2#sha256:}" bs=1 seek=10 conv=notrunc status=none
expect_failure "corrupt cache" "blob $l2 of demo:1: digest mismatch (got sha256:" "$CTR_BIN" pull "$WORK/bad.sif" "docker://$reg/demo:1"
[ ! -e "$WORK/cache/blobs/sha256/${l2#sha256:}" ] || fail "the damaged cache entry was kept"
stored=$(find "$WORK/registry" -path "*/blobs/sha256/*/${l2#sha256:}/data")
cp "$stored" "$WORK/l2.orig"
printf 'X' | dd of="$stored" bs=1 seek=10 conv=notrunc status=none
expect_failure "corrupt registry blob" "blob $l2 of demo:1: digest mismatch (got sha256:" "$CTR_BIN" pull "$WORK/bad.sif" "docker://$reg/demo:1"
head -c $((l2s / 2)) "$WORK/l2.orig" > "$stored"
expect_failure "truncated registry blob" "blob $l2 of demo:1: truncated" "$CTR_BIN" pull "$WORK/bad.sif" "docker://$reg/demo:1"
cp "$WORK/l2.orig" "$stored"
no_leftovers_in "$WORK"
ls -A "$WORK/cache/blobs/sha256" | grep -q '^\.download' && fail "a failed download stayed in the cache"

note "a layer that writes ../etc/evil, and one through a planted symlink, are refused"
mkdir -p "$WORK/evil"
python3 - "$WORK/evil" <<'PY'
import io, sys, tarfile
def layer(path, members):
    with tarfile.open(path, "w:gz") as t:
        for name, kind, data in members:
            i = tarfile.TarInfo(name)
            if kind == "link":
                i.type, i.linkname = tarfile.SYMTYPE, data
                t.addfile(i)
            else:
                i.size = len(data); t.addfile(i, io.BytesIO(data))
layer(sys.argv[1] + "/dotdot.tgz", [("../etc/evil", "file", b"x")])
layer(sys.argv[1] + "/symlink.tgz", [("escape", "link", "/tmp"), ("escape/evil", "file", b"x")])
PY
for kind in dotdot symlink; do
  cp -r "$WORK/layout" "$WORK/evil-$kind"
  read -r ld lds < <(d=$(sha256sum "$WORK/evil/$kind.tgz" | cut -d' ' -f1); mv "$WORK/evil/$kind.tgz" "$WORK/evil-$kind/blobs/sha256/$d"; echo "sha256:$d $(stat -c %s "$WORK/evil-$kind/blobs/sha256/$d")")
  mf=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m["layers"].append({"mediaType":sys.argv[4],"digest":sys.argv[2],"size":int(sys.argv[3])}); print(json.dumps(m))' \
      "$WORK/layout/blobs/sha256/${man#sha256:}" "$ld" "$lds" "$gz")
  md=$(printf %s "$mf" | sha256sum | cut -d' ' -f1); printf %s "$mf" > "$WORK/evil-$kind/blobs/sha256/$md"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"1"}}]}' "$md" "${#mf}" > "$WORK/evil-$kind/index.json"
  skopeo copy -q --dest-tls-verify=false "oci:$WORK/evil-$kind:1" "docker://$reg/evil:$kind"
done
expect_failure "../etc/evil" "../etc/evil: path with '..' refused" "$CTR_BIN" pull "$WORK/bad.sif" "docker://$reg/evil:dotdot"
expect_failure "through a symlink" "escape/evil: refused: it goes through the symlink escape" "$CTR_BIN" pull "$WORK/bad.sif" "docker://$reg/evil:symlink"
[ ! -e /etc/evil ] && [ ! -e /tmp/evil ] || fail "a layer wrote outside the image root"
no_leftovers_in "$WORK"

note "pull as $CTR_TEST_USER (its own cache), then run"
chmod 1777 "$WORK"
rm -rf "$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)/.cache/ctr"
as_user "$CTR_BIN" pull "$WORK/user.sif" "docker://$reg/demo:1" 2>"$WORK/err" || fail "pull as user: $(cat "$WORK/err")"
expect_eq "run as user" "entry default cmd" "$(as_user "$CTR_BIN" run "$WORK/user.sif")"
expect_eq "env as user" "hello from the image" "$(as_user "$CTR_BIN" exec "$WORK/user.sif" sh -c 'echo "$GREETING"')"
rm -f "$WORK/user.sif"

note "imports of skopeo's docker-archive, oci-archive and OCI layout"
skopeo copy -q --src-tls-verify=false "docker://$reg/demo:1" "docker-archive:$WORK/demo-docker.tar:demo:1"
skopeo copy -q --src-tls-verify=false "docker://$reg/demo:1" "oci-archive:$WORK/oci-demo.tar:1"
skopeo copy -q --src-tls-verify=false "docker://$reg/demo:1" "oci:$WORK/oci-dir:1"
for src in "docker-archive:$WORK/demo-docker.tar" "oci-archive:$WORK/oci-demo.tar" "oci-archive:$WORK/oci-demo.tar:1" "oci:$WORK/oci-dir:1" "oci:$WORK/oci-dir"; do
  "$CTR_BIN" -q pull --force "$WORK/import.sif" "$src" || fail "import $src"
  expect_eq "run $src" "entry default cmd" "$("$CTR_BIN" run "$WORK/import.sif")"
done
expect_failure "layout without the tag" "manifest unknown" "$CTR_BIN" pull "$WORK/bad.sif" "oci:$WORK/oci-dir:2"
rm -f "$WORK/import.sif"

expect_failure "build --build-arg with an image to pull" "apply to definition files" \
  "$CTR_BIN" build --build-arg X=1 "$WORK/bad.sif" "oci:$WORK/oci-dir:1"
expect_failure "build --build-arg-file with an image to pull" "apply to definition files" \
  "$CTR_BIN" build --build-arg-file /nonexistent "$WORK/bad.sif" "oci:$WORK/oci-dir:1"

note "the SIF records the image's architecture, not the host's (pull --arch)"
# The same image, its config saying arm64 (as long as amd64: the config's size is unchanged).
cp -a "$WORK/oci-dir" "$WORK/oci-arm64"
man1=$(jq -r '.manifests[0].digest' "$WORK/oci-arm64/index.json"); man1=${man1#sha256:}
cfg1=$(jq -r '.config.digest' "$WORK/oci-arm64/blobs/sha256/$man1"); cfg1=${cfg1#sha256:}
sed 's/"architecture":"amd64"/"architecture":"arm64"/' "$WORK/oci-arm64/blobs/sha256/$cfg1" > "$WORK/cfg-arm64"
cfg2=$(sha256sum < "$WORK/cfg-arm64" | cut -d' ' -f1); mv "$WORK/cfg-arm64" "$WORK/oci-arm64/blobs/sha256/$cfg2"
sed "s/$cfg1/$cfg2/" "$WORK/oci-arm64/blobs/sha256/$man1" > "$WORK/man-arm64"
man2=$(sha256sum < "$WORK/man-arm64" | cut -d' ' -f1); mv "$WORK/man-arm64" "$WORK/oci-arm64/blobs/sha256/$man2"
sed -i "s/$man1/$man2/" "$WORK/oci-arm64/index.json"
"$CTR_BIN" -q pull --arch arm64 "$WORK/arm64.sif" "oci:$WORK/oci-arm64:1" || fail "pull --arch arm64"
expect_contains "the partition's architecture" "FS (Squashfs/*System/arm64)" "$("$CTR_BIN" sif list "$WORK/arm64.sif")"
rm -f "$WORK/arm64.sif"

note "ctr build from a definition file with Bootstrap: docker, oci and docker-archive (%post on top of the image)"
for agent_from in "docker|$reg/demo:1" "oci|oci-dir:1" "docker-archive|demo-docker.tar"; do
  agent=${agent_from%%|*} from=${agent_from#*|}
  printf 'Bootstrap: %s\nFrom: %s\n\n%%post\n    echo built-on-$GREETING > /posted\n' "$agent" "$from" > "$WORK/from-$agent.def"
  (cd "$WORK" && "$CTR_BIN" -q build --force "$WORK/def-$agent.sif" "$WORK/from-$agent.def") >/dev/null 2>&1 ||
    fail "build with Bootstrap: $agent: $(tail -5 "$WORK/def-$agent.sif.build.log" 2>/dev/null)"
  expect_eq "Bootstrap: $agent: %post ran in the image" "built-on-" "$("$CTR_BIN" exec "$WORK/def-$agent.sif" cat /posted)"
  expect_eq "Bootstrap: $agent: the image's runscript" "entry default cmd" "$("$CTR_BIN" run "$WORK/def-$agent.sif")"
  rm -f "$WORK/def-$agent.sif" "$WORK/def-$agent.sif.build.log"
done

note "ctr build's Bootstrap: docker caches where ctr pull does (ctr.conf's image cache dir, one ctr.conf read)"
printf 'image cache dir = %s/site-cache-%%u\n' "$WORK" > "$WORK/cache.conf"
(cd "$WORK" && env -u CTR_CACHE_DIR CTR_CONFIG="$WORK/cache.conf" "$CTR_BIN" -q build --force "$WORK/def-cached.sif" \
  "$WORK/from-docker.def") >/dev/null 2>&1 || fail "build with 'image cache dir': $(tail -5 "$WORK/def-cached.sif.build.log")"
[ -n "$(ls -A "$WORK/site-cache-0/blobs/sha256" 2>/dev/null)" ] ||
  fail "Bootstrap: docker did not cache its layers in ctr.conf's 'image cache dir' ($(ls -la "$WORK"))"
rm -rf "$WORK/def-cached.sif" "$WORK/def-cached.sif.build.log" "$WORK/site-cache-0"

note "pull --sandbox (a directory) and --disable-cache (nothing left in the cache)"
"$CTR_BIN" pull --sandbox "$WORK/sb" "docker://$reg/demo:1" 2>/dev/null || fail "pull --sandbox"
expect_eq "pull --sandbox: a directory image" "hello from the image" "$("$CTR_BIN" exec "$WORK/sb" sh -c 'echo "$GREETING"')"
rm "$WORK/sb/.singularity.d/ctr-workdir"
expect_eq "--image-workdir, an image without WORKDIR: --pwd" "/usr" "$("$CTR_BIN" exec --image-workdir --pwd /usr "$WORK/sb" pwd)"
before=$(find "$WORK/cache" -type f | wc -l)
CTR_CACHE_DIR=$WORK/nocache "$CTR_BIN" pull --disable-cache "$WORK/nc.sif" "docker://$reg/demo:1" 2>/dev/null || fail "pull --disable-cache"
[ ! -e "$WORK/nocache" ] || fail "--disable-cache wrote the cache: $(find "$WORK/nocache" | head -3)"
expect_eq "--disable-cache: the image" "entry default cmd" "$("$CTR_BIN" run "$WORK/nc.sif")"
[ -z "$(ls -A "$WORK" | grep '^\.' || true)" ] || fail "pull left hidden scratch files: $(ls -A "$WORK" | grep '^\.')"

note "pull http(s)://URL: the file as the web server has it, executable as Apptainer leaves it"
mkdir -p "$WORK/www" && cp "$WORK/good.sif" "$WORK/www/app.sif" && echo DATADATA > "$WORK/www/data.txt"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$WORK/www" "$port" >/dev/null 2>&1 &
www=$!
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break; sleep 0.1; done
(umask 022 && "$CTR_BIN" pull "$WORK/web.sif" "http://127.0.0.1:$port/app.sif" 2>/dev/null) || fail "pull http://"
cmp -s "$WORK/web.sif" "$WORK/good.sif" || fail "the pulled file differs from the server's"
expect_eq "mode under umask 022" 755 "$(stat -c %a "$WORK/web.sif")"
expect_eq "run the pulled SIF" "entry default cmd" "$("$CTR_BIN" run "$WORK/web.sif")"
"$CTR_BIN" pull "$WORK/data.sif" "http://127.0.0.1:$port/data.txt" 2>/dev/null || fail "pull of a plain file"
expect_eq "any file as it is" DATADATA "$(cat "$WORK/data.sif")"
expect_failure "HTTP 404" "HTTP 404" "$CTR_BIN" pull "$WORK/missing.sif" "http://127.0.0.1:$port/nothere.sif"
[ ! -e "$WORK/missing.sif" ] || fail "a failed download left its output"
kill "$www" 2>/dev/null; wait "$www" 2>/dev/null || true

note "SIGINT during a pull leaves nothing"
# An image with one 64 MiB uncompressed layer, so that the pull is still running.
mkdir -p "$WORK/big/root" "$WORK/big/layout/blobs/sha256"
head -c 64M /dev/urandom > "$WORK/big/root/data"
tar -C "$WORK/big/root" -cf "$WORK/big/layer.tar" .
bl=$(sha256sum "$WORK/big/layer.tar" | cut -d' ' -f1); bls=$(stat -c %s "$WORK/big/layer.tar")
mv "$WORK/big/layer.tar" "$WORK/big/layout/blobs/sha256/$bl"
printf '{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$bl" > "$WORK/big/c"
bc=$(sha256sum "$WORK/big/c" | cut -d' ' -f1); bcs=$(stat -c %s "$WORK/big/c"); mv "$WORK/big/c" "$WORK/big/layout/blobs/sha256/$bc"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$bc" "$bcs" "$bl" "$bls" > "$WORK/big/m"
bm=$(sha256sum "$WORK/big/m" | cut -d' ' -f1); bms=$(stat -c %s "$WORK/big/m"); mv "$WORK/big/m" "$WORK/big/layout/blobs/sha256/$bm"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"1"}}]}' "$bm" "$bms" > "$WORK/big/layout/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$WORK/big/layout/oci-layout"
skopeo copy -q --dest-tls-verify=false "oci:$WORK/big/layout:1" "docker://$reg/big:1"
for delay in 0.2 0.6 1.2; do
  rm -rf "$WORK/cache"
  "$CTR_BIN" pull "$WORK/int.sif" "docker://$reg/big:1" 2>"$WORK/err" & pid=$!
  sleep $delay; kill -INT $pid 2>/dev/null || true; rc=0; wait $pid || rc=$?
  if [ "$rc" != 0 ]; then
    expect_eq "interrupted pull status (after $delay s)" 130 "$rc"
    expect_contains "interrupted pull message" "interrupted" "$(cat "$WORK/err")"
    interrupted=$((${interrupted:-0} + 1))
    [ ! -e "$WORK/int.sif" ] || fail "interrupted pull left its output"
  fi
  rm -f "$WORK/int.sif"
  left=$(ls -A "$WORK" | grep '\.pull\.' || true); [ -z "$left" ] || fail "interrupted pull left $left"
  left=$(ls -A "$WORK/cache/blobs/sha256" 2>/dev/null | grep '^\.download' || true); [ -z "$left" ] || fail "interrupted pull left $left in the cache"
done
[ "${interrupted:-0}" -gt 0 ] || fail "no pull was still running when SIGINT came"
assert_no_leftovers
echo "PASS: $TEST_NAME"
