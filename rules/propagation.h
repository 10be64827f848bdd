// Copyright 2026 The dtensor Authors.
//
// rules/propagation.h (<dtensor/rules/propagation.h>): the engine that turns
// an operator call on DTensors into a layout decision.
//
// `propagate` gathers the single-mesh-dim rows of every strategy registered
// for the op (rules/strategy.h), expands them to the whole mesh (one row per
// mesh dim), drops combinations that do not fit the real shapes (invalid
// specs, in-place outputs that would change layout), and picks the cheapest
// by the cost of moving the inputs (rules/cost.h), plus the all-reduce a row
// defers where it keeps a Partial input pending while gathering another
// input. The result says where each input must be before the local op, how
// the op computes locally (the op's local kernel, if it has one), and the
// global shape and placements of each output. An op with a decomposition
// (rules/decomposition.h) is only marked as such.
//
// Callers (the dispatcher) cache the result per (operator, input specs,
// non-tensor arguments): see rules/propagation_cache.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <dtensor/rules/decomposition.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/op_call.h>
#include <dtensor/rules/strategy.h>

namespace dtensor {

struct PropagationOptions {
  // Ops without a rule run on replicated inputs instead of raising.
  bool replicate_fallback = false;
  // Raise instead of redistributing any input.
  bool strict = false;
};

// How one schema return maps onto the flat list of output tensors.
struct ReturnLayout {
  enum class Kind { kTensor, kTensorList, kOther } kind = Kind::kOther;
  size_t first_output = 0;  // index into the flat outputs
  size_t count = 0;         // tensors it holds
  // For in-place and out= ops: the argument it aliases and writes, else -1.
  int64_t writes_argument = -1;
};

struct Propagation {
  // Per input: the spec it must have before the local op.
  std::vector<DTensorSpecPtr> input_targets;
  // Whether any input moves.
  bool redistributes = false;
  // Per flat output tensor; may hold kSizedByKernel (rules/strategy.h).
  std::vector<std::vector<int64_t>> output_shapes;
  std::vector<std::vector<PlacementPtr>> output_placements;
  std::vector<ReturnLayout> returns;
  // The op's local kernel; empty for the op itself.
  LocalKernel local_kernel;
  // Set when the op runs as other ops on DTensors (rules/decomposition.h);
  // nothing else here is then filled in.
  Decomposition decomposition;
  // The op has no strategy and runs on replicated inputs
  // (PropagationOptions::replicate_fallback).
  bool replicate_fallback = false;
  // The written tensor takes the output's layout (Strategy::updates_layout_in_place).
  bool updates_layout_in_place = false;
  // Output specs, made on first use (their dtype is the local result's).
  mutable std::vector<DTensorSpecPtr> output_specs;

  // Output `k`'s spec on `mesh` for a local result of `dtype` and
  // `local_sizes` (which size its kSizedByKernel dims; only those outputs
  // need them), made once and kept.
  const DTensorSpecPtr& output_spec(
      size_t k, c10::ScalarType dtype, const DeviceMesh& mesh,
      std::optional<c10::IntArrayRef> local_sizes = std::nullopt) const;
};

// Decides the layout of `call`. Throws dtensor::Error naming the op and the
// input placements when the op has no rule (and no fallback), when no
// combination fits, or when strict mode forbids the redistribution needed.
std::unique_ptr<Propagation> propagate(const OpCall& call, const PropagationOptions& options);

// The layout of `call` when mesh dim m uses `rows[m]` (the op's local kernel
// runs, if it has one). What the rule verifier checks each strategy row
// with. Null when the rows would relayout a tensor written in place; throws
// dtensor::Error when they do not fit the call.
std::unique_ptr<Propagation> propagation_for_rows(const OpCall& call,
                                                  const std::vector<ShardingRow>& rows);

// The all-Replicate row of `call`: correct for any op's own kernel.
ShardingRow replicate_row(const OpCall& call);

}  // namespace dtensor
