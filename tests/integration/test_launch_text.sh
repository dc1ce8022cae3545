#!/bin/bash
# Issue 56, item 3: the functions a launch runs are linked side by side in ctr (CMake option
# CTR_LAUNCH_TEXT, src/cli/launch-text.ld written by bench/startup/launch-text.sh), so that a
# held launch faults in a few windows of code instead of dozens. Checks that this build has
# the section, that the functions every held launch runs are in it, and that the list still
# names ctr's code: a renamed function or another compiler leaves entries that match
# nothing, and the launch path drifts apart again (then run the script again).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ "${CTR_LAUNCH_TEXT:-}" = ON ] ||
  skip "this build does not lay out the launch path (CTR_LAUNCH_TEXT off, or the linker does not take src/cli/launch-text.ld)"
command -v readelf >/dev/null && command -v nm >/dev/null || skip "readelf and nm (binutils) are needed"
symbols=$(nm "$CTR_BIN" 2>/dev/null) || true
[ -n "$symbols" ] || skip "$CTR_BIN has no symbol table (stripped)"
demangled=$(nm -C "$CTR_BIN")
list="$CTR_SOURCE_DIR/src/cli/launch-text.ld"

read -r start size < <(readelf -SW "$CTR_BIN" | awk '$2 == ".text.ctr_launch" { print $4, $6 }') || true
[ -n "${start:-}" ] || fail "CTR_LAUNCH_TEXT is on, and ctr has no .text.ctr_launch section"
note ".text.ctr_launch: $((16#$size)) bytes at 0x$start"

# in_section NAME: the function NAME (or, for a NAME ending in "(", the first whose demangled
# name starts so) lies in the section, its hot part: the [clone .cold] part is elsewhere.
in_section() {
  local addr
  addr=$(awk -v f="$1" '{ name = substr($0, 20) }
    (name == f || (f ~ /\($/ && index(name, f) == 1)) && name !~ /\[clone \.cold\]/ { print $1; exit }' <<<"$demangled")
  [ -n "$addr" ] || fail "no function '$1' in ctr (renamed? update this test and run bench/startup/launch-text.sh)"
  (( 16#$addr >= 16#$start && 16#$addr < 16#$start + 16#$size )) ||
    fail "'$1' (0x$addr) is outside .text.ctr_launch: the held launch's code is apart again (run bench/startup/launch-text.sh)"
}
for f in "main" "ctr::cli::LaunchMemo::of(" "ctr::cli::LaunchMemo::find(" "ctr::runtime::joinSharedImage(" \
         "ctr::runtime::loadSeccompProgram(" "ctr::runtime::dropAllCapabilities("; do
  in_section "$f"
done

# How much of the list still names a function of ctr (or of the libstdc++ linked into it).
names=$(sed -n 's/^ *\*(\.text\.\(startup\.\)\{0,1\}\(.*\))$/\2/p' "$list" | sort -u)
total=$(wc -l <<<"$names")
found=$(comm -12 <(printf '%s\n' "$names") <(awk '{ print $NF }' <<<"$symbols" | sort -u) | wc -l)
note "src/cli/launch-text.ld: $found of its $total functions are in ctr"
(( total >= 100 )) || fail "src/cli/launch-text.ld lists only $total functions"
(( found * 10 >= total * 8 )) ||
  fail "only $found of the $total functions src/cli/launch-text.ld lists are in ctr: run bench/startup/launch-text.sh again"
echo "PASS: $TEST_NAME"
