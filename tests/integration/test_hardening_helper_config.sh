#!/bin/bash
# Issue 51, L5, L6 and L8, against the helper installed setuid root, as the unprivileged
# test user:
#  - L5: a ctr.conf key the helper does not know is refused, as ctr refuses it: a misspelt
#    'setuid image directories' used to be skipped, which meant "anywhere". The two parsers
#    agree on which files are valid (helper-config-agreement, generated inputs).
#  - L6: an entry of 'setuid image directories' allows something only where no user could
#    have made it: a missing directory, a symlink a user planted there, a directory a user
#    owns or may write, or a symlink anywhere in the path allows nothing.
#  - L8: ctr-suid's postrm keeps /run/ctr-helper while a loop device its index names is
#    attached (the helper's mounts live in private mount namespaces: the host's mountinfo
#    never shows them), and removes it once nothing is.
CTR_HELPER_SOURCE_ONLY=1 . "$(dirname "${BASH_SOURCE[0]}")/test_helper_security.sh"

note "TheTwoConfigParsersAgree (helper-config-agreement)"
agree=${CTR_BUILD_DIR:-}/bin/helper-config-agreement
[ -x "$agree" ] || fail "$agree is missing: build the target helper-config-agreement"
out=$("$agree" "$CTR_SOURCE_DIR/etc/ctr.conf" 23000) ||
  fail "the helper's and ctr's ctr.conf parsers disagree: $out"
note "$out"

helper_fixture

note "RefusesUnknownKeys (L5)"
mkdir -p "$WORK/allowed" "$WORK/other"
chmod 755 "$WORK/allowed" "$WORK/other"
cp -p "$IMAGES/good.sif" "$WORK/allowed/a.sif"
cp -p "$IMAGES/good.sif" "$WORK/other/b.sif"
write_conf "allow setuid = yes" "setuid image directories = $WORK/allowed"
expect_refused "control: outside the directories" "is not under any 'setuid image directories'" "$WORK/other/b.sif" marker
# The admin misspells the key: ctr refuses the file, and so must the helper, called directly.
write_conf "allow setuid = yes" "setuid image directory = $WORK/allowed"
set +e; ctr_out=$(CTR_CONFIG="$CONF" "$CTR_BIN" cache list 2>&1); set -e
expect_contains "ctr on the misspelt key" "$CONF:2: unknown key 'setuid image directory'" "$ctr_out"
expect_refused "a misspelt 'setuid image directories'" "line 2: unknown key 'setuid image directory'" \
  "$WORK/other/b.sif" marker
write_conf "allow setuid = yes" "Allow setuid = yes"
expect_refused "a key in another case" "line 2: unknown key 'Allow setuid'" "$IMAGES/good.sif" marker
write_conf "allow setuid = yes" "= yes"
expect_refused "a line without a key" "line 2: unknown key ''" "$IMAGES/good.sif" marker
# Every key ctr knows is accepted: the shipped ctr.conf, with the helper allowed.
{ echo "allow setuid = yes"; grep -v '^allow setuid' "$CTR_SOURCE_DIR/etc/ctr.conf"; } >"$CONF"
run_helper "$IMAGES/good.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "the shipped ctr.conf with 'allow setuid = yes' was refused ($RC): $OUT"
no_leftovers "unknown keys"

note "MissingOrPlantableDirectoryAllowsNothing (L6)"
# /scratch-like: root-owned, world-writable and sticky, as shared scratch space is. The admin
# configured $OPEN/images before creating it.
OPEN="$WORK/open"
mkdir -p "$OPEN"; chmod 1777 "$OPEN"
write_conf "allow setuid = yes" "setuid image directories = $OPEN/images"
expect_refused "control: a missing directory" "is not under any 'setuid image directories'" "$WORK/other/b.sif" marker
# The user plants the name as a symlink to where a root-owned image is.
as_user ln -s "$WORK/other" "$OPEN/images"
expect_refused "a symlink a user planted at a missing directory" "allows nothing: a symlink)" "$OPEN/images/b.sif" marker
expect_refused "the same image by its own path" "allows nothing" "$WORK/other/b.sif" marker
rm "$OPEN/images"
expect_refused "a missing directory, why" "($OPEN/images allows nothing: missing)" "$WORK/other/b.sif" marker
# ... or as a directory of their own, with an image of their own, where owners have 'self'.
as_user mkdir "$OPEN/images"
as_user cp "$IMAGES/good.sif" "$OPEN/images/mine.sif"
write_conf "allow setuid = yes" "setuid image directories = $OPEN/images" "setuid image owners = root, self"
expect_refused "a directory a user created" "($OPEN/images allows nothing: not owned by root)" "$OPEN/images/mine.sif" marker
rm -rf "$OPEN/images"
# A root-owned directory others may write into, sticky or not: what they put there is under it.
mkdir -m 1777 "$OPEN/images"; chmod 1777 "$OPEN/images"
as_user cp "$IMAGES/good.sif" "$OPEN/images/mine.sif"
expect_refused "a root-owned sticky directory anyone may write" "allows nothing: writable by group or others" \
  "$OPEN/images/mine.sif" marker
