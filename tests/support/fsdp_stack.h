// Copyright 2026 The dtensor Authors.
//
// tests/support/fsdp_stack.h: the model fully_shard's suites train (local,
// NCCL): an input layer, residual MLP blocks called through
// dtensor::nn::call (where fully_shard's hooks run), an output layer. Sizes
// are chosen so that dim 0 of most parameters does not split evenly over 4
// ranks (10 rows: 3,3,3,1; 3 rows: 1,1,1,0, an empty shard).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace dtensor::testing {

constexpr int64_t kStackIn = 6;
constexpr int64_t kStackHidden = 10;
constexpr int64_t kStackOut = 3;

class StackBlockImpl : public torch::nn::Module {
 public:
  StackBlockImpl();
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear up{nullptr}, down{nullptr};
};
TORCH_MODULE(StackBlock);

class StackImpl : public torch::nn::Module {
 public:
  explicit StackImpl(int64_t blocks);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear input{nullptr}, output{nullptr};
  std::vector<StackBlock> layers;
};
TORCH_MODULE(Stack);

// The same model on every call (and rank thread: they share libtorch's
// default generator, so seeding and initializing happen under `mutex`).
Stack make_stack(int64_t blocks, at::ScalarType dtype, c10::Device device = at::kCPU);
std::mutex& model_initialization_mutex();

// The model's inputs [rows, kStackIn] and targets [rows, kStackOut], float64.
at::Tensor stack_batch(int64_t rows);
at::Tensor stack_target(int64_t rows);

}  // namespace dtensor::testing
