// Copyright 2026 The dtensor Authors.
//
// examples/fsdp_tp/fsdp_tp.h: FSDP over tensor parallelism (PyTorch's FSDP2 +
// TP) on a 2-D (dp, tp) mesh, checked step by step against one device.
//
// The two-layer MLP of examples/mlp is split by TP like examples/tp_mlp (w1,
// b1 colwise S(0), w2 rowwise S(1), b2 R on "tp"), and every parameter is
// stored fully sharded: FSDP shards dim 0 on "dp" too, which for w1 and b1 is
// StridedShard(0, tp) (examples/fsdp_tp/fsdp_tp_layout.h). Each dp rank
// trains on its own rows of the batch (S(0) on dp). Each step:
//   1. all-gather the parameters over dp: [SS(0,tp), S(0)] -> [R, S(0)];
//   2. forward and backward with the TP layouts; the batch being split over
//      dp, the gathered weights' gradients are pending sums over dp, and the
//      backward of step 1 reduces them onto the storage layout (a
//      reduce-scatter for Shard; for StridedShard the library all-reduces
//      and keeps the rank's pieces);
//   3. SGD on the sharded storage (each rank updates only what it stores).
// Run: `./build/examples/fsdp_tp` (4 ranks of the in-process local backend).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>
#include "examples/fsdp_tp/fsdp_tp_layout.h"
#include "examples/mlp/mlp.h"

namespace dtensor::examples {

struct FsdpTpOptions {
  // hidden 10 over tp 2 leaves pieces of 5, which dp 2 splits 3 + 2.
  MlpShape shape{/*batch=*/8, /*in=*/6, /*hidden=*/10, /*out=*/4};
  int64_t steps = 4;
  double learning_rate = 0.05;
  // false: FSDP shards dim 0 of every parameter (fully_shard's default), so
  // w2 is [S(0), S(1)]. true: FSDP shards the dim TP split where there is one
  // (a shard_placement_fn), so w2 is [SS(1,tp), S(1)] as well.
  bool fsdp_shards_tp_dim = false;
};

// Per parameter (w1, b1, w2, b2), as "SS(0,2),S(0)".
using ParameterPlacements = std::array<std::string, 4>;

struct FsdpTpStep {
  double loss = 0;                              // distributed
  double reference_loss = 0;                    // one device
  double max_grad_diff = 0;                     // largest |grad - reference grad| over parameters
  double max_param_diff = 0;                    // after the update
  ParameterPlacements storage_placements;       // after the update
  ParameterPlacements compute_placements;       // what forward used
  ParameterPlacements compute_grad_placements;  // the gathered ones' (pending sums over dp)
  ParameterPlacements grad_placements;          // the stored parameters' gradients
  std::map<std::string, int64_t, std::less<>> backward_collectives;  // by kind
  at::Tensor local_input;    // the rows of the batch this rank trained on
  int64_t input_offset = 0;  // the global index of the first of them
};

// The layouts of w1, b1, w2, b2 on `mesh`, a 2-D mesh named (dp, tp).
std::array<FsdpTpLayout, 4> fsdp_tp_layouts(const DeviceMesh& mesh, const FsdpTpOptions& options);

// Trains on `mesh` (2-D, (dp, tp)) and on one device from the same initial
// values. Collective: every rank of the mesh calls it.
std::vector<FsdpTpStep> train_fsdp_tp(const DeviceMesh& mesh, const FsdpTpOptions& options);

}  // namespace dtensor::examples
