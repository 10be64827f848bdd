#!/usr/bin/env bash
# Installs the built dtensor into a scratch prefix, then configures, builds and
# runs tests/install/consumer against it with find_package(dtensor).
# Usage: run_consumer_test.sh BUILD_DIR SCRATCH_DIR [extra CMAKE_PREFIX_PATH]
set -euo pipefail
build_dir=$1
scratch=$2
extra_prefix=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch"
cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
cmake -S "$here/consumer" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix${extra_prefix:+;$extra_prefix}" >/dev/null
cmake --build "$scratch/build" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib:${LD_LIBRARY_PATH:-}" "$scratch/build/consumer"
