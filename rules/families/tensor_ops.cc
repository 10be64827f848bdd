// Copyright 2026 The dtensor Authors.
//
// rules/families/tensor_ops.cc: joining and indexing tensors, and ops that
// return Python-level values.
//
// cat and stack keep a split that every operand has on the same dim (not the
// joined one); index_select, gather and scatter need the indexed dim whole
// and keep a split every tensor has alike on another dim (gather also keeps
// any split of the index when the source is whole); ops returning a scalar or
// bool run on replicated inputs so every rank returns the same value.
#include <numeric>

#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/rules/dim_map.h>
#include <dtensor/rules/registration.h>
#include <dtensor/rules/roles.h>

namespace dtensor {
namespace {

// cat(tensors, dim) / stack(tensors, dim): operands are the list elements.
std::vector<ShardingRow> join_rows(const OpCall& call, int64_t m, bool stack) {
  std::vector<ShardingRow> rows;
  const int64_t ndim = call.input(0).spec->ndim();
  const int64_t joined =
      normalize_tensor_dim(call.argument(1).toInt(), ndim + (stack ? 1 : 0), call.op_name());
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    const PlacementPtr& p = call.placement(i, m);
    const auto dim = split_dim_of(*p);
    if (!dim || (!stack && *dim == joined)) continue;
    const int64_t out_dim = stack && *dim >= joined ? *dim + 1 : *dim;
    ShardingRow row;
    bool fits = true;
    for (size_t k = 0; k < call.num_inputs(); ++k) {
      fits = fits && call.input(k).spec->ndim() == ndim;
      row.inputs.push_back(move_for_role(*p, RuleRole::kPassThrough, *dim, out_dim == *dim));
      fits = fits && row.inputs.back() != nullptr;
    }
    PlacementPtr out = move_for_role(*p, RuleRole::kPassThrough, out_dim, out_dim == *dim);
    if (!fits || out == nullptr) continue;
    row.outputs = {out};
    rows.push_back(std::move(row));
  }
  // Every output element is one input element: terms of the same pending
  // reduction on every input stay terms of it.
  const PlacementPtr& first = call.placement(0, m);
  if (first->is_partial()) {
    rows.push_back({std::vector<PlacementPtr>(call.num_inputs(), first), {first}});
  }
  return rows;
}

DimMap keep_all_but(const OpCall& call, size_t dim_argument) {
  const int64_t ndim = call.input(0).spec->ndim();
  DimMap map(ndim);
  std::iota(map.begin(), map.end(), 0);
  if (ndim > 0)
    map[normalize_tensor_dim(call.argument(dim_argument).toInt(), ndim, "dim")] = kConsumed;
  return map;
}

// Whether every input has `ndim` dims and the same sizes on the dims `p` splits.
bool split_dims_agree(const OpCall& call, const Placement& p, int64_t ndim) {
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    const std::vector<int64_t>& other = call.input(i).spec->shape();
    if (static_cast<int64_t>(other.size()) != ndim) return false;
    for (int64_t d = 0; d < ndim; ++d) {
      if (splits_tensor_dim(p, d) && other[d] != shape[d]) return false;
    }
  }
  return true;
}

// gather(self, dim, index) and scatter(self, dim, index, src?): every tensor
// split alike on a dim other than `dim`, whose sizes agree, indexes locally.
std::vector<ShardingRow> index_along_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const int64_t ndim = call.input(0).spec->ndim();
  if (ndim == 0) return rows;
  const int64_t dim = normalize_tensor_dim(call.argument(1).toInt(), ndim, call.op_name());
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    const PlacementPtr& p = call.placement(i, m);
    const auto split = split_dim_of(*p);
    if (!split || splits_tensor_dim(*p, dim) || !split_dims_agree(call, *p, ndim)) continue;
    PlacementPtr moved = move_for_role(*p, RuleRole::kPassThrough, *split);
    if (moved == nullptr) continue;
    rows.push_back({std::vector<PlacementPtr>(call.num_inputs(), moved), {moved}});
  }
  return rows;
}

// gather of a whole source by an index split along `dim`: each output element
// reads the source at positions its index value names, so the output takes
// the index's split. (Split along another dim, the source must be split alike:
// index_along_rows.)
std::vector<ShardingRow> gather_by_index_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows = index_along_rows(call, m);
  const PlacementPtr& index = call.placement(1, m);
  const auto split = split_dim_of(*index);
  const int64_t ndim = call.input(0).spec->ndim();
  if (!split || ndim == 0 || index->merged_leading_dims() > 1 ||
      *split != normalize_tensor_dim(call.argument(1).toInt(), ndim, call.op_name())) {
    return rows;
  }
  PlacementPtr moved = move_for_role(*index, RuleRole::kPassThrough, *split);
  if (moved != nullptr) rows.push_back({{Replicate::make(), moved}, {moved}});
  return rows;
}

// Ops returning a plain value (a Scalar, a bool) of whole tensors: only the
// engine's all-Replicate row. No tensor output has a shape to infer (and
// libtorch 1.13 has no meta kernel for them to infer it from).
Strategy replicated_only() {
  Strategy strategy;
  strategy.rows = [](const OpCall&, int64_t) { return std::vector<ShardingRow>{}; };
  strategy.output_shapes = [](const OpCall&) { return std::vector<std::vector<int64_t>>{}; };
  return strategy;
}

}  // namespace

DTENSOR_REGISTER(tensor_strategies) {
  Registry<Strategy>& registry = strategies();
  Strategy cat;
  cat.rows = [](const OpCall& call, int64_t m) { return join_rows(call, m, false); };
  add_to_existing(registry, {"aten::cat"}, cat);
  Strategy stack;
  stack.rows = [](const OpCall& call, int64_t m) { return join_rows(call, m, true); };
  add_to_existing(registry, {"aten::stack"}, stack);
  Strategy index_select =
      dim_map_strategy([](const OpCall& call) { return keep_all_but(call, 1); });
  index_select.output_shapes = [](const OpCall& call) {
    std::vector<int64_t> shape = call.input(0).spec->shape();
    if (!shape.empty()) {
      shape[normalize_tensor_dim(call.argument(1).toInt(), shape.size(), "index_select")] =
          call.input(1).spec->numel();
    }
    return std::vector<std::vector<int64_t>>{shape};
  };
  add_to_existing(registry, {"aten::index_select"}, index_select);
  Strategy gather;
  gather.rows = gather_by_index_rows;
  add_to_existing(registry, {"aten::gather"}, gather);
  Strategy scatter;
  scatter.rows = index_along_rows;
  add_to_existing(registry,
                  {"aten::scatter.src", "aten::scatter_.src", "aten::scatter.value",
                   "aten::scatter_.value", "aten::scatter.reduce", "aten::scatter_.reduce",
                   "aten::scatter.value_reduce", "aten::scatter_.value_reduce", "aten::scatter_add",
                   "aten::scatter_add_", "aten::scatter_reduce.two", "aten::scatter_reduce_.two"},
                  scatter);
  add_to_existing(
      registry, {"aten::_local_scalar_dense", "aten::equal", "aten::is_nonzero", "aten::allclose"},
      replicated_only());
}

}  // namespace dtensor
