#!/bin/bash
# `ctr inspect` as Apptainer's scripts use it: the labels by default, one flag per part
# (-l -d -r -s -t -e -H), --app, --list-apps, --json in Apptainer's shape and --all, the
# same for a directory and for a SIF; a missing app or an unknown flag is one line and a
# non-zero exit; ctr's own overview stays under --ctr-summary / --ctr-json.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip "python3 is needed to check the JSON output"

# Inspect needs no privileges: as root, it runs as the unprivileged test user.
RUN=()
if [ "$(id -u)" = 0 ]; then
  create_test_user
  RUN=(as_user)
fi
ctr() { "${RUN[@]}" "$CTR_BIN" "$@"; }

DIR="$WORK/rootfs"
make_apptainer_rootfs "$DIR"
meta=$DIR/.singularity.d
# Beyond the fixture: a second app, a directory of /scif/apps that is no app (no scif/),
# an environment script converted from Docker, labels Go's JSON encoder escapes and a
# label that is no string.
mkdir -p "$DIR/scif/apps/other/scif" "$DIR/scif/apps/notanapp/bin"
printf '#!/bin/sh\necho other\n' >"$DIR/scif/apps/other/scif/runscript"
printf 'export DOCKER_VAR=1\n\n\n' >"$meta/env/10-docker2singularity.sh"
cat >"$meta/labels.json" <<'J'
{
  "org.label-schema.name": "ctr-apptainer-fixture",
  "org.label-schema.build-arch": "amd64",
  "Author": "ctr tests",
  "Contact": "ctr <ctr@example.org> & co",
  "Build-Number": 7
}
J
SIF="$WORK/fixture.sif"
"$CTR_BIN" build "$SIF" "$DIR" >/dev/null
chmod 644 "$SIF"

# expect_output WHAT EXPECTED_FILE ARGS...: stdout of `ctr inspect ARGS` is EXPECTED_FILE
# byte for byte, and the exit status 0.
expect_output() {
  local what=$1 expected=$2; shift 2
  ctr inspect "$@" >"$WORK/out" 2>"$WORK/err" || fail "$what: exit status $?: $(cat "$WORK/err")"
  cmp -s "$expected" "$WORK/out" || fail "$what: output differs: $(diff "$expected" "$WORK/out")"
}
# expect_failure WHAT STATUS NEEDLE ARGS...: exit STATUS, nothing on stdout, one line on
# stderr containing NEEDLE (a usage error, status 1, may add ctr's "Run with --help" hint).
expect_failure() {
  local what=$1 status=$2 needle=$3 rc=0; shift 3
  ctr inspect "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  expect_eq "$what: exit status" "$status" "$rc"
  expect_eq "$what: stdout" "" "$(cat "$WORK/out")"
  expect_contains "$what" "$needle" "$(head -n 1 "$WORK/err")"
  [ "$status" = 1 ] && sed -i '2{/^Run with --help for more information\.$/d}' "$WORK/err"
  expect_eq "$what: stderr lines" 1 "$(wc -l <"$WORK/err")"
}
# expected TEXT...: writes the expected output to $WORK/expected and prints its path.
expected() { printf '%s' "$@" >"$WORK/expected"; echo "$WORK/expected"; }
# shown PATH: like `expected`, for a file as Apptainer shows it (trailing newlines replaced
# by one).
shown() { expected "$(cat "$1")"$'\n'; }
# expect_json WHAT PYTHON_DICT ARGS...: `ctr inspect ARGS` prints exactly what Go's
# encoder writes for the dict (tab indent, <, > and & escaped).
expect_json() {
  local what=$1 dict=$2; shift 2
  python3 - "$dict" >"$WORK/expected" <<'P'
import json, sys
text = json.dumps(eval(sys.argv[1]), indent="\t", ensure_ascii=False)
print(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
P
  expect_output "$what" "$WORK/expected" "$@"
}

labels_text='Author: ctr tests
Build-Number: 7
Contact: ctr <ctr@example.org> & co
org.label-schema.build-arch: amd64
org.label-schema.name: ctr-apptainer-fixture
'
labels_dict='{"Author": "ctr tests", "Build-Number": "7", "Contact": "ctr <ctr@example.org> & co",
  "org.label-schema.build-arch": "amd64", "org.label-schema.name": "ctr-apptainer-fixture"}'
tool=$DIR/scif/apps/tool/scif

