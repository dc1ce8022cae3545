#!/bin/bash
# Issue 24, build side: root builds someone else's content. A base image's symlinks never
# lead %files, %files from, the metadata writers or inspect to the host (F1); sandboxes
# carry no setuid/setgid bits, file capabilities or device nodes, and a user's own setuid
# file does not become root's in a SIF (F2); the build log replaces a symlink in its place
# (F3); scratch directories are made only where nobody else can rename them (F4); a
# --build-arg value cannot carry a section into the definition (F10).
. "$(dirname "$0")/lib.sh"
ensure_test_user
ctr=$CTR_BIN
chmod 755 "$WORK"

# Host things an attacker wants: a root-only directory and file, and a secret.
victimdir=$WORK/rootonly && mkdir -m 700 "$victimdir"
victimfile=$WORK/rootfile && echo original > "$victimfile" && chmod 644 "$victimfile"
secret=$WORK/secret && echo SECRET-HOST-TEXT > "$secret" && chmod 600 "$secret"
echo payload-text > "$WORK/payload"

# The base image a user prepared (a directory; as Bootstrap: localimage takes it).
base=$WORK/base
make_demo_rootfs "$base"
rm -rf "$base/opt"
ln -s "$victimdir" "$base/opt"                       # absolute directory link
ln -s ../../../../../../../../"${victimdir#/}" "$base/rel"   # relative link climbing out
ln -sf "$victimfile" "$base/etc/motd"                # file link
ln -s "$secret" "$base/leak"                         # a link to a host secret
ln -s "$victimdir" "$base/d"
chown -R "$CTR_TEST_USER" "$base"

# image_cat SIF PATH / image_stat SIF PATH: a file of the SIF's squashfs and its listing, read
# with unsquashfs (a container would show the host's /tmp there, bound over the image's).
sif_offset() { "$ctr" inspect --ctr-json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["rootfs"]["offset"])'; }
image_cat() { unsquashfs -o "$(sif_offset "$1")" -cat "$1" "$2"; }
image_ls() { unsquashfs -o "$(sif_offset "$1")" -lls "$1" "$2" | grep -F "squashfs-root$2"; }

check_victims() {
  [ -z "$(ls -A "$victimdir")" ] || fail "$1: wrote into the host's $victimdir: $(ls -A "$victimdir")"
  expect_eq "$1: host file behind a link" original "$(cat "$victimfile")"
}

note "F1: %files into paths the base image made symlinks to host directories and files"
cat > "$WORK/files.def" <<EOF
Bootstrap: localimage
From: $base

%files
    $WORK/payload /opt/x
    $WORK/payload /rel/y
    $WORK/payload /etc/motd
    $WORK/payload /d/
    $WORK/payload /newdir/sub/z
EOF
"$ctr" build "$WORK/files.sif" "$WORK/files.def" 2> "$WORK/files.err" || { cat "$WORK/files.err"; fail "build with planted links"; }
check_victims "%files as root"
# Inside the image the links still lead where they point, inside it.
expect_eq "the copy through /opt lands in the image" payload-text "$(image_cat "$WORK/files.sif" "$victimdir/x")"
expect_eq "the copy through the climbing link" payload-text "$(image_cat "$WORK/files.sif" "$victimdir/y")"
expect_eq "a file link is replaced, not written through" payload-text "$(image_cat "$WORK/files.sif" /etc/motd)"
expect_contains "/etc/motd is a file now" "-rw" "$(image_ls "$WORK/files.sif" /etc/motd)"
expect_eq "into a directory link" payload-text "$(image_cat "$WORK/files.sif" "$victimdir/payload")"
expect_eq "parents made" payload-text "$(image_cat "$WORK/files.sif" /newdir/sub/z)"

note "F1: %files from a stage reads inside that stage, never through its links to the host"
cat > "$WORK/from.def" <<EOF
Bootstrap: localimage
From: $base
Stage: one

Bootstrap: localimage
From: $base
Stage: two

%files from one
    /leak /leaked
    /etc/motd /motd-copy
EOF
"$ctr" build "$WORK/from.sif" "$WORK/from.def" 2> "$WORK/from.err" || { cat "$WORK/from.err"; fail "%files from"; }
expect_contains "a link is copied as a link" "/leaked -> $secret" "$(image_ls "$WORK/from.sif" /leaked)"
for src in /d/secret "/d/*" "/leak/.."; do
  printf 'Bootstrap: localimage\nFrom: %s\nStage: one\n\nBootstrap: localimage\nFrom: %s\n\n%%files from one\n    %s /got\n' \
    "$base" "$base" "$src" > "$WORK/from-bad.def"
  cp "$secret" "$victimdir/secret"
  if "$ctr" build "$WORK/from-bad.sif" "$WORK/from-bad.def" 2> "$WORK/from-bad.err"; then
    ! image_cat "$WORK/from-bad.sif" /got 2>/dev/null | grep -q SECRET || fail "%files from one $src: host secret in the image"
    rm -f "$WORK/from-bad.sif"
  else
    expect_contains "%files from one $src: the error" "error: " "$(cat "$WORK/from-bad.err")"
    ! grep -q SECRET "$WORK/from-bad.err" || fail "%files from one $src: the secret in the error"
  fi
  rm -f "$victimdir/secret"
