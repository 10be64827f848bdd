#!/usr/bin/env bash
# The main job: set up, build the library and these examples only (no tests
# or benchmarks), and run on 4 ranks of the in-process local backend (no
# launcher): the Llama-style decoder of examples/llama trained under each
# parallel plan (TP, TP+SP, loss parallel, 2-D), every step checked against
# one device, with its collectives; then tensor-parallel MLP training with
# plain ATen calls, and the DeviceMesh and redistribute tours.
#
#   bash scripts/run_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DTENSOR_TARGETS="llama tp_mlp mesh_tour redistribute_tour" bash scripts/build.sh
build="${DTENSOR_BUILD_DIR:-build}"
"$build"/examples/llama
echo
"$build"/examples/tp_mlp
echo
"$build"/examples/mesh_tour
echo
"$build"/examples/redistribute_tour
