#!/bin/bash
# ctr pull of images that someone else controls (issue 24, F7-F9), as root and as the test
# user: a registry that lies (registry/hostile_registry.py on 127.0.0.1) and archives the
# test user made. Downloads stop once a blob passes its declared size, and ctr.conf's limits
# bound blobs, images and what their layers unpack to (a gzip bomb, a 200 GB sparse file);
# a token realm must be https or the registry's own http host, on the registry's host and
# port unless ctr.conf lists another, and no control character reaches a request; the
# members of a docker-archive or oci-archive that are links out of it, devices or FIFOs are
# never read. Each refusal: one line naming what and why, and nothing left behind.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

command -v python3 >/dev/null || skip "python3 is not installed"
tar --version 2>/dev/null | grep -q 'GNU tar' || skip "GNU tar is needed (sparse archives)"
create_test_user

# ---- ctr.conf: small limits, so that a bomb can be small and quick; and one with the defaults.
CONF=$WORK/ctr.conf
printf 'image linger = 0\npull max blob size = 1M\npull max total size = 3M\npull max unpacked size = 64M\n' > "$CONF"
DEFAULTS=$WORK/defaults.conf
printf 'image linger = 0\n' > "$DEFAULTS"
chmod 644 "$CONF" "$DEFAULTS"
export CTR_CONFIG=$CONF CTR_TEST_CONFIG=$CONF
export CTR_CACHE_DIR=$WORK/cache
# What the test user makes (archives, layouts) and where it pulls to.
U=$WORK/user
mkdir -p "$U/out" "$U/cache" "$WORK/out"
chown -R "$CTR_TEST_USER" "$U"

# A good layer, and the tar writer for hostile archives: mktar OUT NAME=KIND:ARG...
# (file:PATH, text:STRING, symlink:TARGET, hardlink:TARGET, chr:MAJOR,MINOR, fifo:).
mkdir -p "$WORK/src" && echo hello > "$WORK/src/hello"
tar -C "$WORK/src" --numeric-owner --owner=0 --group=0 -cf "$WORK/good.tar" .
cat > "$WORK/mktar.py" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for spec in sys.argv[2:]:
        name, _, rest = spec.partition("=")
        kind, _, arg = rest.partition(":")
        i = tarfile.TarInfo(name)
        data = None
        if kind == "file": data = open(arg, "rb").read()
        elif kind == "text": data = arg.encode()
        elif kind == "symlink": i.type, i.linkname = tarfile.SYMTYPE, arg
        elif kind == "hardlink": i.type, i.linkname = tarfile.LNKTYPE, arg
        elif kind == "chr": i.type, (i.devmajor, i.devminor) = tarfile.CHRTYPE, map(int, arg.split(","))
        elif kind == "fifo": i.type = tarfile.FIFOTYPE
        elif kind == "dir": i.type, i.mode = tarfile.DIRTYPE, 0o755
        if data is not None: i.size = len(data)
        t.addfile(i, io.BytesIO(data) if data is not None else None)
PY
chmod 644 "$WORK/mktar.py" "$WORK/good.tar"
mktar() { as_user python3 "$WORK/mktar.py" "$@"; }

