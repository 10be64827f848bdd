// Copyright 2026 The dtensor Authors.
//
// rules/families/factory_ops.cc: tensors made from another tensor's shape.
//
// *_like fills keep the input's layout, with Partial read as Replicate (a
// fill is a value, not a term). new_* factories take a global size and give
// a Replicate tensor, unless it is the input's own size: then they keep its
// layout as *_like does. Random *_like ops are in
// dtensor/dispatch/kernels/random_ops.cc.
#include <c10/util/strides.h>

#include <dtensor/placements/replicate.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>
#include <dtensor/rules/roles.h>

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
Strategy new_strategy(bool uninitialized) {
  Strategy strategy;
  strategy.rows = [uninitialized](const OpCall& call, int64_t m) -> std::vector<ShardingRow> {
    if (call.argument(1).toIntVector() != call.input(0).spec->shape()) {
      return {{{nullptr}, {Replicate::make()}}};
    }
    const PlacementPtr& p = call.placement(0, m);
    if (p->is_partial() && uninitialized) return {{{p}, {p}}};
    return like_rows(call, m);
  };
  return strategy;
}

// A shard takes its own size (and, with `strided`, for new_empty_strided,
// row-major strides of it); a whole tensor keeps the strides asked for.
LocalKernel new_kernel(bool strided) {
  return [strided](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                   const LocalContext& context) {
    const std::vector<int64_t>& shape =
        local_output_shape(context, 0, stack[0].toTensor().scalar_type());
    if (shape == stack[1].toIntVector()) return op.callBoxed(stack);
    stack[1] = c10::IValue(shape);
    if (strided) {
      const c10::DimVector strides = c10::contiguous_strides(shape);
      stack[2] = c10::IValue(std::vector<int64_t>(strides.begin(), strides.end()));
    }
    op.callBoxed(stack);
  };
}

}  // namespace

DTENSOR_REGISTER(factory_strategies) {
  Registry<Strategy>& registry = strategies();
  Strategy like;
  like.rows = like_rows;
  like.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{call.input(0).spec->shape()};
  };
  add_to_existing(registry,
                  {"aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like"},
                  like);
  add_to_existing(registry, {"aten::new_zeros", "aten::new_ones", "aten::new_full"},
                  new_strategy(/*uninitialized=*/false));
  add_to_existing(registry, {"aten::new_empty", "aten::new_empty_strided"},
                  new_strategy(/*uninitialized=*/true));
}

DTENSOR_REGISTER(factory_kernels) {
  Registry<LocalKernel>& registry = local_kernels();
  add_to_existing(registry,
                  {"aten::new_zeros", "aten::new_ones", "aten::new_full", "aten::new_empty"},
                  new_kernel(/*strided=*/false));
  add_to_existing(registry, {"aten::new_empty_strided"}, new_kernel(/*strided=*/true));
}

}  // namespace dtensor
