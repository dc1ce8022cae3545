#!/bin/bash
# Issue 29: the Debian packages, as an admin meets them. cpack builds ctr and ctr-suid from
# the deb tree (preset deb, built by tests/run-all.sh), lintian finds no error in them,
# apt-get installs them; an ordinary user runs a container through the installed ctr, by
# squashfuse and then by the setuid helper (ctr.conf's switch turned on); `man ctr-exec`
# works; containerd's /usr/bin/ctr, where it is installed, is left as it was; ctr-slurm (where
# the plugin was built) installs the plugin its plugstack.conf line names. Then all are
# purged and nothing of ctr stays: no file, no setuid bit, no alternative, no state directory.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root
deb_build=${CTR_DEB_BUILD_DIR:-$CTR_SOURCE_DIR/build/deb}
[ -f "$deb_build/CPackConfig.cmake" ] && [ -x "$deb_build/bin/ctr" ] ||
  skip "no deb build at $deb_build (cmake --preset deb && cmake --build --preset deb; tests/run-all.sh builds it)"
for tool in cpack dpkg-deb dpkg-shlibdeps apt-get; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (apt-get install dpkg-dev cmake)"
done
for p in ctr ctr-suid ctr-slurm; do
  if dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'installed'; then
    skip "the package $p is already installed on this machine: this test installs and purges its own"
  fi
done
ensure_test_user

bindir=/usr/lib/ctr/bin
helper=/usr/libexec/ctr/ctr-mount-helper
# Everything of ctr the packages put on the system, and what ctr-suid's helper creates.
ctr_paths="/etc/ctr $bindir /usr/lib/ctr /usr/libexec/ctr /usr/share/ctr /usr/share/doc/ctr /usr/share/doc/ctr-suid
  /usr/share/doc/ctr-slurm /usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/ctr
  /usr/bin/ctr-bench /usr/share/man/man1/ctr-exec.1.gz /usr/share/man/man5/ctr.conf.5.gz /run/ctr-helper
  /var/lib/dpkg/alternatives/ctr"
