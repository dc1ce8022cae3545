#!/bin/bash
# Issue 29: what an installed ctr offers beyond the binary. Man pages generated at build
# time (ctr(1), one ctr-COMMAND(1) per command `ctr --help` lists, ctr-bench(1), ctr.conf(5)
# with every key of etc/ctr.conf, which names every key ctr knows), bash completion read from ctr's own help, and the
# modulefile loaded by a real Environment Modules (`module load ctr`). All from an install
# into a prefix, as an admin does it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CTR_BUILD_DIR=${CTR_BUILD_DIR:?CTR_BUILD_DIR must name the build tree (ctest sets it)}
prefix=$WORK/apps/ctr/0.1.0
cmake --install "$CTR_BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; fail "cmake --install failed"; }
ctr=$prefix/bin/ctr

note "man pages"
if [ ! -d "$CTR_BUILD_DIR/man" ]; then
  note "SKIP man pages: help2man was not installed when this build was configured (tests/install-deps.sh installs it)"
else
  man=$prefix/share/man
  commands=$("$ctr" --help | awk '/^Subcommands:/ { on = 1; next } on && /^$/ { exit } on && $1 != "help" { print $1 }')
  [ -n "$commands" ] || fail "ctr --help lists no command"
  for c in $commands; do
    [ -s "$man/man1/ctr-$c.1" ] || fail "no man page for ctr $c: $(ls "$man/man1")"
  done
  for f in man1/ctr.1 man5/ctr.conf.5; do [ -s "$man/$f" ] || fail "no $f"; done
  [ ! -x "$CTR_BUILD_DIR/bin/ctr-bench" ] || [ -s "$man/man1/ctr-bench.1" ] || fail "no ctr-bench(1)"
  if command -v man >/dev/null; then
    page=$(MANWIDTH=200 man -M "$man" ctr-exec 2>&1) || fail "man ctr-exec: $page"
    expect_contains "man ctr-exec: synopsis" "ctr exec [OPTIONS] image [args...]" "$page"
    expect_contains "man ctr-exec: an option of ctr exec --help" "--contain" "$page"
    expect_contains "man ctr-exec: the version" "0.1.0" "$page"
    page=$(MANWIDTH=200 man -M "$man" 5 ctr.conf 2>&1) || fail "man 5 ctr.conf: $page"
    # Every key that etc/ctr.conf sets is in the page, with its default.
    while IFS= read -r line; do
      expect_contains "ctr.conf(5) documents '$line'" "$line" "$page"
    done < <(grep -E '^[a-z][a-z ]*[a-z] = ' "$CTR_SOURCE_DIR/etc/ctr.conf" | sed 's/ *$//')
    page=$(MANWIDTH=200 man -M "$man" ctr 2>&1) || fail "man ctr: $page"
    expect_contains "man ctr: exit status" "128+N when it died of signal N" "$page"
  else
    note "man is not installed: the pages are checked as files only"
  fi
fi

note "etc/ctr.conf, from which ctr.conf(5) is made, names every key ctr knows"
# The helper's build writes ctr's key list (ctr-config-keys, from config's own table).
keys=$CTR_BUILD_DIR/src/helper/generated/ctr_config_keys.inc
if [ -s "$keys" ]; then
  while IFS= read -r key; do
    grep -Eq "^(# ([A-Za-z ]+: +)?)?$key =( |\$)" "$CTR_SOURCE_DIR/etc/ctr.conf" ||
      fail "etc/ctr.conf has no line for the key '$key' (set, or a commented example): ctr.conf(5) leaves it out"
  done < <(sed -n 's/^"\(.*\)",$/\1/p' "$keys")
else
  note "no $keys (the helper is not built): the key list is not compared"
fi

note "bash completion, read from ctr's own help"
completion=$prefix/share/bash-completion/completions/ctr
[ -s "$completion" ] || fail "no bash completion installed"
mkdir -p "$WORK/cwd/sandbox"
touch "$WORK/cwd/a.sif" "$WORK/cwd/b.sqfs" "$WORK/cwd/notes.txt"
complete_words() {
  (cd "$WORK/cwd" && PATH=$prefix/bin:/usr/bin:/bin bash -c '
    . "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _ctr
    printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' bash "$completion" "$@")
}
expect_eq "ctr e<TAB>" "exec " "$(complete_words ctr e)"
expect_eq "ctr exec --cont<TAB>" "--contain --containall " "$(complete_words ctr exec --cont)"
expect_eq "ctr -d exec --cont<TAB> (a global flag first)" "--contain --containall " "$(complete_words ctr -d exec --cont)"
expect_eq "ctr exec <TAB>: images and directories" "a.sif b.sqfs sandbox/ " "$(complete_words ctr exec "")"
expect_eq "ctr exec -B /tmp <TAB>: the option's value is skipped" "a.sif b.sqfs sandbox/ " "$(complete_words ctr exec -B /tmp "")"
expect_eq "ctr exec --bind <TAB>: a path" "a.sif b.sqfs notes.txt sandbox " "$(complete_words ctr exec --bind "")"
expect_contains "ctr exec a.sif <TAB>: a program" "sh " "$(complete_words ctr exec a.sif s)"
expect_eq "ctr sif hea<TAB>: a nested command" "header " "$(complete_words ctr sif hea)"
expect_eq "ctr help ex<TAB>" "exec " "$(complete_words ctr help ex)"

note "the modulefile, loaded by Environment Modules"
modules_init=/usr/share/modules/init/bash
if [ ! -r "$modules_init" ]; then
  note "SKIP modulefile: Environment Modules is not installed (apt-get install environment-modules)"
else
  mkdir -p "$WORK/modulefiles/ctr"
  cp "$prefix/share/ctr/modulefiles/ctr" "$WORK/modulefiles/ctr/0.1.0"
  sed -i "s|^set ctr_root .*|set ctr_root $prefix|" "$WORK/modulefiles/ctr/0.1.0"
  out=$(env -i HOME="$WORK" PATH=/usr/bin:/bin bash -c '
    . "$1"; module use "$2"; module load ctr/0.1.0 || exit 1
    command -v ctr; ctr --version; echo "MANPATH=$MANPATH"; complete -p ctr
    module unload ctr; echo "after unload: $(command -v ctr)"' bash "$modules_init" "$WORK/modulefiles" 2>&1) ||
    fail "module load ctr: $out"
  expect_contains "module load: ctr on PATH" "$prefix/bin/ctr" "$out"
  expect_contains "module load: ctr runs" "ctr version 0.1.0" "$out"
  expect_contains "module load: MANPATH" "MANPATH=$prefix/share/man" "$out"
  expect_contains "module load: completion" "complete -F _ctr ctr" "$out"
  case "$out" in *"after unload: $prefix/bin/ctr"*) fail "module unload left ctr on PATH: $out" ;; esac
  out=$(env -i HOME="$WORK" PATH=/usr/bin:/bin CTR_MODULE_ROOT="$WORK/nothing" bash -c '
    . "$1"; module use "$2"; module load ctr/0.1.0' bash "$modules_init" "$WORK/modulefiles" 2>&1) || true
  expect_contains "module load with no ctr tree: the error" "ctr: no ctr in $WORK/nothing/bin" "$out"
fi
echo "PASS: $TEST_NAME"
