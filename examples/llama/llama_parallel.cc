// Copyright 2026 The dtensor Authors.
#include "examples/llama/llama_parallel.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
// clip_grad.h is not self-contained: it needs torch::Tensor declared first.
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/clip_grad.h>
#include <dtensor/nn/fully_shard.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/nn/reduce_gradients.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "examples/support/one_device.h"

namespace dtensor::examples {
namespace {

// The tp degree of a 1-D mesh (all "tp") or a 2-D (dp, tp) one.
int64_t tp_degree(const DeviceMesh& mesh) {
  DTENSOR_CHECK(mesh.ndim() == 1 || mesh.ndim() == 2,
                "parallelize_llama: expected a 1-D mesh or a 2-D (dp, tp) mesh, found ",
                mesh.to_string());
  if (mesh.ndim() == 1) return mesh.size(0);
  const int64_t tp = mesh.dim_index("tp");
  mesh.dim_index("dp");
  return mesh.size(tp);
}

nn::StyleOptions layouts(PlacementPtr input, PlacementPtr desired_input, PlacementPtr output,
                         PlacementPtr desired_output = nullptr) {
  nn::StyleOptions options;
  options.input_layouts = std::move(input);
  options.desired_input_layouts = std::move(desired_input);
  options.output_layouts = std::move(output);
  options.desired_output_layouts = std::move(desired_output);
  options.use_local_output = false;  // DTensors flow between modules
  return options;
}

// Megatron's plan for every block: the block's input replicated (gathered
// from the sequence split under sequence parallelism), q, k, v, w1 and w3
// split by output features, wo and w2 by input features, their sums
// all-reduced (reduce-scattered to the sequence split) on the way out.
void plan_blocks(const Llama& model, bool sequence_parallel, nn::ParallelizePlan& plan) {
  const PlacementPtr residual = sequence_parallel ? Shard::make(1) : Replicate::make();
  for (size_t i = 0; i < model->layers->size(); ++i) {
    const std::string layer = "layers." + std::to_string(i) + ".";
    for (const char* block : {"attention", "feed_forward"}) {
      plan.emplace_back(layer + block,
                        nn::PrepareModuleInput(layouts(residual, Replicate::make(), nullptr)));
    }
    for (const char* colwise :
         {"attention.wq", "attention.wk", "attention.wv", "feed_forward.w1", "feed_forward.w3"}) {
      plan.emplace_back(layer + colwise, nn::ColwiseParallel(layouts(nullptr, nullptr, nullptr)));
    }
    for (const char* rowwise : {"attention.wo", "feed_forward.w2"}) {
      plan.emplace_back(layer + rowwise, nn::RowwiseParallel(layouts(nullptr, nullptr, residual)));
    }
    if (sequence_parallel) {
      for (const char* norm : {"attention_norm", "ffn_norm"}) {
        plan.emplace_back(layer + norm, nn::SequenceParallel());
      }
    }
  }
}

// The layers alone: colwise q, k, v, w1, w3, rowwise wo and w2 whose
// outputs stay pending sums, the head's logits gathered.
nn::ParallelizePlan partial_residual_plan(const Llama& model) {
  nn::ParallelizePlan plan;
  for (size_t i = 0; i < model->layers->size(); ++i) {
    const std::string layer = "layers." + std::to_string(i) + ".";
    for (const char* colwise :
         {"attention.wq", "attention.wk", "attention.wv", "feed_forward.w1", "feed_forward.w3"}) {
      plan.emplace_back(layer + colwise, nn::ColwiseParallel(layouts(nullptr, nullptr, nullptr)));
    }
    for (const char* rowwise : {"attention.wo", "feed_forward.w2"}) {
      plan.emplace_back(layer + rowwise,
                        nn::RowwiseParallel(layouts(nullptr, nullptr, Partial::make())));
    }
  }
  plan.emplace_back("output", nn::ColwiseParallel(layouts(nullptr, nullptr, Replicate::make())));
  return plan;
}

nn::ParallelizePlan llama_plan(const Llama& model, LlamaPlan which) {
  if (which == LlamaPlan::kPartialResidual) return partial_residual_plan(model);
  const bool sequence_parallel = which == LlamaPlan::kSequenceParallel;
  nn::ParallelizePlan plan;
  plan_blocks(model, sequence_parallel, plan);
  // The head: vocabulary-split logits, gathered unless the loss takes them
  // split. Its input is a boundary: under plain TP the final norm's output
  // is replicated, and the head's input gradient is all-reduced there once.
  const PlacementPtr logits =
      which == LlamaPlan::kLossParallel ? PlacementPtr(Shard::make(-1)) : Replicate::make();
  plan.emplace_back("output", nn::ColwiseParallel(layouts(nullptr, nullptr, logits)));
  if (sequence_parallel) {
    // Each rank embeds its positions: the ids are split, not the vectors.
    plan.emplace_back("tok_embeddings",
                      nn::PrepareModuleInput(layouts(nullptr, Shard::make(1), nullptr)));
    plan.emplace_back("norm", nn::SequenceParallel());
  } else {
    plan.emplace_back(
        "norm", nn::PrepareModuleOutput(layouts(nullptr, nullptr, nullptr, Replicate::make())));
  }
  return plan;
}

// SGD or AdamW over a model's parameters.
class Optimizer {
 public:
  Optimizer(torch::nn::Module& model, const LlamaTrainOptions& options)
      : parameters_(model.parameters()), learning_rate_(options.learning_rate) {
    if (options.adamw) {
      adamw_.emplace(parameters_, torch::optim::AdamWOptions(options.learning_rate));
    }
  }

