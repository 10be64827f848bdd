// Copyright 2026 The dtensor Authors.
//
// examples/llama/llama_parallel.h: parallel plans for the Llama model of
// llama.h, one function each, and training that checks every step against
// one device.
//
// A plan only decides where each parameter lives; the model's forward is
// unchanged and its activations take the layouts the sharding rules give:
//
//  - kTensorParallel (Megatron): q, k, v, w1, w3 split by output features
//    (colwise, Shard(0) of the weight), wo, w2 by input features (rowwise,
//    Shard(1)); attention runs on each rank's heads with no communication,
//    each block's two row-wise outputs are pending sums reduced where the
//    residual stream needs them; embeddings, norms and the head replicated.
//  - kLossParallel: the same, with the output head split by vocabulary, so
//    the logits stay sharded and cross-entropy reduces two values per row
//    instead of gathering them.
//
// On a 2-D mesh (dp, tp) the plan applies to "tp" and the batch is split
// over "dp" (data parallel: replicated parameters, gradients summed over
// dp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <dtensor/mesh/device_mesh.h>
#include "examples/llama/llama.h"

namespace dtensor::examples {

enum class LlamaPlan { kTensorParallel, kLossParallel };

// "tp", "loss_parallel".
std::string plan_name(LlamaPlan plan);

// Lays out the parameters of `model` for `plan` over `mesh` (1-D: the "tp"
// ranks; 2-D: named (dp, tp)) and replicates its buffers. Collective.
void parallelize_llama(Llama& model, const DeviceMesh& mesh, LlamaPlan plan);

struct LlamaTrainOptions {
  LlamaConfig config;
  int64_t batch = 4;
  int64_t seq = 8;
  int64_t steps = 3;
  double learning_rate = 0.1;
  uint64_t seed = 1234;
  // AdamW instead of plain SGD.
  bool adamw = false;
  // Clip the gradients' total 2-norm to this before each update (0: none).
  double clip_norm = 0;
};

struct LlamaStep {
  double loss = 0;                             // on the mesh
  double reference_loss = 0;                   // one device
  double max_grad_diff = 0;                    // over every parameter
  double max_param_diff = 0;                   // after the update
  double grad_norm = 0;                        // before clipping, on the mesh
  double reference_grad_norm = 0;              // one device
  std::map<std::string, int64_t> collectives;  // the step's, by kind (this rank)
};

// Trains the model under `plan` on `mesh` and on one device, from the same
// initial values and data, with SGD or AdamW, clipping the gradients if
// asked. Collective.
std::vector<LlamaStep> train_llama(const DeviceMesh& mesh, LlamaPlan plan,
                                   const LlamaTrainOptions& options);

}  // namespace dtensor::examples
