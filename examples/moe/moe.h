// Copyright 2026 The dtensor Authors.
//
// examples/moe/moe.h: an expert-parallel mixture-of-experts layer written
// with the typed collectives of dtensor/spmd/collectives.h, trained with SGD
// and checked step by step against the same layer on one device.
//
// The layer: y = sum over the token's top-k experts e of gate_e * expert_e(x),
// where
//  - the router is a linear map to one logit per expert; the gates are the
//    softmax probabilities of the k largest, renormalised to sum to 1 per
//    token (as Mixtral does: a token's output has the scale of one expert's);
//  - each expert is an MLP, expert_e(x) = silu(x w_in[e]) w_out[e].
// No load-balancing loss and no capacity limit: every routed token is
// computed, so the layer equals one device exactly.
//
// Expert parallelism over the mesh dim "ep" of n ranks: rank r holds experts
// [r * E/n, (r + 1) * E/n) (Varying) and a copy of the router (Invariant,
// turned Replicate for use: its gradient, one term per rank, is all-reduced
// in backward). Each rank routes its own tokens (data parallel over "ep"),
// sorts the (token, expert) pairs by expert, which sorts them by the rank
// holding the expert, and
//   1. exchanges the per-expert counts (one small all_to_all): the split
//      sizes come from the routing at run time;
//   2. dispatches the pairs' tokens with all_to_all_v;
//   3. applies its experts to the rows it received, grouped by expert;
//   4. combines: all_to_all_v back with the splits swapped, then the rows
//      return to (token, expert) order and are summed, weighted by the gates.
// The backward of each all_to_all_v is the other one (V -> V): a training
// step runs 1 all_to_all and 4 all_to_all_v, plus the loss's and the
// router gradient's all_reduce.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::examples {

struct MoeConfig {
  int64_t model_dim = 8;
  int64_t hidden_dim = 16;
  int64_t num_experts = 8;  // divisible by the "ep" size
  int64_t top_k = 2;
};

// The layer's weights: on one device every expert; on an "ep" rank its own
// experts (the leading dim of w_in and w_out) and the whole router.
struct MoeParams {
  at::Tensor router;  // [model_dim, num_experts]
  at::Tensor w_in;    // [experts held, model_dim, hidden_dim]
  at::Tensor w_out;   // [experts held, hidden_dim, model_dim]

  std::vector<at::Tensor> all() const { return {router, w_in, w_out}; }
};

// Float64 weights drawn from `seed` alone, every expert (the same on every
// rank and thread).
MoeParams seeded_moe_params(const MoeConfig& config, uint64_t seed);

// The weights rank `ep_rank` of `ep_size` holds of `full`: the router and its
// experts, as new leaves that require grad.
MoeParams expert_parallel_params(const MoeParams& full, int64_t ep_rank, int64_t ep_size);

// The layer on one device, written densely (every expert on every token,
// weighted by the gates, zero where not routed): the reference.
at::Tensor moe_one_device(const at::Tensor& x, const MoeParams& params, const MoeConfig& config);

// What the expert-parallel layer routed on this rank in its last call: the
// rows it received per (source rank, local expert), source-major.
using ReceivedCounts = std::vector<int64_t>;

// The layer on this rank's tokens `x` [tokens, model_dim] with this rank's
// `params` (expert_parallel_params) over the mesh dim "ep" of `mesh`.
// Collective over "ep". Writes the rows received per (source rank, local
// expert) into `received` when given.
at::Tensor moe_expert_parallel(const at::Tensor& x, const MoeParams& params,
                               const MoeConfig& config, const DeviceMesh& mesh,
                               ReceivedCounts* received = nullptr);

struct MoeTrainOptions {
  MoeConfig config;
  int64_t tokens_per_rank = 6;
  int64_t steps = 3;
  double learning_rate = 0.5;
  uint64_t seed = 2026;
};

struct MoeStep {
  double loss = 0;                             // the global batch's, on the mesh
  double reference_loss = 0;                   // one device
  double max_grad_diff = 0;                    // this rank's weights and tokens vs one device
  double max_param_diff = 0;                   // after the update
  ReceivedCounts received;                     // this rank's, see moe_expert_parallel
  std::map<std::string, int64_t> collectives;  // the step's, by kind (this rank)
};

// Trains the layer over "ep" of `mesh` and on one device from the same
// weights and data: each step draws a global batch of ep * tokens_per_rank
// tokens and targets, rank r takes rows [r * tokens_per_rank, ...), and the
// loss is the mean over the global batch of |y - target|^2; plain SGD. The
// tokens require grad (as a lower layer's output would), so the dispatch
// has a backward too. Collective over "ep".
std::vector<MoeStep> train_moe(const DeviceMesh& mesh, const MoeTrainOptions& options);

}  // namespace dtensor::examples
