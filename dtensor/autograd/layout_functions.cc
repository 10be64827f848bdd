// Copyright 2026 The dtensor Authors.
#include "dtensor/autograd/layout_functions.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include "dtensor/base/check.h"
#include "dtensor/redistribute/planner.h"
#include "dtensor/tensor_impl.h"
#include "placements/replicate.h"

namespace dtensor {
namespace {

using torch::autograd::variable_list;

at::Tensor redistribute_local(const at::Tensor& tensor, const DTensorSpecPtr& target) {
  const DTensorImpl* impl = dtensor_impl(tensor);
  if (impl->spec() == target || *impl->spec() == *target) return tensor;
  const RedistributePlan& plan = plan_redistribute(*impl->spec(), *target);
  return make_dtensor_tensor(execute_plan(plan, impl->local().contiguous()), plan.target);
}

DTensorSpecPtr gradient_spec(const DTensorSpec& spec) {
  return std::make_shared<const DTensorSpec>(
      spec.with_placements(gradient_placements(spec.placements())));
}

// Gradients arrive as DTensors of the forward output's spec or of any other
// layout a backward formula produced; only the target matters.
struct RedistributeBackward : torch::autograd::Node {
  explicit RedistributeBackward(DTensorSpecPtr source_grad) : source_grad(std::move(source_grad)) {}
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    return {redistribute_with_grad(grads[0], source_grad)};
  }
  std::string name() const override { return "dtensor::RedistributeBackward"; }
  DTensorSpecPtr source_grad;
};

struct ToLocalBackward : torch::autograd::Node {
  explicit ToLocalBackward(DTensorSpecPtr grad_spec) : grad_spec(std::move(grad_spec)) {}
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    return {from_local_with_grad(grads[0], grad_spec)};
  }
  std::string name() const override { return "dtensor::ToLocalBackward"; }
  DTensorSpecPtr grad_spec;
};

struct FromLocalBackward : torch::autograd::Node {
  explicit FromLocalBackward(DTensorSpecPtr local_grad) : local_grad(std::move(local_grad)) {}
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    DTENSOR_CHECK(is_dtensor(grads[0]), "from_local backward: expected a DTensor gradient, found ",
                  "a plain tensor of shape ", grads[0].sizes());
    return {to_local_with_grad(redistribute_with_grad(grads[0], local_grad), nullptr)};
  }
  std::string name() const override { return "dtensor::FromLocalBackward"; }
  DTensorSpecPtr local_grad;
};

template <typename NodeT, typename... Args>
void record(const at::Tensor& input, at::Tensor& output, Args&&... args) {
  if (!torch::autograd::compute_requires_grad(input)) return;
  auto node = std::shared_ptr<NodeT>(new NodeT(std::forward<Args>(args)...),
                                     torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(input));
  torch::autograd::set_history(output, node);
}

}  // namespace

std::vector<PlacementPtr> gradient_placements(const std::vector<PlacementPtr>& placements) {
  std::vector<PlacementPtr> out = placements;
  for (PlacementPtr& p : out) {
    if (p->is_partial()) p = Replicate::make();
  }
  return out;
}

at::Tensor redistribute_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& target) {
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = redistribute_local(tensor, target);
  }
  if (out.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) return tensor;
  record<RedistributeBackward>(tensor, out, gradient_spec(*dtensor_impl(tensor)->spec()));
  return out;
}

at::Tensor to_local_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& grad_spec) {
  const DTensorImpl* impl = dtensor_impl(tensor);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = impl->local().alias();
  }
  record<ToLocalBackward>(tensor, out, grad_spec ? grad_spec : gradient_spec(*impl->spec()));
  return out;
}

at::Tensor from_local_with_grad(const at::Tensor& local, const DTensorSpecPtr& spec) {
  at::Tensor out = make_dtensor_tensor(local.detach(), spec);
  record<FromLocalBackward>(local, out, gradient_spec(*spec));
  return out;
}

}  // namespace dtensor
