# Pieces the pull tests share (source it after lib.sh): free ports, waiting for a server,
# and OCI layouts written by hand (no network beyond 127.0.0.1).

# A free TCP port on 127.0.0.1.
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http URL STATUS: up to 5 s for URL to answer with the HTTP status STATUS.
wait_http() {
  local _
  for _ in $(seq 50); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# demo_layer TGZ: the demo root as one gzip layer (without /.singularity.d, which a
# registry image does not have), files owned by 0:0.
demo_layer() {
  local root
  root=$(mktemp -d "$WORK/demo-root.XXXXXX")
  make_demo_rootfs "$root"
  rm -rf "$root/.singularity.d"
  tar -C "$root" --numeric-owner --owner=0 --group=0 -czf "$1" .
}

# layout_blob LAYOUT FILE: moves FILE into LAYOUT/blobs/sha256, prints "sha256:HEX SIZE".
layout_blob() {
  local d s
  mkdir -p "$1/blobs/sha256"
  d=$(sha256sum "$2" | cut -d' ' -f1); s=$(stat -c %s "$2")
  mv "$2" "$1/blobs/sha256/$d"; echo "sha256:$d $s"
}

# layout_image LAYOUT TAG LAYER...: an OCI layout (created or added to) whose image TAG has
# these layer files (tar, or tar.gz when named *gz), a config of Cmd /bin/sh (or
# $LAYOUT_CONFIG, the JSON of the config's "config"); the files are moved in. Sets MANIFEST
# to the manifest's path inside LAYOUT (tests lie in it afterwards).
layout_image() {
  local layout=$1 tag=$2 layers="" f d s cfg cfgs man mans media
  shift 2
  for f in "$@"; do
    case "$f" in *gz) media=application/vnd.oci.image.layer.v1.tar+gzip;; *) media=application/vnd.oci.image.layer.v1.tar;; esac
    read -r d s < <(layout_blob "$layout" "$f")
    layers="$layers${layers:+,}{\"mediaType\":\"$media\",\"digest\":\"$d\",\"size\":$s}"
  done
  local config=${LAYOUT_CONFIG:-'{"Cmd":["/bin/sh"]}'}
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":[]}}' "$config" > "$layout/.config"
  read -r cfg cfgs < <(layout_blob "$layout" "$layout/.config")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[%s]}' \
    "$cfg" "$cfgs" "$layers" > "$layout/.manifest"
  read -r man mans < <(layout_blob "$layout" "$layout/.manifest")
  MANIFEST=$layout/blobs/sha256/${man#sha256:}
  echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
    "$man" "$mans" "$tag" > "$layout/index.json"
}

# serve_registry [AUTH_YAML]: Debian's docker-registry on a free port of 127.0.0.1, its
# storage and log (access lines included) under $WORK, with the `auth:` block given (lines
# indented by two spaces), none without. Sets REGISTRY (127.0.0.1:PORT) and REGISTRY_PID
# (the caller's EXIT trap stops it). Skips without docker-registry.
# REGISTRY_NAME (default "registry") names its files, for a test that runs several.
serve_registry() {
  local port name=${REGISTRY_NAME:-registry}
  command -v docker-registry >/dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
  port=$(free_port)
  printf 'version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s/%s}}\nhttp: {addr: 127.0.0.1:%s}\n' \
    "$WORK" "$name" "$port" > "$WORK/$name.yml"
  [ -z "${1:-}" ] || printf 'auth:\n%s\n' "$1" >> "$WORK/$name.yml"
  docker-registry serve "$WORK/$name.yml" >"$WORK/$name.log" 2>&1 &
  REGISTRY_PID=$!
  REGISTRY=127.0.0.1:$port
}

# start_registry: serve_registry without authentication, once it answers.
start_registry() {
  serve_registry
  wait_http "http://$REGISTRY/v2/" 200 || fail "docker-registry did not start: $(cat "$WORK/${REGISTRY_NAME:-registry}.log")"
}

# start_token_registry USER:PASSWORD: docker-registry with `auth: token` on a free port of
# 127.0.0.1 and its token service (token_server.py: JWTs signed with a key made here, that
# grant USER what it asks for and nobody else anything), the realm's host allowed in the
# test's ctr.conf ($CTR_TEST_CONFIG: use_linger first). Sets REGISTRY, REGISTRY_PID,
# TOKEN_PORT, TOKEN_PID (the caller's EXIT trap kills both) and TOKEN_LOG.
start_token_registry() {
  local _
  command -v docker-registry >/dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
  command -v openssl >/dev/null || skip "openssl is not installed"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=ctr-test-token-issuer \
    -keyout "$WORK/token.key" -out "$WORK/token.crt" >/dev/null 2>&1 || fail "openssl could not make the token key"
  TOKEN_PORT=$(free_port)
  TOKEN_LOG=$WORK/tokens.log
  /usr/bin/python3 "$CTR_SOURCE_DIR/tests/integration/registry/token_server.py" "$TOKEN_PORT" "$WORK/token.key" \
    "$WORK/token.crt" ctr-test-issuer "$1" "$TOKEN_LOG" >"$WORK/token-server.log" 2>&1 &
  TOKEN_PID=$!
  # On another port than the registry: ctr sends credentials there only because ctr.conf
  # says so (issue 24; test_pull_hardening.sh checks the refusal).
  printf 'pull token realm hosts = 127.0.0.1:%s\n' "$TOKEN_PORT" >> "$CTR_TEST_CONFIG"
  serve_registry "  token:
    realm: http://127.0.0.1:$TOKEN_PORT/token
    service: ctr-test-registry
    issuer: ctr-test-issuer
    rootcertbundle: $WORK/token.crt"
  for _ in $(seq 50); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$REGISTRY/v2/")" = 401 ] &&
      curl -fs "http://127.0.0.1:$TOKEN_PORT/token?service=x" >/dev/null 2>&1 && break
    sleep 0.1
  done
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$REGISTRY/v2/")" = 401 ] ||
    fail "the registry did not start with token auth: $(cat "$WORK/registry.log")"
  curl -fs "http://127.0.0.1:$TOKEN_PORT/token?service=x" >/dev/null ||
    fail "the token service did not start: $(cat "$WORK/token-server.log")"
}

