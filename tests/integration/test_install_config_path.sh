#!/bin/bash
# One ctr.conf for ctr and the setuid helper, whatever the prefix: the helper reads the
# compiled-in path (CTR_SYSCONF_PATH, GNUInstallDirs' full sysconfdir), and ctr reads
# PREFIX/etc/ctr/ctr.conf beside itself where that exists, else the same compiled-in path.
# Where GNUInstallDirs puts the sysconfdir outside the prefix (a prefix under /opt:
# /etc/opt/NAME; /usr: /etc), an install that put ctr.conf under the prefix made two files,
# and an admin who set 'allow setuid = yes' where the guide says (the helper's) still got
# squashfuse: ctr read the other one. For each prefix the build tree is configured afresh
# (no build) and the top-level install (ctr.conf, the library lists, docs) run into a
# staging directory: exactly one ctr.conf, at the helper's path.
. "$(dirname "$0")/lib.sh"
command -v cmake >/dev/null || skip "cmake is missing"

check_prefix() {  # check_prefix WHAT CMAKE-ARGS...
  local what=$1 build=$WORK/build dest=$WORK/dest
  shift
  rm -rf "$build" "$dest"
  cmake -S "$CTR_SOURCE_DIR" -B "$build" -DCTR_BUILD_TESTS=OFF -DCTR_BUILD_BENCH=OFF "$@" >"$WORK/configure.log" 2>&1 ||
    { cat "$WORK/configure.log"; fail "$what: configure failed"; }
  local helper_path
  helper_path=$(sed -n 's/^const char\* const kSysconfPath = "\(.*\)";$/\1/p' "$build/generated/common/configured.cpp")
  [ -n "$helper_path" ] || fail "$what: no kSysconfPath in $build/generated/common/configured.cpp"
  # The top level's own install rules only (the programs are not built here); what comes
  # after the config files (the man pages, made by a build) may fail.
  DESTDIR=$dest cmake -DCMAKE_INSTALL_LOCAL_ONLY=ON -DCMAKE_INSTALL_COMPONENT=ctr -P "$build/cmake_install.cmake" \
    >"$WORK/install.log" 2>&1 || true
  local found
  found=$(cd "$dest" 2>/dev/null && find . -name ctr.conf | sed 's/^\.//')
  expect_eq "$what: the one ctr.conf installed is the one the helper reads" "$helper_path" "$found"
  note "$what: $found"
}

check_prefix "the default prefix (/usr/local)"
check_prefix "a prefix under /opt (GNUInstallDirs: /etc/opt/ctr)" -DCMAKE_INSTALL_PREFIX=/opt/ctr
check_prefix "prefix /usr (GNUInstallDirs: /etc)" -DCMAKE_INSTALL_PREFIX=/usr
check_prefix "prefix /usr with sysconfdir /etc (the deb preset)" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc
check_prefix "a module tree" -DCMAKE_INSTALL_PREFIX=/apps/ctr/0.1.0
echo "PASS: $TEST_NAME"