rm -rf "$OPEN/images"
# A symlink anywhere in the configured path, even root's own: the real path is what counts.
mkdir -m 755 "$OPEN/images"
ln -s "$OPEN" "$WORK/link-to-open"
write_conf "allow setuid = yes" "setuid image directories = $WORK/link-to-open/images"
cp -p "$IMAGES/good.sif" "$OPEN/images/root.sif"
expect_refused "a symlink in the configured path" "allows nothing: $WORK/link-to-open is a symlink" "$OPEN/images/root.sif" marker
write_conf "allow setuid = yes" "setuid image directories = $OPEN/../open/images"
expect_refused "'..' in the configured path" "allows nothing: not a canonical path" "$OPEN/images/root.sif" marker
# Control: a directory root made, below a sticky root-owned one (as /scratch or /tmp), named
# with a trailing '/': images in it are allowed, by any path that leads there.
write_conf "allow setuid = yes" "setuid image directories = /nonexistent/images, $OPEN/images/"
run_helper "$OPEN/images/root.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "control: an image in a root-made directory ($RC): $OUT"
run_helper "$WORK/link-to-open/images/root.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "control: the same through a symlink of the image's path ($RC): $OUT"
expect_refused "control: outside it" "is not under any" "$WORK/other/b.sif" marker
# A user who may write a directory above it can replace it: it allows nothing.
chmod 777 "$OPEN"
expect_refused "a directory above it writable by others (not sticky)" "allows nothing: $OPEN is writable by group or others" \
  "$OPEN/images/root.sif" marker
chmod 1777 "$OPEN"
no_leftovers "image directories"

note "PostrmKeepsTheRunDirectoryWhileAnImageIsAttached (L8)"
postrm="$WORK/ctr-suid.postrm"
sed "s|@CTR_HELPER_RUNDIR@|$HELPER_RUNDIR|g" "$CTR_SOURCE_DIR/packaging/deb/ctr-suid.postrm.in" >"$postrm"
write_conf "allow setuid = yes"
as_user "$HELPER" "$IMAGES/good.sif" hold 60 >"$WORK/hold" 2>&1 &
holder=$!
for i in $(seq 100); do grep -q HELD "$WORK/hold" && break; sleep 0.05; done
grep -q HELD "$WORK/hold" || fail "the held launch did not start: $(cat "$WORK/hold")"
note "attached: $(losetup -a)"
set +e; out=$(sh "$postrm" remove 2>&1); rc=$?; set -e
[ "$rc" = 0 ] || fail "postrm remove failed ($rc): $out"
[ -d "$HELPER_RUNDIR/loop" ] || fail "postrm removed $HELPER_RUNDIR while a container's image is attached: $out"
expect_contains "postrm's message" "ctr-suid: $HELPER_RUNDIR kept" "$out"
note "postrm with an image attached: $out"
pkill -KILL -u "$CTR_TEST_USER" -f "^sleep 60" 2>/dev/null || true
kill -KILL "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
no_leftovers "held launch"
set +e; out=$(sh "$postrm" purge 2>&1); rc=$?; set -e
[ "$rc" = 0 ] && [ -z "$out" ] || fail "postrm purge with nothing attached ($rc): $out"
[ ! -e "$HELPER_RUNDIR" ] || fail "postrm kept $HELPER_RUNDIR with nothing attached: $(ls -R "$HELPER_RUNDIR")"
# The helper makes it again at its next launch.
run_helper "$IMAGES/good.sif" marker
[ "$RC" = 0 ] && [ "$OUT" = good ] || fail "a launch after the run directory went ($RC): $OUT"
no_leftovers "after postrm"

echo "PASS: $TEST_NAME"
