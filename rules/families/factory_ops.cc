// Copyright 2026 The dtensor Authors.
//
// rules/families/factory_ops.cc: tensors made from another tensor's shape.
//
// *_like fills keep the input's layout, with Partial read as Replicate (a
// fill is a value, not a term). new_* factories take a global size and give
// a Replicate tensor, unless it is the input's own size: then they keep its
// layout as *_like does. Random *_like ops are in random_ops.cc.
#include <c10/util/strides.h>

#include "placements/replicate.h"
#include "rules/propagation.h"
#include "rules/registration.h"
#include "rules/roles.h"

namespace dtensor {
namespace {

std::vector<ShardingRow> like_rows(const OpCall& call, int64_t m) {
  const PlacementPtr& p = call.placement(0, m);
  if (p->is_partial()) return {{{p}, {Replicate::make()}}};
  return {{{p}, {p}}};
}

// The input lends its dtype and device, and, for a tensor of its own shape,
// its layout as *_like does: autograd copies a gradient it cannot take over
// through new_empty_strided(grad.sizes()), which must not gather it. When
// the contents are never read (new_empty*), a Partial input's layout serves
// as well: autograd's copy of a shared Partial gradient then stays one.
OpRule new_rule(bool uninitialized) {
  OpRule rule;
  rule.strategy = [uninitialized](const OpCall& call, int64_t m) -> std::vector<ShardingRow> {
    if (call.argument(1).toIntVector() != call.input(0).spec->shape()) {
      return {{{nullptr}, {Replicate::make()}}};
    }
    const PlacementPtr& p = call.placement(0, m);
    if (p->is_partial() && uninitialized) return {{{p}, {p}}};
    return like_rows(call, m);
  };
  // A shard takes its own size (and, for new_empty_strided, row-major
  // strides of it); a whole tensor keeps the strides asked for.
  rule.local_kernel = [](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                         const LocalContext& context) {
    const std::vector<int64_t>& shape =
        local_output_shape(context, 0, stack[0].toTensor().scalar_type());
    if (shape == stack[1].toIntVector()) return op.callBoxed(stack);
    stack[1] = c10::IValue(shape);
    if (op.schema().name() == "aten::new_empty_strided") {
      const c10::DimVector strides = c10::contiguous_strides(shape);
      stack[2] = c10::IValue(std::vector<int64_t>(strides.begin(), strides.end()));
    }
    op.callBoxed(stack);
  };
  return rule;
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
  add_to_existing(registry, {"aten::new_zeros", "aten::new_ones", "aten::new_full"},
                  new_rule(/*uninitialized=*/false));
  add_to_existing(registry, {"aten::new_empty", "aten::new_empty_strided"},
                  new_rule(/*uninitialized=*/true));
}

}  // namespace dtensor
