#!/usr/bin/env bash
# Builds the library and the local-backend tests with ThreadSanitizer into
# build-tsan/ and runs them: the unit suite and the checkpoint suite (its
# async save writes from a thread of its own). libtorch itself is not
# instrumented, so this checks dtensor's own synchronisation (the local
# backend's rendezvous, mailboxes and failure propagation, the async
# writer), which is where races would be ours. Built at -O1 -g1 (line
# tables: file:line in reports) to keep CI short. Arguments go to both
# suites.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DDTENSOR_BUILD_BENCHMARKS=OFF -DDTENSOR_BUILD_EXAMPLES=OFF
cmake --build build-tsan -j "$(nproc)" --target dtensor_tests dtensor_checkpoint_tests
for suite in dtensor_tests dtensor_checkpoint_tests; do
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    DTENSOR_LOCAL_TIMEOUT_SECONDS=120 "./build-tsan/tests/${suite}" "$@"
done
