#!/bin/bash
# Issue 53, item 1: credentials where users already keep them, as the test user, against
# Debian's docker-registry on 127.0.0.1 with basic authentication (htpasswd) and with
# token authentication (token_server.py):
#  - `ctr registry login` checks the credentials with the registry and keeps them (0600);
#    a wrong password is refused in one line naming the registry, and nothing is kept;
#    `registry list` shows the registry and user, never the password; `logout` forgets;
#  - then, each alone: Docker's config.json (auths), a credential helper
#    (credHelpers: docker-credential-NAME get; one that hangs is cut off after 10 s),
#    the containers tools' auth.json ($REGISTRY_AUTH_FILE), enroot's netrc, the variables;
#  - the password appears in no output, log (ctr -d) or --explain, and in no file but the
#    one it came from.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"
command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
ensure_test_user
require_fuse
use_linger 0
home=$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)
secret=Pa55-w0rd-$$
# The user's own credential places, empty at the start and at the end.
places="$home/.config/ctr $home/.docker $home/.config/containers $home/.config/enroot $home/bin"
clean_places() { rm -rf $places; }
clean_places
trap 'kill ${REGISTRY_PID:-} ${TOKEN_PID:-} 2>/dev/null || true; wait 2>/dev/null || true; clean_places; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/layout"
demo_layer "$WORK/layer.tgz"
layout_image "$WORK/layout" 1 "$WORK/layer.tgz"
chmod -R a+rX "$WORK"
make_user_dir
cache=$U/cache
as_user mkdir "$cache"
# pull NAME [ENV...]: the user's pull of $REGISTRY/app:1 into $U/NAME.sif (a fresh cache
# each time: no layer is reused), output in $WORK/NAME.out.
pull() {
  local name=$1
  shift
  rm -rf "$cache"/* "$U/$name.sif"
  as_user env CTR_CACHE_DIR="$cache" PATH="$home/bin:/usr/bin:/bin" "$@" "$CTR_BIN" pull "$U/$name.sif" \
    "docker://$REGISTRY/app:1" >"$WORK/$name.out" 2>&1
}
pulls() { pull "$@" || fail "pull ($1): $(cat "$WORK/$1.out")"; }
refused_pull() { ! pull "$@" || fail "pull ($1) worked"; }
# user_file PATH: stdin into PATH, the user's (its directories made as the user).
user_file() {
  as_user mkdir -p "$(dirname "$1")"
  cat > "$1"
  chown "$CTR_TEST_USER" "$1"
}
no_secret() {  # WHAT TEXT: TEXT holds no password
  case "$2" in *"$secret"*|*wr0ng*) fail "$1: a password is in it: $2";; esac
}

for kind in htpasswd token; do
  note "[$kind] a registry that wants credentials"
  if [ "$kind" = htpasswd ]; then start_htpasswd_registry alice "$secret"; else start_token_registry "alice:$secret"; fi
  chmod 644 "$CTR_TEST_CONFIG"
  skopeo copy -q --dest-tls-verify=false --dest-creds "alice:$secret" "oci:$WORK/layout:1" "docker://$REGISTRY/app:1" ||
    fail "skopeo could not push with the credentials"
  refused_pull anon
  expect_contains "[$kind] without credentials: how to log in" "no credentials for $REGISTRY: ctr registry login $REGISTRY" \
    "$(cat "$WORK/anon.out")"

  note "[$kind] ctr registry login: checked, kept 0600, listed without the password; logout forgets"
  set +e; out=$(echo wr0ng | as_user "$CTR_BIN" registry login --username alice --password-stdin "$REGISTRY" 2>&1); rc=$?; set -e
  [ "$rc" != 0 ] || fail "[$kind] a wrong password was accepted"
  expect_eq "[$kind] one line" 1 "$(printf '%s\n' "$out" | wc -l)"
  expect_contains "[$kind] names the registry" "$REGISTRY" "$out"
  no_secret "[$kind] the refusal" "$out"
  [ ! -e "$home/.config/ctr/auth.json" ] || fail "[$kind] a refused login was kept"
  out=$(echo "$secret" | as_user "$CTR_BIN" registry login -u alice --password-stdin "docker://$REGISTRY" 2>&1) ||
    fail "[$kind] login: $out"
  expect_contains "[$kind] login" "Login to $REGISTRY as alice succeeded" "$out"
  expect_eq "[$kind] the file is the user's alone" "600 $CTR_TEST_USER" "$(stat -c '%a %U' "$home/.config/ctr/auth.json")"
  list=$(as_user "$CTR_BIN" registry list)
  expect_contains "[$kind] list" "$REGISTRY" "$list"
  expect_contains "[$kind] list: the user" "alice" "$list"
  no_secret "[$kind] list" "$list"
  rm -f "$U/debug.sif"
  as_user env CTR_CACHE_DIR="$cache" "$CTR_BIN" -d pull "$U/debug.sif" "docker://$REGISTRY/app:1" >"$WORK/debug.out" 2>&1 ||
    fail "[$kind] pull after login: $(cat "$WORK/debug.out")"
  expect_contains "[$kind] the log says where the credentials came from" "from $home/.config/ctr/auth.json" "$(cat "$WORK/debug.out")"
  no_secret "[$kind] ctr -d pull" "$(cat "$WORK/debug.out")"
  expect_eq "[$kind] the pulled image runs" ctr-demo "$(as_user "$CTR_BIN" exec "$U/debug.sif" sh -c '. /etc/os-release; echo $ID')"
  no_secret "[$kind] --explain" "$(as_user env CTR_CACHE_DIR="$cache" "$CTR_BIN" exec --explain --json "docker://$REGISTRY/app:1" true)"
  note "[$kind] push oras:// with the same credentials (a token with push rights, after a pull's)"
  as_user "$CTR_BIN" push "$U/debug.sif" "oras://$REGISTRY/pushed:1" >"$WORK/push.out" 2>&1 ||
    fail "[$kind] push: $(cat "$WORK/push.out")"
  no_secret "[$kind] push" "$(cat "$WORK/push.out")"
  as_user "$CTR_BIN" registry logout "$REGISTRY" 2>/dev/null || fail "[$kind] logout"
  refused_pull after-logout
  set +e; out=$(as_user "$CTR_BIN" push "$U/debug.sif" "oras://$REGISTRY/pushed:2" 2>&1); rc=$?; set -e
  [ "$rc" != 0 ] || fail "[$kind] a push without credentials worked"
  expect_contains "[$kind] push without credentials: how to log in" "ctr registry login $REGISTRY" "$out"

  note "[$kind] login --authfile FILE, and pull --authfile FILE reads it"
  rm -rf "$U/auth"
  echo "$secret" | as_user "$CTR_BIN" registry login -u alice --password-stdin --authfile "$U/auth/site.json" "$REGISTRY" \
    >"$WORK/login.out" 2>&1 || fail "[$kind] login --authfile: $(cat "$WORK/login.out")"
  ! grep -qs "$REGISTRY" "$home/.config/ctr/auth.json" || fail "[$kind] login --authfile wrote into ctr's own file"
  refused_pull without-authfile
  rm -rf "$cache"/* "$U/with-authfile.sif"
  as_user env CTR_CACHE_DIR="$cache" "$CTR_BIN" pull --authfile "$U/auth/site.json" "$U/with-authfile.sif" \
    "docker://$REGISTRY/app:1" >"$WORK/with-authfile.out" 2>&1 || fail "[$kind] pull --authfile: $(cat "$WORK/with-authfile.out")"
  rm -rf "$U/auth"

  note "[$kind] Docker's config.json: auths"
  auth=$(printf 'alice:%s' "$secret" | base64)
  echo "{\"auths\":{\"http://$REGISTRY/v1/\":{\"auth\":\"$auth\"}}}" | user_file "$home/.docker/config.json"
  pulls docker-auths
  clean_places

  note "[$kind] Docker's config.json: credHelpers (docker-credential-NAME get); a helper that hangs is cut off"
  echo "{\"credHelpers\":{\"$REGISTRY\":\"ctrtest\"}}" | user_file "$home/.docker/config.json"
  # Docker's protocol: `get`, the server on stdin, a JSON answer on stdout.
  user_file "$home/bin/docker-credential-ctrtest" <<H
#!/bin/sh
read server
[ "\$1 \$server" = "get $REGISTRY" ] || exit 1
printf '{"ServerURL":"%s","Username":"alice","Secret":"%s"}\n' "\$server" "$secret"
H
  chmod 755 "$home/bin/docker-credential-ctrtest"
  pulls cred-helper
  if [ "$kind" = htpasswd ]; then  # (once: it waits its 10 s)
    printf '#!/bin/sh\nsleep 600\n' | user_file "$home/bin/docker-credential-ctrtest"
    t0=$(date +%s)
    refused_pull hung-helper
    expect_contains "[$kind] the hung helper is named" \
      "docker-credential-ctrtest get (named by $home/.docker/config.json) did not answer within 10 s" "$(cat "$WORK/hung-helper.out")"
    [ $(( $(date +%s) - t0 )) -lt 30 ] || fail "[$kind] the hung helper held the pull $(( $(date +%s) - t0 )) s"
    ! pgrep -u "$CTR_TEST_USER" -f "sleep 600" >/dev/null || fail "[$kind] the hung helper's sleep was left running"
  fi
  clean_places

  note "[$kind] the containers tools' auth.json (\$REGISTRY_AUTH_FILE), enroot's netrc, the variables"
  echo "{\"auths\":{\"$REGISTRY\":{\"auth\":\"$auth\"}}}" | user_file "$home/.config/containers/podman-auth.json"
  pulls containers REGISTRY_AUTH_FILE="$home/.config/containers/podman-auth.json"
  rm -f "$home/.config/containers/podman-auth.json"
  printf 'machine %s\n  login alice\n  password %s\n' "$REGISTRY" "$secret" | user_file "$home/.config/enroot/.credentials"
  pulls enroot
  clean_places
  pulls variables CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD="$secret"
  refused_pull wrong-variables CTR_DOCKER_USERNAME=alice CTR_DOCKER_PASSWORD=wr0ng
  no_secret "[$kind] a refused pull" "$(cat "$WORK/wrong-variables.out")"

  kill "$REGISTRY_PID" ${TOKEN_PID:-} 2>/dev/null || true
  wait "$REGISTRY_PID" 2>/dev/null || true
  rm -rf "$WORK/registry"
  # The token case's realm line goes with its registry.
  sed -i '/^pull token realm hosts/d' "$CTR_TEST_CONFIG"
done

for f in $(grep -rl -- "$secret" "$WORK" 2>/dev/null || true); do
  case "$f" in "$WORK/htpasswd"|"$WORK"/*.log) ;; *) fail "the password was written to $f";; esac
done
assert_nothing_left "registry credentials"
echo "PASS: $TEST_NAME"
