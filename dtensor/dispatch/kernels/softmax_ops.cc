// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/kernels/softmax_ops.cc: softmax and log_softmax, forward
// and backward, and _safe_softmax.
//
// Every dim other than the normalized one passes any split through
// (rules/pointwise.h). The normalized dim itself may be split too (the
// vocabulary dim of logits, for loss parallelism): each rank holds its
// columns, and the kernel combines the row statistics across the ranks of the
// mesh dims that split it, through redistribute (dtensor/redistribute/
// reduce_terms.h): the row maximum (an all-reduce of max) and the sum of
// exponentials (of sum) forward, one sum backward. Each all-reduce moves one
// value per row, where gathering the logits would move all of them. Half
// types compute in float and round once, as libtorch's CPU kernels do.
#include <ATen/ATen.h>

#include <limits>

#include <dtensor/base/check.h>
#include <dtensor/placements/placement.h>
#include <dtensor/placements/shard.h>
#include <dtensor/redistribute/reduce_terms.h>
#include <dtensor/rules/pointwise.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

// The normalized dim, which every input and the output share.
int64_t normalized_dim(const OpCall& call) {
  const int64_t ndim = call.input(0).spec->ndim();
  return normalize_tensor_dim(call.argument("dim").toInt(), std::max<int64_t>(ndim, 1),
                              call.op_name());
}

// Rows on the dims the op leaves alone: any split passes, the normalized dim
// is whole.
Strategy other_dims_strategy() {
  return pointwise_strategy(Linearity::kNone, [](const OpCall& call) {
    return std::vector<int64_t>{normalized_dim(call)};
  });
}

// The normalized dim split alike on every tensor: the kernel combines.
std::vector<ShardingRow> split_dim_rows(const OpCall& call, int64_t m) {
  const PlacementPtr& p = call.placement(0, m);
  if (call.input(0).spec->ndim() == 0 || split_dim_of(*p) != normalized_dim(call) ||
      p->merged_leading_dims() > 0 || !p->fills_role(RuleRole::kContraction)) {
    return {};
  }
  return {{std::vector<PlacementPtr>(call.num_inputs(), p), {p}}};
}

// The mesh dims that split the normalized dim in the chosen layout.
std::vector<int64_t> splitting_mesh_dims(const LocalContext& context) {
  const int64_t dim = normalized_dim(context.call());
  return mesh_dims_splitting(context, 0, [dim](int64_t d) { return d == dim; });
}

// `t` in the type its statistics are computed in.
at::Tensor computing(const at::Tensor& t) {
  const bool half = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
  return half ? t.to(at::kFloat) : t;
}

// Row maximum over the split dim, across the ranks of `mesh_dims`; an empty
// shard contributes -inf.
at::Tensor row_max(const at::Tensor& x, int64_t dim, const LocalContext& context,
                   const std::vector<int64_t>& mesh_dims) {
  const at::Tensor local =
      x.size(dim) == 0
          ? at::sum(x, dim, /*keepdim=*/true).fill_(-std::numeric_limits<double>::infinity())
          : at::amax(x, dim, /*keepdim=*/true);
  return reduce_terms(local, context.mesh(), mesh_dims, ReduceOp::kMax);
}

at::Tensor row_sum(const at::Tensor& x, int64_t dim, const LocalContext& context,
                   const std::vector<int64_t>& mesh_dims) {
  return reduce_terms(at::sum(x, dim, /*keepdim=*/true), context.mesh(), mesh_dims, ReduceOp::kSum);
}

void replace_outputs(torch::jit::Stack& stack, at::Tensor result) {
  torch::jit::drop(stack, stack.size());
  stack.push_back(std::move(result));
}

// _softmax / _log_softmax(self, dim, half_to_float).
template <bool kLog>
void forward_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                    const LocalContext& context) {
  const std::vector<int64_t> mesh_dims = splitting_mesh_dims(context);
  if (mesh_dims.empty()) return op.callBoxed(stack);
  const at::Tensor self = stack[0].toTensor();
  const int64_t dim = normalized_dim(context.call());
  const at::ScalarType result = stack[2].toBool() ? at::kFloat : self.scalar_type();
  const at::Tensor x = computing(self);
  const at::Tensor shifted = x - row_max(x, dim, context, mesh_dims);
  const at::Tensor sum = row_sum(shifted.exp(), dim, context, mesh_dims);
  const at::Tensor out = kLog ? shifted - sum.log() : shifted.exp().div(sum);
  replace_outputs(stack, out.to(result));
}

// _softmax_backward_data / _log_softmax_backward_data(grad_output, output,
// dim, input_dtype): softmax's is output * (grad - sum(grad * output)),
// log_softmax's grad - exp(output) * sum(grad), the sums over the dim.
template <bool kLog>
void backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const LocalContext& context) {
  const std::vector<int64_t> mesh_dims = splitting_mesh_dims(context);
  if (mesh_dims.empty()) return op.callBoxed(stack);
  const at::Tensor grad = computing(stack[0].toTensor());
  const at::Tensor output = computing(stack[1].toTensor());
  const int64_t dim = normalized_dim(context.call());
  // As ATen's meta function decides: the gradient's dtype, except that a
  // float gradient of a half input (half_to_float) is half.
  const at::ScalarType given = stack[0].toTensor().scalar_type();
  const at::ScalarType result =
      given == at::kFloat && stack[3].toScalarType() == at::kHalf ? at::kHalf : given;
  const at::Tensor in = kLog ? grad - output.exp() * row_sum(grad, dim, context, mesh_dims)
                             : output * (grad - row_sum(grad * output, dim, context, mesh_dims));
  replace_outputs(stack, in.to(result));
}

void add_softmax_op(std::string_view name, LocalKernel kernel) {
  add_to_existing(strategies(), {name}, other_dims_strategy());
  Strategy split;
  split.rows = split_dim_rows;
  add_to_existing(strategies(), {name}, split);
  add_to_existing(local_kernels(), {name}, kernel);
}

}  // namespace

DTENSOR_REGISTER(softmax_ops) {
  add_softmax_op("aten::_softmax", forward_kernel<false>);
  add_softmax_op("aten::_log_softmax", forward_kernel<true>);
  add_softmax_op("aten::_softmax_backward_data", backward_kernel<false>);
  add_softmax_op("aten::_log_softmax_backward_data", backward_kernel<true>);
  // libtorch 2.5+'s softmax of scaled-dot-product attention's math path
  // (what CUDA runs for float64): rows of only -inf give zeros. Its normalized
  // dim stays whole, so ATen's kernel runs each rank's rows; its backward is
  // _softmax_backward_data's.
  add_to_existing(strategies(), {"aten::_safe_softmax"}, other_dims_strategy());
}

}  // namespace dtensor
