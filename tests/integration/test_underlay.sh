# Mount targets the image lacks, made without an overlay over the whole image: the deepest
# directory the image has on a target's path becomes a read-only tmpfs holding the image's
# entries of it (bound read-only, symlinks copied) and the target (an "underlay"), or, past
# 64 entries, an overlay of that directory alone. The container sees the image and the
# targets, read-only; "/" is no overlay (whose every path walk costs, benchmark-guide.md);
# a directory overlayfs's options cannot name falls back to an overlay of the whole image.
# The holder's prepared root (the default targets: home) and a launch's own root (user
# binds) both, and nothing left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0

rootfs=$WORK/rootfs
make_demo_rootfs "$rootfs"
mkdir -p "$rootfs/opt/many" "$rootfs/opt/few/sub" "$rootfs/opt/odd,dir"
for i in $(seq 100); do : > "$rootfs/opt/many/f$i"; : > "$rootfs/opt/odd,dir/f$i"; done
echo few > "$rootfs/opt/few/file"
ln -s file "$rootfs/opt/few/link"
mkfifo "$rootfs/opt/few/fifo"
"$CTR_BIN" build "$WORK/img.sif" "$rootfs" >/dev/null
mkdir -p "$WORK/data" && echo data > "$WORK/data/x"
chmod -R a+rX "$WORK"
home=$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)
[ ! -e "$rootfs$home" ] || fail "the demo image has $home: nothing to test"

# fstypes DIR: what is mounted at DIR in the container (mountinfo's source field: the image's
# FUSE server, ctr-underlay, overlay), bottom to top.
probe='fstypes() { awk -v d="$1" '\''{ i = 7; while ($i != "-") i++; if ($5 == d) printf "%s ", $(i + 2) } END { print "" }'\'' /proc/self/mountinfo; }'

note "the prepared root: the user's home, missing in the image, in an underlay of /home"
out=$(as_user "$CTR_BIN" exec "$WORK/img.sif" sh -c "$probe"'
  fstypes /; fstypes /home; test -d "$HOME" && echo home; touch /home/x 2>/dev/null || echo read-only')
expect_eq "home in the prepared root" "$(printf 'squashfuse \nctr-underlay \nhome\nread-only')" "$out"

note "a launch's own root: targets under a few entries, many entries, and a missing tree"
out=$(as_user "$CTR_BIN" exec -B "$WORK/data:/opt/few/new" -B "$WORK/data:/opt/many/new" \
  -B "$WORK/data:/srv/deep/er:ro" "$WORK/img.sif" sh -c "$probe"'
  echo "root: $(fstypes /)"; echo "few: $(fstypes /opt/few)"; echo "many: $(fstypes /opt/many)"
  cat /opt/few/file /opt/few/new/x /opt/many/new/x /srv/deep/er/x
  readlink /opt/few/link; test -p /opt/few/fifo && echo fifo; test -d /opt/few/sub && echo sub
  ls /opt/few | tr "\n" " "; echo; ls /opt/many | wc -l; ls / | tr "\n" " "; echo
  for p in /opt/few/y /opt/many/y /srv/y /y /opt/few/sub/y; do touch "$p" 2>/dev/null && echo "wrote $p"; done
  echo end')
root_entries=$( (ls "$rootfs"; echo srv) | sort | tr "\n" " ")
expect_eq "own root" "$(printf '%s\n' "root: ctr-underlay " "few: ctr-underlay " \
  "many: overlay " few data data data file fifo sub "fifo file link new sub " 101 "$root_entries" end)" "$out"

note "a directory overlayfs cannot name: an overlay of the whole image instead"
out=$(as_user "$CTR_BIN" exec -B "$WORK/data:/opt/odd\\,dir/new" "$WORK/img.sif" sh -c "$probe"'
  fstypes /; cat "/opt/odd,dir/new/x"; ls /opt/odd,dir | wc -l; touch /opt/y 2>/dev/null || echo read-only')
expect_eq "fallback" "$(printf 'overlay \ndata\n101\nread-only')" "$out"

out=$(as_user "$CTR_BIN" exec --explain "$WORK/img.sif" true)
expect_contains "--explain" "a missing mount target is made in a tmpfs over the deepest directory" "$out"

assert_nothing_left "underlay"
echo "PASS: $TEST_NAME"
