// Copyright 2026 The dtensor Authors.
#include "examples/moe/moe.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <dtensor/base/check.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/spmd/collectives.h>
#include "examples/support/one_device.h"

namespace dtensor::examples {
namespace {

constexpr const char* kEp = "ep";

// Each token's top-k experts and their gates.
struct Routing {
  at::Tensor gates;    // [tokens, k], each row summing to 1
  at::Tensor experts;  // [tokens, k], int64
};

Routing route(const at::Tensor& x, const at::Tensor& router, int64_t top_k) {
  const at::Tensor probabilities = at::softmax(at::mm(x, router), 1);
  auto [top, experts] = at::topk(probabilities, top_k, 1);
  return {top / top.sum(1, /*keepdim=*/true), experts};
}

at::Tensor expert_mlp(const at::Tensor& x, const at::Tensor& w_in, const at::Tensor& w_out) {
  return at::mm(at::silu(at::mm(x, w_in)), w_out);
}

// The positions that sort `keys` (int64, 1-D), equal keys kept in order.
at::Tensor stable_order(const at::Tensor& keys) {
  return std::get<1>(at::sort(keys, /*stable=*/c10::optional<bool>(true), /*dim=*/0));
}

// Sums of consecutive groups of `group` counts.
std::vector<int64_t> group_sums(const std::vector<int64_t>& counts, int64_t group) {
  std::vector<int64_t> sums(counts.size() / group, 0);
  for (size_t i = 0; i < counts.size(); ++i) sums[i / group] += counts[i];
  return sums;
}

std::vector<int64_t> to_vector(const at::Tensor& counts) {
  const at::Tensor contiguous = counts.contiguous();
  const int64_t* data = contiguous.data_ptr<int64_t>();
  return {data, data + contiguous.numel()};
}

// This rank's experts on the rows it received, which arrive in blocks by
// source rank, each block sorted by local expert (`received` counts them,
// source-major). The rows are grouped by expert for one matmul pair per
// expert, then put back in arrival order for the combine.
at::Tensor apply_local_experts(const at::Tensor& rows, const ReceivedCounts& received,
                               const MoeParams& params) {
  const int64_t local_experts = params.w_in.size(0);
  const int64_t sources = static_cast<int64_t>(received.size()) / local_experts;
  const at::Tensor expert_of_row = at::repeat_interleave(
      at::arange(local_experts, at::kLong).repeat(sources), at::tensor(received, at::kLong));
  const at::Tensor by_expert = stable_order(expert_of_row);
  const std::vector<int64_t> rows_per_expert =
      to_vector(at::bincount(expert_of_row, {}, local_experts));
  std::vector<at::Tensor> outputs;
  const std::vector<at::Tensor> groups =
      rows.index_select(0, by_expert).split_with_sizes(rows_per_expert);
  for (int64_t e = 0; e < local_experts; ++e) {
    outputs.push_back(expert_mlp(groups[e], params.w_in[e], params.w_out[e]));
  }
  return at::cat(outputs).index_select(0, stable_order(by_expert));
}

std::vector<at::Tensor> gradients(const MoeParams& params) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : params.all()) out.push_back(p.grad());
  return out;
}

// The largest difference between each of this rank's `mine` and the same
// part of one device's `full` (the experts this rank holds).
double max_diff(const std::vector<at::Tensor>& mine, const std::vector<at::Tensor>& full,
                int64_t ep_rank) {
  double out = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    const at::Tensor part =
        i == 0 ? full[i] : full[i].narrow(0, ep_rank * mine[i].size(0), mine[i].size(0));
    out = std::max(out, max_abs_diff(mine[i], part));
  }
  return out;
}

void sgd_step(const MoeParams& params, double learning_rate) {
  c10::AutoGradMode no_grad(false);
  for (const at::Tensor& p : params.all()) {
    p.sub_(p.grad(), learning_rate);
    p.mutable_grad().zero_();
  }
}

// |y - target|^2 summed, over `tokens`: this part's term of the global mean.
at::Tensor loss_term(const at::Tensor& y, const at::Tensor& target, int64_t tokens) {
  return (y - target).pow(2).sum() / static_cast<double>(tokens);
}

}  // namespace

MoeParams seeded_moe_params(const MoeConfig& config, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const auto draw = [&](std::vector<int64_t> shape, double scale) {
    return at::randn(shape, generator, at::kDouble).mul_(scale);
  };
  const int64_t d = config.model_dim, h = config.hidden_dim, e = config.num_experts;
  return {draw({d, e}, 1.0), draw({e, d, h}, 1.0 / std::sqrt(d)),
          draw({e, h, d}, 1.0 / std::sqrt(h))};
}

MoeParams expert_parallel_params(const MoeParams& full, int64_t ep_rank, int64_t ep_size) {
  const int64_t experts = full.w_in.size(0);
  DTENSOR_CHECK(experts % ep_size == 0, "moe: expected a number of experts divisible by the ",
                ep_size, " ranks of \"ep\", found ", experts);
  const int64_t held = experts / ep_size;
  const auto own = [&](const at::Tensor& t) {
    return t.detach().narrow(0, ep_rank * held, held).clone().requires_grad_();
  };
  return {full.router.detach().clone().requires_grad_(), own(full.w_in), own(full.w_out)};
}

