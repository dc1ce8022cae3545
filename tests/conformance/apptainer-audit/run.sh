#!/bin/bash
# The Apptainer audit (issue 28): each line of cases.tsv is a command line taken from one of
# Apptainer's e2e tests, run here as an ordinary user through ctr's `apptainer` name, with
# the exit status and output that e2e test expects. Prints one line per case (same,
# different, missing, or n/a where this machine lacks what the case needs), then the counts.
# Exit status 0 when every case recorded "same" in cases.tsv is still same, 1 otherwise,
# 77 (skip) without root, user namespaces or FUSE.
#
#   sudo CTR_BIN=build/ci/bin/ctr tests/conformance/apptainer-audit/run.sh [--only REGEX] [--markdown FILE]
#
# --only runs the cases whose id matches REGEX; --markdown writes the docs' table of cases
# with this run's results to FILE. Fixtures are built in a temporary directory, and the
# local registry (Debian's docker-registry, filled with skopeo) and an HTTP server listen
# on 127.0.0.1 only; everything is removed at the end.
AUDIT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$AUDIT_DIR/../../.." && pwd)
: "${CTR_BIN:=$REPO/build/ci/bin/ctr}"
CTR_BIN=$(realpath "$CTR_BIN")  # the apptainer links below must not be relative
export CTR_BIN
. "$REPO/tests/integration/lib.sh"
. "$REPO/tests/integration/registry/common.sh"

ONLY="" MARKDOWN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=$2; shift 2;;
    --markdown) MARKDOWN=$2; shift 2;;
    *) echo "usage: run.sh [--only REGEX] [--markdown FILE]" >&2; exit 2;;
  esac
done

ensure_test_user
require_fuse
use_linger 0

