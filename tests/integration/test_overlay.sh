# Persistent overlays (issue 28, item 3), as an ordinary user: --overlay DIR keeps a run's
# changes in DIR/upper (created with DIR/work when missing, Apptainer's layout), and the next
# run sees them, writable or read-only (DIR:ro); read-only directories stack in the order
# given, the first on top; deletions and re-created directories survive between runs
# (whiteouts, opaque directories in user.overlay.* attributes); read-only layers alone give
# a read-only root; one writer per directory, no reader while it writes (the image's holder
# keeps the locks while the container lives, an instance's too); specs
# overlayfs cannot take are refused in one line; --writable writes into a sandbox
# directory image; nothing is left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
require_kernel_mount_api
require_userns_overlay
use_linger 0
demo_for_user
run() { as_user env -C "$U" "$CTR_BIN" exec "$@"; }

# A writable layer keeps overlayfs's marks in user.overlay.* attributes of the directory's
# file system (Linux >= 5.11, and a file system with user extended attributes).
probe="$U/probe"
as_user mkdir -p "$probe/l/d" "$probe/u" "$probe/w" "$probe/m"
if ! as_user unshare -Urm sh -c "mount -t overlay overlay -o lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w,userxattr $probe/m && rmdir $probe/m/d && mkdir $probe/m/d" 2>/dev/null; then
  skip "overlayfs with userxattr cannot be mounted over $U by an unprivileged user here ($(uname -r), $(stat -f -c %T "$U"))"
fi
rm -rf "$probe"

