#!/bin/bash
# Issue 15, a relocatable install: a tree installed under one prefix, or unpacked from the
# build's tarball, and then moved works where it lands, as the unprivileged test user: ctr
# reads the ctr.conf beside it, finds its FUSE servers (ctr-squashfs, squashfuse_ll) in its
# own libexec/ctr before $PATH, and runs a directory image and a SIF through them. A node
# without the server ctr.conf asks for gets an error naming the program and where it was
# looked for (not "exit status 127").
# Also: `make install DESTDIR=...` lays out the tree under the staging directory.
. "$(dirname "$0")/lib.sh"

ensure_test_user
require_fuse
CTR_BUILD_DIR=${CTR_BUILD_DIR:?CTR_BUILD_DIR must name the build tree (ctest sets it)}
command -v cpack >/dev/null || skip "cpack (CMake's packager) is not installed"
SQUASHFUSE=$(command -v squashfuse_ll)

# The build's own install with DESTDIR: every file under the staging directory, nothing
# outside it.
DEST=$WORK/destdir
DESTDIR=$DEST cmake --install "$CTR_BUILD_DIR" >"$WORK/destdir.log" 2>&1 ||
  { cat "$WORK/destdir.log"; fail "DESTDIR install failed"; }
staged=$DEST$CTR_INSTALL_PREFIX
for f in bin/ctr etc/ctr/ctr.conf etc/ctr/seccomp-default.json libexec/ctr/ctr-mount-helper share/doc/ctr/admin-guide.md; do
  [ -e "$staged/$f" ] || fail "DESTDIR install lacks $f: $(cd "$DEST" && find . | head -30)"
done
expect_eq "DESTDIR install: files outside the prefix" "" "$(cd "$DEST" && find . -type f | grep -v "^.$CTR_INSTALL_PREFIX/" || true)"
rm -rf "$DEST"

# An install into a prefix other than the configured one: the helper stays an ordinary file
# (its paths are compiled in), then the tree moves.
cmake --install "$CTR_BUILD_DIR" --prefix "$WORK/first-prefix" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; fail "cmake --install --prefix failed"; }
helper_mode=$(stat -c %a "$WORK/first-prefix/libexec/ctr/ctr-mount-helper")
expect_eq "helper installed under another prefix: mode" 755 "$helper_mode"
mkdir -p "$WORK/apps/ctr"
mv "$WORK/first-prefix" "$WORK/apps/ctr/moved"
TREE=$WORK/apps/ctr/moved
[ ! -e "$WORK/first-prefix" ] || fail "the first prefix is still there"

# The tarball: a tree without the helper, unpacked somewhere and moved again.
cpack --config "$CTR_BUILD_DIR/CPackConfig.cmake" -B "$WORK/pkg" >"$WORK/cpack.log" 2>&1 ||
  { cat "$WORK/cpack.log"; fail "cpack failed"; }
tarball=$(ls "$WORK"/pkg/ctr-*.tar.gz)
listing=$(tar -tzvf "$tarball")
expect_contains "tarball" "/bin/ctr" "$listing"
expect_contains "tarball" "/etc/ctr/ctr.conf" "$listing"
case "$listing" in *ctr-mount-helper*) fail "the tarball carries the setuid helper: $listing";; esac
case "$listing" in *rws*) fail "the tarball carries a setuid file: $listing";; esac
mkdir "$WORK/unpacked"
tar -C "$WORK/unpacked" -xzf "$tarball"
top=$(ls "$WORK/unpacked")
mv "$WORK/unpacked/$top" "$WORK/apps/ctr/from-tarball"
chmod -R go+rX "$WORK/apps"

# Each tree's own ctr.conf (not the configured prefix's, not $CTR_CONFIG) binds a marker
# directory and says squashfuse, with no lingering holder.
mkdir -p "$WORK/marker"
make_demo_rootfs "$WORK/demo"
mkdir -p "$WORK/demo/mnt/marker"
for tree in "$TREE" "$WORK/apps/ctr/from-tarball"; do
  echo "relocated-$(basename "$tree")" > "$WORK/marker/$(basename "$tree")"
  printf 'image driver = squashfuse\nimage linger = 0\nbind path = %s:/mnt/marker\n' "$WORK/marker" \
    > "$tree/etc/ctr/ctr.conf"
done
chmod -R go+rX "$WORK/marker" "$WORK/apps"

# NOPATH: a PATH without squashfuse_ll (nor anything else), so only the tree can supply it.
NOPATH=$WORK/empty-bin
mkdir -p "$NOPATH"
run_as_user() { set +e; OUT=$(as_user env PATH="$1" "${@:2}" 2>&1); RC=$?; set -e; }

