#!/usr/bin/env bash
# Copyright 2026 The dtensor Authors.
#
# Fetches what the GPU machine lacks and cannot download itself (it has no
# network): Abseil and nlohmann/json (the checkpoint layer's), as Debian
# packages unpacked into .deps/absl (git-ignored).
# Run it here, on the Debian 12 build machine, before carrying .deps/absl to
# the GPU machine; scripts/gpu_check.sh finds it there through
# CMAKE_PREFIX_PATH and LD_LIBRARY_PATH.
#
#   scripts/fetch_gpu_deps.sh        # idempotent; re-run to refresh
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
debs="${repo_root}/.deps/debs"
absl="${repo_root}/.deps/absl"
packages=(libabsl-dev libabsl20220623 nlohmann-json3-dev)

echo "== fetch_gpu_deps: downloading ${packages[*]} into ${debs}"
mkdir -p "${debs}"
(cd "${debs}" && apt-get download "${packages[@]}")

echo "== fetch_gpu_deps: unpacking into ${absl}"
rm -rf "${absl}"
mkdir -p "${absl}"
for deb in "${debs}"/*.deb; do
  dpkg -x "${deb}" "${absl}"
done

# The packages install under /usr; their CMake files compute paths relative to
# themselves, so the unpacked tree works from any prefix.
for config in abslConfig.cmake nlohmann_jsonConfig.cmake; do
  test -n "$(find "${absl}" -name "${config}" -print -quit)" ||
    { echo "fetch_gpu_deps: ${config} missing" >&2; exit 1; }
done
echo "== fetch_gpu_deps: done"
echo "   CMAKE_PREFIX_PATH entry: ${absl}/usr"
echo "   LD_LIBRARY_PATH entry:   ${absl}/usr/lib/x86_64-linux-gnu"
du -sh "${absl}"
