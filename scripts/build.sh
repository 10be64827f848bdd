#!/usr/bin/env bash
# Configures and builds dtensor into build/ (or $DTENSOR_BUILD_DIR) after
# installing what it needs, with warnings as errors. Builds the targets named
# in $DTENSOR_TARGETS (space-separated), or everything. Extra arguments go to
# the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${DTENSOR_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
  -DDTENSOR_WARNINGS_AS_ERRORS=ON "$@"
targets=()
for target in ${DTENSOR_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
