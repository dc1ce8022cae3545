#!/bin/sh
# Installs the Debian 12 packages ctr needs to build, test and benchmark, and only those
# that are missing. Debian packages only; nothing else is downloaded.
set -eu

packages="
  build-essential cmake pkg-config git
  libseccomp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libhwloc-dev hwloc libtomlplusplus-dev libyaml-cpp-dev
  libgsl-dev
  squashfs-tools squashfuse fuse3 util-linux busybox-static
  libcurl4-openssl-dev libarchive-dev skopeo docker-registry
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  clang libclang-rt-14-dev
  charliecloud bubblewrap hyperfine
  snakemake
  libopenblas-dev fio python3-torch python3-torchvision
  mmdebstrap uidmap
  libjs-vega chromium fonts-dejavu-core
"

missing=""
for p in $packages; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install:$missing" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing:$missing"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