at::Tensor moe_one_device(const at::Tensor& x, const MoeParams& params, const MoeConfig& config) {
  const Routing routing = route(x, params.router, config.top_k);
  const at::Tensor weights = at::zeros({x.size(0), config.num_experts}, x.options())
                                 .scatter(1, routing.experts, routing.gates);
  at::Tensor y = at::zeros_like(x);
  for (int64_t e = 0; e < config.num_experts; ++e) {
    y = y + weights.narrow(1, e, 1) * expert_mlp(x, params.w_in[e], params.w_out[e]);
  }
  return y;
}

at::Tensor moe_expert_parallel(const at::Tensor& x, const MoeParams& params,
                               const MoeConfig& config, const DeviceMesh& mesh,
                               ReceivedCounts* received) {
  const int64_t local_experts = params.w_in.size(0);
  const at::Tensor router = spmd::invariant_to_replicate(params.router, mesh, kEp);
  const Routing routing = route(x, router, config.top_k);

  // The (token, expert) pairs sorted by expert, hence by the rank holding it.
  const at::Tensor pair_experts = routing.experts.flatten();
  const at::Tensor by_expert = stable_order(pair_experts);
  const at::Tensor tokens = x.index_select(0, by_expert.div(config.top_k, "floor"));
  const std::vector<int64_t> send_counts =
      to_vector(at::bincount(pair_experts, {}, config.num_experts));
  const std::vector<int64_t> recv_counts =
      spmd::exchange_split_sizes(tokens, send_counts, mesh, kEp);
  const std::vector<int64_t> send_splits = group_sums(send_counts, local_experts);
  const std::vector<int64_t> recv_splits = group_sums(recv_counts, local_experts);

  const at::Tensor dispatched = spmd::all_to_all_v(tokens, mesh, kEp, send_splits, recv_splits);
  const at::Tensor processed = apply_local_experts(dispatched, recv_counts, params);
  const at::Tensor combined = spmd::all_to_all_v(processed, mesh, kEp, recv_splits, send_splits);

  if (received != nullptr) *received = recv_counts;
  const at::Tensor per_pair = combined.index_select(0, stable_order(by_expert));
  return (per_pair.view({x.size(0), config.top_k, x.size(1)}) * routing.gates.unsqueeze(2)).sum(1);
}

std::vector<MoeStep> train_moe(const DeviceMesh& mesh, const MoeTrainOptions& options) {
  const MoeConfig& config = options.config;
  const int64_t ep_size = mesh.size(mesh.dim_index(kEp));
  const int64_t ep_rank = mesh.get_local_rank(kEp);
  const int64_t global_tokens = ep_size * options.tokens_per_rank;
  const MoeParams reference = expert_parallel_params(seeded_moe_params(config, options.seed), 0, 1);
  const MoeParams mine = expert_parallel_params(reference, ep_rank, ep_size);
  at::Generator data = at::detail::createCPUGenerator(options.seed + 1);

  std::vector<MoeStep> steps;
  for (int64_t s = 0; s < options.steps; ++s) {
    // The tokens require grad, as a layer's output below this one would:
    // their gradient comes back through the dispatch's backward.
    const at::Tensor x =
        at::randn({global_tokens, config.model_dim}, data, at::kDouble).requires_grad_();
    const at::Tensor target = at::randn({global_tokens, config.model_dim}, data, at::kDouble);
    const int64_t first = ep_rank * options.tokens_per_rank;
    const at::Tensor x_mine =
        x.detach().narrow(0, first, options.tokens_per_rank).clone().requires_grad_();
    MoeStep step;
    {
      const CollectiveCounter counter;
      const at::Tensor y = moe_expert_parallel(x_mine, mine, config, mesh, &step.received);
      // Every rank's term summed: the global loss on every rank, whose
      // gradient reaches each term whole (P -> I).
      const at::Tensor loss = spmd::all_reduce(
          loss_term(y, target.narrow(0, first, options.tokens_per_rank), global_tokens), mesh, kEp,
          spmd::ReplicatedType::kInvariant);
      loss.backward();
      step.loss = loss.item<double>();
      step.collectives = {counter.by_collective().begin(), counter.by_collective().end()};
    }
    const at::Tensor reference_loss =
        loss_term(moe_one_device(x, reference, config), target, global_tokens);
    reference_loss.backward();
    step.reference_loss = reference_loss.item<double>();
    step.max_grad_diff =
        std::max(max_diff(gradients(mine), gradients(reference), ep_rank),
                 max_abs_diff(x_mine.grad(), x.grad().narrow(0, first, options.tokens_per_rank)));
    sgd_step(mine, options.learning_rate);
    sgd_step(reference, options.learning_rate);
    step.max_param_diff = max_diff(mine.all(), reference.all(), ep_rank);
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace dtensor::examples
