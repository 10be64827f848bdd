#!/usr/bin/env bash
# The main job: set up, build the library and these examples only (no tests
# or benchmarks), and run on 4 ranks of the in-process local backend (no
# launcher): tensor-parallel (and sequence-parallel) MLP training with plain
# ATen calls on DTensors, checked step by step against one-device training;
# then the DeviceMesh and redistribute tours.
#
#   bash scripts/run_example.sh          # the main job
#   bash scripts/run_example.sh llama    # also the Llama-style decoder under its plans
set -euo pipefail
cd "$(dirname "$0")/.."
targets="tp_mlp mesh_tour redistribute_tour"
[[ "${1:-}" == "llama" ]] && targets+=" llama"
DTENSOR_TARGETS="$targets" bash scripts/build.sh
build="${DTENSOR_BUILD_DIR:-build}"
"$build"/examples/tp_mlp
echo
if [[ "${1:-}" == "llama" ]]; then
  "$build"/examples/llama
  echo
fi
"$build"/examples/mesh_tour
echo
"$build"/examples/redistribute_tour
