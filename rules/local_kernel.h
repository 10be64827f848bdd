// Copyright 2026 The dtensor Authors.
//
// rules/local_kernel.h (<dtensor/rules/local_kernel.h>): how an operator
// computes on the local shards when the op itself would not, registered per
// ATen operator.
//
// After propagation has chosen a layout and the inputs have been
// redistributed to it, each rank runs the op on its shards. Some rows only
// hold with a different local computation: a mean over a split dim divides
// by the global count, a view takes the shard's own shape, a random op draws
// the global tensor and keeps its part. Such an op registers one kernel; it
// runs for EVERY layout the engine chooses for that op (the all-Replicate
// one included), reading the chosen layout from its context and calling the
// op itself where nothing special is needed.
//
//   dtensor::local_kernels().add("aten::mean.dim", mean_kernel);
//
// Kernels registered here compute locally. A kernel that must communicate
// lives in the dispatch layer (dtensor/dispatch/kernels/) and asks
// redistribute for the collective, so every byte moved is planned and
// counted; it registers into this same registry.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/stack.h>

#include <dtensor/base/registry.h>
#include <dtensor/rules/op_call.h>
#include "absl/functional/function_ref.h"

namespace dtensor {

struct Propagation;

// What a local kernel knows: the call, and the layout chosen for it
// (rules/propagation.h): each input's spec after redistribution, each
// output's global shape and placements. Made by whoever runs the kernel.
class LocalContext {
 public:
  // `call` returns the call, made on its first use: an op whose layout the
  // propagation cache held has no call yet, and making one costs about as
  // much as a whole cached view op. A FunctionRef does not own what it
  // calls: a context lives only while the kernel it is made for runs.
  LocalContext(absl::FunctionRef<const OpCall&()> call, const Propagation& propagation,
               const DeviceMesh& mesh)
      : call_(call), propagation_(propagation), mesh_(mesh) {}

  const OpCall& call() const { return call_(); }
  const Propagation& propagation() const { return propagation_; }
  const DeviceMesh& mesh() const { return mesh_; }

 private:
  absl::FunctionRef<const OpCall&()> call_;
  const Propagation& propagation_;
  const DeviceMesh& mesh_;
};

// Computes the op on local shards: `stack` holds the call's arguments with
// every tensor replaced by its local shard; leave the local outputs on it.
using LocalKernel = std::function<void(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                                       const LocalContext& context)>;

// Local kernels by operator name; one per op.
Registry<LocalKernel>& local_kernels();

// The calling rank's local shape of output `k` (of dtype `dtype`); not for
// an output sized by its kernel (kSizedByKernel in rules/strategy.h).
const std::vector<int64_t>& local_output_shape(const LocalContext& context, size_t k,
                                               c10::ScalarType dtype);

// The mesh dims on which the chosen layout of input `i` splits a tensor dim
// that `counts` accepts (a kernel combining partial results over those dims:
// a loss over a split batch, a norm over a split dim).
std::vector<int64_t> mesh_dims_splitting(const LocalContext& context, size_t i,
                                         const std::function<bool(int64_t dim)>& counts);

}  // namespace dtensor
