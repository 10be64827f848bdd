// Copyright 2026 The dtensor Authors.
//
// rules/reduction.h: the rule builder for reductions over some dims.
//
// Dims that are not reduced pass any split through (RuleRole::kPassThrough),
// renumbered when keepdim is false. A split of a reduced dim
// (RuleRole::kContraction) leaves each rank a term of the result: Partial of
// `split_gives` (sum for sum, max for amax), or no row at all when the
// reduction does not combine that way (var, argmax: the dim must be
// Replicate). Partial inputs pass when the reduction is linear in them.
//
//   Reduction sum;
//   sum.split_gives = ReduceOp::kSum;
//   sum.partials_pass = {ReduceOp::kSum, ReduceOp::kAvg};
//   registry.add("aten::sum.dim_IntList", reduction_rule(sum));
#pragma once

#include <optional>
#include <vector>

#include "mesh/reduce_op.h"
#include "rules/rule.h"

namespace dtensor {

struct Reduction {
  // Argument holding the reduced dims (int, int[] or None; None and [] mean
  // all dims); nullopt: the op reduces every dim.
  std::optional<size_t> dims_argument = 1;
  // Argument holding keepdim; nullopt: false.
  std::optional<size_t> keepdim_argument = 2;
  // What a split reduced dim leaves on each rank; nullopt: not allowed.
  std::optional<ReduceOp> split_gives;
  // A split reduced dim must hold something on every rank (max of nothing
  // is an error, not an identity).
  bool needs_nonempty_shards = false;
  // Partial inputs that pass through unchanged.
  std::vector<ReduceOp> partials_pass;
  // Mean: each rank sums its part and divides by the global count, giving
  // Partial(sum) for a split reduced dim. Sets a local kernel.
  bool mean = false;
  // Vector norms: the argument holding the order p (None: 2). A split reduced
  // dim leaves each rank its part of sum |x|^p (max or min |x| for +-inf, the
  // nonzero count for 0); the local kernel all-reduces the parts over the mesh
  // dims that split a reduced dim and takes the root, so the norm comes out
  // Replicate there without gathering the tensor (gradient clipping over
  // sharded parameters).
  std::optional<size_t> norm_order_argument;
};

OpRule reduction_rule(const Reduction& reduction);

}  // namespace dtensor
