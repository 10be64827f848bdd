// Copyright 2026 The dtensor Authors.
//
// rules/families/reduction_ops.cc: reductions (rules/reduction.h). Vector
// norms, whose kernel communicates, are in dtensor/dispatch/kernels/norm_ops.cc.
#include <dtensor/rules/reduction.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

Reduction combining(ReduceOp gives, std::vector<ReduceOp> partials, bool nonempty = false) {
  Reduction r;
  r.split_gives = gives;
  r.partials_pass = std::move(partials);
  r.needs_nonempty_shards = nonempty;
  return r;
}

}  // namespace

DTENSOR_REGISTER(reduction_strategies) {
  Registry<Strategy>& registry = strategies();
  const Reduction sum = combining(ReduceOp::kSum, {ReduceOp::kSum, ReduceOp::kAvg});
  add_to_existing(registry, {"aten::sum.dim_IntList"}, reduction_strategy(sum));
  add_to_existing(registry, {"aten::sum"}, reduction_strategy(over_all(sum)));
  Reduction mean;
  mean.mean = true;
  mean.partials_pass = {ReduceOp::kSum, ReduceOp::kAvg};
  add_to_existing(registry, {"aten::mean.dim"}, reduction_strategy(mean));
  add_to_existing(registry, {"aten::mean"}, reduction_strategy(over_all(mean)));
  add_to_existing(local_kernels(), {"aten::mean.dim"}, mean_kernel(mean));
  add_to_existing(local_kernels(), {"aten::mean"}, mean_kernel(over_all(mean)));
  const Reduction amax = combining(ReduceOp::kMax, {ReduceOp::kMax}, true);
  const Reduction amin = combining(ReduceOp::kMin, {ReduceOp::kMin}, true);
  add_to_existing(registry, {"aten::amax"}, reduction_strategy(amax));
  add_to_existing(registry, {"aten::amin"}, reduction_strategy(amin));
  add_to_existing(registry, {"aten::max"}, reduction_strategy(over_all(amax)));
  add_to_existing(registry, {"aten::min"}, reduction_strategy(over_all(amin)));
  const Reduction prod = combining(ReduceOp::kProduct, {ReduceOp::kProduct});
  add_to_existing(registry, {"aten::prod.dim_int"}, reduction_strategy(prod));
  add_to_existing(registry, {"aten::prod"}, reduction_strategy(over_all(prod)));
  // Values with indices and statistics: reduced dims must be whole.
  add_to_existing(
      registry,
      {"aten::max.dim", "aten::min.dim", "aten::argmax", "aten::argmin", "aten::logsumexp"},
      reduction_strategy(local_only(1, 2)));
  add_to_existing(registry,
                  {"aten::var.correction", "aten::std.correction", "aten::var_mean.correction",
                   "aten::std_mean.correction"},
                  reduction_strategy(local_only(1, 3)));
}

}  // namespace dtensor