done

note "F1: metadata writers and inspect resolve inside the image"
meta=$WORK/meta-base && make_demo_rootfs "$meta"
rm -rf "$meta/.singularity.d" && ln -s "$victimdir" "$meta/.singularity.d"
printf 'Bootstrap: localimage\nFrom: %s\n\n%%runscript\n    echo hi\n%%labels\n    A b\n' "$meta" > "$WORK/meta.def"
"$ctr" build "$WORK/meta.sif" "$WORK/meta.def" 2> "$WORK/meta.err" || { cat "$WORK/meta.err"; fail "metadata through a planted .singularity.d"; }
check_victims "metadata as root"
expect_contains "runscript written inside the image" "echo hi" "$("$ctr" inspect --runscript "$WORK/meta.sif")"
leaky=$WORK/leaky-base && make_demo_rootfs "$leaky"
ln -sf "$secret" "$leaky/.singularity.d/runscript"
ln -sf "$secret" "$leaky/.singularity.d/labels.json"
printf 'Bootstrap: localimage\nFrom: %s\n' "$leaky" > "$WORK/leaky.def"
"$ctr" build "$WORK/leaky.sif" "$WORK/leaky.def" 2> "$WORK/leaky.err" || true
! grep -aq SECRET-HOST-TEXT "$WORK/leaky.sif" 2>/dev/null || fail "the host secret reached the SIF's metadata"
! "$ctr" inspect --runscript "$leaky" 2>/dev/null | grep -q SECRET || fail "inspect of a directory read through its link"

note "F2: a root-built sandbox keeps no setuid file, capability or device node"
priv=$WORK/priv-base && make_demo_rootfs "$priv"
cp "$priv/bin/busybox" "$priv/bin/suidsh" && chmod 4755 "$priv/bin/suidsh"
cp "$priv/bin/busybox" "$priv/bin/sgidsh" && chmod 2755 "$priv/bin/sgidsh"
mknod "$priv/dev/mynull" c 1 3 && mknod "$priv/blockdev" b 7 0
cp "$priv/bin/busybox" "$priv/bin/capsh"
# security.capability v2: cap_net_raw (13) permitted and effective.
python3 -c 'import os,struct,sys; os.setxattr(sys.argv[1], "security.capability", struct.pack("<IIIII", 0x02000001, 1<<13, 0, 0, 0))' "$priv/bin/capsh"
printf 'Bootstrap: localimage\nFrom: %s\n' "$priv" > "$WORK/priv.def"
"$ctr" build --sandbox "$WORK/sandbox" "$WORK/priv.def" 2> "$WORK/sandbox.err" || { cat "$WORK/sandbox.err"; fail "sandbox build"; }
expect_contains "the note" "dropped from the sandbox: 2 setuid/setgid bits, 1 file capabilities, 2 device nodes" "$(cat "$WORK/sandbox.err")"
[ -z "$(find "$WORK/sandbox" -xdev -perm /6000 -type f)" ] || fail "setuid files in the sandbox: $(find "$WORK/sandbox" -perm /6000 -type f)"
[ -z "$(find "$WORK/sandbox" -xdev \( -type c -o -type b \))" ] || fail "device nodes in the sandbox"
python3 -c 'import os,sys; os.getxattr(sys.argv[1], "security.capability")' "$WORK/sandbox/bin/capsh" 2>/dev/null &&
  fail "file capability kept in the sandbox"
"$ctr" build --sandbox --keep-privileged-files "$WORK/sandbox-keep" "$WORK/priv.def" 2> "$WORK/keep.err" ||
  { cat "$WORK/keep.err"; fail "sandbox build --keep-privileged-files"; }
expect_contains "the warning" "warning: --keep-privileged-files" "$(cat "$WORK/keep.err")"
expect_eq "kept on request" 2 "$(find "$WORK/sandbox-keep" -xdev -perm /6000 -type f | wc -l)"
"$ctr" build --keep-privileged-files "$WORK/x.sif" "$WORK/priv.def" 2> "$WORK/keep-sif.err" && fail "--keep-privileged-files without --sandbox"
expect_contains "one line" "--keep-privileged-files applies to --sandbox builds" "$(cat "$WORK/keep-sif.err")"
rm -rf "$WORK/sandbox" "$WORK/sandbox-keep"

