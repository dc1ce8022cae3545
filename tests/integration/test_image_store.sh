#!/bin/bash
# The site image store (ctr.conf 'image store dir', issue 53 items 4 and 6) against a real
# registry on 127.0.0.1 (docker-registry, filled with skopeo), as two unprivileged users.
# A "node" is a node-local image cache of its own (CTR_CACHE_DIR); the store is one directory
# they all see, as a parallel file system is. Checked: a node's miss fills the store once and
# the user's other nodes run the store's copy without asking the registry for a layer (in
# place or copied: 'image store copy'); parallel first launches on several nodes fetch once;
# another user never runs a user's entry, and does run the store owner's; a corrupt or
# truncated entry is refetched, never run; a killed filler is taken over, a live one waited
# for and given up on after 'image store wait'; a full store costs a warning and no
# leftovers; offline, the store's copy runs; `ctr store list|size|clean|pull`.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry/common.sh"

command -v skopeo >/dev/null || skip "skopeo is not installed (apt-get install skopeo)"
ensure_test_user
require_fuse
use_linger 0
USER2=$(second_test_user)
TUID=$(id -u "$CTR_TEST_USER")
UID2=$(id -u "$USER2")

demo_layer "$WORK/l1.tgz"
for name in v2 par ro; do
  mkdir -p "$WORK/root-$name/etc" && echo "$name" > "$WORK/root-$name/etc/$name"
  tar -C "$WORK/root-$name" --numeric-owner --owner=0 --group=0 -czf "$WORK/$name.tgz" .
  cp "$WORK/l1.tgz" "$WORK/$name-base.tgz"
  layout_image "$WORK/layout-$name" 1 "$WORK/$name-base.tgz" "$WORK/$name.tgz"
done
layout_image "$WORK/layout1" 1 "$WORK/l1.tgz"

# The registry logs every request (level info): blob fetches are counted from its log.
serve_registry
sed -i 's/log: {level: error}/log: {level: info}/' "$WORK/registry.yml"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true
docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
wait_http "http://$REGISTRY/v2/" 200 || fail "docker-registry did not start: $(cat "$WORK/registry.log")"
trap 'kill $REGISTRY_PID 2>/dev/null || true; wait $REGISTRY_PID 2>/dev/null || true; umount "$WORK/full" "$WORK/ro-store" 2>/dev/null || true; rm -rf "$WORK"' EXIT
push() { skopeo copy -q --dest-tls-verify=false "oci:$1:1" "docker://$REGISTRY/$2"; }
push "$WORK/layout1" demo:1
push "$WORK/layout-v2" v2:1
push "$WORK/layout-par" par:1
push "$WORK/layout-ro" ro:1
blob_gets() { grep -c "GET /v2/$1/blobs/sha256:" "$WORK/registry.log" || true; }

STORE=$WORK/store
mkdir -m 1777 "$STORE"  # users fill it; root owns it, so root's entries are everyone's
chmod 1777 "$WORK"
cat >> "$CTR_TEST_CONFIG" <<EOF
image store dir = $STORE
image store copy = never
EOF
# on NODE [USER] CMD...: CMD as USER (the test user) with NODE's image cache.
on() {
  local node=$1 user=$CTR_TEST_USER
  shift
  if [ "$1" = "$USER2" ]; then user=$USER2; shift; fi
  ( cd "$WORK" && runuser -u "$user" -- env -i HOME="$(getent passwd "$user" | cut -d: -f6)" PATH=/usr/local/bin:/usr/bin:/bin \
      CTR_CONFIG="$CTR_TEST_CONFIG" CTR_CACHE_DIR="$WORK/node-$node-$user" "$@" )
}
ref=docker://$REGISTRY/demo:1

