// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/operator_library.cc: the `dtensor::` namespace of ATen
// operators, the one TORCH_LIBRARY block of the project.
//
// Operators of dtensor's own exist where no ATen operator carries what a
// DTensor needs to know. embedding_backward_for_layout is
// embedding_dense_backward with the weight's placements as an argument: the
// DTensor autograd kernel of aten::embedding (dtensor/autograd/
// embedding_backward.cc) calls it, so that on DTensors each rank computes
// only its rows' gradient (its strategy and local kernel are in
// rules/families/embedding_ops.cc); on plain tensors it is
// embedding_dense_backward.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace dtensor {
namespace {

// On plain tensors, the op is embedding_dense_backward (the weight's
// placements matter only to DTensors). Boxed: no C++ string type to spell,
// which differs between libtorch versions.
void embedding_backward_for_layout(const c10::OperatorHandle&, c10::DispatchKeySet,
                                   torch::jit::Stack* stack) {
  constexpr size_t kArguments = 6;
  const size_t first = stack->size() - kArguments;
  at::Tensor result = at::embedding_dense_backward(
      (*stack)[first].toTensor(), (*stack)[first + 1].toTensor(), (*stack)[first + 2].toInt(),
      (*stack)[first + 3].toInt(), (*stack)[first + 4].toBool());
  torch::jit::drop(*stack, kArguments);
  stack->push_back(std::move(result));
}

}  // namespace
}  // namespace dtensor

TORCH_LIBRARY(dtensor, m) {
  m.def(
      "embedding_backward_for_layout(Tensor grad, Tensor indices, int num_weights, "
      "int padding_idx, bool scale_grad_by_freq, str weight_placements) -> Tensor");
}

// Not CompositeExplicitAutograd: that would also take the DTensor key, ahead
// of the DTensor dispatcher.
TORCH_LIBRARY_IMPL(dtensor, CPU, m) {
  m.impl("embedding_backward_for_layout",
         torch::CppFunction::makeFromBoxedFunction<&dtensor::embedding_backward_for_layout>());
}
TORCH_LIBRARY_IMPL(dtensor, CUDA, m) {
  m.impl("embedding_backward_for_layout",
         torch::CppFunction::makeFromBoxedFunction<&dtensor::embedding_backward_for_layout>());
}
