// Copyright 2026 The dtensor Authors.
//
// aten::embedding on DTensors at the DTensor autograd key: the forward as
// usual, and a backward that passes the weight's placements on. libtorch's
// own formula calls embedding_dense_backward, which sees only the gradient
// and the ids, so a vocabulary-sharded weight got its whole [vocab, dim]
// gradient computed on every rank. Here the backward calls
// dtensor::embedding_backward_for_layout (rules/families/embedding_ops.cc):
// each rank computes the gradient of its own rows, laid out like the weight.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <dtensor/base/compat.h>
#include <dtensor/core/tensor_impl.h>

namespace dtensor {
namespace {

using torch::autograd::variable_list;

struct EmbeddingBackward : torch::autograd::Node {
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    const at::Tensor ids = indices.unpack();
    if (sparse || weight_placements.empty()) {
      return {at::embedding_backward(grads[0], ids, num_weights, padding_idx, scale_grad_by_freq,
                                     sparse)};
    }
    static const c10::OperatorHandle for_layout = c10::Dispatcher::singleton().findSchemaOrThrow(
        "dtensor::embedding_backward_for_layout", "");
    torch::jit::Stack stack{grads[0],         ids, num_weights, padding_idx, scale_grad_by_freq,
                            weight_placements};
    // The op has no autograd formula of its own: not twice differentiable.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for_layout.callBoxed(&stack);
    return {stack.back().toTensor()};
  }
  std::string name() const override { return "dtensor::EmbeddingBackward"; }
  void release_variables() override { indices.reset_data(); }

  torch::autograd::SavedVariable indices;
  int64_t num_weights = 0;
  int64_t padding_idx = -1;
  bool scale_grad_by_freq = false;
  bool sparse = false;
  std::string weight_placements;  // empty when the weight is a plain tensor
};

// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
void embedding_with_layout_backward(const c10::OperatorHandle& op, c10::DispatchKeySet,
                                    torch::jit::Stack* stack) {
  const size_t first = stack->size() - 5;
  const at::Tensor weight = (*stack)[first].toTensor();
  const at::Tensor indices = (*stack)[first + 1].toTensor();
  AutogradNodePtr<EmbeddingBackward> node;
  if (torch::autograd::compute_requires_grad(weight)) {
    node = make_autograd_node<EmbeddingBackward>();
    node->num_weights = weight.size(0);
    node->padding_idx = (*stack)[first + 2].toInt();
    node->scale_grad_by_freq = (*stack)[first + 3].toBool();
    node->sparse = (*stack)[first + 4].toBool();
    if (is_dtensor(weight)) {
      node->weight_placements = placements_to_string(dtensor_impl(weight)->spec()->placements());
    }
    node->indices = torch::autograd::SavedVariable(indices, /*is_output=*/false);
  }
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(stack);
  }
  if (!node) return;
  at::Tensor output = stack->back().toTensor();
  node->set_next_edges(torch::autograd::collect_next_edges(weight));
  torch::autograd::set_history(output, node);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse3, m) {
  m.impl("embedding", torch::CppFunction::makeFromBoxedFunction<&embedding_with_layout_backward>());
}

}  // namespace

static_assert(kDTensorDispatchKey == c10::DispatchKey::PrivateUse3,
              "embedding's autograd kernel above is registered for the DTensor key's autograd key");

}  // namespace dtensor
