// Copyright 2026 The dtensor Authors.
#include "tests/support/fsdp_stack.h"

#include <string>

#include <ATen/ATen.h>

#include <dtensor/nn/module_hooks.h>

namespace dtensor::testing {

StackBlockImpl::StackBlockImpl() {
  up = register_module("up", torch::nn::Linear(kStackHidden, 2 * kStackHidden));
  down = register_module("down", torch::nn::Linear(2 * kStackHidden, kStackHidden));
}

at::Tensor StackBlockImpl::forward(const at::Tensor& x) {
  return x + nn::call(down, at::tanh(nn::call(up, x)));
}

StackImpl::StackImpl(int64_t blocks) {
  input = register_module("input", torch::nn::Linear(kStackIn, kStackHidden));
  for (int64_t b = 0; b < blocks; ++b) {
    layers.push_back(register_module("layers_" + std::to_string(b), StackBlock()));
  }
  output = register_module("output", torch::nn::Linear(kStackHidden, kStackOut));
}

at::Tensor StackImpl::forward(const at::Tensor& x) {
  at::Tensor h = nn::call(input, x);
  for (StackBlock& block : layers) h = nn::call(block, h);
  return nn::call(output, h);
}

std::mutex& model_initialization_mutex() {
  static std::mutex mutex;
  return mutex;
}

Stack make_stack(int64_t blocks, at::ScalarType dtype, c10::Device device) {
  std::lock_guard<std::mutex> lock(model_initialization_mutex());
  at::manual_seed(7);
  Stack model(blocks);
  model->to(device, dtype);
  return model;
}

at::Tensor stack_batch(int64_t rows) {
  return at::arange(rows * kStackIn, at::kDouble).reshape({rows, kStackIn}).mul(0.37).sin();
}

at::Tensor stack_target(int64_t rows) {
  return at::arange(rows * kStackOut, at::kDouble).reshape({rows, kStackOut}).mul(0.21).cos();
}

}  // namespace dtensor::testing