# start_htpasswd_registry USER PASSWORD: docker-registry with basic authentication
# (`auth: htpasswd`, a bcrypt entry for USER) on a free port of 127.0.0.1. Sets REGISTRY
# and REGISTRY_PID.
start_htpasswd_registry() {
  local hash
  command -v docker-registry >/dev/null || skip "docker-registry is not installed (apt-get install docker-registry)"
  hash=$(/usr/bin/python3 -W ignore -c 'import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))' "$2")
  case "$hash" in '$2'*) ;; *) skip "no bcrypt in this Python's crypt module for the registry's htpasswd file";; esac
  printf '%s:%s\n' "$1" "$hash" > "$WORK/htpasswd"
  serve_registry "  htpasswd:
    realm: ctr-test
    path: $WORK/htpasswd"
  wait_http "http://$REGISTRY/v2/" 401 || fail "the registry did not start with htpasswd auth: $(cat "$WORK/registry.log")"
}

# push_rootfs_to_registry ROOTFS NAME:TAG: packs ROOTFS as a one-layer image (layout_image)
# and pushes it with skopeo to this test's registry, started first when there is none.
# Skips without skopeo or docker-registry.
push_rootfs_to_registry() {
  local rootfs=$1 ref=$2 layout
  command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
  [ -n "${REGISTRY:-}" ] || start_registry
  layout=$(mktemp -d "$WORK/layout.XXXXXX")
  tar -C "$rootfs" --numeric-owner --owner=0 --group=0 -czf "$layout/layer.tgz" .
  layout_image "$layout" "${ref##*:}" "$layout/layer.tgz"
  skopeo copy -q --dest-tls-verify=false "oci:$layout:${ref##*:}" "docker://$REGISTRY/$ref" || fail "skopeo could not push $ref"
  rm -rf "$layout"
}

# ORAS images pushed with the distribution API itself (curl), as Apptainer lays them out.
# push_blob NAME FILE: FILE as a blob of repository NAME (POST, then PUT with its digest).
push_blob() {
  local loc sep digest
  digest=sha256:$(sha256sum "$2" | cut -d' ' -f1)
  loc=$(curl -sS -o /dev/null -D - -X POST "http://$REGISTRY/v2/$1/blobs/uploads/" | sed -n 's/^[Ll]ocation: *//p' | tr -d '\r')
  [ -n "$loc" ] || fail "the registry gave no upload location for $1"
  case "$loc" in http*) ;; *) loc="http://$REGISTRY$loc" ;; esac
  case "$loc" in *\?*) sep='&' ;; *) sep='?' ;; esac
  curl -sSf -o /dev/null -X PUT -H 'Content-Type: application/octet-stream' --data-binary @"$2" "$loc${sep}digest=$digest" ||
    fail "could not push $2 to $1"
  echo "$digest $(stat -c %s "$2")"
}
# push_oras NAME:TAG SIF [LAYER-MEDIA-TYPE]: the SIF as Apptainer pushes it.
push_oras() {
  local name=${1%%:*} tag=${1##*:} media=${3:-application/vnd.sylabs.sif.layer.v1.sif} cfg cfgs sif sifs
  printf '{}' > "$WORK/oras-config"
  read -r cfg cfgs < <(push_blob "$name" "$WORK/oras-config")
  read -r sif sifs < <(push_blob "$name" "$2")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.sylabs.sif.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"%s","digest":"%s","size":%s,"annotations":{"org.opencontainers.image.title":"%s"}}]}' \
    "$cfg" "$cfgs" "$media" "$sif" "$sifs" "$(basename "$2")" > "$WORK/oras-manifest"
  curl -sSf -o /dev/null -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
    --data-binary @"$WORK/oras-manifest" "http://$REGISTRY/v2/$name/manifests/$tag" || fail "could not push the manifest of $1"
  SIF_DIGEST=$sif
}

# push_lazy_app: $WORK/app.sif (the demo root, 6 MiB of random bytes in data/big.bin and 400
# small files in data/small/), built and pushed by `ctr push` as lazy/app:1 (its chunk table
# in the ORAS config), $WORK readable by the test user; $tree is the tree it was built from.
push_lazy_app() {
  tree=$WORK/tree
  make_demo_rootfs "$tree"
  mkdir -p "$tree/data/small"
  head -c 6291456 /dev/urandom > "$tree/data/big.bin"
  for i in $(seq 400); do echo "small file $i" > "$tree/data/small/f$i"; done
  "$CTR_BIN" -q build "$WORK/app.sif" "$tree" >/dev/null || fail "could not build the SIF"
  "$CTR_BIN" -q push "$WORK/app.sif" "oras://$REGISTRY/lazy/app:1" || fail "ctr push failed"
  chmod -R a+rX "$WORK"
}
