// Copyright 2026 The dtensor Authors.
#include "examples/mlp/mlp.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <vector>

#include "examples/support/one_device.h"

namespace dtensor::examples {
namespace {

at::Tensor smooth_values(const std::vector<int64_t>& shape, double phase, c10::Device device) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  return at::arange(numel, at::kFloat).add(phase).sin().mul(0.5).reshape(shape).to(device);
}

}  // namespace

MlpParameters initial_mlp_parameters(const MlpShape& s, c10::Device device) {
  return {smooth_values({s.hidden, s.in}, 0.1, device), smooth_values({s.hidden}, 0.2, device),
          smooth_values({s.out, s.hidden}, 0.3, device), smooth_values({s.out}, 0.4, device)};
}

at::Tensor mlp_input(const MlpShape& s, c10::Device device) {
  return at::arange(s.batch * s.in, at::kFloat).cos().reshape({s.batch, s.in}).to(device);
}

at::Tensor mlp_target(const MlpShape& s, c10::Device device) {
  return at::arange(s.batch * s.out, at::kFloat).sin().reshape({s.batch, s.out}).to(device);
}

at::Tensor mlp_hidden(const at::Tensor& x, const MlpParameters& p) {
  return at::relu(at::linear(x, p[0], p[1]));
}

at::Tensor mlp_output(const at::Tensor& hidden, const MlpParameters& p) {
  return at::linear(hidden, p[2], p[3]);
}

at::Tensor mean_squared_error(const at::Tensor& output, const at::Tensor& target) {
  return (output - target).pow(2).mean();
}

MlpParameters reference_copies(const MlpParameters& params) {
  MlpParameters copies;
  for (size_t i = 0; i < params.size(); ++i) copies[i] = params[i].clone().requires_grad_();
  return copies;
}

double one_device_forward_backward(const at::Tensor& x, const MlpParameters& reference,
                                   const at::Tensor& target) {
  const at::Tensor loss =
      mean_squared_error(mlp_output(mlp_hidden(x, reference), reference), target);
  loss.backward();
  return loss.item<double>();
}

void sgd_step(MlpParameters& params, double learning_rate) {
  c10::AutoGradMode no_grad(false);
  for (at::Tensor& p : params) {
    p.sub_(p.grad() * learning_rate);
    p.mutable_grad().zero_();
  }
}

double max_grad_diff(const MlpParameters& distributed, const MlpParameters& reference) {
  double diff = 0;
  for (size_t i = 0; i < distributed.size(); ++i) {
    diff = std::max(diff, max_abs_diff(distributed[i].grad(), reference[i].grad()));
  }
  return diff;
}

double max_param_diff(const MlpParameters& distributed, const MlpParameters& reference) {
  double diff = 0;
  for (size_t i = 0; i < distributed.size(); ++i) {
    diff = std::max(diff, max_abs_diff(distributed[i], reference[i]));
  }
  return diff;
}

}  // namespace dtensor::examples
