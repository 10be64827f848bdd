// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/dispatch.h: how ATen calls on DTensors run, and the modes
// that change it.
//
// Every ATen operator that reaches a DTensor goes through one boxed kernel:
// unwrap the local shards, propagate the layout (rules/propagation.h, cached
// per operator, input specs and non-tensor arguments), redistribute inputs to
// the chosen strategy, run the op on the local shards, wrap the outputs. The
// kernel is registered at load time for every `aten` operator that has no
// CompositeImplicitAutograd decomposition (those decompose into ops that do
// reach it, which keeps their autograd formulas), and as the fallback of the
// DTensor key.
//
// Modes, per thread (each rank thread of the local backend sets its own):
//
//   {
//     dtensor::ScopedStrictMode strict;           // raise on any implicit redistribute
//     dtensor::ScopedReplicateFallback fallback;  // ops without rules run replicated
//     dtensor::ScopedImplicitReplication mix;     // plain tensors count as Replicate
//     ...
//   }
//
// Without implicit replication, mixing a plain tensor with a DTensor is an
// error unless the plain tensor is a 0-dim scalar (treated as Replicate).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include <torch/library.h>

namespace dtensor {

class ScopedDispatchMode {
 public:
  ~ScopedDispatchMode();
  ScopedDispatchMode(const ScopedDispatchMode&) = delete;
  ScopedDispatchMode& operator=(const ScopedDispatchMode&) = delete;

 protected:
  explicit ScopedDispatchMode(uint64_t bit);

 private:
  uint64_t previous_;
};

// Raise instead of redistributing any input of an operator.
class ScopedStrictMode : public ScopedDispatchMode {
 public:
  ScopedStrictMode();
};

// Operators without a sharding rule run on replicated inputs (correct,
// slow) instead of raising.
class ScopedReplicateFallback : public ScopedDispatchMode {
 public:
  ScopedReplicateFallback();
};

// Plain tensors mixed with DTensors count as Replicate.
class ScopedImplicitReplication : public ScopedDispatchMode {
 public:
  ScopedImplicitReplication();
};

// The calling thread's active modes (a bit per mode).
uint64_t dispatch_mode_bits();

// Registers a kernel made by `make_kernel` for `key` on every `aten`
// operator without a CompositeImplicitAutograd decomposition, as this layer
// does for the DTensor key: a key that must see every op before any
// CompositeExplicitAutograd kernel (which a fallback alone would not) takes
// this, plus its fallback. The SPMD type checker (dtensor/spmd/types.h) does.
void register_kernel_for_every_aten_op(c10::DispatchKey key,
                                       const std::function<torch::CppFunction()>& make_kernel);

// Routes `op_name` ("ns::name.overload") on DTensors through the DTensor
// kernel. Done for every aten op at load time; call it for custom operators
// that have a CompositeExplicitAutograd kernel (others reach the fallback).
void register_dtensor_kernel(std::string_view op_name);

}  // namespace dtensor
