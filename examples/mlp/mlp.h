// Copyright 2026 The dtensor Authors.
//
// examples/mlp/mlp.h: the two-layer MLP the training examples share
// (examples/tp_mlp, examples/fsdp_tp), its data, its SGD update, and the
// comparison of a distributed run with the same run on one device.
//
// The MLP is linear -> relu -> linear -> mean squared error, with parameters
// {w1 [hidden, in], b1 [hidden], w2 [out, hidden], b2 [out]}. Every function
// here is plain ATen, so it runs unchanged on plain tensors (the one-device
// reference) and on DTensors (the distributed run): that sameness is what the
// examples check.
#pragma once

#include <array>
#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace dtensor::examples {

struct MlpShape {
  int64_t batch = 6, in = 8, hidden = 12, out = 8;
};

// w1, b1, w2, b2.
using MlpParameters = std::array<at::Tensor, 4>;
inline constexpr const char* kMlpParameterNames[4] = {"w1", "b1", "w2", "b2"};

// Deterministic, distinct values (no RNG, so every rank builds the same).
MlpParameters initial_mlp_parameters(const MlpShape& shape, c10::Device device);
// The input [batch, in] and the target [batch, out].
at::Tensor mlp_input(const MlpShape& shape, c10::Device device);
at::Tensor mlp_target(const MlpShape& shape, c10::Device device);

// The hidden activations and the output before the loss.
at::Tensor mlp_hidden(const at::Tensor& x, const MlpParameters& p);
at::Tensor mlp_output(const at::Tensor& hidden, const MlpParameters& p);
// Mean squared error of the output against `target`.
at::Tensor mean_squared_error(const at::Tensor& output, const at::Tensor& target);

// Leaf copies of `params` that require grad: the one-device reference.
MlpParameters reference_copies(const MlpParameters& params);
// Forward and backward of the whole batch on one device; returns the loss.
double one_device_forward_backward(const at::Tensor& x, const MlpParameters& reference,
                                   const at::Tensor& target);

// p -= lr * grad, then zeroes the gradient (outside autograd).
void sgd_step(MlpParameters& params, double learning_rate);

// The largest |distributed - reference| (examples/support/one_device.h) over
// the four parameters' gradients, or over their values.
double max_grad_diff(const MlpParameters& distributed, const MlpParameters& reference);
double max_param_diff(const MlpParameters& distributed, const MlpParameters& reference);

}  // namespace dtensor::examples
