// Copyright 2026 The dtensor Authors.
//
// rules/rule.h: a sharding rule for one ATen operator.
//
// A rule is an equality: running the op on every rank's shards, laid out as
// a row's input placements, gives shards of the op's global result laid out
// as the row's output placements. Rules are written for ONE mesh dim: the
// strategy returns every row that holds on mesh dim `m` for this call, and
// the engine (rules/propagation.h) expands them to the whole mesh, checks
// them against the real shapes, and picks the cheapest combination given
// where the inputs are now.
//
//   dtensor::OpRule rule;
//   rule.strategy = [](const dtensor::OpCall& call, int64_t m) {
//     std::vector<dtensor::ShardingRow> rows;
//     rows.push_back({{dtensor::Shard::make(0)}, {dtensor::Shard::make(0)}});
//     return rows;
//   };
//   dtensor::RuleRegistry::global().add("mylib::my_op", rule);
//
// Rows list inputs in `OpCall::inputs()` order (one per tensor, Tensor[]
// elements one by one) and outputs one per schema return (a Tensor[] return
// uses its placement for every element). The engine adds the all-Replicate
// row (the op itself on whole inputs) to every op's rows.
//
// A rule with a `local_kernel` computes only combinations made entirely of
// its own rows: on a mesh of several dims it lists the rows it accepts on
// the dims it leaves alone too (`replicate_row(call)`, pass-through rows).
// Rows of the op's other rules keep serving every other combination.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/stack.h>

#include "rules/op_call.h"

namespace dtensor {

struct ShardingRow {
  std::vector<PlacementPtr> inputs;
  std::vector<PlacementPtr> outputs;
  // Other mesh dims on which this row holds only if every input keeps the
  // placement it has now: a row may read them (a view's strided split counts
  // the pieces earlier mesh dims leave). The engine refuses any combination
  // that redistributes an input there.
  std::vector<int64_t> assumes_inputs_kept_on;
};

// Global shape of every output tensor (Tensor[] returns element by element).
using OutputShapesFn = std::function<std::vector<std::vector<int64_t>>(const OpCall&)>;

struct Propagation;

// What a custom local kernel knows: the call, and the layout chosen for it
// (rules/propagation.h): each input's spec after redistribution, each
// output's global shape and placements.
struct LocalContext {
  const OpCall& call;
  const Propagation& propagation;
  const DeviceMesh& mesh;
};

// The calling rank's local shape of output `k` (of dtype `dtype`).
const std::vector<int64_t>& local_output_shape(const LocalContext& context, size_t k,
                                               c10::ScalarType dtype);

// The mesh dims on which the chosen layout of input `i` splits a tensor dim
// that `counts` accepts (a kernel combining partial results over those dims:
// a loss over a split batch, a norm over a split dim).
std::vector<int64_t> mesh_dims_splitting(const LocalContext& context, size_t i,
                                         const std::function<bool(int64_t dim)>& counts);

// Computes the op on local shards: `stack` holds the call's arguments with
// every tensor replaced by its local shard; leave the local outputs on it.
using LocalKernelFn = std::function<void(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                                         const LocalContext& context)>;

// Computes the op from other ops on DTensors: `stack` holds the call's
// arguments (DTensors as they are); replace them by the op's results. Each op
// the decomposition calls propagates on its own.
using DecompositionFn =
    std::function<void(const c10::OperatorHandle& op, torch::jit::Stack& stack)>;

struct OpRule {
  // The rows that hold on one mesh dim. Required unless `decomposition` is set.
  std::function<std::vector<ShardingRow>(const OpCall& call, int64_t mesh_dim)> strategy;
  // Instead of rows: ops whose inputs no single row can describe (the
  // `_foreach_*` lists, whose elements each have their own layout) run as
  // other ops on DTensors. An op with a decomposition uses nothing else.
  DecompositionFn decomposition;
  // Optional: output shapes; by default the op runs on meta tensors.
  OutputShapesFn output_shapes;
  // Optional: how rows of THIS rule compute locally; by default the op itself
  // runs on the local shards.
  LocalKernelFn local_kernel;
  // In-place views (t_, squeeze_): the tensor written takes the output's
  // shape and layout, instead of keeping its own.
  bool updates_layout_in_place = false;
};

}  // namespace dtensor
