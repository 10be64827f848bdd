// Copyright 2026 The dtensor Authors.
//
// dtensor/nn/reduce_gradients.h: the pending sums of a model's gradients,
// reduced in one collective per kind instead of one per parameter.
//
// A replicated parameter used on split activations (a norm weight under
// sequence parallelism, any parameter of a data-parallel batch) gets a
// Partial gradient: each rank holds a term of it. Left so, the optimizer's
// update reduces each one on its own (a collective per parameter).
// `reduce_gradients` reduces them together, as a hand-written plan does after
// backward: gradients with the same mesh, Partial mesh dims and reduction,
// dtype and device are flattened into one buffer and reduced with one
// collective; each gradient is then the reduced value, Partial read as
// Replicate, and the update communicates no more.
//
//   loss.backward();
//   dtensor::nn::reduce_gradients(model->parameters());   // one all-reduce
//   optimizer.step();
//
// Between steps, set gradients to none rather than zero (libtorch 2.x's
// zero_grad default; 1.13's zeroes them in place): a pending sum accumulated
// into a replicated zero gradient is reduced there and then, one per
// parameter. clip_grad_norm_ (dtensor/nn/clip_grad.h) calls it first. Collective over
// every mesh a Partial gradient is on; every rank calls it with the same
// parameters in the same order.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace dtensor::nn {

// Reduces every Partial DTensor gradient of `parameters` in place (others,
// plain ones, those without a gradient, and a gradient whose mesh dims reduce
// by different ops are left as they are). Returns the
// number of buckets, each reduced by one collective over its mesh dims.
int64_t reduce_gradients(const std::vector<at::Tensor>& parameters);

}  // namespace dtensor::nn
