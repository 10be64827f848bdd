// Copyright 2026 The dtensor Authors.
//
// rules/families/tensor_ops.cc: joining and indexing tensors, and ops that
// return Python-level values.
//
// cat and stack keep a split that every operand has on the same dim (not the
// joined one); index_select, gather and scatter-like ops need the indexed
// dim whole; ops returning a scalar or bool run on replicated inputs so
// every rank returns the same value.
#include <numeric>

#include "placements/replicate.h"
#include "placements/shard.h"
#include "rules/dim_map.h"
#include "rules/registration.h"
#include "rules/roles.h"

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
  return rows;
}

DimMap keep_all_but(const OpCall& call, size_t dim_argument) {
  const int64_t ndim = call.input(0).spec->ndim();
  DimMap map(ndim);
  std::iota(map.begin(), map.end(), 0);
  if (ndim > 0) map[normalize_tensor_dim(call.argument(dim_argument).toInt(), ndim, "dim")] = kConsumed;
  return map;
}

OpRule replicated_only() {
  OpRule rule;
  rule.strategy = [](const OpCall&, int64_t) { return std::vector<ShardingRow>{}; };
  return rule;
}

}  // namespace

DTENSOR_REGISTER_RULES(tensor) {
  OpRule cat;
  cat.strategy = [](const OpCall& call, int64_t m) { return join_rows(call, m, false); };
  add_to_existing(registry, {"aten::cat"}, cat);
  OpRule stack;
  stack.strategy = [](const OpCall& call, int64_t m) { return join_rows(call, m, true); };
  add_to_existing(registry, {"aten::stack"}, stack);
  OpRule index_select = dim_map_rule([](const OpCall& call) { return keep_all_but(call, 1); });
  index_select.output_shapes = [](const OpCall& call) {
    std::vector<int64_t> shape = call.input(0).spec->shape();
    if (!shape.empty()) {
      shape[normalize_tensor_dim(call.argument(1).toInt(), shape.size(), "index_select")] =
          call.input(1).spec->numel();
    }
    return std::vector<std::vector<int64_t>>{shape};
  };
  add_to_existing(registry, {"aten::index_select"}, index_select);
  add_to_existing(registry,
                  {"aten::gather", "aten::_local_scalar_dense", "aten::equal",
                   "aten::is_nonzero", "aten::allclose"},
                  replicated_only());
}

}  // namespace dtensor