REGISTRY_PID="" HTTP_PID=""
cleanup() {
  as_user "$WORK/bin/apptainer" instance stop --all >/dev/null 2>&1 || true
  if [ -n "$REGISTRY_PID" ]; then kill "$REGISTRY_PID" 2>/dev/null; wait "$REGISTRY_PID" 2>/dev/null || true; fi
  if [ -n "$HTTP_PID" ]; then kill "$HTTP_PID" 2>/dev/null; wait "$HTTP_PID" 2>/dev/null || true; fi
  if [ -n "${HOME_APPTAINER_NEW:-}" ]; then rm -rf "$HOME_APPTAINER_NEW"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

START=$(date +%s)
USERNAME=$CTR_TEST_USER
UIDN=$(id -u "$USERNAME")
HOMEDIR=$(getent passwd "$USERNAME" | cut -d: -f6)
HOSTNAME_HOST=$(hostname)
# Apptainer keeps instance logs in ~/.apptainer: remove it afterwards if this run made it.
[ -e "$HOMEDIR/.apptainer" ] || HOME_APPTAINER_NEW=$HOMEDIR/.apptainer

# ---- the names: apptainer and singularity, links to ctr as the drop-in installs them
mkdir -p "$WORK/bin"
ln -s "$CTR_BIN" "$WORK/bin/apptainer"
ln -s "$CTR_BIN" "$WORK/bin/singularity"
# echo-check PORT [reverse]: what the e2e instance tests' echo() does, from the host.
cat > "$WORK/bin/echo-check" <<'S'
#!/usr/bin/python3
import socket, sys, time
msg = b"b40cbeaaea293f7e8bd40fb61f389cfca9823467\n"
want = msg[:-1][::-1] + b"\n" if len(sys.argv) > 2 else msg
for _ in range(30):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("echo-check: nothing listens on port " + sys.argv[1])
s.sendall(msg)
got = s.makefile("rb").readline()
sys.exit(0 if got == want else "echo-check: got %r, expected %r" % (got, want))
S
chmod 755 "$WORK/bin/echo-check"

# ---- fixtures, built as the user in U (the cases' working directory)
U=$WORK/u
mkdir -m 755 "$U"
make_demo_rootfs "$U/busybox-root"
# A base like the e2e tests' busybox SIF: its 90-environment.sh is the empty one an
# Apptainer build leaves (a builder appends %environment to it).
printf '#!/bin/sh\n# Custom environment shell code should follow\n\n' > "$U/busybox-root/.singularity.d/env/90-environment.sh"
cp "$AUDIT_DIR/audit-image.def" "$AUDIT_DIR/inspect-image.def" "$U/"
mkdir -p "$U/testdata/tmp" "$U/testdata/var_tmp" "$U/testdata/home" "$U/canary" "$U/sqov" "$U/cases" "$U/http"
touch "$U/testdata/tmp/f.tmp" "$U/testdata/var_tmp/f.vartmp" "$U/testdata/home/f.home" \
      "$U/canary/file" "$U/canary/file,comma" "$U/canary/file:colon" "$U/sqov/squash_marker"
chmod 777 "$U/canary/file"
echo "test file" > "$U/testfile.txt"
chown -R "$CTR_TEST_USER" "$U"
ubuild() { as_user env -C "$U" "$WORK/bin/apptainer" -q build "$@" >"$WORK/build.log" 2>&1 || fail "fixture: build $*: $(tail -5 "$WORK/build.log")"; }
ubuild busybox.sif busybox-root
ubuild img.sif audit-image.def
ubuild --sandbox sandbox img.sif
ubuild inspect.sif inspect-image.def
ubuild --sandbox inspect-dir inspect.sif
# The inspect image's squashfs partition, as the e2e test extracts it.
part=$(as_user "$CTR_BIN" sif list "$U/inspect.sif" | awk -F'|' '/FS \(Squashfs/ {gsub(/ /, "", $1); print $1; exit}')
as_user sh -c "'$CTR_BIN' sif dump $part '$U/inspect.sif' > '$U/inspect.sqfs'"
as_user mksquashfs "$U/sqov" "$U/overlay.sqfs" -quiet -noappend >/dev/null
HAVE_EXT3=""
if PATH=$PATH:/usr/sbin:/sbin command -v mkfs.ext3 >/dev/null; then
  truncate -s 64M "$U/ext3.img" && PATH=$PATH:/usr/sbin:/sbin mkfs.ext3 -q -F "$U/ext3.img" && chown "$CTR_TEST_USER" "$U/ext3.img" && HAVE_EXT3=1
fi

# ---- the registry (docker:// in place of the e2e tests' oras:// and Docker Hub images)
REG="" DIGEST=""
if command -v skopeo >/dev/null && command -v docker-registry >/dev/null; then
  start_registry
  push_rootfs_to_registry "$U/busybox-root" demo:1
  skopeo copy -q --src-tls-verify=false --dest-tls-verify=false "docker://$REGISTRY/demo:1" "docker://$REGISTRY/demo:latest"
  REG=$REGISTRY
  DIGEST=$(skopeo inspect --tls-verify=false "docker://$REG/demo:1" | jq -r .Digest)
fi
# ---- an HTTP server without Content-Length (e2e pull's httptest servers)
cp "$U/busybox.sif" "$U/http/busybox.sif"
printf DATADATADATADATA > "$U/http/data.txt"
HTTP_PORT=$(free_port)
/usr/bin/python3 - "$U/http" "$HTTP_PORT" >"$WORK/http.log" 2>&1 <<'PY' &
import http.server, os, sys
root, port = sys.argv[1], int(sys.argv[2])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        p = os.path.join(root, os.path.basename(self.path))
        if not os.path.isfile(p):
            self.send_error(404); return
        self.send_response(200); self.end_headers()
        with open(p, "rb") as f: self.wfile.write(f.read())
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
HTTP_PID=$!
HTTPURL=http://127.0.0.1:$HTTP_PORT
wait_http "$HTTPURL/data.txt" 200 || { kill $HTTP_PID; HTTP_PID=""; HTTPURL=""; }
PORT=$(free_port)

# What every case's shell sees (as_user starts from an empty environment).
cat > "$U/.audit-env" <<E
PATH=$WORK/bin:/usr/local/bin:/usr/bin:/bin
IMG=$U/img.sif BUSYBOX=$U/busybox.sif SANDBOX=$U/sandbox
ISIF=$U/inspect.sif ISQFS=$U/inspect.sqfs IDIR=$U/inspect-dir
TESTDATA=$U/testdata CANARY=$U/canary OVL=$U/overlay-dir SQOV=$U/overlay.sqfs EXT3=$U/ext3.img
REG=$REG DIGEST=$DIGEST HTTPURL=$HTTPURL PORT=$PORT
USERNAME=$USERNAME UIDN=$UIDN HOMEDIR=$HOMEDIR HOSTNAME_HOST=$HOSTNAME_HOST
CTR_CACHE_DIR=$U/cache
export PATH IMG BUSYBOX SANDBOX ISIF ISQFS IDIR TESTDATA CANARY OVL SQOV EXT3 REG DIGEST HTTPURL PORT USERNAME UIDN HOMEDIR HOSTNAME_HOST CTR_CACHE_DIR
E
chown "$CTR_TEST_USER" "$U/.audit-env"
note "fixtures ready in $(( $(date +%s) - START )) s"

# ---- the cases
# check_output CHECK OUT ERR: 0 when the check holds (see cases.tsv's header in the docs).
check_output() {
  local chk=$1 out=$2 err=$3 want
  want=${chk#*[=~!]}
  case "$chk" in E~*|E!*) want=${chk#E?};; !=*) want=${chk#!=};; esac
  want=${want//\$UIDN/$UIDN}; want=${want//\$USERNAME/$USERNAME}; want=${want//\$HOMEDIR/$HOMEDIR}
  want=${want//\$HOSTNAME_HOST/$HOSTNAME_HOST}; want=${want//\$T/$T}
  want=$(printf '%b' "$want")
  case "$chk" in
    -) return 0;;
    =*) [ "$out" = "$want" ];;
    !=*) [ "$out" != "$want" ];;
    ~*) [[ "$out" == *"$want"* ]];;
    !*) [[ "$out" != *"$want"* ]];;
    E~*) [[ "$err" == *"$want"* ]];;
    E!*) [[ "$err" != *"$want"* ]];;
  esac
}
# What ctr says when it lacks a command or flag: a "missing" result rather than "different".
MISSING_RE='unknown flag|unknown command|A subcommand is required|was not expected|unsupported source|[Nn]ot supported|not yet supported|are not supported|refused for now|do not apply to instances'

