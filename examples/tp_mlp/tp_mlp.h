// Copyright 2026 The dtensor Authors.
//
// examples/tp_mlp/tp_mlp.h: tensor-parallel training of a two-layer MLP,
// checked step by step against the same training on one device.
//
// The MLP is linear -> relu -> linear -> mean squared error. Tensor
// parallelism shards the first linear by columns (its weight [hidden, in] as
// S(0), its bias S(0)) and the second by rows (weight [out, hidden] S(1),
// bias Replicate): the hidden activations stay sharded and the second matmul
// leaves Partial(sum) outputs, reduced once. The sequence-parallel variant
// keeps the activations sharded by rows outside the MLP: the input arrives as
// S(0), is gathered before the first linear, and the Partial output is
// reduce-scattered back to S(0).
//
// Every step runs forward, backward and an SGD update on the ordinary ATen
// API (at::linear, at::relu, Tensor::backward, sub_) with DTensor parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::examples {

struct TpMlpOptions {
  int64_t batch = 6, in = 8, hidden = 12, out = 8;
  int64_t steps = 4;
  double learning_rate = 0.05;
  bool sequence_parallel = false;
};

struct TpMlpStep {
  double loss = 0;            // distributed
  double reference_loss = 0;  // one device
  double max_grad_diff = 0;   // largest |grad - reference grad| over parameters
  double max_param_diff = 0;  // after the update
  std::string output_placements;
  std::string weight_grad_placements;  // first layer's weight
};

// Trains on `mesh` (1-D) and on one device from the same initial values.
// Collective: every rank of the mesh calls it.
std::vector<TpMlpStep> train_tp_mlp(const DeviceMesh& mesh, const TpMlpOptions& options);

}  // namespace dtensor::examples
