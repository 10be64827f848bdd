// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/op_runner.h: one operator call on DTensors, from the
// dispatcher's stack to wrapped outputs (the body of the DTensor kernel).
#pragma once

#include <cstdint>

#include <ATen/core/dispatch/Dispatcher.h>

#include <dtensor/rules/propagation.h>

namespace dtensor {

struct DispatchModes {
  PropagationOptions propagation;
  bool implicit_replication = false;
};

// The call as rules see it: every tensor argument with its spec. Throws for
// DTensors on different meshes and for plain tensors that may not mix in.
OpCall make_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments,
                 const DispatchModes& modes);

// Replaces the op's arguments on `stack` by its (wrapped) results.
// `mode_bits` identifies `modes` in the propagation cache key.
void run_on_dtensors(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const DispatchModes& modes, uint64_t mode_bits);

// Runs `op` on the DTensor arguments on `stack` with a given layout decision
// for `call` (the second half of run_on_dtensors; the rule verifier's entry
// point). `call` is what a custom local kernel reads.
void run_with_propagation(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                          const Propagation& propagation, const OpCall& call);

}  // namespace dtensor
