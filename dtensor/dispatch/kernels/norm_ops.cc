// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/kernels/norm_ops.cc: vector norms (norm, linalg_vector_norm).
//
// Dims that are not reduced pass any split through (rules/reduction.h). A
// split reduced dim gives Replicate without gathering the tensor: each rank
// computes its part of sum |x|^p (max or min |x| for +-inf, the nonzero
// count for 0), the parts are combined with one all-reduce that redistribute
// plans (dtensor/redistribute/reduce_terms.h), and the root is taken. That is
// gradient clipping's total norm over sharded parameters, counted by
// CollectiveCounter like every other collective.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include <dtensor/base/check.h>
#include <dtensor/redistribute/reduce_terms.h>
#include <dtensor/rules/reduction.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

// max (or min) of |x| over `dims`; an empty shard gives the identity 0 (or inf).
at::Tensor extreme_of_abs(const at::Tensor& abs, const std::vector<int64_t>& dims, bool keep,
                          bool max) {
  int64_t reduced_numel = 1;
  for (int64_t d : dims) reduced_numel *= abs.size(d);
  if (reduced_numel == 0) {
    return at::sum(abs, dims, keep).fill_(max ? 0.0 : std::numeric_limits<double>::infinity());
  }
  return max ? at::amax(abs, dims, keep) : at::amin(abs, dims, keep);
}

void run_norm(const Reduction& r, const c10::OperatorHandle& op, torch::jit::Stack& stack,
              const LocalContext& context) {
  const OpCall& call = context.call();
  const std::vector<bool> reduced = reduced_dims(call, r);
  const std::vector<int64_t> combine =
      mesh_dims_splitting(context, 0, [&](int64_t dim) { return reduced[dim]; });
  if (combine.empty()) {
    op.callBoxed(stack);
    return;
  }
  const c10::IValue& order = call.argument(*r.norm_order_argument);
  const double p = order.isNone() ? 2.0 : order.toScalar().toDouble();
  at::Tensor x = stack[0].toTensor();
  const auto dtype_index = call.schema().argumentIndexWithName("dtype");
  if (dtype_index && !call.argument(*dtype_index).isNone()) {
    x = x.to(call.argument(*dtype_index).toScalarType());
  }
  // The op itself refuses integers (on whole inputs it runs and says so).
  DTENSOR_CHECK(at::isFloatingType(x.scalar_type()) || at::isComplexType(x.scalar_type()),
                call.op_name(), ": expected a floating point or complex input for a norm, found ",
                x.scalar_type());
  x = x.abs();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (reduced[d]) dims.push_back(static_cast<int64_t>(d));
  }
  const bool keep = keepdim(call, r);
  ReduceOp combine_op = ReduceOp::kSum;
  at::Tensor part;
  if (std::isinf(p)) {
    combine_op = p > 0 ? ReduceOp::kMax : ReduceOp::kMin;
    part = extreme_of_abs(x, dims, keep, p > 0);
  } else if (p == 0) {
    part = at::sum(x.ne(0).to(x.scalar_type()), dims, keep);
  } else {
    part = at::sum(x.pow(p), dims, keep);
  }
  part = reduce_terms(part, context.mesh(), combine, combine_op);
  if (p != 0 && !std::isinf(p)) part = part.pow(1.0 / p);
  torch::jit::drop(stack, stack.size());
  stack.push_back(part);
}

LocalKernel norm_kernel(const Reduction& reduction) {
  return [reduction](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const LocalContext& context) { run_norm(reduction, op, stack, context); };
}

}  // namespace

DTENSOR_REGISTER(norm_ops) {
  Reduction norm = local_only(2, 3);
  norm.norm_order_argument = 1;
  const std::initializer_list<std::string_view> ops = {"aten::norm.ScalarOpt_dim",
                                                       "aten::linalg_vector_norm"};
  add_to_existing(strategies(), ops, reduction_strategy(norm));
  add_to_existing(local_kernels(), ops, norm_kernel(norm));
  add_to_existing(strategies(), {"aten::norm.Scalar"}, reduction_strategy(over_all(norm)));
  add_to_existing(local_kernels(), {"aten::norm.Scalar"}, norm_kernel(over_all(norm)));
}

}  // namespace dtensor
