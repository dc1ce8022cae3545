#!/bin/sh
# tests/install-deps.sh [--run]: installs the Debian 12 packages that ctr needs, and only
# those that are missing. Debian packages only; nothing else is downloaded.
#   --run   what building ctr and running containers need (README command 1, about 90
#           packages on a fresh machine);
#   (none)  that, plus what the test suite and the benchmarks need (README command 2, CI).
set -eu

# Building: the compiler, CMake and the libraries ctr links or loads; running: squashfs,
# FUSE and e2fsprogs (overlay create); busybox-static for the demo image. Not git: whoever has a clone has it (the build
# records the revision when git is there); the tests install it. g++ rather than
# build-essential: Ninja builds, so neither make nor dpkg-dev (the Debian packages' tools,
# which the tests install) is needed to build and run.
run_packages="
  g++ cmake ninja-build pkg-config
  libseccomp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libhwloc-dev libtomlplusplus-dev libyaml-dev libcurl4-openssl-dev libarchive-dev
  libsquashfs-dev libfuse3-dev libgpgme-dev
  squashfs-tools squashfuse fuse3 util-linux busybox-static e2fsprogs fuse2fs fuse-overlayfs
"
# The tests, the fuzzers, ctr-bench and its workloads, and the runtimes they compare with.
test_packages="
  git build-essential
  libgtest-dev libgmock-dev hwloc libgsl-dev libyaml-cpp-dev
  skopeo docker-registry
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  clang libclang-rt-14-dev ccache
  charliecloud bubblewrap hyperfine linux-perf
  snakemake cwltool
  libopenblas-dev fio python3-torch python3-torchvision
  mmdebstrap uidmap patchelf help2man man-db environment-modules lintian
  libjs-vega chromium fonts-dejavu-core
  slurmctld slurmd slurm-client munge libslurm-dev iproute2
"

case "${1:-}" in
  --run) packages=$run_packages ;;
  "") packages="$run_packages $test_packages" ;;
  *) echo "install-deps: unknown option '$1' (usage: tests/install-deps.sh [--run])" >&2; exit 2 ;;
esac

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
