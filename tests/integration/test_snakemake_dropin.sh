#!/bin/bash
# Issue 15, a drop-in for tools that drive Apptainer: Debian's snakemake with
# --use-singularity runs a rule's `container:` image through ctr linked as `singularity` on
# PATH, as the unprivileged test user. Snakemake checks `singularity --version` (it wants an
# "apptainer version V" with V >= 1.0.0), then runs
#   singularity exec --home CWD ARGS IMAGE bash -c 'set -euo pipefail; CMD'
# so the image needs bash: a busybox image with the host's bash and its libraries.
. "$(dirname "$0")/lib.sh"

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
