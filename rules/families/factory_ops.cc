// Copyright 2026 The dtensor Authors.
//
// rules/families/factory_ops.cc: tensors made from another tensor's shape.
//
// *_like fills keep the input's layout, with Partial read as Replicate (a
// fill is a value, not a term). new_* factories take a global size and give
// a Replicate tensor. Random *_like ops are in random_ops.cc.
#include "placements/replicate.h"
#include "rules/registration.h"
#include "rules/roles.h"

namespace dtensor {
namespace {

std::vector<ShardingRow> like_rows(const OpCall& call, int64_t m) {
  const PlacementPtr& p = call.placement(0, m);
  if (p->is_partial()) return {{{p}, {Replicate::make()}}};
  return {{{p}, {p}}};
}

std::vector<ShardingRow> new_rows(const OpCall& call, int64_t m) {
  // The input only lends its dtype and device: any layout will do.
  return {{{nullptr}, {Replicate::make()}}};
}

}  // namespace

DTENSOR_REGISTER_RULES(factory) {
  OpRule like;
  like.strategy = like_rows;
  like.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{call.input(0).spec->shape()};
  };
  add_to_existing(registry,
                  {"aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like"},
                  like);
  OpRule fresh;
  fresh.strategy = new_rows;
  add_to_existing(registry,
                  {"aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full",
                   "aten::new_empty_strided"},
                  fresh);
}

}  // namespace dtensor
