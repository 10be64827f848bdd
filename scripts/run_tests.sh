#!/usr/bin/env bash
# Set up, build, and run every test that needs no GPU (GPU tests skip cleanly).
# DTENSOR_SANITIZERS=1 then runs the local-backend suites under
# AddressSanitizer + UndefinedBehaviorSanitizer (scripts/asan.sh) and
# ThreadSanitizer (scripts/tsan.sh), each in a build directory of its own: not
# yet in CI (their time on a quiet machine and a clean TSan run are still to
# be confirmed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${DTENSOR_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
if [ "${DTENSOR_SANITIZERS:-0}" != 0 ]; then
  bash scripts/asan.sh
  bash scripts/tsan.sh
fi