declare -A COUNT=([same]=0 [different]=0 [missing]=0 [n/a]=0)
REGRESSIONS=() NEWLY_SAME=()
[ -n "$MARKDOWN" ] && printf '| id | e2e test | command | Apptainer expects | ctr | note |\n|---|---|---|---|---|---|\n' > "$MARKDOWN"
while IFS=$'\t' read -r id suite source needs status chk recorded cmd; do
  case "$id" in ''|'#'*) continue;; esac
  [ -n "$ONLY" ] && ! [[ "$id" =~ $ONLY ]] && continue
  result="" reason=""
  case "$needs" in
    registry) [ -n "$REG" ] || { result=n/a; reason="no docker-registry/skopeo here"; };;
    http) [ -n "$HTTPURL" ] || { result=n/a; reason="no HTTP server"; };;
    ext3) [ -n "$HAVE_EXT3" ] || { result=n/a; reason="no mkfs.ext3 here"; };;
  esac
  T=$U/cases/$id
  if [ -z "$result" ]; then
    as_user mkdir -p "$T" </dev/null
    rc=0 t0=$(date +%s%N)
    timeout -k 5 60 runuser -u "$CTR_TEST_USER" -- env -i HOME="$HOMEDIR" USER="$USERNAME" LOGNAME="$USERNAME" \
      CTR_CONFIG="$CTR_TEST_CONFIG" T="$T" sh -c ". '$U/.audit-env'; cd '$U'; $cmd" \
      </dev/null >"$WORK/out" 2>"$WORK/err" || rc=$?
    out=$(cat "$WORK/out") err=$(cat "$WORK/err") ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if [ "$rc" = "$status" ] && check_output "$chk" "$out" "$err"; then
      result=same
    else
      if [ "$rc" != "$status" ]; then reason="exit $rc (expected $status)"; else reason="output: check '$chk' failed"; fi
      [ -n "$out" ] && reason="$reason; stdout: $(head -c 120 <<<"$out" | tr '\n' ' ')"
      [ -n "$err" ] && reason="$reason; stderr: $(grep -v '^ctr build: ' <<<"$err" | head -1 | head -c 160)"
      if grep -Eq "$MISSING_RE" <<<"$err"; then result=missing; else result=different; fi
    fi
  fi
  COUNT[$result]=$(( ${COUNT[$result]} + 1 ))
  if [ "$recorded" = same ] && [ "$result" != same ] && [ "$result" != n/a ]; then REGRESSIONS+=("$id"); fi
  if [ "$recorded" != same ] && [ "$result" = same ]; then NEWLY_SAME+=("$id"); fi
  printf '%-13s %-9s %s\n' "$id" "$result" "$reason"
  if [ -n "${AUDIT_VERBOSE:-}" ] && [ "$result" != n/a ]; then
    printf '    $ %s\n    exit %s in %s ms; stdout: %s\n    stderr: %s\n' "$cmd" "$rc" "$ms" "$(head -c 300 "$WORK/out")" "$(head -c 300 "$WORK/err")"
  fi
  if [ -n "$MARKDOWN" ]; then
    md() { sed 's/|/\\|/g' <<<"$1"; }
    expect="exit $status"; [ "$chk" != - ] && expect="$expect, $chk"
    printf '| %s | %s | `%s` | %s | %s | %s |\n' "$id" "$(md "$source")" "$(md "$cmd")" "$(md "$expect")" "$result" "$(md "${reason//$WORK/\$WORK}")" >> "$MARKDOWN"
  fi
done < "$AUDIT_DIR/cases.tsv"

counted=$(( COUNT[same] + COUNT[different] + COUNT[missing] ))
pct=$(awk -v s="${COUNT[same]}" -v n="$counted" 'BEGIN { printf "%.1f", n ? 100 * s / n : 0 }')
echo "== $counted cases: ${COUNT[same]} same, ${COUNT[different]} different, ${COUNT[missing]} missing ($pct % same); ${COUNT[n/a]} n/a; $(( $(date +%s) - START )) s"
[ ${#NEWLY_SAME[@]} = 0 ] || echo "now same, recorded otherwise in cases.tsv (update it): ${NEWLY_SAME[*]}"

# Nothing of the audit may stay: no instance, no process or mount of its files. (Only the
# audit's own: other tests of the same user may run beside it outside ctest.)
as_user "$WORK/bin/apptainer" instance stop --all >/dev/null 2>&1 || true
for _ in $(seq 100); do
  left=$(pgrep -u "$CTR_TEST_USER" -f "$WORK" || true)
  [ -z "$left" ] && break
  sleep 0.05
done
[ -z "$left" ] || fail "processes left: $(ps -o pid,args -p "$(tr '\n' , <<<"$left" | sed 's/,$//')")"
m=$(grep -h "$WORK" /proc/[0-9]*/mountinfo 2>/dev/null | sort -u || true)
[ -z "$m" ] || fail "mounts left: $m"
[ "$(as_user "$WORK/bin/apptainer" instance list --json | jq '.instances | length')" = 0 ] || fail "instances left"
if [ ${#REGRESSIONS[@]} != 0 ]; then
  echo "FAIL: recorded same in cases.tsv, not same now: ${REGRESSIONS[*]}" >&2
  exit 1
fi
echo "PASS: every case recorded same is same"
