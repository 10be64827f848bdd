#!/usr/bin/env bash
# The main job: set up, build, and run the example on 4 ranks of the
# in-process local backend (no launcher).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
"${DTENSOR_BUILD_DIR:-build}"/examples/mesh_tour
