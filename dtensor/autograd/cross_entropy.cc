// Copyright 2026 The dtensor Authors.
//
// aten::cross_entropy_loss on vocabulary-split logits, fused, at the DTensor
// autograd key (loss parallelism as Megatron writes it by hand).
//
// libtorch decomposes cross_entropy_loss into log_softmax and nll_loss above
// the DTensor key. On logits split by class that costs a third all-reduce in
// the backward (log_softmax's backward sums the gradient over the split
// classes) and leaves the loss a pending sum, reduced again when read. Fused,
// each rank works on its block of classes: one all-reduce of the row maxima,
// one of [sum of exponentials, target logit] per row (the target logit lives
// on one rank, zero on the others), and the loss is whole on every rank of
// the class split. The backward is softmax minus the one-hot target on each
// rank's block, scaled: no communication at all.
//
// The fused path takes [N, C] logits whose classes are split in ordered
// blocks (Shard(1)) on some mesh dims and whose rows are replicated or
// Shard(0) on the others, class-index targets (label smoothing too) and a
// weight that is absent or replicated and not trained. Any other call
// (probabilities as targets, say) runs libtorch's decomposition, whose ops
// have their own rules.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/autograd/layout_functions.h>
#include <dtensor/base/check.h>
#include <dtensor/base/compat.h>
#include <dtensor/core/tensor_impl.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/redistribute/reduce_terms.h>

namespace dtensor {
namespace {

using torch::autograd::variable_list;

// Where the logits are split: the mesh dims cutting the classes and those
// cutting the rows.
struct ClassSplit {
  std::vector<int64_t> class_dims;
  std::vector<int64_t> row_dims;
};

std::optional<ClassSplit> class_split_of(const DTensorSpec& logits) {
  if (logits.ndim() != 2) return std::nullopt;
  ClassSplit split;
  for (int64_t m = 0; m < logits.mesh().ndim(); ++m) {
    const Placement& p = *logits.placements()[m];
    if (p.is_replicate()) continue;
    const auto* shard = dynamic_cast<const Shard*>(&p);
    if (shard == nullptr) return std::nullopt;
    (shard->dim() == 1 ? split.class_dims : split.row_dims).push_back(m);
  }
  if (split.class_dims.empty()) return std::nullopt;
  return split;
}

// The weight, when absent or whole on every rank and not trained.
std::optional<at::Tensor> usable_weight(const c10::IValue& weight) {
  if (weight.isNone() || !weight.toTensor().defined()) return at::Tensor();
  const at::Tensor& w = weight.toTensor();
  if (w.requires_grad()) return std::nullopt;
  if (!is_dtensor(w)) return w;
  for (const PlacementPtr& p : dtensor_impl(w)->spec()->placements()) {
    if (!p->is_replicate()) return std::nullopt;
  }
  return dtensor_impl(w)->local();
}

// `placement` on `dims`, Replicate elsewhere.
std::vector<PlacementPtr> placed_on(const DeviceMesh& mesh, const std::vector<int64_t>& dims,
                                    const PlacementPtr& placement) {
  std::vector<PlacementPtr> placements(mesh.ndim(), Replicate::make());
  for (int64_t m : dims) placements[m] = placement;
  return placements;
}

constexpr int64_t kReductionNone = 0;
constexpr int64_t kReductionMean = 1;

// What the backward needs of one fused call. With label smoothing e over C
// classes of weights w (all 1 without a weight; W their sum), a row's loss
// is (1 - e) w_t (lse - x_t) + (e / C) (W lse - sum_c w_c x_c), whose
// gradient in x_c is (1 - e) w_t (p_c - [c = t]) + (e / C) (W p_c - w_c).
struct LossBackward final : torch::autograd::Node {
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    DTENSOR_CHECK(!c10::GradMode::is_enabled(),
                  "cross_entropy_loss over split classes: expected a backward without "
                  "create_graph (the fused backward is not differentiable), found create_graph");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // The loss's gradient, whole along the class split.
    at::Tensor g =
        is_dtensor(grads[0]) ? local_laid_out_as(grads[0], output_gradient_placements) : grads[0];
    g = g.to(probabilities.scalar_type());
    if (reduction == kReductionMean) g = g / total_weight;
    const at::Tensor row_scale =
        (reduction == kReductionNone ? g : g.expand({valid.size(0)})).unsqueeze(1);
    at::Tensor one_hot = at::zeros_like(probabilities);
    if (one_hot.size(1) > 0) one_hot.scatter_(1, local_target.unsqueeze(1), mine.unsqueeze(1));
    at::Tensor grad = (probabilities - one_hot).mul(target_weight.unsqueeze(1) * (1 - smoothing));
    if (smoothing != 0) {
      grad = grad + (probabilities * weight_sum - class_weight.unsqueeze(0))
                        .mul(valid.unsqueeze(1) * (smoothing / classes));
    }
    return {make_dtensor_tensor(grad.mul(row_scale).to(logits->dtype()), logits)};
  }
  std::string name() const override { return "dtensor::VocabParallelCrossEntropyBackward"; }

