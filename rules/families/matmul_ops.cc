// Copyright 2026 The dtensor Authors.
//
// rules/families/matmul_ops.cc: matrix products as einsum rules
// (rules/einsum.h). matmul and linear decompose into these in libtorch.
#include "rules/einsum.h"
#include "rules/registration.h"

namespace dtensor {

DTENSOR_REGISTER_RULES(matmul) {
  add_to_existing(registry, {"aten::mm"}, einsum_rule("mk,kn->mn"));
  add_to_existing(registry, {"aten::bmm"}, einsum_rule("bmk,bkn->bmn"));
  add_to_existing(registry, {"aten::mv"}, einsum_rule("mk,k->m"));
  add_to_existing(registry, {"aten::dot", "aten::vdot"}, einsum_rule("k,k->"));
  add_to_existing(registry, {"aten::addmm"}, einsum_rule("mk,kn->mn", /*with_addend=*/true));
  add_to_existing(registry, {"aten::baddbmm"}, einsum_rule("bmk,bkn->bmn", /*with_addend=*/true));
  add_to_existing(registry, {"aten::addmv"}, einsum_rule("mk,k->m", /*with_addend=*/true));
}

}  // namespace dtensor