purge() {
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q ctr-slurm ctr-suid ctr >"$WORK/purge.log" 2>&1
}
cleanup() {
  if dpkg-query -W ctr >/dev/null 2>&1 || dpkg-query -W ctr-suid >/dev/null 2>&1 ||
     dpkg-query -W ctr-slurm >/dev/null 2>&1; then purge || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# /usr/bin/ctr and its bash completion: Debian's containerd ships both. Whatever is there
# now must be there, unchanged, afterwards.
fingerprint() { if [ -L "$1" ]; then echo "link $(readlink "$1")"; elif [ -e "$1" ]; then sha256sum <"$1"; else echo absent; fi; }
completion=/usr/share/bash-completion/completions/ctr
before_bin=$(fingerprint /usr/bin/ctr)
before_completion=$(fingerprint "$completion")
other_ctr=""
if [ -e /usr/bin/ctr ] && owner=$(dpkg-query -S /usr/bin/ctr 2>/dev/null); then other_ctr=${owner%%:*}; fi
note "/usr/bin/ctr before: ${other_ctr:+($other_ctr) }$before_bin"

note "cpack -G DEB"
mkdir "$WORK/pkg"
(cd "$WORK/pkg" && cpack -G DEB --config "$deb_build/CPackConfig.cmake" -B "$WORK/pkg") >"$WORK/cpack.log" 2>&1 ||
  { cat "$WORK/cpack.log"; fail "cpack -G DEB failed"; }
ctr_deb=$(ls "$WORK"/pkg/ctr_*_*.deb 2>/dev/null | head -n1)
suid_deb=$(ls "$WORK"/pkg/ctr-suid_*_*.deb 2>/dev/null | head -n1)
[ -n "$ctr_deb" ] && [ -n "$suid_deb" ] || fail "cpack made no ctr and ctr-suid packages: $(ls "$WORK/pkg")"
slurm_deb=$(ls "$WORK"/pkg/ctr-slurm_*_*.deb 2>/dev/null | head -n1)
if [ -f "$deb_build/lib/ctr_spank.so" ]; then
  [ -n "$slurm_deb" ] || fail "the plugin was built but cpack made no ctr-slurm package: $(ls "$WORK/pkg")"
else
  [ -z "$slurm_deb" ] || fail "a ctr-slurm package without a plugin built"
  note "no ctr-slurm package: the deb tree has no plugin (libslurm-dev missing at configure time)"
fi
expect_eq "ctr-suid depends on the same ctr" "ctr (= $(dpkg-deb -f "$ctr_deb" Version))" \
  "$(dpkg-deb -f "$suid_deb" Depends | tr ',' '\n' | grep -m1 '^ *ctr ' | sed 's/^ *//')"
depends=$(dpkg-deb -f "$ctr_deb" Depends)
for dep in squashfuse fuse3 squashfs-tools e2fsprogs fuse2fs fuse-overlayfs libc6; do
  expect_contains "ctr depends on $dep" "$dep" "$depends"
done
expect_eq "ctr-mount-helper in the package: 4755 root" "-rwsr-xr-x root/root" \
  "$(dpkg-deb -c "$suid_deb" | awk '$6 ~ /ctr-mount-helper$/ { print $1, $2 }')"
expect_eq "ctr.conf is a conffile" "/etc/ctr/ctr.conf" "$(dpkg-deb -I "$ctr_deb" conffiles | grep -x /etc/ctr/ctr.conf)"
! grep -qxE '\./usr/bin/ctr|\./usr/share/bash-completion/completions/ctr' <(dpkg-deb -c "$ctr_deb" | awk '{ print $6 }') ||
  fail "the ctr package ships /usr/bin/ctr or its completion, which Debian's containerd owns"

if command -v lintian >/dev/null; then
  note "lintian"
  chmod -R a+rX "$WORK/pkg"
  lint=$(cd "$WORK" && runuser -u "$CTR_TEST_USER" -- lintian "$ctr_deb" "$suid_deb" $slurm_deb 2>&1) || true
  errors=$(grep '^E: ' <<<"$lint" || true)
  [ -z "$errors" ] || fail "lintian reports errors: $errors"
  note "lintian: no error ($(grep -c '^W: ' <<<"$lint" || true) warnings)"
else
  note "SKIP lintian: not installed (tests/install-deps.sh installs it)"
fi

note "apt-get install"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$ctr_deb" "$suid_deb" $slurm_deb \
  >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "apt-get install of the packages failed"; }
expect_eq "ctr-mount-helper installed 4755 root" "4755 root" "$(stat -c '%a %U' "$helper")"
expect_eq "/usr/bin/ctr-bench" "$bindir/ctr-bench" "$(readlink -f /usr/bin/ctr-bench)"
if [ -n "$other_ctr" ]; then
  expect_eq "/usr/bin/ctr is still $other_ctr's" "$before_bin" "$(fingerprint /usr/bin/ctr)"
  expect_eq "$completion is still $other_ctr's" "$before_completion" "$(fingerprint "$completion")"
  expect_contains "apt-get says where ctr is" "this ctr is $bindir/ctr" "$(cat "$WORK/install.log")"
else
  expect_eq "/usr/bin/ctr (alternative)" "$bindir/ctr" "$(readlink -f /usr/bin/ctr)"
  expect_eq "$completion (alternative)" /usr/share/ctr/bash-completion/ctr "$(readlink -f "$completion")"
fi
if [ -n "$slurm_deb" ]; then
  line=$(grep '^required ' /usr/share/ctr/slurm/plugstack.conf)
  plugin=$(awk '{ print $2 }' <<<"$line")
  [ -f "$plugin" ] || fail "ctr-slurm: the plugin its plugstack.conf line names is not there: $line"
  expect_eq "ctr-slurm: the plugin runs the installed ctr" "ctr=$bindir/ctr" "$(awk '{ print $3 }' <<<"$line")"
  expect_eq "ctr version: Slurm plugin built" true "$(as_user "$bindir/ctr" version --json | jq '.components.slurm_plugin.built')"
fi
version=$(as_user "$bindir/ctr" version --json)
python3 - "$version" <<'PY' || fail "ctr version --json of the installed ctr: $version"
import json, sys
v = json.loads(sys.argv[1])
h = v["components"]["setuid_helper"]
assert v["build"]["install_prefix"] == "/usr", v["build"]
assert h["path"] == "/usr/libexec/ctr/ctr-mount-helper" and h["setuid_root_now"] and h["setuid_install"], h
PY
if command -v man >/dev/null; then
  expect_eq "man -w ctr-exec" /usr/share/man/man1/ctr-exec.1.gz "$(man -w ctr-exec 2>&1)"
  expect_contains "man ctr-exec" "ctr exec [OPTIONS] image [args...]" "$(MANWIDTH=200 man ctr-exec 2>&1)"
  expect_contains "man 5 ctr.conf" "allow setuid = no" "$(MANWIDTH=200 man 5 ctr.conf 2>&1)"
else
  note "man is not installed: the pages are checked as files only"
  [ -s /usr/share/man/man1/ctr-exec.1.gz ] || fail "no /usr/share/man/man1/ctr-exec.1.gz"
fi

# The image: root's, in a directory users can read (what ctr-suid's defaults allow).
make_demo_squashfs demo
image=$WORK/demo.sqfs
chmod 644 "$image"
# Holders end with their last launch, so that the purge finds nothing running.
sed -i 's/^image linger = .*/image linger = 0/' /etc/ctr/ctr.conf

note "a container as $CTR_TEST_USER through the installed ctr (squashfuse)"
expect_contains "explain: squashfuse" "driver:     squashfuse" "$(as_user "$bindir/ctr" exec --explain "$image" true 2>&1)"
out=$(as_user "$bindir/ctr" exec "$image" cat /etc/os-release 2>&1) || fail "ctr exec: $out"
expect_contains "the demo image's os-release" "ctr demo" "$out"
assert_nothing_left "after the squashfuse launch"

if (require_loop_squashfs "helper part" 2>/dev/null); then
  note "the same through ctr-suid's helper (allow setuid = yes, image driver = setuid)"
  sed -i 's/^allow setuid = .*/allow setuid = yes/; s/^image driver = .*/image driver = setuid/' /etc/ctr/ctr.conf
  expect_contains "explain: the helper" "driver:     setuid-helper" "$(as_user "$bindir/ctr" exec --explain "$image" true 2>&1)"
  out=$(as_user "$bindir/ctr" exec "$image" cat /etc/os-release 2>&1) || fail "ctr exec through the helper: $out"
  expect_contains "the demo image's os-release (helper)" "ctr demo" "$out"
  # While a launch runs, the image is a loop device the helper attached (kernel squashfs).
  as_user "$bindir/ctr" exec "$image" sleep 3 >"$WORK/sleep.log" 2>&1 &
  sleeper=$!
  loop=""
  for _ in $(seq 50); do loop=$(losetup -j "$image" 2>/dev/null); [ -n "$loop" ] && break; sleep 0.05; done
  wait "$sleeper" || fail "ctr exec ... sleep through the helper: $(cat "$WORK/sleep.log")"
  [ -n "$loop" ] || fail "no loop device of $image while the helper's launch ran"
  assert_nothing_left "after the helper launch"
  [ -d /run/ctr-helper ] || fail "the helper made no /run/ctr-helper"
  keys=$CTR_FIXTURES_DIR/sif/keys
  if [ -d "$keys" ]; then
    note "ctr-suid's own user runs an execution rule's check (_ctr-verify, not nobody)"
    entry=$(getent passwd _ctr-verify) || fail "ctr-suid made no user _ctr-verify"
    [ "$(cut -d: -f3 <<<"$entry")" -lt 1000 ] || fail "_ctr-verify is not a system user: $entry"
    mkdir -p "$WORK/rootfs" "$WORK/signed"
    make_demo_rootfs "$WORK/rootfs"
    "$bindir/ctr" -q build "$WORK/signed/app.sif" "$WORK/rootfs" >/dev/null || fail "ctr build of a SIF"
    "$bindir/ctr" sign --key "$keys/ed25519-private.pem" "$WORK/signed/app.sif" >/dev/null || fail "ctr sign"
    chmod 755 "$WORK/signed" && chmod 644 "$WORK/signed/app.sif"
    # Only _ctr-verify may read the trusted key: a check that reads it ran as that user.
    install -o _ctr-verify -m 400 "$keys/ed25519-public.pem" /etc/ctr/trusted-test.pem
    printf 'execution rule = whitelist\ntrusted key = /etc/ctr/trusted-test.pem\n' >>/etc/ctr/ctr.conf
    expect_contains "ctr check: the check's user is one of its own" \
      "[ok] execution rule's check user: '_ctr-verify', a user of its own: no process runs as it now" \
      "$(as_user "$bindir/ctr" check 2>&1)"
    # The helper called by the user: with --help, the holder's help (exit 0) says it mounted.
    out=$(as_user "$helper" "$WORK/signed/app.sif" --help 2>&1) || fail "the helper refused a signed SIF: $out"
    out=$(as_user "$helper" "$image" --help 2>&1) && fail "an unsigned squashfs was mounted under the rule"
    expect_contains "an unsigned squashfs refused by the check" "only a signed SIF image may run here" "$out"
    sed -i '/^execution rule = /d; /^trusted key = /d' /etc/ctr/ctr.conf
    rm -f /etc/ctr/trusted-test.pem "/run/ctr-helper/verified/$(stat -c %d-%i "$WORK/signed/app.sif")"
    assert_nothing_left "after the execution rule's check"
  else
    note "SKIP execution rule part: no signing keys at $keys"
  fi
else
  note "SKIP helper part: $(require_loop_squashfs "helper part" 2>&1 | sed 's/^SKIP: [^:]*: //')"
fi

note "apt-get purge"
purge || { cat "$WORK/purge.log"; fail "apt-get purge failed"; }
for p in ctr ctr-suid; do
  ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'installed' || fail "$p is still installed"
done
for path in $ctr_paths; do
  [ ! -e "$path" ] && [ ! -L "$path" ] || fail "left after purge: $path"
done
! update-alternatives --query ctr >/dev/null 2>&1 || fail "the alternative ctr is still registered"
expect_eq "/usr/bin/ctr after purge" "$before_bin" "$(fingerprint /usr/bin/ctr)"
expect_eq "$completion after purge" "$before_completion" "$(fingerprint "$completion")"
setuid=$(find /usr /etc /run -xdev -perm -4000 -name 'ctr*' 2>/dev/null || true)
[ -z "$setuid" ] || fail "setuid files of ctr left: $setuid"
assert_nothing_left "after purge"
echo "PASS: $TEST_NAME"
