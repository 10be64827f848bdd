// Copyright 2026 The dtensor Authors.
#include <dtensor/autograd/layout_functions.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <dtensor/base/check.h>
#include <dtensor/base/compat.h>
#include <dtensor/core/tensor_impl.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/planner.h>

namespace dtensor {
namespace {

using torch::autograd::variable_list;

// The shard of `impl` after `plan` (planned from its spec): the shard
// itself, uncopied, when nothing moves; with `consume`, the steps may reuse
// its memory, which the caller gives up (execute_plan_consuming).
at::Tensor shard_after(const DTensorImpl& impl, const RedistributePlan& plan,
                       bool consume = false) {
  if (plan.steps.empty()) return impl.local();
  return consume ? execute_plan_consuming(plan, impl.local()) : execute_plan(plan, impl.local());
}

at::Tensor redistribute_local(const at::Tensor& tensor, const DTensorSpecPtr& target,
                              bool consume) {
  const DTensorImpl* impl = dtensor_impl(tensor);
  if (impl->spec() == target || *impl->spec() == *target) return tensor;
  const RedistributePlanPtr plan = plan_redistribute(*impl->spec(), *target);
  return make_dtensor_tensor(shard_after(*impl, *plan, consume), plan->target);
}

// The layout a gradient of a tensor of `spec` takes: `spec` itself (shared)
// unless it holds a Partial, which the gradient replicates.
DTensorSpecPtr gradient_spec(const DTensorSpecPtr& spec) {
  if (!spec->has_partial()) return spec;
  return std::make_shared<const DTensorSpec>(
      spec->with_placements(gradient_placements(spec->placements())));
}

// The backward of a layout function: hands the incoming gradient (undefined
// stays undefined) and the spec saved at the forward to `gradient`.
class LayoutBackward final : public torch::autograd::Node {
 public:
  using Gradient = at::Tensor (*)(const at::Tensor& grad, const DTensorSpecPtr& spec);

  LayoutBackward(const char* name, Gradient gradient, DTensorSpecPtr spec)
      : name_(name), gradient_(gradient), spec_(std::move(spec)) {}
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    return {gradient_(grads[0], spec_)};
  }
  std::string name() const override { return name_; }

 private:
  const char* name_;
  Gradient gradient_;
  DTensorSpecPtr spec_;
};

// Gradients arrive as DTensors of the forward output's spec or of any other
// layout a backward formula produced; only the target (the source's
// gradient spec) matters.
at::Tensor redistribute_backward(const at::Tensor& grad, const DTensorSpecPtr& source_grad) {
  return redistribute_with_grad(grad, source_grad);
}

at::Tensor to_local_backward(const at::Tensor& grad, const DTensorSpecPtr& grad_spec) {
  return from_local_with_grad(grad, grad_spec);
}

at::Tensor from_local_backward(const at::Tensor& grad, const DTensorSpecPtr& local_grad) {
  DTENSOR_CHECK(is_dtensor(grad), "from_local backward: expected a DTensor gradient, found ",
                "a plain tensor of shape ", grad.sizes());
  return to_local_with_grad(redistribute_with_grad(grad, local_grad), nullptr);
}

// Records the backward of `output` made from `input`, when `input` needs a
// gradient: `gradient` brings it to `grad_spec`, or, when null, to the
// gradient spec of `forward_spec` (made only then: most calls record
// nothing).
void record(const at::Tensor& input, at::Tensor& output, const char* name,
            LayoutBackward::Gradient gradient, const DTensorSpecPtr& grad_spec,
            const DTensorSpecPtr& forward_spec) {
  if (!torch::autograd::compute_requires_grad(input)) return;
  auto node = make_autograd_node<LayoutBackward>(
      name, gradient, grad_spec ? grad_spec : gradient_spec(forward_spec));
  node->set_next_edges(torch::autograd::collect_next_edges(input));
  torch::autograd::set_history(output, node);
}

// `tensor` laid out as `target` (its shard consumed or not), the backward
// recorded to bring the gradient to `grad_spec`, or, when null, to the
// source's gradient spec. Only a given `grad_spec` is recorded when nothing
// moves: on a new tensor sharing the shard and, as a view does, the version
// counter, so an in-place change through either is seen by the backward of
// whatever saved the other.
at::Tensor redistribute_recorded(const at::Tensor& tensor, const DTensorSpecPtr& target,
                                 const DTensorSpecPtr& grad_spec, bool consume) {
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = redistribute_local(tensor, target, consume);
  }
  const DTensorImpl* impl = dtensor_impl(tensor);
  if (out.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) {
    if (!grad_spec) return tensor;
    out = make_dtensor_tensor(impl->local(), impl->spec());
    out.unsafeGetTensorImpl()->set_version_counter(tensor.unsafeGetTensorImpl()->version_counter());
  }
  record(tensor, out, "dtensor::RedistributeBackward", redistribute_backward, grad_spec,
         impl->spec());
  return out;
}

}  // namespace

at::Tensor local_laid_out_as(const at::Tensor& tensor,
                             const std::vector<PlacementPtr>& placements) {
  const DTensorImpl* impl = dtensor_impl(tensor);
  return shard_after(*impl, *plan_redistribute(*impl->spec(), placements));
}

std::vector<PlacementPtr> gradient_placements(const std::vector<PlacementPtr>& placements) {
  std::vector<PlacementPtr> out = placements;
  for (PlacementPtr& p : out) {
    if (p->is_partial()) p = Replicate::make();
  }
  return out;
}

at::Tensor redistribute_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& target) {
  return redistribute_recorded(tensor, target, /*grad_spec=*/nullptr, /*consume=*/false);
}

at::Tensor redistribute_consuming_with_grad(const at::Tensor& tensor,
                                            const DTensorSpecPtr& target) {
  return redistribute_recorded(tensor, target, /*grad_spec=*/nullptr, /*consume=*/true);
}

at::Tensor redistribute_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& target,
                                  const DTensorSpecPtr& grad_spec) {
  DTENSOR_CHECK(grad_spec != nullptr,
                "redistribute_with_grad: grad_spec: expected a spec, found null");
  return redistribute_recorded(tensor, target, grad_spec, /*consume=*/false);
}

at::Tensor to_local_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& grad_spec) {
  const DTensorImpl* impl = dtensor_impl(tensor);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = impl->local().alias();
  }
  record(tensor, out, "dtensor::ToLocalBackward", to_local_backward, grad_spec, impl->spec());
  return out;
}

at::Tensor from_local_with_grad(const at::Tensor& local, const DTensorSpecPtr& spec,
                                const DTensorSpecPtr& grad_spec) {
  at::Tensor out = make_dtensor_tensor(local.detach(), spec);
  record(local, out, "dtensor::FromLocalBackward", from_local_backward, grad_spec, spec);
  return out;
}

}  // namespace dtensor