note "a node's miss fills the store once; the user's other nodes run it without a layer request"
out=$(on a "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/a.err") || fail "node a: $(cat "$WORK/a.err")"
expect_contains "the image runs" "ID=ctr-demo" "$out"
expect_contains "node a pulled" "pulling sha256:" "$(cat "$WORK/a.err")"
expect_contains "and kept it in the store" "keeping sha256:" "$(cat "$WORK/a.err")"
digest=$(sed -n 's/.*pulling \(sha256:[0-9a-f]*\).*/\1/p' "$WORK/a.err")
entry=$STORE/$TUID/sha256-${digest#sha256:}
[ -f "$entry.sif" ] && [ -f "$entry.json" ] || fail "no store entry at $entry: $(ls -la "$STORE/$TUID" 2>&1)"
expect_eq "the user's store directory is private" 700 "$(stat -c %a "$STORE/$TUID")"
expect_eq "nothing half-written" 0 "$(find "$STORE" -name '.tmp-*' -o -name '*.filling' | wc -l)"
gets=$(blob_gets demo)
for node in b c; do
  out=$(on $node "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/$node.err") || fail "node $node: $(cat "$WORK/$node.err")"
  expect_contains "node $node runs it" "ID=ctr-demo" "$out"
  ! grep -q pulling "$WORK/$node.err" || fail "node $node pulled: $(cat "$WORK/$node.err")"
done
expect_eq "no layer fetched again" "$gets" "$(blob_gets demo)"
expect_contains "explain: in place" "from:       $ref ($digest, the site image store)" "$(on b "$CTR_BIN" exec --explain "$ref" true)"
expect_contains "run from the store's file" "image:      $entry.sif" "$(on b "$CTR_BIN" exec --explain "$ref" true)"
sed -i 's/^image store copy = never/image store copy = always/' "$CTR_TEST_CONFIG"
on d "$CTR_BIN" exec "$ref" true 2> "$WORK/d.err" || fail "node d: $(cat "$WORK/d.err")"
expect_contains "explain: copied" "($digest, the site image store, copied to the image cache)" \
  "$(on e "$CTR_BIN" exec --explain "$ref" true 2>/dev/null)"
cmp -s "$entry.sif" "$WORK/node-d-$CTR_TEST_USER/images/sha256-${digest#sha256:}.sif" || fail "node d's copy differs from the store's"
expect_eq "still no layer fetched" "$gets" "$(blob_gets demo)"

note "another user never runs a user's entry; everyone runs the store owner's"
on a "$USER2" "$CTR_BIN" exec "$ref" true 2> "$WORK/u2.err" || fail "$USER2: $(cat "$WORK/u2.err")"
expect_contains "$USER2 pulled for itself" "pulling sha256:" "$(cat "$WORK/u2.err")"
[ -f "$STORE/$UID2/sha256-${digest#sha256:}.json" ] || fail "$USER2's own entry is missing"
( cd "$WORK" && CTR_CONFIG="$CTR_TEST_CONFIG" CTR_CACHE_DIR="$WORK/node-root" "$CTR_BIN" store pull "docker://$REGISTRY/v2:1" ) \
  > "$WORK/rootpull.out" 2>&1 || fail "store pull as root: $(cat "$WORK/rootpull.out")"
expect_contains "store pull names the entry" "$STORE/0/sha256-" "$(cat "$WORK/rootpull.out")"
expect_eq "the owner's directory is readable" 755 "$(stat -c %a "$STORE/0")"
v2gets=$(blob_gets v2)
out=$(on f "$USER2" "$CTR_BIN" exec "docker://$REGISTRY/v2:1" cat /etc/v2 2> "$WORK/f.err") || fail "$USER2, the owner's entry: $(cat "$WORK/f.err")"
expect_eq "the owner's entry runs" v2 "$out"
expect_eq "and no layer was fetched" "$v2gets" "$(blob_gets v2)"

note "a changed or corrupt entry is refetched, never run; a truncated one is no entry; store verify"
sed -i 's/^image store copy = always/image store copy = never/' "$CTR_TEST_CONFIG"
size=$(stat -c %s "$entry.sif")
corrupt() { printf 'X' | dd of="$1" bs=1 seek=$(( $(stat -c %s "$1") - 100 )) conv=notrunc status=none; }
# corrupt_as_storage ENTRY: ENTRY.sif corrupted as storage corrupts it, with no write anyone
# could see: its record rewritten to the file's new identity, so only the sha256 shows it.
corrupt_as_storage() {
  corrupt "$1.sif"
  python3 - "$1.json" "$1.sif" <<'PYEOF'
import json, os, sys
r = json.load(open(sys.argv[1])); st = os.lstat(sys.argv[2])
r["sif_identity"] = "%d %d %d.%d %d.%d" % (st.st_ino, st.st_size, st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9,
                                           st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9)
json.dump(r, open(sys.argv[1], "w"))
PYEOF
  chown "$CTR_TEST_USER" "$1.json"
}
corrupt "$entry.sif"
out=$(on g "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/g.err") || fail "node g, changed entry: $(cat "$WORK/g.err")"
expect_contains "in place: the change is seen without a read" "has changed since it was written" "$(cat "$WORK/g.err")"
expect_contains "pulled again" "pulling sha256:" "$(cat "$WORK/g.err")"
expect_contains "and ran" "ID=ctr-demo" "$out"
cmp -s "$entry.sif" "$WORK/node-g-$CTR_TEST_USER/images/sha256-${digest#sha256:}.sif" || fail "the entry was not filled again"
corrupt_as_storage "$entry"
set +e; out=$(on a "$CTR_BIN" store verify 2>&1); rc=$?; set -e
[ "$rc" = 1 ] || fail "store verify of a corrupt entry: status $rc: $out"
expect_contains "verify names it" "image store entry $entry.sif is corrupt (sha256" "$out"
expect_contains "and removed it" "1 corrupt (1 removed)" "$out"
[ ! -e "$entry.json" ] || fail "store verify left the corrupt entry"
on g2 "$CTR_BIN" exec "$ref" true 2>/dev/null || fail "refill after verify"
corrupt_as_storage "$entry"
sed -i 's/^image store copy = never/image store copy = always/' "$CTR_TEST_CONFIG"
out=$(on g3 "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/g3.err") || fail "node g3, corrupt entry: $(cat "$WORK/g3.err")"
expect_contains "copied: the sha256 shows it" "is corrupt (sha256" "$(cat "$WORK/g3.err")"
expect_contains "pulled again" "pulling sha256:" "$(cat "$WORK/g3.err")"
expect_contains "and ran" "ID=ctr-demo" "$out"
sed -i 's/^image store copy = always/image store copy = never/' "$CTR_TEST_CONFIG"
expect_contains "verify: all sound" "0 corrupt" "$(on a "$CTR_BIN" store verify)"
truncate -s $((size / 2)) "$entry.sif"
on h "$CTR_BIN" exec "$ref" true 2> "$WORK/h.err" || fail "node h, truncated entry: $(cat "$WORK/h.err")"
expect_contains "a truncated entry is a miss" "pulling sha256:" "$(cat "$WORK/h.err")"
expect_eq "filled again" "$size" "$(stat -c %s "$entry.sif")"

note "parallel first launches on four nodes: one fetch of each layer, every launch runs"
pgets=$(blob_gets par)
pids=()
for i in 1 2 3 4; do
  on "p$i" "$CTR_BIN" exec "docker://$REGISTRY/par:1" cat /etc/par > "$WORK/p$i.out" 2> "$WORK/p$i.err" &
  pids+=($!)
done
for i in 1 2 3 4; do wait "${pids[$((i - 1))]}" || fail "parallel launch $i: $(cat "$WORK/p$i.err")"; done
expect_eq "every launch ran the image" 4 "$(cat "$WORK"/p?.out | grep -c '^par$')"
expect_eq "one pull" 1 "$(cat "$WORK"/p?.err | grep -c 'pulling sha256:')"
# The config and the two layers: every blob of the layout but the manifest.
expect_eq "each blob fetched once" $((pgets + $(ls "$WORK/layout-par/blobs/sha256" | wc -l) - 1)) "$(blob_gets par)"
note "waiters: $(cat "$WORK"/p?.err | grep -c 'waiting for it' || true)"

note "a filler killed on this node is taken over at once; a live one is waited for, then given up on"
pdigest=$(sed -n 's/.*pulling \(sha256:[0-9a-f]*\).*/\1/p' "$WORK"/p?.err | head -1)
pentry=$STORE/$TUID/sha256-${pdigest#sha256:}
rm "$pentry.json" "$pentry.sif"
runuser -u "$CTR_TEST_USER" -- sh -c "echo \"$(hostname) 999999\" > '$pentry.filling'"
out=$(on q "$CTR_BIN" exec "docker://$REGISTRY/par:1" cat /etc/par 2> "$WORK/q.err") || fail "after a killed filler: $(cat "$WORK/q.err")"
expect_eq "ran" par "$out"
expect_contains "took it over" "stopped filling $pdigest" "$(cat "$WORK/q.err")"
rm "$pentry.json" "$pentry.sif"
runuser -u "$CTR_TEST_USER" -- sh -c "echo 'othernode 1' > '$pentry.filling'"
( while [ -f "$pentry.filling" ]; do touch "$pentry.filling" 2>/dev/null; sleep 1; done ) & toucher=$!
echo "image store wait = 3" >> "$CTR_TEST_CONFIG"
set +e; err=$(on r "$CTR_BIN" exec "docker://$REGISTRY/par:1" true 2>&1); rc=$?; set -e
kill "$toucher" 2>/dev/null || true; wait "$toucher" 2>/dev/null || true
[ "$rc" != 0 ] || fail "ran although the filler never finished"
expect_contains "gives up naming the filler" "waited 3 s for othernode 1 to fill $pdigest" "$err"
expect_contains "in its last line" "giving up ('image store wait')" "$(printf '%s\n' "$err" | tail -1)"
rm -f "$pentry.filling"
sed -i '/^image store wait/d' "$CTR_TEST_CONFIG"

note "a full store: a warning, the launch runs, nothing half-written"
mkdir -p "$WORK/full"
if mount -t tmpfs -o size=64k,mode=1777 ctr-test-full "$WORK/full"; then
  sed -i "s|^image store dir = .*|image store dir = $WORK/full|" "$CTR_TEST_CONFIG"
  out=$(on s "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/s.err") || fail "full store: $(cat "$WORK/s.err")"
  expect_contains "ran" "ID=ctr-demo" "$out"
  expect_contains "one warning naming the store" "image store $WORK/full/$TUID: cannot keep $ref there" "$(cat "$WORK/s.err")"
  expect_contains "and the reason" "No space left on device" "$(cat "$WORK/s.err")"
  expect_eq "nothing left in it" 0 "$(find "$WORK/full/$TUID" -type f | wc -l)"
  umount "$WORK/full"
  sed -i "s|^image store dir = .*|image store dir = $STORE|" "$CTR_TEST_CONFIG"
else
  note "SKIP part: cannot mount a tmpfs here"
fi

note "a read-only store: its entries run; a miss is pulled on the node, silently, and kept nowhere else"
mkdir "$WORK/ro-store"
if mount --bind -o ro "$STORE" "$WORK/ro-store" 2>/dev/null || { mount --bind "$STORE" "$WORK/ro-store" && mount -o remount,bind,ro "$WORK/ro-store"; }; then
  sed -i "s|^image store dir = .*|image store dir = $WORK/ro-store|" "$CTR_TEST_CONFIG"
  out=$(on ro1 "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/ro1.err") || fail "read-only store, an entry: $(cat "$WORK/ro1.err")"
  expect_contains "the entry ran" "ID=ctr-demo" "$out"
  ! grep -q pulling "$WORK/ro1.err" || fail "pulled although the read-only store has it: $(cat "$WORK/ro1.err")"
  out=$(on ro1 "$CTR_BIN" exec "docker://$REGISTRY/ro:1" cat /etc/ro 2> "$WORK/ro2.err") || fail "read-only store, a miss: $(cat "$WORK/ro2.err")"
  expect_eq "the miss ran" ro "$out"
  expect_contains "pulled on the node" "pulling sha256:" "$(cat "$WORK/ro2.err")"
  ! grep -qi "warn\|keeping" "$WORK/ro2.err" || fail "a read-only store is no fault: $(cat "$WORK/ro2.err")"
  umount "$WORK/ro-store"
  sed -i "s|^image store dir = .*|image store dir = $STORE|" "$CTR_TEST_CONFIG"
else
  note "SKIP part: cannot bind-mount read-only here"
fi

note "offline: the store's copy runs on a node that never ran the image"
kill "$REGISTRY_PID"; wait "$REGISTRY_PID" 2>/dev/null || true
out=$(on t "$CTR_BIN" exec "$ref" cat /etc/os-release 2> "$WORK/t.err") || fail "offline: $(cat "$WORK/t.err")"
expect_contains "ran" "ID=ctr-demo" "$out"
expect_contains "with a warning" "running the site store's copy" "$(cat "$WORK/t.err")"

note "store list, size, clean; refused in one line"
listing=$(on a "$CTR_BIN" store list)
expect_contains "list: the user's entry" "$ref" "$listing"
expect_contains "list: the total" "image(s), " "$listing"
expect_contains "size, by writer" "uid $TUID: " "$(on a "$CTR_BIN" store size)"
expect_eq "list --json" "$digest" "$(on a "$CTR_BIN" store list --json | jq -r --arg r "$ref" '[.images[] | select(.references | index($r))][0].digest')"
set +e; err=$(on a "$CTR_BIN" store clean 2>&1); rc=$?; set -e
[ "$rc" = 1 ] || fail "store clean without a selector: status $rc"
expect_contains "says what to give" "--days N, --max-size SIZE, --reference REF or --all" "$err"
runuser -u "$CTR_TEST_USER" -- touch "$STORE/$TUID/.tmp-left.sif.node.1"
touch -d '2 hours ago' "$STORE/$TUID/.tmp-left.sif.node.1"
expect_contains "dry run" "would remove 1 image(s) and 1 leftover(s)" "$(on a "$CTR_BIN" store clean -n --reference "$ref")"
[ -f "$entry.json" ] || fail "the dry run removed the entry"
expect_contains "clean --reference" "removed 1 image(s) and 1 leftover(s)" "$(on a "$CTR_BIN" store clean --reference "$ref")"
[ ! -e "$entry.json" ] && [ ! -e "$entry.sif" ] || fail "the entry is still there"
[ -f "$STORE/$UID2/sha256-${digest#sha256:}.json" ] || fail "the user removed $USER2's entry"
expect_contains "root cleans everyone's" "removed " "$(CTR_CONFIG="$CTR_TEST_CONFIG" "$CTR_BIN" store clean --all)"
expect_eq "empty" 0 "$(find "$STORE" -type f | wc -l)"
chmod 777 "$STORE"
set +e; err=$(on z "$CTR_BIN" exec "$ref" true 2>&1); rc=$?; set -e
[ "$rc" != 0 ] || fail "ran with a store anyone can rename entries in"
expect_contains "names the store" "image store $STORE is writable by others without the sticky bit" "$err"
chmod 1777 "$STORE"
sed -i '/^image store/d' "$CTR_TEST_CONFIG"
set +e; err=$(on a "$CTR_BIN" store list 2>&1); rc=$?; set -e
[ "$rc" = 1 ] || fail "store list without a store: status $rc"
expect_contains "says so" "sets no 'image store dir'" "$err"

assert_nothing_left "image store"
echo "PASS: $TEST_NAME"
