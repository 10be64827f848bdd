// Copyright 2026 The dtensor Authors.
//
// rules/families/matmul_ops.cc: matrix products as einsum rules
// (rules/einsum.h). matmul and linear decompose into these in libtorch.
#include <dtensor/rules/einsum.h>
#include <dtensor/rules/registration.h>

namespace dtensor {

DTENSOR_REGISTER(matmul_strategies) {
  Registry<Strategy>& registry = strategies();
  add_to_existing(registry, {"aten::mm"}, einsum_strategy("mk,kn->mn"));
  add_to_existing(registry, {"aten::bmm"}, einsum_strategy("bmk,bkn->bmn"));
  add_to_existing(registry, {"aten::mv"}, einsum_strategy("mk,k->m"));
  add_to_existing(registry, {"aten::dot", "aten::vdot"}, einsum_strategy("k,k->"));
  add_to_existing(registry, {"aten::addmm"}, einsum_strategy("mk,kn->mn", /*with_addend=*/true));
  add_to_existing(registry, {"aten::baddbmm"},
                  einsum_strategy("bmk,bkn->bmn", /*with_addend=*/true));
  add_to_existing(registry, {"aten::addmv"}, einsum_strategy("mk,k->m", /*with_addend=*/true));
}

}  // namespace dtensor
