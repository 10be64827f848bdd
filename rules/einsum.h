// Copyright 2026 The dtensor Authors.
//
// rules/einsum.h (<dtensor/rules/einsum.h>): the strategy builder for contractions written as
// einsum strings ("bmk,bkn->bmn").
//
// Per mesh dim, for every letter split on some operand: a letter kept in the
// output passes the split through (RuleRole::kPassThrough) to every operand
// holding it and to the output; a letter summed away (RuleRole::kContraction)
// must be split identically on every operand holding it and makes the output
// Partial(sum). Two operands split with different kinds are never paired: a
// row always moves ONE placement to every operand. The op is linear in each
// operand, so Partial(sum|avg) on one operand with the others Replicate
// gives that Partial.
//
// `with_addend` handles addmm/baddbmm: the first input is added (after
// broadcasting) to the product, so it is split like the output, Partial(sum)
// when the output is, Replicate when broadcast.
//
//   dtensor::strategies().add("aten::bmm", einsum_strategy("bmk,bkn->bmn"));
//   dtensor::strategies().add("aten::addmm", einsum_strategy("mk,kn->mn", /*with_addend=*/true));
#pragma once

#include <string_view>

#include <dtensor/rules/strategy.h>

namespace dtensor {

// Throws dtensor::Error for a malformed equation (one output, one letter per
// dim, output letters all present in the inputs).
Strategy einsum_strategy(std::string_view equation, bool with_addend = false);

}  // namespace dtensor
