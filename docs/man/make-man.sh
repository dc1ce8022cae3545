#!/bin/sh
# Writes ctr's man pages into OUT_DIR/man1 and OUT_DIR/man5 at build time:
#   ctr(1) and ctr-COMMAND(1) for every command `ctr --help` lists (help2man, from each
#   command's own --help), ctr-bench(1) when CTR_BENCH is given, and ctr.conf(5) from
#   etc/ctr.conf itself (its comments are the reference: ctrconf2man.awk).
# Usage: make-man.sh CTR VERSION SOURCE_DIR OUT_DIR [CTR_BENCH]
set -eu
ctr=$1 version=$2 src=$3 out=$4 bench=${5:-}
here=$src/docs/man
command -v help2man >/dev/null || { echo "make-man.sh: help2man is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/man1" "$out/man5"

# page NAME DESCRIPTION PROGRAM [INCLUDE]: one page through help2man; PROGRAM is run with
# --help (help2man takes the version from --version-string, not from the program).
page() {
  help2man --no-info --no-discard-stderr --version-string="$version" --name="$2" --section=1 \
    ${4:+--include="$4"} --output="$tmp/$1.1" "$3"
  # help2man stamps the month; a rebuild of the same tree should give the same bytes.
  sed -i '/^\.TH /s/"[A-Z][a-z]* [0-9][0-9]*"/""/' "$tmp/$1.1"
  mv "$tmp/$1.1" "$out/man1/$1.1"
}

# subcommands CMD...: "NAME<tab>WHAT" for each subcommand `ctr CMD... --help` lists.
subcommands() {
  "$ctr" "$@" --help | awk '/^Subcommands:/ { on = 1; next } on && /^$/ { exit } on { name = $1; $1 = ""; sub(/^ +/, ""); print name "\t" $0 }'
}
# command_page WHAT CMD...: ctr-CMD-...(1), then the pages of its own subcommands
# (ctr-instance-start(1), ctr-sif-header(1): Apptainer's naming).
command_page() {
  what=$1
  shift
  name=ctr-$(printf '%s' "$*" | tr ' ' -)
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$ctr" "$*" > "$tmp/$name"
  chmod +x "$tmp/$name"
  page "$name" "$(printf '%s' "$what" | sed 's/^./\L&/')" "$tmp/$name" "$here/ctr-command.h2m"
  subcommands "$@" | while IFS="$(printf '\t')" read -r sub subwhat; do
    command_page "$subwhat" "$@" "$sub"
  done
}

page ctr "a container runtime for HPC clusters" "$ctr" "$here/ctr.h2m"
subcommands | while IFS="$(printf '\t')" read -r cmd what; do
  [ "$cmd" = help ] && continue
  command_page "$what" "$cmd"
done
[ -z "$bench" ] || page ctr-bench "bare metal against the container, per figure of merit" "$bench" "$here/ctr-bench.h2m"
awk -v version="$version" -f "$here/ctrconf2man.awk" "$src/etc/ctr.conf" > "$out/man5/ctr.conf.5"
