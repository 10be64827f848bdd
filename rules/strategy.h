// Copyright 2026 The dtensor Authors.
//
// rules/strategy.h (<dtensor/rules/strategy.h>): sharding strategies, the
// rows of placements an operator's result follows from, registered per ATen
// operator.
//
// A row is an equality: running the op on every rank's shards, laid out as
// the row's input placements, gives shards of the op's global result laid
// out as the row's output placements. Strategies are written for ONE mesh
// dim: `rows` returns every row that holds on mesh dim `m` for this call,
// and the engine (rules/propagation.h) expands them to the whole mesh,
// checks them against the real shapes, and picks the cheapest combination
// given where the inputs are now (rules/cost.h).
//
//   dtensor::Strategy strategy;
//   strategy.rows = [](const dtensor::OpCall& call, int64_t m) {
//     return std::vector<dtensor::ShardingRow>{{{dtensor::Shard::make(0)},
//                                               {dtensor::Shard::make(0)}}};
//   };
//   dtensor::strategies().add("mylib::my_op", strategy);       // joins the op's others
//   dtensor::strategies().override("aten::mm", strategy);      // replaces them
//
// Rows list inputs in `OpCall::inputs()` order (one per tensor, Tensor[]
// elements one by one) and outputs one per schema return (a Tensor[] return
// uses its placement for every element). The engine adds the all-Replicate
// row (the op itself on whole inputs) to every op's rows. How the rows
// compute locally is the op itself on the shards, or the op's local kernel
// (rules/local_kernel.h) when one is registered; an op may instead run as
// other ops on DTensors (rules/decomposition.h). Every change to a registry
// clears the propagation caches.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <dtensor/base/registry.h>
#include <dtensor/rules/op_call.h>

namespace dtensor {

struct ShardingRow {
  std::vector<PlacementPtr> inputs;
  std::vector<PlacementPtr> outputs;
  // Other mesh dims on which this row holds only if every input keeps the
  // placement it has now: a row may read them (a view's strided split counts
  // the pieces earlier mesh dims leave). The engine refuses any combination
  // that redistributes an input there.
  std::vector<int64_t> assumes_inputs_kept_on = {};
};

// Global shape of every output tensor (Tensor[] returns element by element).
// A shape may end in kSizedByKernel: that dim, and any after it the local
// result has, are as long as the local result's, and no row may split them
// (a fused kernel's bookkeeping: a padded log-sum-exp, random-number state,
// whose shapes vary between libtorch versions). {kSizedByKernel} alone is
// the local result's whole shape: every row places it Replicate or Partial.
inline constexpr int64_t kSizedByKernel = -1;
// Whether `shape` ends in kSizedByKernel.
inline bool has_kernel_sized_dims(const std::vector<int64_t>& shape) {
  return !shape.empty() && shape.back() == kSizedByKernel;
}
using OutputShapesFn = std::function<std::vector<std::vector<int64_t>>(const OpCall&)>;

struct Strategy {
  // The rows that hold on one mesh dim. Required.
  std::function<std::vector<ShardingRow>(const OpCall& call, int64_t mesh_dim)> rows;
  // Optional: output shapes; by default the op runs on meta tensors.
  OutputShapesFn output_shapes;
  // In-place views (t_, squeeze_): the tensor written takes the output's
  // shape and layout, instead of keeping its own.
  bool updates_layout_in_place = false;
};

// Strategies by operator name ("aten::add.Tensor"); an op's strategies join.
Registry<Strategy>& strategies();

}  // namespace dtensor
