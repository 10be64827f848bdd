#!/usr/bin/env bash
# Builds the library and the local-backend test suites (unit, rules, autograd,
# nn) with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ (or
# $DTENSOR_ASAN_BUILD_DIR) and runs them; any report fails the run. Only the
# suites' targets are built, at -O1, to keep CI short. libtorch is not
# instrumented: ASan still sees every heap access dtensor makes, UBSan checks
# dtensor's own code. -g1 (line tables only) keeps file:line in reports at a
# fraction of full debug info's compile and link time. Not run:
# unit_single_rank_collectives (the unit suite's redistribute cases again,
# minutes under ASan). Extra arguments go to ctest.
#   bash scripts/asan.sh                 # everything
#   bash scripts/asan.sh -R '^unit$'     # one suite
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${DTENSOR_ASAN_BUILD_DIR:-build-asan}
sanitize="-fsanitize=address,undefined -fno-omit-frame-pointer"
# g++ 12 under the sanitizers at -O1 warns that libtorch 1.13's
# c10::optional<at::Generator> copy "may be used uninitialized" where
# uniform_/normal_ take their default generator (tests/rules/random_test.cc):
# a false positive of instrumented code (GCC's manual warns that sanitizers
# raise the rate of -Wmaybe-uninitialized false positives); every other
# warning stays an error.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="$sanitize -Wno-maybe-uninitialized" -DCMAKE_EXE_LINKER_FLAGS="$sanitize" \
  -DCMAKE_SHARED_LINKER_FLAGS="$sanitize" -DDTENSOR_WARNINGS_AS_ERRORS=ON \
  -DDTENSOR_BUILD_BENCHMARKS=OFF -DDTENSOR_WITH_NCCL=OFF
cmake --build "$build_dir" -j "$(nproc)" --target dtensor_tests dtensor_rules_tests \
  dtensor_autograd_tests dtensor_nn_tests
# LeakSanitizer stays on (ASan's default): these suites leak nothing, libtorch
# included, so no suppression is needed.
UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}" \
  ctest --test-dir "$build_dir" -R '^(unit|rules|autograd|nn)$' --output-on-failure \
  -j "$(nproc)" "$@"