for IMG in "$DIR" "$SIF"; do
  kind=directory; [ "$IMG" = "$SIF" ] && kind=SIF
  note "$kind: each part as Apptainer prints it"
  expect_output "$kind: default is the labels" "$(expected "$labels_text")" "$IMG"
  expect_output "$kind: -l" "$(expected "$labels_text")" -l "$IMG"
  expect_output "$kind: --labels" "$(expected "$labels_text")" --labels "$IMG"
  expect_output "$kind: -r" "$(shown "$meta/runscript")" -r "$IMG"
  expect_output "$kind: --runscript" "$(shown "$meta/runscript")" --runscript "$IMG"
  expect_output "$kind: -s (startscript, not --silent)" "$(shown "$meta/startscript")" -s "$IMG"
  expect_output "$kind: -t" "$(shown "$meta/test")" -t "$IMG"
  expect_output "$kind: -H" "$(shown "$meta/runscript.help")" -H "$IMG"
  # The SIF's Def.FILE object is printed as stored (Apptainer trims only files it reads).
  if [ "$kind" = SIF ]; then def=$(cat "$meta/Singularity"; echo x); def=${def%x}$'\n'; else def="$(cat "$meta/Singularity")"$'\n'; fi
  expect_output "$kind: -d (not --debug)" "$(expected "$def")" -d "$IMG"
  # Only the %environment and Docker scripts, not the runtime's own (01-base, 95-apps, ...).
  expect_output "$kind: -e" "$(expected "=== /.singularity.d/env/10-docker2singularity.sh ===
export DOCKER_VAR=1

=== /.singularity.d/env/90-environment.sh ===
$(cat "$meta/env/90-environment.sh")

")" -e "$IMG"
  expect_output "$kind: -l -r: runscript, then labels" "$(expected "$(cat "$meta/runscript")"$'\n' "$labels_text")" -l -r "$IMG"
  expect_output "$kind: --list-apps" "$(expected $'other\ntool\n')" --list-apps "$IMG"

  note "$kind: --app NAME shows the app's parts"
  expect_output "$kind: --app tool" "$(expected $'Tool-Version: 1.0\n')" --app tool "$IMG"
  expect_output "$kind: --app tool -r" "$(shown "$tool/runscript")" --app tool -r "$IMG"
  expect_output "$kind: --app tool -t" "$(shown "$tool/test")" --app tool -t "$IMG"
  expect_output "$kind: --app tool -H" "$(shown "$tool/runscript.help")" --app tool -H "$IMG"
  expect_output "$kind: --app tool -e" "$(expected "=== /scif/apps/tool/scif/env/90-environment.sh ===
$(cat "$tool/env/90-environment.sh")

")" --app tool -e "$IMG"
  expect_output "$kind: --app other -t (no such file: nothing)" "$(expected '')" --app other -t "$IMG"

  note "$kind: --json in Apptainer's shape"
  expect_json "$kind: --json" "{'data': {'attributes': {'labels': $labels_dict}}, 'type': 'container'}" --json "$IMG"
  expect_json "$kind: -j -r -s" "{'data': {'attributes': {'runscript': open('$meta/runscript').read().rstrip('\n'),
    'startscript': open('$meta/startscript').read().rstrip('\n')}}, 'type': 'container'}" -j -r -s "$IMG"
  expect_json "$kind: --json --app tool -r" "{'data': {'attributes': {'apps': {'tool':
    {'runscript': open('$tool/runscript').read().rstrip('\n')}}}}, 'type': 'container'}" --json --app tool -r "$IMG"
  expect_json "$kind: --json --list-apps" "{'data': {'attributes': {'apps': {'other': {}, 'tool': {}}}}, 'type': 'container'}" \
    --json --list-apps "$IMG"

  note "$kind: --all is everything, as JSON, whatever --app says"
  for args in "--all" "--all --app tool"; do
    # shellcheck disable=SC2086
    ctr inspect $args "$IMG" >"$WORK/all.json" || fail "$kind: $args failed"
    python3 - "$WORK/all.json" "$meta" "$tool" "$kind" <<'P' || fail "$kind: $args: see above"
