#!/bin/bash
# Issue 15, a drop-in for tools that drive Apptainer: Debian's snakemake with
# --use-singularity runs a rule's `container:` image through ctr linked as `singularity` on
# PATH, as the unprivileged test user. Snakemake checks `singularity --version` (it wants an
# "apptainer version V" with V >= 1.0.0), then runs
#   singularity exec --home CWD ARGS IMAGE bash -c 'set -euo pipefail; CMD'
# so the image needs bash: a busybox image with the host's bash and its libraries. Then a
# rule whose container is docker://127.0.0.1:PORT/bash:1 (Debian's docker-registry): with no
# image pulled by hand, Snakemake pulls it through ctr (`singularity pull --name ...`).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

ensure_test_user
require_fuse
command -v snakemake >/dev/null || skip "snakemake is not installed (tests/install-deps.sh installs Debian's)"
use_linger 0

# The drop-in link answers as Apptainer.
mkdir -p "$WORK/bin"
ln -s "$CTR_BIN" "$WORK/bin/singularity"
version=$(as_user "$WORK/bin/singularity" --version)
[[ "$version" =~ ^apptainer\ version\ [0-9]+\.[0-9]+\.[0-9]+\+ctr\.[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  fail "singularity --version printed '$version'"

# A busybox root with bash (the host's, with the libraries ldd names), as a SIF.
ROOT=$WORK/bash-root
make_demo_rootfs "$ROOT"
cp /bin/bash "$ROOT/bin/bash"
for lib in $(ldd /bin/bash | grep -o '/[^ ]*'); do
  mkdir -p "$ROOT$(dirname "$lib")"
  cp -L "$lib" "$ROOT$lib"
done
"$CTR_BIN" -q build "$WORK/bash.sif" "$ROOT"
chmod 644 "$WORK/bash.sif"
# The same root as an image in a registry on 127.0.0.1, for a rule that names it by
# reference: Snakemake pulls it itself (`singularity pull --name HASH.simg docker://...`).
push_rootfs_to_registry "$ROOT" bash:1
trap 'kill "$REGISTRY_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
rm -rf "$ROOT"

# Data the rule reads through --singularity-args "-B ...".
mkdir -p "$WORK/data"
echo "from the bound directory" > "$WORK/data/extra.txt"
chmod -R go+rX "$WORK/data"

WF=$WORK/wf
mkdir -p "$WF/in"
echo "input line" > "$WF/in/data.txt"
cat > "$WF/Snakefile" <<EOF
envvars: "GREETING_FROM_HOST"

rule all:
    input: "out/result.txt"

rule greet:
    input: "in/data.txt"
    output: "out/result.txt"
    container: "$WORK/bash.sif"
    shell:
        r"""
        read -r line < {input}
        read -r extra < /data/extra.txt
        while read -r l; do [[ \$l == ID=* ]] && os=\${{l#ID=}}; done < /etc/os-release
        printf '%s|%s|%s|%s|bash %s\n' "\$line" "\$GREETING_FROM_HOST" "\$extra" "\$os" "\${{BASH_VERSINFO[0]}}" > {output}
        """
EOF
chown -R "$CTR_TEST_USER" "$WF"

set +e
out=$(as_user env PATH="$WORK/bin:/usr/bin:/bin" GREETING_FROM_HOST="hello from the host" \
  snakemake --directory "$WF" --snakefile "$WF/Snakefile" --cores 1 --use-singularity \
  --singularity-args "-B $WORK/data:/data" --envvars GREETING_FROM_HOST 2>&1)
rc=$?
set -e
[ "$rc" = 0 ] || fail "snakemake failed (status $rc): $out"
expect_contains "snakemake ran the rule in the container" "Activating singularity image $WORK/bash.sif" "$out"
[ -f "$WF/out/result.txt" ] || fail "no output file: $out"
result=$(cat "$WF/out/result.txt")
expect_eq "the rule's output (input, --envvars variable, -B directory, image's os-release, bash)" \
  "input line|hello from the host|from the bound directory|ctr-demo|bash ${BASH_VERSINFO[0]}" "$result"
expect_eq "output owned by the test user" "$CTR_TEST_USER" "$(stat -c %U "$WF/out/result.txt")"
assert_nothing_left "snakemake's launches"
note "snakemake --use-singularity through ctr: ok"

note "a rule whose container is docker://$REGISTRY/bash:1: snakemake pulls it through ctr"
WF2=$WORK/wf2
mkdir -p "$WF2"
cat > "$WF2/Snakefile" <<EOF
rule all:
    input: "out/pulled.txt"

rule pulled:
    output: "out/pulled.txt"
    container: "docker://$REGISTRY/bash:1"
    shell:
        r"""
        while read -r l; do [[ \$l == ID=* ]] && os=\${{l#ID=}}; done < /etc/os-release
        printf '%s|bash %s\n' "\$os" "\${{BASH_VERSINFO[0]}}" > {output}
        """
EOF
chown -R "$CTR_TEST_USER" "$WF2"
set +e
out=$(as_user env PATH="$WORK/bin:/usr/bin:/bin" \
  snakemake --directory "$WF2" --snakefile "$WF2/Snakefile" --cores 1 --use-singularity 2>&1)
rc=$?
set -e
[ "$rc" = 0 ] || fail "snakemake with a docker:// container failed (status $rc): $out"
expect_contains "snakemake pulled the image" "Pulling singularity image docker://$REGISTRY/bash:1" "$out"
expect_eq "the rule ran in the pulled image" "ctr-demo|bash ${BASH_VERSINFO[0]}" "$(cat "$WF2/out/pulled.txt")"
pulled=$(find "$WF2/.snakemake/singularity" -name '*.simg' 2>/dev/null)
[ -n "$pulled" ] && "$CTR_BIN" sif list "$pulled" >/dev/null || fail "no SIF where snakemake asked for it: $(ls -R "$WF2/.snakemake" 2>&1 | head -20)"
assert_nothing_left "snakemake's pull and launches"
note "snakemake with a registry image through ctr: ok"
