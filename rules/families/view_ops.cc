// Copyright 2026 The dtensor Authors.
//
// rules/families/view_ops.cc: views, selections and reshapes
// (rules/dim_map.h), and the backward of slices and selections. flatten,
// unflatten, reshape and chunk decompose into these in libtorch.
#include <numeric>

#include <dtensor/placements/shard.h>
#include <dtensor/rules/dim_map.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>

namespace dtensor {
namespace {

int64_t input_ndim(const OpCall& call) { return call.input(0).spec->ndim(); }

int64_t dim_argument(const OpCall& call, size_t index, int64_t ndim) {
  return normalize_tensor_dim(call.argument(index).toInt(), ndim, call.op_name());
}

DimMap identity(int64_t ndim) {
  DimMap map(ndim);
  std::iota(map.begin(), map.end(), 0);
  return map;
}

// Backward of a slice or a select (grad_output, input_sizes, dim, ...): the
// output is zeros of input_sizes with the gradient in the sliced or selected
// part of `dim`, whose size is the output's, so `dim` itself must be whole.
int64_t backward_dim(const OpCall& call) {
  const int64_t ndim = static_cast<int64_t>(call.argument(1).toIntVector().size());
  return normalize_tensor_dim(call.argument(2).toInt(), ndim, call.op_name());
}

Strategy scatter_backward_strategy(std::function<DimMap(const OpCall&)> map) {
  Strategy strategy = dim_map_strategy(std::move(map));
  strategy.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{call.argument(1).toIntVector()};
  };
  return strategy;
}

// Removes dim `dim`: it is consumed and later dims shift down.
DimMap without_dim(int64_t ndim, int64_t dim) {
  DimMap map(ndim);
  for (int64_t d = 0; d < ndim; ++d) map[d] = d < dim ? d : (d == dim ? kConsumed : d - 1);
  return map;
}

// Keeps every dim but `dim`, which is cut (it must be Replicate).
DimMap cutting_dim(int64_t ndim, int64_t dim) {
  DimMap map = identity(ndim);
  map[dim] = kConsumed;
  return map;
}

DimMap transpose_map(const OpCall& call) {
  const int64_t ndim = input_ndim(call);
  DimMap map = identity(ndim);
  if (ndim < 2) return map;
  const bool is_t = call.schema().arguments().size() == 1;
  const int64_t a = is_t ? 0 : dim_argument(call, 1, ndim);
  const int64_t b = is_t ? 1 : dim_argument(call, 2, ndim);
  std::swap(map[a], map[b]);
  return map;
}

DimMap permute_map(const OpCall& call) {
  const int64_t ndim = input_ndim(call);
  const std::vector<int64_t> dims = call.argument(1).toIntVector();
  DimMap map(ndim, kConsumed);
  for (size_t i = 0; i < dims.size(); ++i) {
    map[normalize_tensor_dim(dims[i], ndim, "permute")] = static_cast<int64_t>(i);
  }
  return map;
}

DimMap unsqueeze_map(const OpCall& call) {
  const int64_t ndim = input_ndim(call);
  const int64_t dim = normalize_tensor_dim(call.argument(1).toInt(), ndim + 1, "unsqueeze");
  DimMap map(ndim);
  for (int64_t d = 0; d < ndim; ++d) map[d] = d < dim ? d : d + 1;
  return map;
}

DimMap squeeze_map(const OpCall& call) {
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  const int64_t ndim = input_ndim(call);
  const bool one_dim = call.schema().arguments().size() > 1;
  const int64_t only = one_dim && ndim > 0 ? dim_argument(call, 1, ndim) : -1;
  DimMap map(ndim);
  int64_t next = 0;
  for (int64_t d = 0; d < ndim; ++d) {
    const bool squeezed = shape[d] == 1 && (!one_dim || d == only);
    map[d] = squeezed ? kConsumed : next++;
  }
  return map;
}

DimMap expand_map(const OpCall& call) {
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  const std::vector<int64_t> sizes = call.argument(1).toIntVector();
  const int64_t ndim = input_ndim(call);
  const int64_t lead = static_cast<int64_t>(sizes.size()) - ndim;
  DimMap map(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t target = sizes[lead + d];
    map[d] = (shape[d] == 1 && target != 1 && target != -1) ? kConsumed : lead + d;
  }
  return map;
}

DimMap slice_map(const OpCall& call) {
  const int64_t ndim = input_ndim(call);
  const int64_t dim = dim_argument(call, 1, ndim);
  const int64_t size = call.input(0).spec->shape()[dim];
  const c10::IValue& start = call.argument(2);
  const c10::IValue& end = call.argument(3);
  const bool whole = (start.isNone() || start.toInt() == 0) &&
                     (end.isNone() || end.toInt() >= size) && call.argument(4).toInt() == 1;
  return whole ? identity(ndim) : cutting_dim(ndim, dim);
}

// The dims squeeze removes: those of GLOBAL size 1 (all of them, or the one
// named). A shard may be 1 long where the global dim is not, and must keep it.
std::vector<int64_t> squeezed_dims(const OpCall& call) {
  const DimMap map = squeeze_map(call);
  std::vector<int64_t> dims;
  for (int64_t d = static_cast<int64_t>(map.size()) - 1; d >= 0; --d) {
    if (map[d] == kConsumed) dims.push_back(d);
  }
  return dims;
}

// The shard loses the dims of global size 1 (it may be 1 long where the
// global dim is not).
LocalKernel squeeze_kernel(bool in_place) {
  return [in_place](const c10::OperatorHandle&, torch::jit::Stack& stack,
                    const LocalContext& context) {
    at::Tensor local = stack[0].toTensor();
    for (int64_t d : squeezed_dims(context.call())) {
      local = in_place ? local.squeeze_(d) : local.squeeze(d);
    }
    torch::jit::drop(stack, stack.size());
    stack.push_back(in_place ? local : local.alias());
  };
}

Strategy in_place_view(Strategy strategy) {
  strategy.updates_layout_in_place = true;
  return strategy;
}

}  // namespace

