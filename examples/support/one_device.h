// Copyright 2026 The dtensor Authors.
//
// examples/support/one_device.h: comparing what the distributed examples
// compute with the same computation on one device.
#pragma once

#include <ATen/core/Tensor.h>

namespace dtensor::examples {

// Largest |a - b| over the elements. Either side may be a DTensor, compared
// through its full_tensor (collective then: every rank of its mesh calls it).
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);

// Whether a distributed step's loss matches one device's. Float32 sums taken
// in another order differ by round-off that grows with the loss, hence a
// relative part beside the absolute one. False for NaN: every caller's
// comparison is written `x <= tolerance` so that NaN counts as a mismatch.
bool loss_matches(double loss, double reference, double absolute_tolerance = 1e-5,
                  double relative_tolerance = 1e-5);

// Whether a training step (with loss, reference_loss, max_grad_diff and
// max_param_diff) agrees with one device: the losses match and both
// differences are within `tolerance` (`<=`: a NaN difference fails).
template <typename Step>
bool step_agrees(const Step& step, double tolerance) {
  return loss_matches(step.loss, step.reference_loss) && step.max_grad_diff <= tolerance &&
         step.max_param_diff <= tolerance;
}

}  // namespace dtensor::examples