note "--explain: the layers, top first, and their locks"
as_user mkdir -p "$U/tools/stack" "$U/tools/env2" "$U/more/stack"
as_user sh -c "echo tools > $U/tools/stack/which; echo more > $U/more/stack/which; echo kept > $U/tools/env2/a"
explain=$(run --explain --overlay more:ro --overlay env --overlay "$U/tools:ro" "$img" true)
expect_contains "the writable layer first" "layer:    $U/env/upper (writable upper layer, work $U/env/work" "$explain"
expect_contains "created if missing" "$U/env created if missing; locked exclusively" "$explain"
[ "$(grep -n "layer:    $U/more (read-only" <<<"$explain" | cut -d: -f1)" -lt \
  "$(grep -n "layer:    $U/tools (read-only" <<<"$explain" | cut -d: -f1)" ] ||
  fail "read-only layers not in the order given: $explain"
[ ! -e "$U/env" ] || fail "--explain created the overlay directory"
json=$(run --explain --json --overlay env "$img" true)
expect_eq "json: upper" overlay "$(jq -r .overlay.upper <<<"$json")"
expect_eq "json: lock" exclusive "$(jq -r '.overlay.layers[0].lock' <<<"$json")"

note "a conda-style environment installed in one run is there in the next, writable and read-only"
run --overlay env "$img" sh -c 'mkdir -p /env/bin && printf "#!/bin/sh\necho tool from the overlay\n" > /env/bin/tool && chmod +x /env/bin/tool'
[ -d "$U/env/upper" ] && [ -d "$U/env/work" ] || fail "env/upper and env/work not created: $(ls -la "$U/env")"
expect_eq "the file is the user's on the host" "$CTR_TEST_USER" "$(stat -c %U "$U/env/upper/env/bin/tool")"
expect_eq "next run, writable" "tool from the overlay" "$(run --overlay env "$img" /env/bin/tool)"
expect_eq "next run, read-only" "tool from the overlay" "$(run --overlay env:ro "$img" /env/bin/tool)"
out=$(run --overlay env:ro "$img" sh -c 'echo x > /env/bin/other' 2>&1) && fail "a read-only layer took a write"
expect_contains "read-only" "Read-only file system" "$out"
expect_eq "the image is still below" "$(run "$img" cat /etc/os-release | head -1)" "$(run --overlay env "$img" cat /etc/os-release | head -1)"

note "read-only layers stack in the order given (the first on top); alone, they make a read-only root"
expect_eq "first given on top" more "$(run --overlay more:ro,tools:ro "$img" cat /stack/which)"
expect_eq "the other order" tools "$(run --overlay tools:ro --overlay more:ro "$img" cat /stack/which)"
out=$(run --overlay tools:ro "$img" touch /new 2>&1) && fail "read-only layers alone gave a writable root"
expect_contains "read-only root" "Read-only file system" "$out"

note "a directory of a lower layer deleted and made again stays empty in later runs (opaque, user.overlay.*)"
run --overlay env --overlay tools:ro "$img" sh -c 'rm -r /env2 && mkdir /env2 && echo new > /env2/b'
expect_eq "later run" "b" "$(run --overlay env --overlay tools:ro "$img" ls /env2)"
expect_eq "the lower layer is untouched" kept "$(cat "$U/tools/env2/a")"

note "locks: one writer, no reader while it writes; readers share"
rm -f "$U/stop"
wait_stop='while [ ! -e '"$U"'/stop ]; do sleep 0.05; done'
run --overlay env "$img" sh -c "touch $U/started; $wait_stop" &
writer=$!
for _ in $(seq 200); do [ -e "$U/started" ] && break; sleep 0.05; done
out=$(run --overlay env "$img" true 2>&1) && fail "a second writer got the overlay"
expect_eq "second writer: one line" 1 "$(wc -l <<<"$out")"
expect_contains "second writer" "ctr: error: --overlay $U/env: in use by another container" "$out"
out=$(run --overlay env:ro "$img" true 2>&1) && fail "a reader got the overlay while it was written"
expect_contains "reader" "--overlay $U/env: open writable in another container" "$out"
as_user touch "$U/stop"
wait "$writer" || fail "the writer failed"
run --overlay env:ro "$img" true || fail "a reader was refused once the writer had ended"
rm -f "$U/stop" "$U/started"
run --overlay env:ro "$img" sh -c "touch $U/started; $wait_stop" &
reader=$!
for _ in $(seq 200); do [ -e "$U/started" ] && break; sleep 0.05; done
run --overlay env:ro "$img" true || fail "a second reader was refused"
out=$(run --overlay env "$img" true 2>&1) && fail "a writer got the overlay while it was read"
expect_contains "writer beside a reader" "in use by another container" "$out"
as_user touch "$U/stop"
wait "$reader" || fail "the reader failed"

note "an instance holds its writable overlay until it stops"
as_user env -C "$U" "$CTR_BIN" instance start --overlay env "$img" ovl
run instance://ovl sh -c 'echo from-instance > /env/i'
out=$(run --overlay env:ro "$img" true 2>&1) && fail "a reader got the instance's writable overlay"
as_user "$CTR_BIN" instance stop ovl >/dev/null
expect_eq "after stop" from-instance "$(run --overlay env:ro "$img" cat /env/i)"

note "--writable: a sandbox directory image takes the changes itself"
as_user "$CTR_BIN" build --sandbox "$U/sb" "$img" >/dev/null 2>&1 || fail "build --sandbox"
run --writable "$U/sb" sh -c 'echo changed > /etc/written'
expect_eq "kept in the sandbox" changed "$(cat "$U/sb/etc/written")"
out=$(run "$U/sb" touch /etc/other 2>&1) && fail "a sandbox without --writable took a write"
expect_contains "read-only without --writable" "Read-only file system" "$out"
expect_eq "--fakeroot --writable: root's files" 0 "$(run -f -w "$U/sb" sh -c 'echo x > /etc/os-release && id -u')"
out=$(run --writable "$img" true 2>&1) && fail "--writable of a squashfs accepted"
expect_contains "--writable of an image file" "--writable needs a sandbox directory image" "$out"

note "a squashfs or SIF image stacks read-only, mounted by the image's holder"
mksquashfs "$U/tools" "$U/tools.sqfs" -quiet -noappend >/dev/null && chmod a+r "$U/tools.sqfs"
"$CTR_BIN" -q build "$U/more.sif" "$U/more" && chmod a+r "$U/more.sif"
expect_eq "a squashfs layer" tools "$(run --overlay tools.sqfs "$img" cat /stack/which)"
expect_eq "a SIF layer over it" more "$(run --overlay more.sif --overlay tools.sqfs "$img" cat /stack/which)"
expect_contains "--explain: the image layer" "(read-only image $U/tools.sqfs, mounted by the image's holder)" \
  "$(run --explain --overlay tools.sqfs "$img" true)"
expect_eq "a writable directory over an image layer" "tools changed" \
  "$(run --overlay envimg --overlay tools.sqfs "$img" sh -c 'echo "$(cat /stack/which) changed" > /stack/which; cat /stack/which')"
expect_eq "the change is in the directory" "tools changed" "$(cat "$U/envimg/upper/stack/which")"
expect_eq "the image is as it was" tools "$(run --overlay tools.sqfs "$img" cat /stack/which)"

note "what ctr cannot stack is refused in one line, exit 1, nothing created"
for spec_msg in "missing:ro|--overlay missing:ro: no such directory" \
                "a:b|a path with ':', ',' or '\\' cannot be an overlay layer" \
                "env --overlay tools|are both writable: at most one is"; do
  spec=${spec_msg%%|*} msg=${spec_msg#*|}
  # shellcheck disable=SC2086 # the two-option case splits on purpose
  out=$(run --overlay $spec "$img" true 2>&1) && fail "--overlay $spec accepted"
  rc=0; run --overlay $spec "$img" true >/dev/null 2>&1 || rc=$?
  expect_eq "--overlay $spec: exit" 1 "$rc"
  expect_eq "--overlay $spec: one line" 1 "$(wc -l <<<"$out")"
  expect_contains "--overlay $spec" "$msg" "$out"
done
[ ! -e "$U/missing" ] || fail "a refused overlay was created"

assert_nothing_left "overlays"