  DTensorSpecPtr logits;
  std::vector<PlacementPtr> output_gradient_placements;
  int64_t reduction = kReductionMean;
  double smoothing = 0;
  int64_t classes = 0;
  at::Tensor probabilities;  // softmax of this rank's block of classes
  at::Tensor local_target;   // the target's index in the block (0 when elsewhere)
  at::Tensor mine;           // 1 where this rank's block holds the target
  at::Tensor valid;          // 1 where the target is not ignored
  at::Tensor target_weight;  // w_t, 0 for ignored rows
  at::Tensor class_weight;   // w of this rank's block of classes
  at::Tensor weight_sum;     // W
  at::Tensor total_weight;   // the mean's divisor, over every rank's rows
};

// The options of one call.
struct LossOptions {
  at::Tensor weight;  // whole, or undefined
  int64_t reduction = kReductionMean;
  int64_t ignore_index = -100;
  double smoothing = 0;
};

// The fused forward on each rank's shards. Returns the loss (a DTensor) and
// fills `backward` when given.
at::Tensor fused_forward(const at::Tensor& self, const at::Tensor& target,
                         const LossOptions& options, const ClassSplit& split,
                         LossBackward* backward) {
  const DTensorSpecPtr& spec = dtensor_impl(self)->spec();
  const DeviceMesh& mesh = spec->mesh();
  // Statistics, counts and the loss in float32 at least (a count of 65,536
  // rows is inf in float16): the loss and gradient go back in the logits'
  // dtype.
  const at::ScalarType logits_dtype = dtensor_impl(self)->local().scalar_type();
  const at::Tensor x = dtensor_impl(self)->local().to(at::toOpMathType(logits_dtype));
  const at::ScalarType dtype = x.scalar_type();
  const at::Tensor t = local_laid_out_as(target, placed_on(mesh, split.row_dims, Shard::make(0)));
  const int64_t classes = spec->shape()[1];
  const int64_t first = spec->local_layout().global_offset[1];
  const int64_t count = x.size(1);
  const at::Tensor valid = t.ne(options.ignore_index);
  const at::Tensor bad = valid.logical_and(t.lt(0).logical_or(t.ge(classes))).sum();
  const at::Tensor local_max =
      count > 0 ? std::get<0>(x.max(1))
                : at::full({x.size(0)}, -std::numeric_limits<double>::infinity(), x.options());
  const at::Tensor shifted =
      x - reduce_terms(local_max, mesh, split.class_dims, ReduceOp::kMax).unsqueeze(1);
  const at::Tensor mine = valid.logical_and(t.ge(first)).logical_and(t.lt(first + count));
  const at::Tensor index = (t - first).clamp(0, std::max<int64_t>(count - 1, 0));
  const at::Tensor picked = count > 0
                                ? at::where(mine, shifted.gather(1, index.unsqueeze(1)).squeeze(1),
                                            at::zeros({}, x.options()))
                                : at::zeros({x.size(0)}, x.options());
  const at::Tensor weight =
      options.weight.defined() ? options.weight.to(dtype) : at::ones({classes}, x.options());
  const at::Tensor class_weight = weight.narrow(0, first, count);
  // Per row, over the classes: sum of exponentials, target logit, and with
  // label smoothing the weighted sum of logits, in one all-reduce.
  std::vector<at::Tensor> columns = {shifted.exp().sum(1), picked};
  if (options.smoothing != 0) columns.push_back(shifted.mul(class_weight).sum(1));
  const at::Tensor sums =
      reduce_terms(at::stack(columns, 1), mesh, split.class_dims, ReduceOp::kSum);
  const at::Tensor log_sum = sums.select(1, 0).log();
  const at::Tensor valid_rows = valid.to(dtype);
  const at::Tensor target_weight = valid_rows * weight.index_select(0, t.clamp(0, classes - 1));
  at::Tensor row_loss = (log_sum - sums.select(1, 1)).mul(target_weight * (1 - options.smoothing));
  const at::Tensor weight_sum = weight.sum();
  if (options.smoothing != 0) {
    row_loss =
        row_loss +
        (log_sum * weight_sum - sums.select(1, 2)).mul(valid_rows * (options.smoothing / classes));
  }
  // Ranks along the row split hold other targets: they learn of a bad one
  // together with the mean's divisor, so that every rank raises.
  at::Tensor total = at::stack({target_weight.sum(), bad.to(dtype)});
  if (!split.row_dims.empty()) total = reduce_terms(total, mesh, split.row_dims, ReduceOp::kSum);
  DTENSOR_CHECK(total[1].item<double>() == 0,
                "aten::cross_entropy_loss: expected every target in [0, ", classes,
                ") or ignore_index (", options.ignore_index, "), found one outside");
  at::Tensor loss = row_loss;
  std::vector<PlacementPtr> placements = placed_on(mesh, split.row_dims, Shard::make(0));
  std::vector<int64_t> shape = {spec->shape()[0]};
  if (options.reduction != kReductionNone) {
    loss = row_loss.sum();
    if (options.reduction == kReductionMean) loss = loss / total[0];
    placements = placed_on(mesh, split.row_dims, Partial::make(ReduceOp::kSum));
    shape.clear();
  }
  if (backward != nullptr) {
    backward->logits = spec;
    backward->reduction = options.reduction;
    backward->smoothing = options.smoothing;
    backward->classes = classes;
    backward->output_gradient_placements = placed_on(
        mesh, split.row_dims,
        options.reduction == kReductionNone ? PlacementPtr(Shard::make(0)) : Replicate::make());
    backward->probabilities = (shifted - log_sum.unsqueeze(1)).exp();
    backward->local_target = index;
    backward->mine = mine.to(dtype);
    backward->valid = valid_rows;
    backward->target_weight = target_weight;
    backward->class_weight = class_weight;
    backward->weight_sum = weight_sum;
    backward->total_weight = total[0];
  }
  return make_dtensor_tensor(loss.to(logits_dtype),
                             std::make_shared<const DTensorSpec>(mesh, std::move(placements),
                                                                 std::move(shape), logits_dtype));
}

// Checks on global shapes and values, so that every rank raises alike before
// any collective.
void check_arguments(const at::Tensor& self, const at::Tensor& target, const LossOptions& options) {
  const std::vector<int64_t>& logits = dtensor_impl(self)->spec()->shape();
  const std::vector<int64_t>& targets = dtensor_impl(target)->spec()->shape();
  DTENSOR_CHECK(targets[0] == logits[0], "cross_entropy_loss: target: expected ", logits[0],
                " rows (as the input's ", logits[0], "), found ", targets[0]);
  DTENSOR_CHECK(!options.weight.defined() || options.weight.numel() == logits[1],
                "cross_entropy_loss: weight: expected one per class (", logits[1], "), found ",
                options.weight.numel());
  DTENSOR_CHECK(options.smoothing >= 0 && options.smoothing <= 1,
                "cross_entropy_loss: label_smoothing: expected a value in [0, 1], found ",
                options.smoothing);
}

// cross_entropy_loss(self, target, weight?, reduction, ignore_index,
// label_smoothing)
void cross_entropy_at_dtensor_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                                       torch::jit::Stack* stack) {
  const size_t first = stack->size() - 6;
  const at::Tensor self = (*stack)[first].toTensor();
  const at::Tensor target = (*stack)[first + 1].toTensor();
  const std::optional<at::Tensor> weight = usable_weight((*stack)[first + 2]);
  const std::optional<ClassSplit> split =
      is_dtensor(self) ? class_split_of(*dtensor_impl(self)->spec()) : std::nullopt;
  if (!split || !weight || !is_dtensor(target) || target.dim() != 1 ||
      at::isFloatingType(target.scalar_type())) {
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  const LossOptions options{*weight, (*stack)[first + 3].toInt(), (*stack)[first + 4].toInt(),
                            (*stack)[first + 5].toDouble()};
  check_arguments(self, target, options);
  AutogradNodePtr<LossBackward> node;
  if (torch::autograd::compute_requires_grad(self)) node = make_autograd_node<LossBackward>();
  at::Tensor loss;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    loss = fused_forward(self, target, options, *split, node.get());
  }
  torch::jit::drop(*stack, 6);
  if (node) {
    node->set_next_edges(torch::autograd::collect_next_edges(self));
    torch::autograd::set_history(loss, node);
  }
  stack->push_back(loss);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse3, m) {
  m.impl("cross_entropy_loss",
         torch::CppFunction::makeFromBoxedFunction<&cross_entropy_at_dtensor_autograd>());
}

}  // namespace

static_assert(kDTensorDispatchKey == c10::DispatchKey::PrivateUse3,
              "cross_entropy_loss's autograd kernel above is registered for the DTensor key's "
              "autograd key");

}  // namespace dtensor
