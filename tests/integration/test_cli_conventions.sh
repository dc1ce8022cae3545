#!/bin/bash
# Issue 15, CLI conventions: `ctr --version` and `ctr version` print "ctr version X.Y.Z
# (git REV; BUILD_TYPE; setuid helper install on|off; Slurm plugin built|not built)" and
# `ctr version --json` the same facts and more (issue 29: a bug report says what it ran)
# (through links named apptainer or singularity, Apptainer's forms: see below);
# `ctr help [COMMAND]` prints help and exits 0; a bad flag, an unknown command or no command
# is a usage error: exit 1 and a message naming what was wrong (255 stays for failed launches).
. "$(dirname "$0")/lib.sh"

run() { set +e; OUT=$("$CTR_BIN" "$@" 2>&1); RC=$?; set -e; }

run --version
expect_eq "--version status" 0 "$RC"
[[ "$OUT" =~ ^ctr\ version\ [0-9]+\.[0-9]+\.[0-9]+\ \(git\ [^\;]+\;\ [A-Za-z]*\;\ setuid\ helper\ install\ (on|off)\;\ Slurm\ plugin\ (built|not\ built)\)$ ]] ||
  fail "--version printed '$OUT'"
run version
expect_eq "version" "$OUT" "$("$CTR_BIN" --version)"
# The revision is the source tree's, as git names it now (also after commits made since
# cmake last ran: build_info.cpp is written at every build).
if rev=$(git -C "$CTR_SOURCE_DIR" describe --always --dirty --abbrev=12 2>/dev/null); then
  expect_contains "--version: the git revision" "(git $rev;" "$OUT"
fi
run version --json
expect_eq "version --json status" 0 "$RC"
python3 - "$OUT" "${rev:-unknown}" <<'PY' || fail "version --json: $OUT"
import json, sys
v = json.loads(sys.argv[1])
assert v["revision"] == sys.argv[2], (v["revision"], sys.argv[2])
assert set(v["components"]) == {"setuid_helper", "slurm_plugin", "apptainer_links", "bench"}, v["components"]
assert set(v["components"]["setuid_helper"]) == {"built", "setuid_install", "path", "setuid_root_now"}
assert isinstance(v["components"]["slurm_plugin"]["built"], bool)
assert v["build"]["type"] and v["build"]["compiler"] and v["version"].count(".") == 2
PY
run help exec
expect_eq "help exec status" 0 "$RC"
expect_contains "help exec" "Usage: ctr exec [OPTIONS] image" "$OUT"
run help
expect_eq "help status" 0 "$RC"
expect_contains "help" "Usage: ctr [OPTIONS] SUBCOMMAND" "$OUT"
run help nosuchcommand
expect_eq "help of an unknown command: status" 1 "$RC"
expect_contains "help of an unknown command" "unknown command 'nosuchcommand'" "$OUT"
run nosuchcommand
expect_eq "unknown command: status" 1 "$RC"
expect_contains "unknown command" "unknown command 'nosuchcommand'" "$OUT"
run exec --no-such-flag img true
expect_eq "bad flag: status" 1 "$RC"
expect_eq "bad flag: one line naming it" "ctr: error: exec: unknown flag: --no-such-flag (ctr exec --help lists the options)" "$OUT"
run exec --bind
expect_eq "a flag without its value: status" 1 "$RC"
expect_eq "a flag without its value: one line" 1 "$(printf '%s\n' "$OUT" | wc -l)"
expect_contains "a flag without its value" "exec: --bind" "$OUT"
run
expect_eq "no command: status" 1 "$RC"
note "no command: $OUT"
# `--` as Apptainer parses it: one before IMAGE ends ctr's options; after IMAGE every `--`
# belongs to the command (checked on the plan, so no container is started).
mkdir -p "$WORK/img"
argv_of() { CTR_CONFIG=/dev/null "$CTR_BIN" exec --explain --json "$@" | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)["argv"]))'; }
expect_eq "exec -- IMG echo a b" "echo a b" "$(argv_of -- "$WORK/img" echo a b)"
expect_eq "exec --pwd / -- IMG echo a b" "echo a b" "$(argv_of --pwd / -- "$WORK/img" echo a b)"
expect_eq "exec IMG -- echo hi" "-- echo hi" "$(argv_of "$WORK/img" -- echo hi)"
expect_eq "exec IMG echo -- hi" "echo -- hi" "$(argv_of "$WORK/img" echo -- hi)"
expect_eq "exec -- IMG echo --" "echo --" "$(argv_of -- "$WORK/img" echo --)"
expect_eq "exec -- IMG -- echo" "-- echo" "$(argv_of -- "$WORK/img" -- echo)"

