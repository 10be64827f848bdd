// Copyright 2026 The dtensor Authors.
//
// examples/llama/llama_parallel.h: parallel plans for the Llama model of
// llama.h, one function each, and training that checks every step against
// one device.
//
// Each plan is a dtensor::nn::ParallelizePlan: styles on submodules, run by
// parallelize_module as the modules' forward hooks (the model calls its
// children through dtensor::nn::call), so activations change layout only
// where the plan says, as in a hand-written Megatron plan:
//
//  - kTensorParallel: q, k, v, w1, w3 split by output features (colwise),
//    wo, w2 by input features (rowwise); each attention and feed-forward
//    block takes a replicated input (its gradient all-reduced there once)
//    and all-reduces its output; attention runs on each rank's heads with
//    no communication; the head splits the vocabulary and gathers the
//    logits; embeddings and norms replicated.
//  - kSequenceParallel: the same blocks, with the residual stream and the
//    norms split along the sequence: each block all-gathers its input and
//    reduce-scatters its output; the norms' and the embedding's weight
//    gradients are pending sums, reduced in one bucket
//    (dtensor::nn::reduce_gradients).
//  - kLossParallel: kTensorParallel with the logits left split by
//    vocabulary: cross-entropy reduces a few values per row instead of
//    gathering them.
//  - kPartialResidual: the layers alone, as a user might write it first:
//    colwise and rowwise layers with the rowwise outputs left as pending
//    sums (Partial) into the residual adds, no plan for the blocks. Each
//    pending sum is reduced once, where a norm first needs it, and every
//    later reader takes that reduced form (DTensorImpl's reduced forms):
//    forward communicates as kTensorParallel does.
//  - kFullyShard: data parallelism alone on a 1-D mesh named "dp": every
//    parameter sharded by dtensor::nn::fully_shard (one group per block, the
//    rest in the root's), plain activations, each rank its own rows.
//
// On a 2-D mesh (dp, tp), as PyTorch composes FSDP2 with TP: the plan
// applies to the "tp" slice, then dtensor::nn::fully_shard shards every
// parameter over "dp" (one group per block, the rest in the root's), and
// each dp rank trains on its own rows of the batch; the gradients are
// reduce-scattered (averaged) over dp, one collective per group.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include "examples/llama/llama.h"

namespace dtensor::examples {

enum class LlamaPlan {
  kTensorParallel,
  kSequenceParallel,
  kLossParallel,
  kPartialResidual,
  kFullyShard
};

// A model initialized from `seed` alone, on `device`, in `dtype` (float64
// unless asked): the same on every rank and thread (the local backend's rank
// threads make theirs one at a time).
Llama seeded_llama(const LlamaConfig& config, uint64_t seed,
                   const at::Device& device = at::Device(at::kCPU),
                   at::ScalarType dtype = at::kDouble);

// "tp", "tp_sp", "loss_parallel", "tp_partial_residual", "fsdp".
std::string plan_name(LlamaPlan plan);

// Lays out the parameters of `model` for `plan` over `mesh` (1-D: the "tp"
// ranks, or the "dp" ranks for kFullyShard; 2-D: named (dp, tp), fully
// sharded over dp, gathered parameters
// freed after forward if `reshard_after_forward`) and replicates its
// buffers. Collective.
void parallelize_llama(Llama& model, const DeviceMesh& mesh, LlamaPlan plan,
                       bool reshard_after_forward = false);

// What this rank feeds the model parallelized on `mesh` from the whole
// `batch` (token ids [batch, seq]): over a "dp" dim, this rank's rows (the
// batch must divide by the dp degree: each rank's mean loss counts alike),
// as a DTensor replicated over tp where there is tensor parallelism.
at::Tensor llama_batch(const at::Tensor& batch, const DeviceMesh& mesh);

// The whole batch's loss from this rank's `loss` (the model's): over a
// "dp" dim, the mean of the ranks' means (one small all-gather).
double llama_loss_value(const at::Tensor& loss, const DeviceMesh& mesh);

struct LlamaTrainOptions {
  LlamaConfig config;
  int64_t batch = 4;
  int64_t seq = 8;
  int64_t steps = 3;
  double learning_rate = 0.1;
  uint64_t seed = 1234;
  // What the model computes in (float32 on CUDA takes the fused attention
  // kernels; float64 takes the math path).
  at::ScalarType dtype = at::kDouble;
  // AdamW instead of plain SGD.
  bool adamw = false;
  // Clip the gradients' total 2-norm to this before each update (0: none).
  double clip_norm = 0;
  // Over "dp": free each block's gathered parameters after forward (one
  // more all-gather per block in backward). Off, the step communicates as
  // a hand-written FSDP + TP plan: per group one all-gather, one
  // reduce-scatter.
  bool reshard_after_forward = false;
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
// asked; after each backward, the pending gradient sums are reduced in
// buckets (dtensor::nn::reduce_gradients). Collective.
std::vector<LlamaStep> train_llama(const DeviceMesh& mesh, LlamaPlan plan,
                                   const LlamaTrainOptions& options);

}  // namespace dtensor::examples
