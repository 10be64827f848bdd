// Copyright 2026 The dtensor Authors.
#include "examples/llama/llama_parallel.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
// clip_grad.h is not self-contained: it needs torch::Tensor declared first.
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <mutex>
#include <optional>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/nn/clip_grad.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "examples/support/one_device.h"

namespace dtensor::examples {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The tensor-parallel placement of the weight of the module at `path`, or
// null for a replicated one.
PlacementPtr tp_placement(const std::string& path, LlamaPlan plan) {
  for (const char* colwise :
       {"attention.wq", "attention.wk", "attention.wv", "feed_forward.w1", "feed_forward.w3"}) {
    if (ends_with(path, colwise)) return Shard::make(0);
  }
  for (const char* rowwise : {"attention.wo", "feed_forward.w2"}) {
    if (ends_with(path, rowwise)) return Shard::make(1);
  }
  if (path == "output" && plan == LlamaPlan::kLossParallel) return Shard::make(0);
  return nullptr;
}

// The mesh dim the plan splits tensors over, and the data-parallel one (-1
// on a 1-D mesh).
struct MeshDims {
  int64_t tp = 0;
  int64_t dp = -1;
};

MeshDims mesh_dims(const DeviceMesh& mesh) {
  DTENSOR_CHECK(mesh.ndim() == 1 || mesh.ndim() == 2,
                "parallelize_llama: expected a 1-D mesh or a 2-D (dp, tp) mesh, found ",
                mesh.to_string());
  if (mesh.ndim() == 1) return {};
  return {mesh.dim_index("tp"), mesh.dim_index("dp")};
}

// Replicated everywhere but on the tp dim.
std::vector<PlacementPtr> on_tp(const DeviceMesh& mesh, const PlacementPtr& placement) {
  std::vector<PlacementPtr> placements(mesh.ndim(), Replicate::make());
  placements[mesh_dims(mesh).tp] = placement;
  return placements;
}

// The batch split over dp (if any), replicated over tp.
std::vector<PlacementPtr> batch_layout(const DeviceMesh& mesh) {
  std::vector<PlacementPtr> placements(mesh.ndim(), Replicate::make());
  if (mesh_dims(mesh).dp >= 0) placements[mesh_dims(mesh).dp] = Shard::make(0);
  return placements;
}

// A model made from `seed` alone, the same on every rank: the rank threads
// of the local backend share libtorch's default generator.
Llama seeded_model(const LlamaConfig& config, uint64_t seed) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  at::manual_seed(seed);
  Llama model(config);
  model->to(at::kDouble);
  return model;
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
      adamw_->zero_grad();
      return;
    }
    torch::NoGradGuard no_grad;
    for (at::Tensor& p : parameters_) {
      p.sub_(p.grad().mul(learning_rate_));
      p.mutable_grad() = at::Tensor();
    }
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

std::string plan_name(LlamaPlan plan) {
  return plan == LlamaPlan::kTensorParallel ? "tp" : "loss_parallel";
}

void parallelize_llama(Llama& model, const DeviceMesh& mesh, LlamaPlan plan) {
  const MeshDims dims = mesh_dims(mesh);
  DTENSOR_CHECK(model->config().heads % mesh.size(dims.tp) == 0 &&
                    model->config().kv_heads % mesh.size(dims.tp) == 0,
                "parallelize_llama: expected the heads (", model->config().heads,
                ") and key/value "
                "heads (",
                model->config().kv_heads, ") to divide by the tp degree (", mesh.size(dims.tp),
                ")");
  nn::distribute_module(
      *model, mesh, [&](const std::string& path, torch::nn::Module& module, const DeviceMesh& on) {
        if (const PlacementPtr placement = tp_placement(path, plan)) {
          nn::distribute_parameter(module, "weight", on, on_tp(on, placement));
        }
      });
  nn::replicate_buffers(*model, mesh);
}

std::vector<LlamaStep> train_llama(const DeviceMesh& mesh, LlamaPlan plan,
                                   const LlamaTrainOptions& options) {
  Llama reference = seeded_model(options.config, options.seed);
  Llama model = seeded_model(options.config, options.seed);
  parallelize_llama(model, mesh, plan);
  at::Generator data = at::detail::createCPUGenerator(options.seed);
  const at::Tensor tokens =
      at::randint(options.config.vocab, {options.batch, options.seq}, data, at::kLong);
  const at::Tensor targets = tokens.roll(-1, 1);
  const DTensor mesh_tokens = distribute_tensor(tokens, mesh, batch_layout(mesh));
  const DTensor mesh_targets = distribute_tensor(targets, mesh, batch_layout(mesh));
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
    record.loss = DTensor(loss).full_tensor().item<double>();
    {
      CollectiveCounter counter;
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
