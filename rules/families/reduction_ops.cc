// Copyright 2026 The dtensor Authors.
//
// rules/families/reduction_ops.cc: reductions (rules/reduction.h).
#include "rules/reduction.h"
#include "rules/registration.h"

namespace dtensor {
namespace {

Reduction combining(ReduceOp gives, std::vector<ReduceOp> partials, bool nonempty = false) {
  Reduction r;
  r.split_gives = gives;
  r.partials_pass = std::move(partials);
  r.needs_nonempty_shards = nonempty;
  return r;
}

Reduction over_all(Reduction r) {
  r.dims_argument.reset();
  r.keepdim_argument.reset();
  return r;
}

// A reduction whose reduced dims must be whole on every rank.
Reduction local_only(size_t dims_argument, std::optional<size_t> keepdim_argument) {
  Reduction r;
  r.dims_argument = dims_argument;
  r.keepdim_argument = keepdim_argument;
  return r;
}

}  // namespace

DTENSOR_REGISTER_RULES(reduction) {
  const Reduction sum = combining(ReduceOp::kSum, {ReduceOp::kSum, ReduceOp::kAvg});
  add_to_existing(registry, {"aten::sum.dim_IntList"}, reduction_rule(sum));
  add_to_existing(registry, {"aten::sum"}, reduction_rule(over_all(sum)));
  Reduction mean;
  mean.mean = true;
  mean.partials_pass = {ReduceOp::kSum, ReduceOp::kAvg};
  add_to_existing(registry, {"aten::mean.dim"}, reduction_rule(mean));
  add_to_existing(registry, {"aten::mean"}, reduction_rule(over_all(mean)));
  const Reduction amax = combining(ReduceOp::kMax, {ReduceOp::kMax}, true);
  const Reduction amin = combining(ReduceOp::kMin, {ReduceOp::kMin}, true);
  add_to_existing(registry, {"aten::amax"}, reduction_rule(amax));
  add_to_existing(registry, {"aten::amin"}, reduction_rule(amin));
  add_to_existing(registry, {"aten::max"}, reduction_rule(over_all(amax)));
  add_to_existing(registry, {"aten::min"}, reduction_rule(over_all(amin)));
  const Reduction prod = combining(ReduceOp::kProduct, {ReduceOp::kProduct});
  add_to_existing(registry, {"aten::prod.dim_int"}, reduction_rule(prod));
  add_to_existing(registry, {"aten::prod"}, reduction_rule(over_all(prod)));
  // Values with indices and statistics: reduced dims must be whole.
  add_to_existing(registry,
                  {"aten::max.dim", "aten::min.dim", "aten::argmax", "aten::argmin",
                   "aten::logsumexp"},
                  reduction_rule(local_only(1, 2)));
  add_to_existing(registry,
                  {"aten::var.correction", "aten::std.correction", "aten::var_mean.correction",
                   "aten::std_mean.correction"},
                  reduction_rule(local_only(1, 3)));
  Reduction norm = local_only(2, 3);
  norm.norm_order_argument = 1;
  add_to_existing(registry, {"aten::norm.ScalarOpt_dim", "aten::linalg_vector_norm"},
                  reduction_rule(norm));
  add_to_existing(registry, {"aten::norm.Scalar"}, reduction_rule(over_all(norm)));
}

}  // namespace dtensor
