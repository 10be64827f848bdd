// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/clip_grad.h (<dtensor/nn/clip_grad.h>): gradient clipping for
// models whose parameters are DTensors, plain tensors, or both.
//
// torch::nn::utils::clip_grad_norm_ takes each gradient's norm and then the
// norm of those norms: on DTensors that is one collective per sharded
// gradient, and a model mixing DTensor and plain parameters fails to stack
// them. Here each rank adds up its own part of every gradient (|g|^p, or
// max |g|), counting each element once however it is laid out (a replicated
// copy counts on one rank; pending sums are reduced first by
// reduce_gradients, dtensor/nn/reduce_gradients.h, one collective per kind,
// and the gradients keep the reduced values, so the optimizer does not
// reduce them again), and one all-reduce over the mesh gives the total norm; every gradient is then
// scaled by max_norm / (total + 1e-6) when that is below 1, as libtorch
// does. The result equals one device's to rounding.
//
//   double total = dtensor::nn::clip_grad_norm_(model->parameters(), /*max_norm=*/1.0);
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace dtensor::nn {

// Clips the gradients of `parameters` (those without one are skipped) in
// place and returns their total `norm_type`-norm (2, any p > 0, or
// infinity). DTensor gradients must all be on one mesh. Collective over that
// mesh. Throws dtensor::Error for meshes that differ or a norm_type <= 0.
double clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                       double norm_type = 2.0);

}  // namespace dtensor::nn