# expect_refused WHAT NEEDLE [as_user] CMD...: fails within 60 s with one line on stderr (progress lines
# aside) holding NEEDLE; no output, no scratch directory, no partial download left.
expect_refused() {
  local what=$1 needle=$2 rc=0 left
  shift 2
  if [ "$1" = as_user ]; then
    shift
    as_user timeout -k 5 60 "$@" >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
  else
    timeout -k 5 60 "$@" >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
  fi
  [ "$rc" != 0 ] || fail "$what: succeeded"
  [ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "$what: still running after 60 s"
  expect_eq "$what: lines on stderr" 1 "$(grep -vc '^layer \|^-- ' "$WORK/stderr" || true)"
  expect_contains "$what" "$needle" "$(cat "$WORK/stderr")"
  left=$(ls -A "$WORK/out"; ls -A "$U/out")
  [ -z "$left" ] || fail "$what: left behind: $left"
  left=$(find "$WORK/cache" "$U/cache" -name '.download-*' 2>/dev/null)
  [ -z "$left" ] || fail "$what: a partial download stayed in the cache: $left"
}

# ---- the lying registry, and a second one on another port (a token service elsewhere).
HOSTILE=$WORK/hostile
mkdir -p "$HOSTILE/manifests" "$HOSTILE/blobs"
echo '{}' > "$WORK/hostile.json"; echo '{"token":"other-token"}' > "$WORK/other.json"
: > "$WORK/hostile.log"; : > "$WORK/other.log"
port=$(free_port); other_port=$(free_port)
python3 "$(dirname "$0")/registry/hostile_registry.py" "$port" "$HOSTILE" "$WORK/hostile.json" "$WORK/hostile.log" 2>"$WORK/hostile.err" &
pids=$!
python3 "$(dirname "$0")/registry/hostile_registry.py" "$other_port" "$HOSTILE" "$WORK/other.json" "$WORK/other.log" 2>/dev/null &
pids="$pids $!"
trap 'kill $pids 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
wait_http "http://127.0.0.1:$port/v2/" 200 || fail "the hostile registry did not start: $(cat "$WORK/hostile.err")"
wait_http "http://127.0.0.1:$other_port/v2/" 200 || fail "the second registry did not start"
: > "$WORK/other.log"  # from here on, any request there is ctr's
reg=127.0.0.1:$port
set_conf() { printf '%s\n' "$1" > "$WORK/hostile.json"; }

# serve NAME LAYER...: an image of these layers (moved), served as $reg/NAME:1.
serve() {
  local name=$1 b; shift
  rm -rf "$WORK/layout-$name"
  layout_image "$WORK/layout-$name" 1 "$@"
  mkdir -p "$HOSTILE/manifests/$name"
  cp "$MANIFEST" "$HOSTILE/manifests/$name/1"
  for b in "$WORK/layout-$name"/blobs/sha256/*; do cp "$b" "$HOSTILE/blobs/sha256:$(basename "$b")"; done
}
layer_digest() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][int(sys.argv[2])]["digest"])' "$HOSTILE/manifests/$1/1" "$2"; }

cp "$WORK/good.tar" "$WORK/l.tar" && serve good "$WORK/l.tar"
"$CTR_BIN" -q pull "$WORK/out/good.sif" "docker://$reg/good:1" || fail "a pull from the test registry"
rm -f "$WORK/out/good.sif"; rm -rf "$WORK/cache"

note "F7: a blob that streams on past its declared size is cut off there (as root and as the user)"
head -c 10240 /dev/urandom > "$WORK/src2" && tar -C "$WORK" -cf "$WORK/l.tar" src2
serve liar "$WORK/l.tar"
liar=$(layer_digest liar 0)
set_conf "{\"pad\":{\"$liar\":268435456}}"
expect_refused "oversized blob" "blob $liar of liar:1: larger than its manifest says (" "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/liar:1"
expect_refused "oversized blob, as the user" "blob $liar of liar:1: larger than its manifest says (" \
  as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" pull "$U/out/x.sif" "docker://$reg/liar:1"
for _ in $(seq 50); do [ "$(grep -c "^sent .* of $liar" "$WORK/hostile.log")" = 2 ] && break; sleep 0.1; done
for sent in $(sed -n "s/^sent \([0-9]*\) bytes of $liar/\1/p" "$WORK/hostile.log"); do
  [ "$sent" -lt $((64 << 20)) ] || fail "ctr read $sent bytes of a blob declared as 10240 (of 256 MiB offered)"
done
[ ! -e "$WORK/cache/blobs/sha256/${liar#sha256:}" ] || fail "the oversized blob entered the cache"

note "F7: declared sizes over 'pull max blob size' or, together, over 'pull max total size': nothing fetched"
head -c 1536K /dev/urandom > "$WORK/src2" && tar -C "$WORK" -cf "$WORK/l.tar" src2
serve bigblob "$WORK/l.tar"
big=$(layer_digest bigblob 0)
set_conf '{}'
expect_refused "blob over the limit" "layer 1/1 ${big:0:19} of bigblob:1: declared as " "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/bigblob:1"
expect_contains "blob over the limit" "(the limit is 1 MiB: 'pull max blob size' in $CONF)" "$(cat "$WORK/stderr")"
for i in 1 2 3 4; do head -c 900K /dev/urandom > "$WORK/src2" && tar -C "$WORK" -cf "$WORK/l$i.tar" src2; done
serve many "$WORK/l1.tar" "$WORK/l2.tar" "$WORK/l3.tar" "$WORK/l4.tar"
expect_refused "layers over the total" "many:1: its layers are declared as more than 3 MiB together (the limit is 3 MiB: 'pull max total size' in $CONF)" \
  as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" pull "$U/out/x.sif" "docker://$reg/many:1"
! grep -qE "GET /v2/(bigblob|many)/blobs/sha256:[0-9a-f]{64} " "$WORK/hostile.log" || fail "a layer over the limits was fetched"

note "F7: a gzip bomb (a 256 MiB file in 256 KiB) against 'pull max unpacked size = 64M', from each source"
mkdir -p "$WORK/bomb" && truncate -s 256M "$WORK/bomb/zeros"
tar -C "$WORK/bomb" -cf - zeros | gzip -9 > "$WORK/bomb.tgz"
rm -rf "$WORK/bomb"
bomb_msg="unpacks to more than 64 MiB (at zeros); the limit is 64 MiB: 'pull max unpacked size' in $CONF"
cp "$WORK/bomb.tgz" "$WORK/l.tgz" && serve bomb "$WORK/l.tgz"
expect_refused "gzip bomb from a registry" "of bomb:1: $bomb_msg" "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/bomb:1"
cp -r "$WORK/layout-bomb" "$U/layout-bomb" && chown -R "$CTR_TEST_USER" "$U/layout-bomb"
expect_refused "gzip bomb in an OCI layout, as the user" "$bomb_msg" as_user "$CTR_BIN" pull "$U/out/x.sif" "oci:$U/layout-bomb:1"
cp "$WORK/bomb.tgz" "$U/bomb.tgz" && chown "$CTR_TEST_USER" "$U/bomb.tgz"
printf '{"architecture":"amd64","os":"linux","config":{}}' > "$U/config.json"; chmod 644 "$U/config.json"
mktar "$U/bomb-docker.tar" 'manifest.json=text:[{"Config":"config.json","Layers":["l1/layer.tar"]}]' \
  "config.json=file:$U/config.json" "l1/layer.tar=file:$U/bomb.tgz"
expect_refused "gzip bomb in a docker-archive the user made" "layer 1/1 l1/layer.tar of $U/bomb-docker.tar: $bomb_msg" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/bomb-docker.tar"
# The archive itself a bomb: refused while it is unpacked.
expect_refused "an oci-archive that is a gzip bomb" "oci-archive $U/bomb.tgz: $bomb_msg" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "oci-archive:$U/bomb.tgz"

note "F7: a sparse 200 GB file in a layer of a few hundred bytes, with the built-in limits"
mkdir -p "$WORK/sparse" && truncate -s 200G "$WORK/sparse/huge"
tar -C "$WORK/sparse" --sparse -czf "$WORK/l.tgz" huge
rm -rf "$WORK/sparse"
[ "$(stat -c %s "$WORK/l.tgz")" -lt 4096 ] || fail "the sparse layer is not small: $(stat -c %s "$WORK/l.tgz") bytes"
serve sparse "$WORK/l.tgz"
sparse_msg="unpacks to more than 128 GiB (at huge); the limit is 128 GiB: 'pull max unpacked size' in $DEFAULTS"
CTR_CONFIG=$DEFAULTS expect_refused "sparse file from a registry" "of sparse:1: $sparse_msg" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/sparse:1"
CTR_TEST_CONFIG=$DEFAULTS expect_refused "sparse file, as the user" "$sparse_msg" \
  as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" pull "$U/out/x.sif" "docker://$reg/sparse:1"

note "F8: token realms: file://, another port (credentials never sent), another host, http elsewhere"
set_conf "{\"challenge\":\"Bearer realm=\\\"file:///dev/zero\\\",service=\\\"x\\\"\",\"token\":\"t\"}"
expect_refused "file:// realm" "registry $reg sent the token realm 'file:///dev/zero': refused: a token realm must be an https URL" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1"
set_conf "{\"challenge\":\"Bearer realm=\\\"http://127.0.0.1:$other_port/token\\\",service=\\\"x\\\"\",\"token\":\"other-token\"}"
expect_refused "realm on another port" "refused: it is on another host or port than the registry (an admin can allow it with 'pull token realm hosts' in $CONF)" \
  env CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=s3cret "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1"
expect_refused "realm on another port, as the user" "refused: it is on another host or port" \
  as_user env CTR_CACHE_DIR="$U/cache" APPTAINER_DOCKER_USERNAME=alice APPTAINER_DOCKER_PASSWORD=s3cret "$CTR_BIN" pull "$U/out/x.sif" "docker://$reg/good:1"
[ ! -s "$WORK/other.log" ] || fail "a request went to a token realm on another port: $(cat "$WORK/other.log")"
set_conf "{\"challenge\":\"Bearer realm=\\\"http://localhost:$port/token\\\"\",\"token\":\"t\"}"
expect_refused "http realm on another host" "refused: a token realm over plain http is accepted only on the registry's own host" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1"
set_conf "{\"challenge\":\"Bearer realm=\\\"https://auth.example.invalid/token\\\"\",\"token\":\"t\"}"
expect_refused "https realm on another host" "'https://auth.example.invalid/token': refused: it is on another host or port" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1"
note "F8: the admin lists the other port: then the credentials go there, and the pull works"
printf 'pull token realm hosts = 127.0.0.1:%s\n' "$other_port" >> "$CONF"
set_conf "{\"challenge\":\"Bearer realm=\\\"http://127.0.0.1:$other_port/token\\\",service=\\\"x\\\"\",\"token\":\"other-token\"}"
CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=s3cret "$CTR_BIN" -q pull "$WORK/out/x.sif" "docker://$reg/good:1" 2>"$WORK/stderr" ||
  fail "a pull through a listed token realm: $(cat "$WORK/stderr")"
expect_contains "the listed realm got the credentials" "Authorization: Basic" "$(cat "$WORK/other.log")"
rm -f "$WORK/out/x.sif"

note "F8: a CR LF in the token, control characters in the service and scope"
set_conf "{\"challenge\":\"Bearer realm=\\\"http://$reg/token\\\"\",\"token\":\"abc\\r\\nX-Injected: yes\"}"
expect_refused "CR LF in the token" "the token from http://$reg/token holds a control character: refused" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1"
! grep -qi 'x-injected' "$WORK/hostile.log" || fail "a header from the token reached a request"
set_conf "{\"challenge\":\"Bearer realm=\\\"http://$reg/token\\\",service=\\\"a\\u0001b\\\"\",\"token\":\"t\"}"
expect_refused "control character in the service" "the token service named by registry $reg holds a control character: refused" \
  as_user env CTR_CACHE_DIR="$U/cache" "$CTR_BIN" pull "$U/out/x.sif" "docker://$reg/good:1"
set_conf "{\"challenge\":\"Bearer realm=\\\"http://$reg/token\\\",scope=\\\"repository:good:pull\\u007f\\\"\",\"token\":\"t\"}"
expect_refused "control character in the scope" "the token scope named by registry $reg holds a control character: refused" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1"
set_conf '{}'

note "issue 53, item 6: a registry that answers 429 is asked again after its Retry-After, a bounded number of times"
set_conf '{"busy":{"count":2,"retry_after":"1"}}'
: > "$WORK/hostile.log"
"$CTR_BIN" pull "$WORK/out/busy.sif" "docker://$reg/good:1" >/dev/null 2>"$WORK/stderr" ||
  fail "a pull through two 429s: $(cat "$WORK/stderr")"
expect_eq "one warning for the busy registry" 1 "$(grep -c "$reg answers HTTP 429 (too many requests): asking again in 1 s" "$WORK/stderr" || true)"
expect_eq "the manifest asked three times" 3 "$(grep -c 'GET /v2/good/manifests/1 ' "$WORK/hostile.log" || true)"
rm -f "$WORK/out/busy.sif"
set_conf '{"busy":{"count":100,"retry_after":"0"}}'
: > "$WORK/hostile.log"
rc=0; timeout -k 5 60 "$CTR_BIN" pull "$WORK/out/x.sif" "docker://$reg/good:1" >/dev/null 2>"$WORK/stderr" || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a registry busy past the bound: exit $rc"
expect_contains "busy past the bound" "HTTP 429 after 5 tries (TOOMANYREQUESTS: slow down)" "$(grep 'error' "$WORK/stderr")"
expect_eq "asked five times in all" 5 "$(grep -c 'GET /v2/good/manifests/1 ' "$WORK/hostile.log" || true)"
[ ! -e "$WORK/out/x.sif" ] || fail "busy past the bound: an output was left"
set_conf '{}'

note "F9: archive members that are links out of the archive, devices or FIFOs; made by $CTR_TEST_USER, pulled by root"
# A root-only directory: a tar with a secret, and JSON documents ctr would accept.
S=$WORK/secret
mkdir -p "$S/t" && echo TOPSECRET > "$S/t/secret.txt"
tar -C "$S/t" -cf "$S/secret.tar" secret.txt && rm -rf "$S/t"
printf '[{"Config":"config.json","Layers":["l1/layer.tar"]}]' > "$S/manifest.json"
cp "$U/config.json" "$S/config.json"
chmod 700 "$S"; chmod 600 "$S"/*
cp "$WORK/good.tar" "$U/good.tar"; chown "$CTR_TEST_USER" "$U/good.tar"
M='manifest.json=text:[{"Config":"config.json","Layers":["l1/layer.tar"]}]'
C="config.json=file:$U/config.json"
up=../../../../../../../../..
n=0
leaves="refused: a link that leaves the archive"
n=$((n + 1)); mktar "$U/d$n.tar" "manifest.json=symlink:$S/manifest.json" "$C" "l1/layer.tar=file:$U/good.tar"
expect_refused "manifest.json -> an absolute root-only file" "$U/d$n.tar: manifest.json (manifest.json): $leaves" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "$M" "config.json=symlink:$up$S/config.json" "l1/layer.tar=file:$U/good.tar"
expect_refused "config -> ../../ a root-only file" "$U/d$n.tar: config (config.json): $leaves" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "$M" "$C" "l1/layer.tar=symlink:$S/secret.tar"
expect_refused "layer -> a root-only tar" "layer 1/1 l1/layer.tar of $U/d$n.tar (l1/layer.tar): $leaves" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
expect_refused "layer -> a root-only tar, as the user" "$leaves" as_user "$CTR_BIN" pull "$U/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "$M" "$C" "l1/layer.tar=symlink:$up/dev/zero"
expect_refused "layer -> ../../dev/zero" "$leaves" "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "$M" "$C" "l1/=dir:" "l1/layer.tar=chr:1,5"
expect_refused "layer is a character device (1,5)" "l1/layer.tar: refused: a device in an image archive" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "manifest.json=fifo:" "$C" "l1/layer.tar=file:$U/good.tar"
expect_refused "manifest.json is a FIFO" "manifest.json: refused: a FIFO in an image archive" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "$M" "$C" "l1/layer.tar=hardlink:$up$S/secret.tar"
expect_refused "layer is a hard link out of the archive" "path with '..' refused" \
  "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"
n=$((n + 1)); mktar "$U/d$n.tar" "$M" "$C" "l1/=dir:" "l1/layer.tar=symlink:/proc/self/root$S/secret.tar"
expect_refused "layer -> a /proc magic link" "$leaves" "$CTR_BIN" pull "$WORK/out/x.sif" "docker-archive:$U/d$n.tar"

note "F9: the same for an oci-archive: index.json, a manifest blob and a layer blob"
rm -rf "$WORK/oa" && cp "$WORK/good.tar" "$WORK/l.tar" && layout_image "$WORK/oa" 1 "$WORK/l.tar"
layer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"][0]["digest"][7:])' "$MANIFEST")
cp "$WORK/oa/index.json" "$S/index.json"; chmod 600 "$S/index.json"
chmod -R a+rX "$WORK/oa"
oci_members() {  # the layout's files as mktar arguments, but for the member named $1 (given as $2)
  local f
  for f in $(cd "$WORK/oa" && find . -type f | sed 's|^\./||'); do
    if [ "$f" = "$1" ]; then echo "$f=$2"; else echo "$f=file:$WORK/oa/$f"; fi
  done
}
n=$((n + 1)); mapfile -t members < <(oci_members index.json "symlink:$S/index.json")
mktar "$U/o$n.tar" "${members[@]}"
expect_refused "index.json -> a root-only file" "index.json (index.json): $leaves" "$CTR_BIN" pull "$WORK/out/x.sif" "oci-archive:$U/o$n.tar"
n=$((n + 1)); mapfile -t members < <(oci_members "blobs/sha256/$layer" "symlink:../../$up$S/secret.tar")
mktar "$U/o$n.tar" "${members[@]}"
expect_refused "layer blob -> ../../ a root-only tar" "(blobs/sha256/$layer): $leaves" "$CTR_BIN" pull "$WORK/out/x.sif" "oci-archive:$U/o$n.tar"
expect_refused "layer blob -> a root-only tar, as the user" "$leaves" as_user "$CTR_BIN" pull "$U/out/x.sif" "oci-archive:$U/o$n.tar"
n=$((n + 1)); mapfile -t members < <(oci_members "blobs/sha256/$layer" "symlink:/dev/zero")
mktar "$U/o$n.tar" "${members[@]}"
expect_refused "layer blob -> /dev/zero" "$leaves" "$CTR_BIN" pull "$WORK/out/x.sif" "oci-archive:$U/o$n.tar"

note "ctr build's Bootstrap: agents take the same limits and refusals (ctr.conf read by the build too)"
mkdir -p "$WORK/build"
expect_build_refused() {  # expect_build_refused WHAT NEEDLE AGENT FROM
  local rc=0
  printf 'Bootstrap: %s\nFrom: %s\n\n%%post\n    true\n' "$3" "$4" > "$WORK/build/b.def"
  timeout -k 5 60 "$CTR_BIN" -q build "$WORK/build/b.sif" "$WORK/build/b.def" >/dev/null 2>"$WORK/stderr" || rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "$1: build exit status $rc"
  expect_contains "$1" "$2" "$(cat "$WORK/stderr"; cat "$WORK/build/b.sif.build.log" 2>/dev/null)"
  [ ! -e "$WORK/build/b.sif" ] || fail "$1: the build left its output"
  rm -f "$WORK/build/b.sif.build.log"
}
expect_build_refused "Bootstrap: oci, a gzip bomb" "$bomb_msg" oci "$U/layout-bomb:1"
expect_build_refused "Bootstrap: docker-archive, a layer linked to a root-only tar" "$leaves" docker-archive "$U/d3.tar"
set_conf "{\"challenge\":\"Bearer realm=\\\"file:///dev/zero\\\"\",\"token\":\"t\"}"
expect_build_refused "Bootstrap: docker, a file:// token realm" "refused: a token realm must be an https URL" docker "$reg/good:1"
set_conf '{}'

note "F9: links between an archive's own members still work (skopeo's <id>/layer.tar -> ../<digest>.tar)"
mktar "$U/ok.tar" 'manifest.json=text:[{"Config":"config.json","Layers":["id/layer.tar"]}]' "$C" \
  "$layer.tar=file:$U/good.tar" "id/=dir:" "id/layer.tar=symlink:../$layer.tar"
"$CTR_BIN" -q pull "$WORK/out/ok.sif" "docker-archive:$U/ok.tar" 2>"$WORK/stderr" || fail "an archive with an inner link: $(cat "$WORK/stderr")"
as_user "$CTR_BIN" -q pull "$U/out/ok.sif" "docker-archive:$U/ok.tar" 2>"$WORK/stderr" || fail "an archive with an inner link, as the user: $(cat "$WORK/stderr")"
rm -f "$WORK/out/ok.sif" "$U/out/ok.sif"
echo "PASS: $TEST_NAME"