DTENSOR_REGISTER(view_strategies) {
  Registry<Strategy>& registry = strategies();
  add_to_existing(registry, {"aten::view", "aten::_unsafe_view", "aten::_reshape_alias"},
                  reshape_strategy());
  add_to_existing(registry, {"aten::t", "aten::transpose.int"}, dim_map_strategy(transpose_map));
  add_to_existing(registry, {"aten::permute"}, dim_map_strategy(permute_map));
  add_to_existing(registry, {"aten::unsqueeze"}, dim_map_strategy(unsqueeze_map));
  add_to_existing(registry, {"aten::squeeze", "aten::squeeze.dim"}, dim_map_strategy(squeeze_map));
  add_to_existing(registry, {"aten::squeeze_", "aten::squeeze_.dim"},
                  in_place_view(dim_map_strategy(squeeze_map)));
  add_to_existing(registry, {"aten::t_", "aten::transpose_"},
                  in_place_view(dim_map_strategy(transpose_map)));
  add_to_existing(registry, {"aten::unsqueeze_"}, in_place_view(dim_map_strategy(unsqueeze_map)));
  add_to_existing(registry, {"aten::expand"}, dim_map_strategy(expand_map));
  add_to_existing(registry, {"aten::slice.Tensor"}, dim_map_strategy(slice_map));
  add_to_existing(registry, {"aten::select.int", "aten::unbind.int"},
                  dim_map_strategy([](const OpCall& call) {
                    return without_dim(input_ndim(call), dim_argument(call, 1, input_ndim(call)));
                  }));
  add_to_existing(registry, {"aten::split.Tensor", "aten::split_with_sizes"},
                  dim_map_strategy([](const OpCall& call) {
                    return cutting_dim(input_ndim(call), dim_argument(call, 2, input_ndim(call)));
                  }));
}

DTENSOR_REGISTER(view_backward_strategies) {
  // The gradient's dims are the output's; a split of any but the sliced dim
  // passes, a Partial passes (zeros elsewhere keep the sum).
  add_to_existing(strategies(), {"aten::slice_backward"},
                  scatter_backward_strategy([](const OpCall& call) {
                    return cutting_dim(input_ndim(call), backward_dim(call));
                  }));
  // The gradient lacks the selected dim: its dims map past it.
  add_to_existing(strategies(), {"aten::select_backward"},
                  scatter_backward_strategy([](const OpCall& call) {
                    const int64_t selected = backward_dim(call);
                    DimMap map(input_ndim(call));
                    for (int64_t d = 0; d < input_ndim(call); ++d)
                      map[d] = d < selected ? d : d + 1;
                    return map;
                  }));
  // Each shard takes its own size.
  add_to_existing(local_kernels(), {"aten::slice_backward", "aten::select_backward"},
                  sized_view_kernel(/*size_argument=*/1));
}

DTENSOR_REGISTER(view_kernels) {
  Registry<LocalKernel>& registry = local_kernels();
  add_to_existing(registry, {"aten::view", "aten::_unsafe_view", "aten::_reshape_alias"},
                  LocalKernel(reshape_kernel));
  add_to_existing(registry, {"aten::squeeze", "aten::squeeze.dim"}, squeeze_kernel(false));
  add_to_existing(registry, {"aten::squeeze_", "aten::squeeze_.dim"}, squeeze_kernel(true));
  add_to_existing(registry, {"aten::expand"}, sized_view_kernel(/*size_argument=*/1));
}

}  // namespace dtensor