  void step() {
    if (adamw_) {
      adamw_->step();
    } else {
      torch::NoGradGuard no_grad;
      for (at::Tensor& p : parameters_) p.sub_(p.grad().mul(learning_rate_));
    }
    // Gradients to none, not zero (libtorch 1.13's zero_grad zeroes them):
    // the next backward's pending sums would otherwise be reduced one by one
    // as they accumulate into the zeros, not in reduce_gradients' buckets.
    for (at::Tensor& p : parameters_) p.mutable_grad() = at::Tensor();
  }

 private:
  std::vector<at::Tensor> parameters_;
  double learning_rate_;
  std::optional<torch::optim::AdamW> adamw_;
};

// The largest difference between the two models' parameters (`of_grad`:
// their gradients).
double max_difference(torch::nn::Module& distributed, torch::nn::Module& reference, bool of_grad) {
  const auto mine = distributed.named_parameters();
  const auto theirs = reference.named_parameters();
  double largest = 0;
  for (const auto& parameter : mine) {
    const at::Tensor& other = theirs[parameter.key()];
    largest = std::max(largest, of_grad ? max_abs_diff(parameter->grad(), other.grad())
                                        : max_abs_diff(*parameter, other));
  }
  return largest;
}

}  // namespace

Llama seeded_llama(const LlamaConfig& config, uint64_t seed, const at::Device& device,
                   at::ScalarType dtype) {
  // The rank threads of the local backend share libtorch's default
  // generator: one model at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  at::manual_seed(seed);
  Llama model(config);
  model->to(device, dtype);
  return model;
}

std::string plan_name(LlamaPlan plan) {
  switch (plan) {
    case LlamaPlan::kTensorParallel:
      return "tp";
    case LlamaPlan::kSequenceParallel:
      return "tp_sp";
    case LlamaPlan::kLossParallel:
      return "loss_parallel";
    case LlamaPlan::kPartialResidual:
      return "tp_partial_residual";
    case LlamaPlan::kFullyShard:
      return "fsdp";
  }
  return "";
}

namespace {

bool has_dim(const DeviceMesh& mesh, const char* name) {
  const std::vector<std::string>& names = mesh.dim_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The mesh tensor parallelism splits over: all of a 1-D mesh not named
// "dp", the "tp" slice of a 2-D one; none for fully_shard alone.
std::optional<DeviceMesh> tp_mesh(const DeviceMesh& mesh) {
  if (mesh.ndim() == 2) return mesh["tp"];
  if (has_dim(mesh, "dp")) return std::nullopt;
  return mesh;
}

}  // namespace

at::Tensor llama_batch(const at::Tensor& batch, const DeviceMesh& mesh) {
  at::Tensor rows = batch;
  if (has_dim(mesh, "dp")) {
    const DeviceMesh dp = mesh["dp"];
    DTENSOR_CHECK(batch.size(0) % dp.size(0) == 0, "llama_batch: expected a batch (", batch.size(0),
                  ") that divides by the dp degree (", dp.size(0),
                  "): each rank's mean loss counts alike");
    rows = batch.chunk(dp.size(0))[dp.get_local_rank(0)];
  }
  const std::optional<DeviceMesh> tp = tp_mesh(mesh);
  return tp ? distribute_tensor(rows, *tp, {Replicate::make()}).tensor() : rows;
}

double llama_loss_value(const at::Tensor& loss, const DeviceMesh& mesh) {
  const at::Tensor mine = (is_dtensor(loss) ? DTensor(loss).full_tensor() : loss).detach();
  if (!has_dim(mesh, "dp")) return mine.item<double>();
  return DTensor(from_local(mine.reshape({1}), mesh["dp"], {Shard::make(0)}))
      .full_tensor()
      .mean()
      .item<double>();
}

void parallelize_llama(Llama& model, const DeviceMesh& mesh, LlamaPlan plan,
                       bool reshard_after_forward) {
  const bool fsdp_only = plan == LlamaPlan::kFullyShard;
  DTENSOR_CHECK(!fsdp_only || (mesh.ndim() == 1 && has_dim(mesh, "dp")),
                "parallelize_llama: the fsdp plan expected a 1-D mesh named \"dp\", found ",
                mesh.to_string());
  if (!fsdp_only) {
    const int64_t degree = tp_degree(mesh);
    DTENSOR_CHECK(model->config().heads % degree == 0 && model->config().kv_heads % degree == 0,
                  "parallelize_llama: expected the heads (", model->config().heads,
                  ") and key/value heads (", model->config().kv_heads,
                  ") to divide by the tp degree (", degree, ")");
    const DeviceMesh tp = *tp_mesh(mesh);
    nn::parallelize_module(*model, tp, llama_plan(model, plan));
    nn::distribute_module(*model, tp);  // the rest replicated
    nn::replicate_buffers(*model, tp);
  }
  if (!has_dim(mesh, "dp")) return;
  // Data parallelism stores every parameter sharded over dp: one group per
  // block, the embedding, final norm and head in the root's.
  const DeviceMesh dp = mesh["dp"];
  const nn::FullyShardOptions fsdp{.reshard_after_forward = reshard_after_forward};
  for (const auto& layer : *model->layers) nn::fully_shard(*layer, dp, fsdp);
  nn::fully_shard(*model, dp, fsdp);
}

std::vector<LlamaStep> train_llama(const DeviceMesh& mesh, LlamaPlan plan,
                                   const LlamaTrainOptions& options) {
  // The reference trains on the mesh's device too (a CUDA one under NCCL).
  Llama reference = seeded_llama(options.config, options.seed, mesh.device(), options.dtype);
  Llama model = seeded_llama(options.config, options.seed, mesh.device(), options.dtype);
  parallelize_llama(model, mesh, plan, options.reshard_after_forward);
  at::Generator data = at::detail::createCPUGenerator(options.seed);
  const at::Tensor tokens =
      at::randint(options.config.vocab, {options.batch, options.seq}, data, at::kLong)
          .to(mesh.device());
  const at::Tensor targets = tokens.roll(-1, 1);
  const at::Tensor mesh_tokens = llama_batch(tokens, mesh);
  const at::Tensor mesh_targets = llama_batch(targets, mesh);
  Optimizer reference_optimizer(*reference, options), optimizer(*model, options);
  std::vector<LlamaStep> steps;
  for (int64_t step = 0; step < options.steps; ++step) {
    LlamaStep record;
    const at::Tensor reference_loss = reference->loss(tokens, targets);
    reference_loss.backward();
    record.reference_loss = reference_loss.item<double>();
    at::Tensor loss;
    {
      CollectiveCounter counter;
      loss = model->loss(mesh_tokens, mesh_targets);
      loss.backward();
      record.collectives = {counter.by_collective().begin(), counter.by_collective().end()};
    }
    record.max_grad_diff = max_difference(*model, *reference, /*of_grad=*/true);
    record.loss = llama_loss_value(loss, mesh);
    {
      CollectiveCounter counter;
      nn::reduce_gradients(model->parameters());
      if (options.clip_norm > 0) {
        record.grad_norm = nn::clip_grad_norm_(model->parameters(), options.clip_norm);
      }
      optimizer.step();
      for (const auto& [kind, count] : counter.by_collective()) record.collectives[kind] += count;
    }
    if (options.clip_norm > 0) {
      record.reference_grad_norm =
          torch::nn::utils::clip_grad_norm_(reference->parameters(), options.clip_norm);
    }
    reference_optimizer.step();
    record.max_param_diff = max_difference(*model, *reference, /*of_grad=*/false);
    steps.push_back(std::move(record));
  }
  return steps;
}

}  // namespace dtensor::examples