# Under the drop-in names (links named apptainer or singularity), the version questions get
# Apptainer's answers: `--version` "apptainer version A+ctr.X", `version` the bare "A+ctr.X",
# with X ctr's own version; Apptainer's global flags come before either.
ctr_version=$("$CTR_BIN" --version)
ctr_version=${ctr_version#ctr version }
ctr_version=${ctr_version%% *}
for name in apptainer singularity; do
  ln -s "$CTR_BIN" "$WORK/$name"
  for flags in "" "--quiet --silent" "-d" "--nocolor -v"; do
    # shellcheck disable=SC2086
    OUT=$("$WORK/$name" $flags --version)
    [[ "$OUT" =~ ^apptainer\ version\ [0-9]+\.[0-9]+\.[0-9]+\+ctr\.${ctr_version//./\\.}$ ]] ||
      fail "$name $flags --version printed '$OUT'"
    # shellcheck disable=SC2086
    expect_eq "$name $flags version" "${OUT#apptainer version }" "$("$WORK/$name" $flags version)"
  done
  set +e; OUT=$("$WORK/$name" --bogus-global-flag version 2>&1); RC=$?; set -e
  expect_eq "$name: an unknown global flag: status" 1 "$RC"
  expect_contains "$name: an unknown global flag" "--bogus-global-flag" "$OUT"
  # Apptainer's shape for a flag a command does not have, which its wrappers look for.
  set +e; OUT=$("$WORK/$name" exec --x img true 2>&1); RC=$?; set -e
  expect_eq "$name exec --x: status" 1 "$RC"
  expect_eq "$name exec --x" 'Error for command "exec": unknown flag: --x' "$OUT"
done
# Only the name matters: another link to ctr is still ctr.
ln -s "$CTR_BIN" "$WORK/apptainer-not"
expect_eq "a link of another name" "$("$CTR_BIN" --version)" "$("$WORK/apptainer-not" --version)"

# A launch that fails is still 255.
run exec /nonexistent.sif true
expect_eq "failed launch: status" 255 "$RC"
# Apptainer's global flags before the command: -s/--silent keeps ctr's warnings out (as
# -q does), --nocolor is accepted (ctr prints no colour).
run --nocolor version
expect_eq "--nocolor version" 0 "$RC"
unshare -Urm true 2>/dev/null ||
  skip "no user namespaces here: the --silent launch cases cannot run (the other cases passed)"
{
  make_demo_rootfs "$WORK/demo"
  export CTR_CONFIG=/dev/null
  # A launch that warns (HOME is set with --home, not --env) and succeeds.
  run exec --env HOME=/elsewhere "$WORK/demo" true
  expect_eq "ignored setting: status" 0 "$RC"
  expect_contains "ignored setting warns" "warning: HOME cannot be set with --env" "$OUT"
  for flag in -s --silent -q; do
    run "$flag" --nocolor exec --env HOME=/elsewhere "$WORK/demo" true
    expect_eq "$flag: status" 0 "$RC"
    expect_eq "$flag: no warning" "" "$OUT"
  done
  unset CTR_CONFIG
}

echo "PASS: $TEST_NAME"
