// Copyright 2026 The dtensor Authors.
//
// rules/reduction.h (<dtensor/rules/reduction.h>): the strategy builder for reductions over some
// dims.
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
//   dtensor::strategies().add("aten::sum.dim_IntList", reduction_strategy(sum));
#pragma once

#include <optional>
#include <vector>

#include <dtensor/mesh/reduce_op.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/strategy.h>

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
  // Partial(sum) for a split reduced dim; needs `mean_kernel`.
  bool mean = false;
  // Vector norms: the argument holding the order p (None: 2). A split reduced
  // dim gives Replicate: the op's kernel (dtensor/dispatch/kernels/
  // norm_ops.cc) combines each rank's part of sum |x|^p (max or min |x| for
  // +-inf, the nonzero count for 0) with one all-reduce planned by
  // redistribute, and takes the root, so the norm never gathers the tensor
  // (gradient clipping over sharded parameters).
  std::optional<size_t> norm_order_argument;
};

Strategy reduction_strategy(const Reduction& reduction);

// The local kernel of a `mean` reduction: with no reduced dim split, the op
// itself; otherwise the shard's sum divided by the global count.
LocalKernel mean_kernel(const Reduction& reduction);

// Which dims of input 0 the call reduces, and whether it keeps them.
std::vector<bool> reduced_dims(const OpCall& call, const Reduction& reduction);
bool keepdim(const OpCall& call, const Reduction& reduction);

// `r` reducing every dim, whatever the call says (sum, mean, norm.Scalar).
Reduction over_all(Reduction r);
// A reduction whose reduced dims (argument `dims_argument`) must be whole on
// every rank.
Reduction local_only(size_t dims_argument, std::optional<size_t> keepdim_argument);

}  // namespace dtensor
