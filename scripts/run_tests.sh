#!/usr/bin/env bash
# Set up, build, and run every test that needs no GPU (GPU tests skip cleanly),
# then the local-backend suites again under AddressSanitizer +
# UndefinedBehaviorSanitizer (scripts/asan.sh) and ThreadSanitizer
# (scripts/tsan.sh), each in a build directory of its own. CI runs all of it;
# DTENSOR_SANITIZERS=0 skips the sanitizer builds (about 25 of CI's minutes on
# a 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${DTENSOR_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
if [ "${DTENSOR_SANITIZERS:-1}" != 0 ]; then
  bash scripts/asan.sh
  bash scripts/tsan.sh
fi
