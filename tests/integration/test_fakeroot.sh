# --fakeroot for launches (issue 28, item 2), as an ordinary user: root in the container
# (uid and gid 0, HOME /root with the user's home there, root's capabilities in the user
# namespace), the image's files root's rather than nobody's; without subordinate ids the
# one id is mapped, with a range in /etc/subuid and /etc/subgid root and 65536 more ids
# through newuidmap/newgidmap; with --overlay an install into the image's /usr and a
# deletion of an image file survive to the next run, owned by the user (or its subordinate
# ids) on the host; nothing is left behind.
. "$(dirname "$0")/lib.sh"
ensure_test_user
require_fuse
use_linger 0
demo_for_user
uid=$(id -u "$CTR_TEST_USER")
gid=$(id -g "$CTR_TEST_USER")
home=$(getent passwd "$CTR_TEST_USER" | cut -d: -f6)
run() { as_user env -C "$U" "$CTR_BIN" exec "$@"; }

# The test user's subordinate ids are this test's to set: its lines are kept and put back.
cp /etc/subuid "$WORK/subuid.saved" && cp /etc/subgid "$WORK/subgid.saved"
restore_ids() {
  cat "$WORK/subuid.saved" > /etc/subuid
  cat "$WORK/subgid.saved" > /etc/subgid
  rm -f "$home/.ctr-fakeroot-probe"
  rm -rf "$WORK"
}
trap restore_ids EXIT
sed -i "/^$CTR_TEST_USER:/d" /etc/subuid /etc/subgid

note "without subordinate ids: root is the user's one id"
out=$(run --fakeroot "$img" sh -c 'id -u; id -g; echo "$HOME"; cat /proc/self/uid_map | wc -l; awk "{print \$1, \$2, \$3}" /proc/self/uid_map')
expect_eq "fakeroot identity" "0
0
/root
1
0 $uid 1" "$out"
expect_contains "--explain says why" "no other id is mapped" "$(run --explain --fakeroot "$img" true)"
expect_eq "whoami" root "$(run -f "$img" whoami)"
expect_eq "APPTAINER_FAKEROOT" 0 "$(as_user env -C "$U" APPTAINER_FAKEROOT=1 "$CTR_BIN" exec "$img" id -u)"

note "the image's files are root's (not nobody's as without it); the home is at /root"
expect_eq "/usr without --fakeroot" 65534 "$(run "$img" stat -c %u /usr)"
expect_eq "/usr with --fakeroot" "0 root" "$(run --fakeroot "$img" stat -c '%u %U' /usr)"
as_user sh -c 'echo from-home > "$HOME/.ctr-fakeroot-probe"'
expect_eq "the user's home at /root" from-home "$(run --fakeroot "$img" cat /root/.ctr-fakeroot-probe)"
run --fakeroot "$img" sh -c 'echo by-root > /root/.ctr-fakeroot-probe'
expect_eq "what root writes is the user's on the host" "$CTR_TEST_USER" "$(stat -c %U "$home/.ctr-fakeroot-probe")"
caps=$(run --fakeroot "$img" awk '/^CapEff/ {print $2}' /proc/self/status)
[ "$caps" != 0000000000000000 ] || fail "--fakeroot's root has no capabilities"
expect_eq "without --fakeroot, none" 0000000000000000 "$(run "$img" awk '/^CapEff/ {print $2}' /proc/self/status)"

note "with --overlay: an install into /usr and a deleted image file survive, the user's on the host"
run --fakeroot --overlay ov "$img" sh -c 'mkdir -p /usr/local/bin && printf "#!/bin/sh\necho installed as root\n" > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool && rm /etc/os-release'
expect_eq "owner on the host" "$uid" "$(stat -c %u "$U/ov/upper/usr/local/bin/tool")"
expect_eq "next run, no --fakeroot, read-only" "installed as root" "$(run --overlay ov:ro "$img" /usr/local/bin/tool)"
out=$(run --overlay ov:ro "$img" cat /etc/os-release 2>&1) && fail "the deleted file came back: $out"

note "an instance started with --fakeroot: a launch into it is root with root's capabilities"
as_user env -C "$U" "$CTR_BIN" instance start --fakeroot "$img" fr
out=$(run instance://fr sh -c 'id -u; awk "/^CapEff/ {print \$2}" /proc/self/status; echo "$HOME"')
[ "$(sed -n 1p <<<"$out")" = 0 ] && [ "$(sed -n 2p <<<"$out")" != 0000000000000000 ] && [ "$(sed -n 3p <<<"$out")" = /root ] ||
  fail "a launch into a --fakeroot instance: $out"
as_user "$CTR_BIN" instance stop fr >/dev/null

note "with subordinate ids: root and 65536 more, through newuidmap/newgidmap"
if [ -u "$(command -v newuidmap || echo /nonexistent)" ] && [ -u "$(command -v newgidmap || echo /nonexistent)" ]; then
  echo "$CTR_TEST_USER:300000:65536" >> /etc/subuid
  echo "$CTR_TEST_USER:400000:65536" >> /etc/subgid
  out=$(run --fakeroot "$img" awk '{print $1, $2, $3}' /proc/self/uid_map /proc/self/gid_map)
  expect_eq "maps" "0 $uid 1
1 300000 65536
0 $gid 1
1 400000 65536" "$out"
  run --fakeroot --overlay ov "$img" sh -c 'chown 100:100 /usr/local/bin/tool'
  expect_eq "a chown to 100 is subordinate id 300099 on the host" "300099 400099" \
    "$(stat -c '%u %g' "$U/ov/upper/usr/local/bin/tool")"
  expect_eq "and 100 inside" "100 100" "$(run --fakeroot --overlay ov:ro "$img" stat -c '%u %g' /usr/local/bin/tool)"
  # The user cannot remove its subordinate ids' files itself: root cleans up.
  rm -rf "$U/ov"
else
  note "SKIP part: newuidmap/newgidmap are not installed setuid root (package uidmap): the subordinate ranges are not tried"
fi

assert_nothing_left "fakeroot"
