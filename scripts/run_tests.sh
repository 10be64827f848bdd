#!/usr/bin/env bash
# Set up, build, and run every test that needs no GPU (GPU tests skip cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${DTENSOR_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