for tree in "$TREE" "$WORK/apps/ctr/from-tarball"; do
  name=$(basename "$tree")
  note "$name: a directory image, PATH as usual"
  run_as_user /usr/bin:/bin "$tree/bin/ctr" exec "$WORK/demo" cat "/mnt/marker/$name"
  expect_eq "$name: directory image: status ($OUT)" 0 "$RC"
  expect_eq "$name: the tree's ctr.conf bound the marker" "relocated-$name" "$OUT"
done

# A SIF built by the moved tree (mksquashfs from $PATH), run through the tree's ctr-squashfs
# where the build has it, else squashfuse_ll from $PATH.
mkdir "$WORK/images"
chown "$CTR_TEST_USER" "$WORK/images"
run_as_user /usr/bin:/bin "$TREE/bin/ctr" build "$WORK/images/demo.sif" "$WORK/demo"
expect_eq "ctr build from the moved tree: status ($OUT)" 0 "$RC"
run_as_user /usr/bin:/bin "$TREE/bin/ctr" exec "$WORK/images/demo.sif" cat /mnt/marker/moved
expect_eq "SIF, the tree's server: status ($OUT)" 0 "$RC"
expect_eq "SIF, the tree's server" "relocated-moved" "$OUT"
if [ -x "$TREE/libexec/ctr/ctr-squashfs" ]; then
  run_as_user /usr/bin:/bin "$TREE/bin/ctr" exec --explain "$WORK/images/demo.sif" true
  expect_contains "the moved tree's ctr-squashfs serves the image" "server:     $TREE/libexec/ctr/ctr-squashfs" "$OUT"
fi
assert_nothing_left "SIF from the moved tree"

# The rest is about squashfuse_ll, which the tree's ctr.conf now asks for.
printf 'squashfs server = squashfuse\n' >> "$TREE/etc/ctr/ctr.conf"

# No squashfuse_ll on PATH, nor in the tree, nor under the configured prefix: the error
# names the program and where it looked.
[ ! -e "$CTR_INSTALL_PREFIX/libexec/ctr/squashfuse_ll" ] ||
  skip "$CTR_INSTALL_PREFIX/libexec/ctr/squashfuse_ll exists here, so squashfuse_ll cannot be missing"
run_as_user "$NOPATH" "$TREE/bin/ctr" exec "$WORK/images/demo.sif" true
expect_eq "missing squashfuse_ll: status" 255 "$RC"
expect_eq "missing squashfuse_ll: one line" 1 "$(printf '%s\n' "$OUT" | wc -l)"
expect_contains "missing squashfuse_ll" "squashfuse_ll not found (looked in $TREE/libexec/ctr, $CTR_INSTALL_PREFIX/libexec/ctr, \$PATH=$NOPATH): install squashfuse" "$OUT"
case "$OUT" in *"exit status 127"*) fail "missing squashfuse_ll still reported as a failed exec: $OUT";; esac
run_as_user "$NOPATH" "$TREE/bin/ctr" check
expect_contains "ctr check without squashfuse_ll" "squashfuse: squashfuse_ll not found" "$OUT"
assert_nothing_left "the failed launch"

# The same PATH, with squashfuse_ll dropped into the tree's libexec/ctr: found there.
cp "$SQUASHFUSE" "$TREE/libexec/ctr/squashfuse_ll"
run_as_user "$NOPATH" "$TREE/bin/ctr" exec "$WORK/images/demo.sif" cat /mnt/marker/moved
expect_eq "SIF, squashfuse_ll from the tree's libexec: status ($OUT)" 0 "$RC"
expect_eq "SIF, squashfuse_ll from the tree's libexec" "relocated-moved" "$OUT"
run_as_user "$NOPATH" "$TREE/bin/ctr" check
expect_contains "ctr check names the tree's squashfuse_ll" "[ok] squashfuse: $TREE/libexec/ctr/squashfuse_ll" "$OUT"
assert_nothing_left "SIF with the tree's squashfuse_ll"

# Through a symlink from elsewhere (a user's ~/bin): /proc/self/exe is the tree's ctr.
mkdir -p "$WORK/userbin"
ln -s "$WORK/apps/ctr/from-tarball/bin/ctr" "$WORK/userbin/ctr"
run_as_user /usr/bin:/bin "$WORK/userbin/ctr" exec "$WORK/images/demo.sif" cat /mnt/marker/from-tarball
expect_eq "SIF through a symlink to the tarball tree: status ($OUT)" 0 "$RC"
expect_eq "SIF through a symlink to the tarball tree" "relocated-from-tarball" "$OUT"
assert_nothing_left "SIF from the tarball tree"
assert_no_leftovers
note "relocated trees: ok"
