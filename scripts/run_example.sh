#!/usr/bin/env bash
# The main job: set up, build the library and these examples only (no tests
# or benchmarks), and run on 4 ranks of the in-process local backend (no
# launcher): tensor-parallel (and sequence-parallel) MLP training with plain
# ATen calls on DTensors, checked step by step against one-device training;
# a Llama-style decoder trained under tensor, loss and 2-D parallel plans,
# checked the same way; then the DeviceMesh and redistribute tours.
set -euo pipefail
cd "$(dirname "$0")/.."
DTENSOR_TARGETS="tp_mlp llama mesh_tour redistribute_tour" bash scripts/build.sh
"${DTENSOR_BUILD_DIR:-build}"/examples/tp_mlp
echo
"${DTENSOR_BUILD_DIR:-build}"/examples/llama
echo
"${DTENSOR_BUILD_DIR:-build}"/examples/mesh_tour
echo
"${DTENSOR_BUILD_DIR:-build}"/examples/redistribute_tour
