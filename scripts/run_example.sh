#!/usr/bin/env bash
# The main job: set up, build, and run the examples on 4 ranks of the
# in-process local backend (no launcher): a DeviceMesh tour, then a tour of
# redistribute plans checked against the single-device tensor.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
"${DTENSOR_BUILD_DIR:-build}"/examples/mesh_tour
echo
"${DTENSOR_BUILD_DIR:-build}"/examples/redistribute_tour
