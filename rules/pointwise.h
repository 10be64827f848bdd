// Copyright 2026 The dtensor Authors.
//
// rules/pointwise.h (<dtensor/rules/pointwise.h>): the strategy builder for elementwise operators,
// with broadcasting and Partial linearity.
//
// On each mesh dim, an elementwise op keeps any split of an output dim that
// every operand holding that dim (not broadcast) splits identically
// (RuleRole::kPassThrough: Shard, StridedShard, Ragged, user placements that
// declare it); broadcast operands are Replicate. Partial placements pass
// where the op is linear in them, as `Linearity` says. out= arguments follow
// the output; in-place operands keep their layout (the engine enforces it).
//
//   dtensor::strategies().add("aten::relu", pointwise_strategy(Linearity::kNone));
//   dtensor::strategies().add("aten::add.Tensor", pointwise_strategy(Linearity::kAdditive));
#pragma once

#include <functional>
#include <vector>

#include <dtensor/rules/strategy.h>

namespace dtensor {

enum class Linearity {
  // No Partial passes (relu, exp, comparisons...).
  kNone,
  // All operands Partial(sum) (or all avg) give that Partial: add, sub, neg.
  kAdditive,
  // One operand Partial(sum|avg), the others Replicate: mul.
  kMultiplicative,
  // The first operand Partial(sum|avg), the others Replicate: div.
  kFirstOperand,
  // All operands Partial(max) give Partial(max), all Partial(min) give
  // Partial(min): maximum, minimum.
  kMaxMin,
  // The values pass unchanged: all operands holding the same Partial, of any
  // op, give it (clone, detach, copy_; a copy_ between dtypes only from
  // floating to floating).
  kIdentity,
};

// Output dims that must stay whole on every rank (softmax's dim), given the call.
using WholeDimsFn = std::function<std::vector<int64_t>(const OpCall&)>;

Strategy pointwise_strategy(Linearity linearity, WholeDimsFn whole_dims = nullptr);

// The broadcast shape of the call's operands (inputs other than out=).
std::vector<int64_t> broadcast_operand_shape(const OpCall& call);

// Whether input `i` is an out= argument (keyword-only and written).
bool is_out_argument(const OpCall& call, size_t i);

}  // namespace dtensor