import json, sys
text = open(sys.argv[1]).read()
doc = json.loads(text)
meta, tool, kind = sys.argv[2:5]
def shown(path): return open(path).read().rstrip("\n")
attrs = doc["data"]["attributes"]
checks = [
    ("top-level keys", list(doc), ["data", "type"]),
    ("type", doc["type"], "container"),
    ("attribute order (Apptainer's)", list(attrs),
     ["apps", "environment", "labels", "runscript", "test", "helpfile", "deffile", "startscript"]),
    ("apps", list(attrs["apps"]), ["other", "tool"]),
    ("tool's attribute order", list(attrs["apps"]["tool"]), ["environment", "labels", "runscript", "test", "helpfile"]),
    ("tool's environment", attrs["apps"]["tool"]["environment"],
     {"/scif/apps/tool/scif/env/90-environment.sh": shown(tool + "/env/90-environment.sh")}),
    ("tool's labels", attrs["apps"]["tool"]["labels"], {"Tool-Version": "1.0"}),
    ("other", attrs["apps"]["other"], {"runscript": "#!/bin/sh\necho other"}),
    ("environment files", sorted(attrs["environment"]),
     ["/.singularity.d/env/10-docker2singularity.sh", "/.singularity.d/env/90-environment.sh"]),
    ("runscript", attrs["runscript"], shown(meta + "/runscript")),
    ("test", attrs["test"], shown(meta + "/test")),
    ("helpfile", attrs["helpfile"], shown(meta + "/runscript.help")),
    ("startscript", attrs["startscript"], shown(meta + "/startscript")),
    ("deffile", attrs["deffile"], open(meta + "/Singularity").read() if kind == "SIF" else shown(meta + "/Singularity")),
    ("escaped <", "<" in text or "\\u003c" not in text, False),
]
bad = [f"{what}: expected {want!r}, got {got!r}" for what, got, want in checks if got != want]
for b in bad: print(f"FAIL: {kind}: --all: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
P
  done

  note "$kind: bad input: one line, Apptainer's exit status"
  expect_failure "$kind: missing app" 255 "no app 'nope'" --app nope "$IMG"
  expect_failure "$kind: missing app, with -r --json" 255 "no app 'nope'" -r --json --app nope "$IMG"
  expect_failure "$kind: unknown flag" 1 "--bogus" --bogus "$IMG"
  expect_failure "$kind: ctr's overview takes no Apptainer flag" 1 "--ctr-json" --ctr-json -r "$IMG"

  note "$kind: ctr's overview"
  ctr inspect --ctr-summary "$IMG" >"$WORK/out" || fail "$kind: --ctr-summary failed"
  expect_contains "$kind: --ctr-summary labels" "org.label-schema.name: ctr-apptainer-fixture" "$(cat "$WORK/out")"
  expect_contains "$kind: --ctr-summary runscript" "== Runscript" "$(cat "$WORK/out")"
  ctr inspect --ctr-json "$IMG" >"$WORK/out" || fail "$kind: --ctr-json failed"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["kind"] != sys.argv[2])' \
    "$WORK/out" "$([ "$kind" = SIF ] && echo sif || echo directory)" || fail "$kind: --ctr-json: wrong kind: $(head -c 300 "$WORK/out")"
done

expect_failure "missing image" 255 "$WORK/nope.sif" -r "$WORK/nope.sif"

note "a SIF with a recorded inspect-metadata.json: Apptainer shows the record"
cp "$SIF" "$WORK/recorded.sif"
cat >"$WORK/inspect-metadata.json" <<'J'
{"data": {"attributes": {"labels": {"Recorded": "yes"}, "runscript": "recorded runscript",
  "apps": {"rec": {"runscript": "recorded app runscript"}}}}, "type": "container"}
J
"$CTR_BIN" sif add --datatype 6 --filename inspect-metadata.json "$WORK/recorded.sif" "$WORK/inspect-metadata.json"
chmod 644 "$WORK/recorded.sif"
expect_output "recorded: labels" "$(expected $'Recorded: yes\n')" "$WORK/recorded.sif"
expect_output "recorded: -r" "$(expected $'recorded runscript\n')" -r "$WORK/recorded.sif"
expect_output "recorded: --list-apps" "$(expected $'rec\n')" --list-apps "$WORK/recorded.sif"
expect_output "recorded: --app rec -r" "$(expected $'recorded app runscript\n')" --app rec -r "$WORK/recorded.sif"
expect_failure "recorded: --app tool is not recorded" 255 "no app 'tool'" --app tool "$WORK/recorded.sif"

echo "PASS: $TEST_NAME"
