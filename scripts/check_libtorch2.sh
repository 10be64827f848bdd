#!/usr/bin/env bash
# Builds and tests dtensor against Debian 13's libtorch 2.6 in a chroot, on a
# Debian 12 machine without a GPU: the closest check of the libtorch 2.x code
# paths (base/compat.h, the ops only 2.x has) that can be made
# without the GPU machine's pip torch.
#
#   bash scripts/check_libtorch2.sh          # CPU libtorch 2.6: build, then ctest -E bench
#   bash scripts/check_libtorch2.sh --sid    # the same in Debian sid (libtorch 2.14 when
#                                            # written; g++ 16, C++20)
#   bash scripts/check_libtorch2.sh --cuda   # CUDA libtorch 2.6 + NCCL 2.22: configure with
#                                            # DTENSOR_WITH_NCCL=ON and build everything
#                                            # (no GPU here: nothing runs)
#
# Warnings are errors, as in CI. Needs root and network access to deb.debian.org. The chroots live in
# /work/trixie-root (CPU), /work/sid-root and /work/trixie-cuda (CUDA), outside the repo; a
# second run reuses them and their ccache. The build is a clone of this
# repo's HEAD: commit first. Logs: <chroot>/b/{build,ctest}.log.
#
# The CUDA chroot holds Debian's CUDA 12.4 toolkit and NCCL. Debian's
# nvidia-cudnn is an installer that downloads cuDNN from NVIDIA, which is out
# of reach, so its install step is skipped; libtorch_cuda then lacks
# libcudnn, so executables link with --allow-shlib-undefined and cannot run.
set -euo pipefail

cuda=0
suite=trixie
[[ "${1:-}" == "--cuda" ]] && cuda=1
[[ "${1:-}" == "--sid" ]] && suite=sid
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [[ $cuda == 1 ]]; then
  root=/work/trixie-cuda
  components=main,contrib,non-free
  packages=(libtorch-cuda-dev libnccl-dev nvidia-cuda-toolkit)
  cmake_flags=(-DDTENSOR_WITH_NCCL=ON -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined)
else
  root=/work/$suite-root
  components=main,contrib
  packages=(libtorch-dev)
  cmake_flags=()
fi
packages+=(g++ cmake make libopenmpi-dev openmpi-bin libabsl-dev libgtest-dev libgmock-dev
           libbenchmark-dev nlohmann-json3-dev ccache git ca-certificates)

in_root() { chroot "$root" /bin/bash -c "$1"; }

make_root() {
  local dbs=/tmp/debootstrap
  if [[ ! -x $dbs/usr/sbin/debootstrap ]]; then
    mkdir -p $dbs && (cd $dbs && apt-get download debootstrap && dpkg -x debootstrap_*.deb .)
  fi
  DEBOOTSTRAP_DIR=$dbs/usr/share/debootstrap $dbs/usr/sbin/debootstrap --no-check-gpg \
    --variant=minbase --components=$components $suite "$root" http://deb.debian.org/debian
  echo "deb [trusted=yes] http://deb.debian.org/debian $suite ${components//,/ }" \
    >"$root/etc/apt/sources.list"
}

mount_once() {  # type-or-bind source target [options]
  mountpoint -q "$3" && return 0
  mkdir -p "$3"
  if [[ $1 == bind ]]; then mount --bind ${4:+-o $4} "$2" "$3"; else mount -t "$1" "$2" "$3"; fi
}

[[ -d $root/etc ]] || make_root
cp /etc/resolv.conf "$root/etc/"
mount_once proc proc "$root/proc"
mount_once bind /dev "$root/dev"
mount_once bind /dev/pts "$root/dev/pts"
mount_once bind "$repo" "$root/src" ro

# Valid-Until: this machine's clock may be behind or ahead of the mirror's
# (sid's Release file then reads as expired).
in_root "apt-get -o Acquire::Check-Valid-Until=false update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  --no-install-recommends ${packages[*]} >/tmp/install.log 2>&1 || true"
if [[ $cuda == 1 ]]; then  # see the header: cuDNN's installer cannot download
  in_root "printf '#!/bin/sh\nexit 0\n' >/var/lib/dpkg/info/nvidia-cudnn.postinst &&
           dpkg --configure -a >/dev/null"
fi
in_root "dpkg-query -W ${packages[*]} >/dev/null"  # fails loudly if an install failed

in_root "git config --global --add safe.directory '*' && rm -rf /b/dtensor &&
  git clone -q /src /b/dtensor && cd /b/dtensor &&
  export CCACHE_DIR=/b/.ccache &&
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DDTENSOR_WARNINGS_AS_ERRORS=ON ${cmake_flags[*]} >/b/configure.log 2>&1 &&
  grep 'dtensor: libtorch' /b/configure.log &&
  cmake --build build -j\$(nproc) -- -k >/b/build.log 2>&1"
echo "check_libtorch2: build of $(git -C "$repo" rev-parse --short HEAD) passed"
if [[ $cuda == 0 ]]; then
  in_root "cd /b/dtensor/build && ctest -j\$(nproc) -E bench --output-on-failure >/b/ctest.log 2>&1;
           status=\$?; tail -4 /b/ctest.log; exit \$status"
fi
