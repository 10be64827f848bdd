// Copyright 2026 The dtensor Authors.
#include "examples/support/one_device.h"

#include <cmath>

#include <ATen/ATen.h>

#include <dtensor/core/tensor_impl.h>
#include <dtensor/dtensor.h>

namespace dtensor::examples {
namespace {

at::Tensor global_value(const at::Tensor& t) {
  return is_dtensor(t) ? DTensor(t).full_tensor() : t;
}

}  // namespace

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (global_value(a) - global_value(b)).abs().max().item<double>();
}

bool loss_matches(double loss, double reference, double absolute_tolerance,
                  double relative_tolerance) {
  return std::abs(loss - reference) <=
         absolute_tolerance + relative_tolerance * std::abs(reference);
}

}  // namespace dtensor::examples
