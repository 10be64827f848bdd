// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/pointwise.h>

#include <algorithm>

#include <dtensor/base/check.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/roles.h>

namespace dtensor {
namespace {

struct Operands {
  std::vector<int64_t> out_shape;
  int64_t out_ndim;
};

// The dim of input `k` that lines up with output dim `out_dim`, or -1 when the
// input lacks it or broadcasts along it.
int64_t aligned_dim(const DTensorSpec& spec, const Operands& ops, int64_t out_dim) {
  const int64_t dim = out_dim - (ops.out_ndim - spec.ndim());
  if (dim < 0) return -1;
  if (spec.shape()[dim] == 1 && ops.out_shape[out_dim] != 1) return -1;
  return dim;
}

// Whether input `spec` holds the output's leading `k` dims as they are.
bool leading_dims_match(const DTensorSpec& spec, const Operands& ops, int64_t k) {
  if (spec.ndim() != ops.out_ndim) return false;
  return std::equal(ops.out_shape.begin(), ops.out_shape.begin() + k, spec.shape().begin());
}

// Every operand splits output dim `out_dim` like `split` does, or nothing
// when some operand cannot.
std::optional<ShardingRow> aligned_row(const OpCall& call, const Operands& ops,
                                       const Placement& split, int64_t out_dim) {
  const int64_t merged = split.merged_leading_dims();
  ShardingRow row;
  PlacementPtr out = move_for_role(split, RuleRole::kPassThrough, out_dim);
  if (out == nullptr) return std::nullopt;
  for (size_t k = 0; k < call.num_inputs(); ++k) {
    const DTensorSpec& spec = *call.input(k).spec;
    if (is_out_argument(call, k)) {
      row.inputs.push_back(out);
      continue;
    }
    const int64_t dim = aligned_dim(spec, ops, out_dim);
    if (dim < 0) {
      row.inputs.push_back(Replicate::make());
      continue;
    }
    const bool match = merged <= 1 || leading_dims_match(spec, ops, merged);
    PlacementPtr moved = move_for_role(split, RuleRole::kPassThrough, dim, match);
    if (moved == nullptr) return std::nullopt;
    row.inputs.push_back(moved);
  }
  row.outputs.assign(call.schema().returns().size(), out);
  return row;
}

void add_split_rows(const OpCall& call, const Operands& ops, int64_t m,
                    const std::vector<int64_t>& whole, std::vector<ShardingRow>& rows) {
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    if (is_out_argument(call, i)) continue;
    const PlacementPtr& p = call.placement(i, m);
    const std::optional<int64_t> dim = split_dim_of(*p);
    if (!dim) continue;
    const DTensorSpec& spec = *call.input(i).spec;
    const int64_t out_dim = *dim + (ops.out_ndim - spec.ndim());
    if (aligned_dim(spec, ops, out_dim) < 0) continue;
    if (std::count(whole.begin(), whole.end(), out_dim) > 0) continue;
    if (p->merged_leading_dims() > 1 && !leading_dims_match(spec, ops, p->merged_leading_dims())) {
      continue;
    }
    if (auto row = aligned_row(call, ops, *p, out_dim)) rows.push_back(std::move(*row));
  }
}

// A row with operand placements chosen by `pick(operand index)`; out=
// arguments and outputs get `out`.
template <typename Pick>
ShardingRow partial_row(const OpCall& call, const PlacementPtr& out, Pick pick) {
  ShardingRow row;
  size_t operand = 0;
  for (size_t k = 0; k < call.num_inputs(); ++k) {
    row.inputs.push_back(is_out_argument(call, k) ? out : pick(operand++));
  }
  row.outputs.assign(call.schema().returns().size(), out);
  return row;
}

// Whether converting each operand to the first's dtype (copy_ into self)
// keeps every Partial: the same dtype, or floating to floating (rounding
// aside, a conversion that sums and orders alike). Truncating to integers,
// or wrapping them, does not: float terms 0.5 + 0.5 copied into int64 terms
// would sum to 0, not 1.
bool conversions_keep_partials(const OpCall& call) {
  const c10::ScalarType to = call.input(0).spec->dtype();
  const auto floating = [](c10::ScalarType t) {
    return c10::isFloatingType(t) || c10::isComplexType(t);
  };
  for (size_t k = 1; k < call.num_inputs(); ++k) {
    const c10::ScalarType from = call.input(k).spec->dtype();
    if (from != to && !(floating(from) && floating(to))) return false;
  }
  return true;
}

void add_partial_rows(const OpCall& call, int64_t m, Linearity linearity,
                      std::vector<ShardingRow>& rows) {
  const size_t operands =
      call.num_inputs() -
      std::count_if(call.inputs().begin(), call.inputs().end(), [&](const TensorInput& in) {
        return is_out_argument(call, &in - call.inputs().data());
      });
  auto all = [&](ReduceOp op) {
    const PlacementPtr p = Partial::make(op);
    rows.push_back(partial_row(call, p, [&](size_t) { return p; }));
  };
  auto one = [&](ReduceOp op, size_t which) {
    const PlacementPtr p = Partial::make(op);
    rows.push_back(
        partial_row(call, p, [&](size_t k) { return k == which ? p : Replicate::make(); }));
  };
  switch (linearity) {
    case Linearity::kNone:
      break;
    case Linearity::kAdditive:
      all(ReduceOp::kSum);
      all(ReduceOp::kAvg);
      break;
    case Linearity::kMultiplicative:
      for (size_t k = 0; k < operands; ++k) {
        one(ReduceOp::kSum, k);
        one(ReduceOp::kAvg, k);
      }
      break;
    case Linearity::kFirstOperand:
      one(ReduceOp::kSum, 0);
      one(ReduceOp::kAvg, 0);
      break;
    case Linearity::kMaxMin:
      all(ReduceOp::kMax);
      all(ReduceOp::kMin);
      break;
    case Linearity::kIdentity:
      if (!conversions_keep_partials(call)) break;
      for (size_t k = 0; k < call.num_inputs(); ++k) {
        const auto op = call.placement(k, m)->partial_op();
        if (op && !is_out_argument(call, k)) all(*op);
      }
      break;
  }
}

}  // namespace

