// Copyright 2026 The dtensor Authors.
//
// dtensor/autograd/layout_functions.h: the differentiable forms of the calls
// that change how a DTensor is held, used by dtensor/dtensor.h.
//
// Operators on DTensors are differentiated by libtorch's own formulas (the
// DTensor kernel runs below autograd). What libtorch cannot know is how the
// wrapping itself moves gradients; these record that (design.md section 3):
//  - redistribute: the gradient goes back to the source placements, with
//    Partial normalised to Replicate (P->R backward moves nothing; R->S
//    backward is an all-gather), or to a layout the caller names.
//  - to_local: the local gradient becomes a DTensor laid out as `grad_spec`
//    (by default the forward placements, Partial read as Replicate).
//  - from_local: the DTensor gradient is redistributed to `grad_spec` (by
//    default the forward placements, Partial read as Replicate) and its
//    shard taken.
// Each records a node only when grad mode is on and the input requires grad.
#pragma once

#include <ATen/core/Tensor.h>

#include <dtensor/placements/spec.h>

namespace dtensor {

// `tensor` (a DTensor) laid out as `target` (same mesh, shape and dtype).
at::Tensor redistribute_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& target);
// The same on a `tensor` the caller gives up, holding the only reference to
// it and to its shard's memory (DTensor::redistribute on an rvalue checks):
// the steps may reuse that memory (execute_plan_consuming).
at::Tensor redistribute_consuming_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& target);
// The same as the first, with the gradient brought to `grad_spec` (not
// null); the backward is recorded even when `target` is the tensor's own
// layout.
at::Tensor redistribute_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& target,
                                  const DTensorSpecPtr& grad_spec);

// The local shard of DTensor `tensor`, an alias of its storage.
at::Tensor to_local_with_grad(const at::Tensor& tensor, const DTensorSpecPtr& grad_spec);

// A DTensor of spec `spec` whose shard is `local`. The gradient is brought to
// `grad_spec` before its shard is taken; by default (null) to `spec` with
// Partial read as Replicate.
at::Tensor from_local_with_grad(const at::Tensor& local, const DTensorSpecPtr& spec,
                                const DTensorSpecPtr& grad_spec = nullptr);

// The shard of DTensor `tensor` laid out as `placements`, recorded by no
// autograd node (for kernels that compute on shards): planned and executed
// like any redistribute; the shard itself, uncopied, when nothing moves.
at::Tensor local_laid_out_as(const at::Tensor& tensor, const std::vector<PlacementPtr>& placements);

// `placements` with every Partial replaced by Replicate: how gradients of a
// Partial layout are held.
std::vector<PlacementPtr> gradient_placements(const std::vector<PlacementPtr>& placements);

}  // namespace dtensor