note "F2: a user's own setuid file does not become root's setuid in a SIF"
userdir=$WORK/userdir && mkdir "$userdir" && chown "$CTR_TEST_USER" "$userdir"
as_user sh -c "cp -a '$priv' '$userdir/tree' 2>/dev/null; rm -f '$userdir/tree/dev/mynull' '$userdir/tree/blockdev'; chmod 4755 '$userdir/tree/bin/suidsh'; chmod 2755 '$userdir/tree/bin/sgidsh'"
[ -u "$userdir/tree/bin/suidsh" ] || fail "setup: the user's setuid file"
printf 'Bootstrap: localimage\nFrom: %s\n' "$userdir/tree" > "$userdir/local.def"
as_user "$ctr" build "$userdir/local.sif" "$userdir/local.def" 2> "$WORK/local.err" || { cat "$WORK/local.err"; fail "user's localimage build"; }
as_user "$ctr" build "$userdir/dir.sif" "$userdir/tree" 2> "$WORK/dir.err" || { cat "$WORK/dir.err"; fail "user's directory build"; }
printf 'Bootstrap: localimage\nFrom: %s\n%%files\n    %s /bin/suidcopy\n' "$base" "$userdir/tree/bin/suidsh" > "$userdir/files.def"
as_user "$ctr" build "$userdir/files.sif" "$userdir/files.def" 2> "$WORK/ufiles.err" || { cat "$WORK/ufiles.err"; fail "user's %files build"; }
# Mode and owner as the image holds them.
for sif in local.sif dir.sif; do
  for f in /bin/suidsh /bin/sgidsh; do
    expect_contains "$sif: $f" "-rwxr-xr-x root/root" "$(image_ls "$userdir/$sif" "$f")"
  done
done
expect_contains "files.sif: /bin/suidcopy" "-rwxr-xr-x root/root" "$(image_ls "$userdir/files.sif" /bin/suidcopy)"

note "F3: the build log replaces a symlink in its place"
ln -s "$victimfile" "$userdir/job.sif.build.log"
printf 'Bootstrap: localimage\nFrom: %s\n' "$base" > "$WORK/plain.def"
"$ctr" build "$userdir/job.sif" "$WORK/plain.def" 2> "$WORK/log.err" || { cat "$WORK/log.err"; fail "build beside a planted log link"; }
check_victims "build log"
[ -f "$userdir/job.sif.build.log" ] && [ ! -L "$userdir/job.sif.build.log" ] || fail "the log is not a file of its own"

note "F4: root's scratch directory is not made where the user can rename it"
printf 'Bootstrap: localimage\nFrom: %s\n%%setup\n    echo "$APPTAINER_ROOTFS" > %s\n' "$base" "$WORK/rootfs-at" > "$WORK/where.def"
"$ctr" build "$userdir/where.sif" "$WORK/where.def" 2> "$WORK/where.err" || { cat "$WORK/where.err"; fail "build into the user's directory"; }
case "$(cat "$WORK/rootfs-at")" in "$userdir"/*) fail "root's build worked in the user's directory: $(cat "$WORK/rootfs-at")";; esac
"$ctr" build "$WORK/where-root.sif" "$WORK/where.def" 2> "$WORK/where.err" || { cat "$WORK/where.err"; fail "build into root's directory"; }
case "$(cat "$WORK/rootfs-at")" in "$WORK"/.where-root.sif.build.*) ;; *) fail "a private output directory should hold the scratch: $(cat "$WORK/rootfs-at")";; esac
# A user who swaps every dot-entry of the directory for a link to a root-only one, while
# root builds and packs there.
as_user sh -c "end=\$((\$(date +%s) + 6)); while [ \$(date +%s) -lt \$end ]; do for e in '$userdir'/.job2*; do [ -e \"\$e\" ] || continue; mv \"\$e\" \"\$e.moved\" 2>/dev/null && ln -s '$victimdir' \"\$e\" 2>/dev/null; done; done" &
swapper=$!
for i in 1 2 3; do "$ctr" build --force "$userdir/job2.sif" "$WORK/files.def" 2>/dev/null || true; done
wait "$swapper" || true
check_victims "swapped scratch entries"
ls -A "$userdir" | grep -v -E '^(job|local|dir|where|tree|local\.def|\.job2.*)' >/dev/null || true

note "F10: a --build-arg value cannot carry a section"
printf 'Bootstrap: localimage\nFrom: %s\n%%post\n    echo {{ GREETING }}\n' "$base" > "$userdir/arg.def"
chown "$CTR_TEST_USER" "$userdir/arg.def"
for value in "$(printf 'hi\n%%setup\n    touch %s/injected' "$userdir")" "$(printf 'hi\r%%setup')"; do
  as_user "$ctr" build "$userdir/arg.sif" "$userdir/arg.def" --build-arg "GREETING=$value" 2> "$WORK/arg.err" &&
    fail "a build-arg with a line break was accepted"
  expect_contains "names the argument" "--build-arg GREETING: the value holds a" "$(cat "$WORK/arg.err")"
  expect_eq "one line" 1 "$(wc -l < "$WORK/arg.err" | tr -d ' ')"
done
[ ! -e "$userdir/injected" ] || fail "the injected %setup ran on the host"
printf 'GREETING=a\\nb\n' > "$userdir/args"
as_user "$ctr" build "$userdir/arg.sif" "$userdir/arg.def" --build-arg-file "$userdir/args" 2>/dev/null ||
  fail "a literal backslash-n in --build-arg-file is one line and fine"

check_victims "end"
assert_no_leftovers
echo "PASS: $TEST_NAME"