bool is_out_argument(const OpCall& call, size_t i) {
  const c10::Argument& argument = call.schema().arguments()[call.input(i).argument];
  return argument.kwarg_only() && argument.alias_info() != nullptr &&
         argument.alias_info()->isWrite();
}

std::vector<int64_t> broadcast_operand_shape(const OpCall& call) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    if (is_out_argument(call, i)) continue;
    const std::vector<int64_t>& s = call.input(i).spec->shape();
    if (s.size() > shape.size()) shape.insert(shape.begin(), s.size() - shape.size(), 1);
    const size_t offset = shape.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& into = shape[offset + d];
      DTENSOR_CHECK(into == s[d] || into == 1 || s[d] == 1, call.op_name(),
                    ": operand shapes do not broadcast: ", call.describe_inputs());
      if (into == 1) into = s[d];
    }
  }
  return shape;
}

Strategy pointwise_strategy(Linearity linearity, WholeDimsFn whole_dims) {
  Strategy strategy;
  strategy.rows = [linearity, whole_dims](const OpCall& call, int64_t m) {
    const std::vector<int64_t> shape = broadcast_operand_shape(call);
    const Operands ops{shape, static_cast<int64_t>(shape.size())};
    std::vector<ShardingRow> rows;
    const std::vector<int64_t> whole = whole_dims ? whole_dims(call) : std::vector<int64_t>{};
    add_split_rows(call, ops, m, whole, rows);
    add_partial_rows(call, m, linearity, rows);
    return rows;
  };
  strategy.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>(call.schema().returns().size(),
                                             broadcast_operand_shape(call));
  };
  return strategy;
}

}  // namespace dtensor
