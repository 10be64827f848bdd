// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/reduction.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <dtensor/base/check.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/roles.h>

namespace dtensor {

std::vector<bool> reduced_dims(const OpCall& call, const Reduction& r) {
  const int64_t ndim = call.input(0).spec->ndim();
  std::vector<bool> reduced(ndim, false);
  const c10::IValue* dims = r.dims_argument ? &call.argument(*r.dims_argument) : nullptr;
  if (dims == nullptr || dims->isNone() || (dims->isIntList() && dims->toIntList().empty())) {
    std::fill(reduced.begin(), reduced.end(), true);
  } else if (dims->isInt()) {
    if (ndim > 0) reduced[normalize_tensor_dim(dims->toInt(), ndim, call.op_name())] = true;
  } else {
    for (int64_t d : dims->toIntVector()) {
      reduced[normalize_tensor_dim(d, ndim, call.op_name())] = true;
    }
  }
  return reduced;
}

bool keepdim(const OpCall& call, const Reduction& r) {
  return r.keepdim_argument && call.argument(*r.keepdim_argument).toBool();
}

Reduction over_all(Reduction r) {
  r.dims_argument.reset();
  r.keepdim_argument.reset();
  return r;
}

Reduction local_only(size_t dims_argument, std::optional<size_t> keepdim_argument) {
  Reduction r;
  r.dims_argument = dims_argument;
  r.keepdim_argument = keepdim_argument;
  return r;
}

namespace {

std::vector<int64_t> reduced_shape(const OpCall& call, const Reduction& r) {
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  const std::vector<bool> reduced = reduced_dims(call, r);
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(shape[d]);
    } else if (keepdim(call, r)) {
      out.push_back(1);
    }
  }
  return out;
}

// Whether every coordinate of the mesh holds part of `dim` of input 0.
bool every_shard_nonempty(const OpCall& call, int64_t dim) {
  const DTensorSpec& spec = *call.input(0).spec;
  const int64_t local_dim = spec.local_layout().merged_leading_dims > 1 ? 0 : dim;
  return spec.min_local_sizes()[local_dim] > 0;
}

PlacementPtr reduced_split(const OpCall& call, const Reduction& r, const Placement& p, int64_t dim,
                           const std::vector<bool>& reduced) {
  const int64_t merged = std::max<int64_t>(p.merged_leading_dims(), 1);
  // A Ragged split covers its merged leading dims: all of them must go.
  const bool all_reduced =
      std::all_of(reduced.begin() + dim, reduced.begin() + dim + merged, [](bool b) { return b; });
  if (!reduced[dim]) {
    bool leading_kept = true;
    int64_t out_dim = dim;
    for (int64_t d = 0; d < dim + merged; ++d) {
      if (reduced[d] && d < dim && !keepdim(call, r)) --out_dim;
      leading_kept &= !reduced[d];
    }
    return move_for_role(p, RuleRole::kPassThrough, out_dim, leading_kept || merged <= 1);
  }
  const std::optional<ReduceOp> gives =
      r.mean ? std::optional<ReduceOp>(ReduceOp::kSum) : r.split_gives;
  const bool norm = r.norm_order_argument.has_value();
  if ((!gives && !norm) || !all_reduced || !p.fills_role(RuleRole::kContraction)) return nullptr;
  if (norm) return Replicate::make();  // the op's kernel combines the parts
  if (r.needs_nonempty_shards && !every_shard_nonempty(call, dim)) return nullptr;
  return Partial::make(*gives);
}

std::vector<ShardingRow> reduction_rows(const OpCall& call, const Reduction& r, int64_t m) {
  const PlacementPtr& p = call.placement(0, m);
  const size_t returns = call.schema().returns().size();
  std::vector<ShardingRow> rows;
  auto add = [&](const PlacementPtr& in, const PlacementPtr& out) {
    ShardingRow row;
    row.inputs.assign(call.num_inputs(), Replicate::make());
    row.inputs[0] = in;
    row.outputs.assign(returns, out);
    rows.push_back(std::move(row));
  };
  if (const auto dim = split_dim_of(*p)) {
    if (PlacementPtr out = reduced_split(call, r, *p, *dim, reduced_dims(call, r))) add(p, out);
  } else if (const auto op = p->partial_op()) {
    if (std::count(r.partials_pass.begin(), r.partials_pass.end(), *op)) add(p, p);
  }
  return rows;
}

// With no reduced dim split, the op itself (exactly the single-device
// result). Otherwise the sum of the shard over the reduced dims divided by the
// GLOBAL count, so the terms of a split reduced dim add up to the mean
// (Partial(sum)); half types sum and divide in float and round once, as
// libtorch 2.x's own mean does.
void run_mean(const Reduction& r, const c10::OperatorHandle& op, torch::jit::Stack& stack,
              const LocalContext& context) {
  const OpCall& call = context.call();
  const std::vector<bool> reduced = reduced_dims(call, r);
  const c10::IValue& dtype_value = call.argument("dtype");
  const auto dtype = dtype_value.isNone()
                         ? c10::optional<at::ScalarType>()
                         : c10::optional<at::ScalarType>(dtype_value.toScalarType());
  const at::Tensor local = stack[0].toTensor();
  const at::ScalarType result = dtype ? *dtype : local.scalar_type();
  DTENSOR_CHECK(at::isFloatingType(result) || at::isComplexType(result), call.op_name(),
                ": expected a floating point or complex dtype for a mean, found ", result);
  if (mesh_dims_splitting(context, 0, [&](int64_t dim) { return reduced[dim]; }).empty()) {
    op.callBoxed(stack);
    return;
  }
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (!reduced[d]) continue;
    dims.push_back(static_cast<int64_t>(d));
    count *= shape[d];
  }
  const bool half = result == at::kHalf || result == at::kBFloat16;
  at::Tensor out = at::sum(local, dims, keepdim(call, r), half ? at::kFloat : result).div_(count);
  torch::jit::drop(stack, stack.size());
  stack.push_back(half ? out.to(result) : out);
}

}  // namespace

Strategy reduction_strategy(const Reduction& reduction) {
  Strategy strategy;
  strategy.rows = [reduction](const OpCall& call, int64_t m) {
    return reduction_rows(call, reduction, m);
  };
  strategy.output_shapes = [reduction](const OpCall& call) {
    return std::vector<std::vector<int64_t>>(call.schema().returns().size(),
                                             reduced_shape(call, reduction));
  };
  return strategy;
}

LocalKernel mean_kernel(const Reduction& reduction) {
  return [reduction](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const LocalContext& context) { run_mean(reduction, op, stack, context); };
}

}  // namespace dtensor
