#!/bin/bash
# Issue 28: a CWL tool through Debian's cwltool --singularity, with ctr linked as
# `singularity` on PATH, as the unprivileged test user. The tool's DockerRequirement names
# an image in a registry on 127.0.0.1 (dockerPull) and nothing is pulled by hand: cwltool
# runs `singularity pull --force --name HOST:PORT_NAME:TAG.sif docker://...`, then
#   singularity exec --contain --ipc --cleanenv --pid --home ... --bind ... --pwd ...
#     --net --network none IMAGE CMD
# and collects the output file.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

ensure_test_user
require_fuse
command -v cwltool >/dev/null || skip "cwltool is not installed (tests/install-deps.sh installs Debian's)"
use_linger 0

make_demo_rootfs "$WORK/root"
push_rootfs_to_registry "$WORK/root" demo:1
trap 'kill "$REGISTRY_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
rm -rf "$WORK/root"
mkdir -p "$WORK/bin" "$WORK/run"
ln -s "$CTR_BIN" "$WORK/bin/singularity"

cat > "$WORK/tool.cwl" <<CWL
cwlVersion: v1.2
class: CommandLineTool
requirements:
  DockerRequirement:
    dockerPull: $REGISTRY/demo:1
baseCommand: [sh, -c]
arguments: ['grep ^ID= /etc/os-release > out.txt; cat \$0 >> out.txt', \$(inputs.infile.path)]
inputs:
  infile: {type: File}
outputs:
  result: {type: File, outputBinding: {glob: out.txt}}
CWL
echo "input from the host" > "$WORK/in.txt"
chown -R "$CTR_TEST_USER" "$WORK/run" "$WORK/tool.cwl" "$WORK/in.txt"

set +e
# cwltool pulls into its working directory: the test user's own.
out=$(as_user env PATH="$WORK/bin:/usr/bin:/bin" sh -c 'cd "$1" && exec cwltool --singularity --outdir out "$2" --infile "$3"' \
  sh "$WORK/run" "$WORK/tool.cwl" "$WORK/in.txt" 2>&1)
rc=$?
set -e
[ "$rc" = 0 ] || fail "cwltool failed (status $rc): $out"
expect_contains "cwltool pulled the image through ctr" "'singularity', 'pull', '--force', '--name'" "$out"
expect_contains "cwltool: success" "Final process status is success" "$out"
result=$(cat "$WORK/run/out/out.txt")
expect_contains "the tool ran in the pulled image" "ID=ctr-demo" "$result"
expect_contains "the tool read its staged input" "input from the host" "$result"
[ -s "$WORK/run/${REGISTRY}_demo:1.sif" ] || fail "no SIF where cwltool asked for it: $(ls "$WORK/run")"
expect_eq "output owned by the test user" "$CTR_TEST_USER" "$(stat -c %U "$WORK/run/out/out.txt")"
assert_nothing_left "cwltool's pull and launch"
note "cwltool --singularity with a registry image through ctr: ok"
echo "PASS: $TEST_NAME"
