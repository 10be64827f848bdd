// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/dim_map.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include <ATen/TensorUtils.h>

#include <dtensor/base/check.h>
#include <dtensor/placements/layout.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/placements/strided_shard.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/roles.h>
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// A row moving input 0's placement on mesh dim m through `map`; the other
// inputs (if any) stay Replicate.
std::optional<ShardingRow> mapped_row(const OpCall& call, int64_t m, const DimMap& map) {
  const PlacementPtr& p = call.placement(0, m);
  ShardingRow row;
  row.inputs.assign(call.num_inputs(), Replicate::make());
  row.inputs[0] = p;
  PlacementPtr out;
  if (p->is_partial()) {
    out = p;
  } else {
    const auto dim = split_dim_of(*p);
    if (!dim || map[*dim] == kConsumed) return std::nullopt;
    bool leading_kept = true;
    for (int64_t d = 0; d < p->merged_leading_dims(); ++d) leading_kept &= map[d] == d;
    out = move_for_role(*p, RuleRole::kPassThrough, map[*dim], leading_kept);
    if (out == nullptr) return std::nullopt;
  }
  row.outputs.assign(call.schema().returns().size(), out);
  return row;
}

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + begin, v.begin() + end, int64_t{1}, std::multiplies<>());
}

// A split of one dim of a reshape group, seen in the row-major order of the
// group's elements: `blocks` equal consecutive blocks, in each of which
// coordinate r holds positions [unit * pieces[r].begin, unit * pieces[r].end)
// of its `length` * `unit` elements. Any reshape of the group keeps this
// order, so an output split holding the same positions is exact.
struct FlatSplit {
  int64_t blocks;
  int64_t length;
  int64_t unit;
  std::vector<ChunkRange> pieces;
};

// The flat split that `p` makes of dim `j` of `shape` (a group's dims of a
// tensor of `tensor_ndim` dims) over `n` ranks: a StridedShard's blocks are
// its split factor times the dims before, each cut by torch.chunk; a
// placement of even blocks must say which block each rank keeps, checked as
// layouts check it (checked_held_pieces). nullopt for any other split.
std::optional<FlatSplit> flat_split(const PlacementPtr& p, size_t tensor_ndim,
                                    const std::vector<int64_t>& shape, size_t j, int64_t n) {
  const std::optional<int64_t> strided = p->strided_blocks();
  if (!strided && !p->fills_role(RuleRole::kEvenBlocks)) return std::nullopt;
  const int64_t factor = strided.value_or(1);
  if (shape[j] % factor != 0) return std::nullopt;
  FlatSplit split{
      product(shape, 0, j) * factor, shape[j] / factor, product(shape, j + 1, shape.size()), {}};
  for (int64_t r = 0; r < n; ++r) {
    if (strided) {
      split.pieces.push_back(torch_chunk_range(split.length, n, r));
      continue;
    }
    const std::optional<RangeList> held = checked_held_pieces(p, tensor_ndim, split.length, n, r);
    if (!held || held->size() > 1) return std::nullopt;
    split.pieces.push_back(held->empty() ? ChunkRange{0, 0} : held->front());
  }
  return split;
}

bool same_positions(ChunkRange a, int64_t a_unit, ChunkRange b, int64_t b_unit) {
  const bool a_empty = a.begin == a.end, b_empty = b.begin == b.end;
  if (a_empty || b_empty) return a_empty && b_empty;
  return a.begin * a_unit == b.begin * b_unit && a.end * a_unit == b.end * b_unit;
}

// The split of dim `d` of `shape` (a group's output dims) that holds exactly
// the positions of `split` on every rank, as its index in the group: a
// StridedShard with one block per row of the dims before d and per block of
// d, each cut by torch.chunk (a Shard for a single block). nullopt when no
// split of d does.
std::optional<int64_t> split_factor_on(const FlatSplit& split, const std::vector<int64_t>& shape,
                                       size_t d) {
  const int64_t before = product(shape, 0, d);
  if (split.blocks % before != 0) return std::nullopt;
  const int64_t factor = split.blocks / before;
  if (shape[d] % factor != 0) return std::nullopt;
  const int64_t length = shape[d] / factor, unit = product(shape, d + 1, shape.size());
  if (length * unit != split.length * split.unit) return std::nullopt;
  const auto n = static_cast<int64_t>(split.pieces.size());
  for (int64_t r = 0; r < n; ++r) {
    if (!same_positions(split.pieces[r], split.unit, torch_chunk_range(length, n, r), unit)) {
      return std::nullopt;
    }
  }
  return factor;
}

struct OutputSplit {
  size_t dim;
  int64_t factor;
};

// The first dim of `shape` (a group's output dims) split as `split`, and how.
std::optional<OutputSplit> output_split(const FlatSplit& split, const std::vector<int64_t>& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (const std::optional<int64_t> factor = split_factor_on(split, shape, d)) {
      return OutputSplit{d, *factor};
    }
  }
  return std::nullopt;
}

// Input dims in[i0, i) reshaped into output dims out[o0, o) with the same
// product, split on mesh dim m. The mesh dims before m that split the group
// too act first, each on the piece the ones before it left: each must map
// to an output split by the same rule and leave equal pieces (they are then
// added to `assumed_kept`: gathering one would change m's result). Mesh dim
// m's own pieces may be uneven: torch.chunk's, matched exactly.
PlacementPtr regrouped_split(const OpCall& call, int64_t m, const std::vector<int64_t>& in,
                             size_t i0, size_t i, const std::vector<int64_t>& out, size_t o0,
                             size_t o, std::vector<int64_t>& assumed_kept) {
  std::vector<int64_t> in_piece(in.begin() + i0, in.begin() + i);
  std::vector<int64_t> out_piece(out.begin() + o0, out.begin() + o);
  if (product(in_piece, 0, in_piece.size()) == 0) return nullptr;
  std::vector<int64_t> read;
  for (int64_t k = 0; k <= m; ++k) {
    const PlacementPtr& q = call.placement(0, k);
    const std::vector<int64_t> dims = split_tensor_dims(*q);
    const auto in_group = [&](int64_t dim) {
      return dim >= static_cast<int64_t>(i0) && dim < static_cast<int64_t>(i);
    };
    if (std::none_of(dims.begin(), dims.end(), in_group)) continue;
    if (dims.size() != 1) return nullptr;
    const int64_t n = call.mesh().size(k);
    const size_t j = dims[0] - i0;
    const std::optional<FlatSplit> split = flat_split(q, in.size(), in_piece, j, n);
    if (!split) return nullptr;
    const std::optional<OutputSplit> target = output_split(*split, out_piece);
    if (!target) return nullptr;
    if (k == m) {
      assumed_kept.insert(assumed_kept.end(), read.begin(), read.end());
      const auto dim = static_cast<int64_t>(o0 + target->dim);
      return target->factor == 1 ? Shard::make(dim) : StridedShard::make(dim, target->factor);
    }
    // Equal input pieces make equal output pieces (they hold the same
    // positions), so every rank's local reshape is the same one.
    if (split->length % n != 0) return nullptr;
    in_piece[j] /= n;
    out_piece[target->dim] /= n;
    read.push_back(k);
  }
  return nullptr;
}

// Where the reshape sends a split of input dim `dim`. A strided result
// depends on the splits of earlier mesh dims, which it adds to `assumed_kept`
// (gathering one of them would change the stride).
PlacementPtr reshaped_split(const OpCall& call, int64_t m, const Placement& p, int64_t dim,
                            const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                            std::vector<int64_t>& assumed_kept) {
  // Walk groups of dims with equal products.
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    const size_t i0 = i, o0 = o;
    int64_t pi = i < in.size() ? in[i++] : 1, po = o < out.size() ? out[o++] : 1;
    while (pi != po) {
      if (pi < po && i < in.size()) {
        pi *= in[i++];
      } else if (o < out.size()) {
        po *= out[o++];
      } else {
        break;
      }
    }
    if (static_cast<size_t>(dim) < i0 || static_cast<size_t>(dim) >= i) continue;
    if (i - i0 == 1 && o - o0 == 1) return p.moved_to_dim(o0);  // kept as is
    // Only size-1 dims join or leave the split dim ([1, 11] <-> [11]): the
    // split moves as it is, even or not.
    if (product(in, i0, i) == in[dim]) {
      for (size_t d = o0; d < o; ++d) {
        if (out[d] == in[dim]) return p.moved_to_dim(d);
      }
    }
    return regrouped_split(call, m, in, i0, i, out, o0, o, assumed_kept);
  }
  return nullptr;
}

std::vector<int64_t> target_shape(const OpCall& call) {
  return infer_view_shape(call.argument(1).toIntVector(), call.input(0).spec->numel());
}

}  // namespace

std::vector<int64_t> infer_view_shape(std::vector<int64_t> sizes, int64_t numel) {
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == -1) {
      DTENSOR_CHECK(infer < 0, "view: only one dim may be -1, found [", absl::StrJoin(sizes, ", "),
                    "]");
      infer = static_cast<int64_t>(d);
    } else {
      known *= sizes[d];
    }
  }
  if (infer >= 0 && known != 0) sizes[infer] = numel / known;
  DTENSOR_CHECK(product(sizes, 0, sizes.size()) == numel, "view: shape [",
                absl::StrJoin(sizes, ", "), "] is invalid for a tensor of ", numel, " elements");
  return sizes;
}

Strategy dim_map_strategy(std::function<DimMap(const OpCall&)> map) {
  Strategy strategy;
  strategy.rows = [map = std::move(map)](const OpCall& call, int64_t m) {
    std::vector<ShardingRow> rows;
    if (auto row = mapped_row(call, m, map(call))) rows.push_back(std::move(*row));
    return rows;
  };
  return strategy;
}

LocalKernel sized_view_kernel(size_t size_argument) {
  return [size_argument](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                         const LocalContext& context) {
    const at::ScalarType dtype = stack[0].toTensor().scalar_type();
    stack[size_argument] = c10::IValue(local_output_shape(context, 0, dtype));
    op.callBoxed(stack);
  };
}

Strategy reshape_strategy() {
  Strategy strategy;
  strategy.rows = [](const OpCall& call, int64_t m) {
    std::vector<ShardingRow> rows;
    const PlacementPtr& p = call.placement(0, m);
    PlacementPtr out;
    std::vector<int64_t> assumed_kept;
    if (p->is_partial()) {
      out = p;
    } else if (const auto dim = split_dim_of(*p); dim && p->merged_leading_dims() <= 1) {
      out = reshaped_split(call, m, *p, *dim, call.input(0).spec->shape(), target_shape(call),
                           assumed_kept);
    }
    if (out != nullptr) {
      ShardingRow row;
      row.assumes_inputs_kept_on = std::move(assumed_kept);
      row.inputs.assign(call.num_inputs(), Replicate::make());
      row.inputs[0] = p;
      row.outputs = {out};
      rows.push_back(std::move(row));
    }
    return rows;
  };
  strategy.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{target_shape(call)};
  };
  return strategy;
}

// The shard takes its own output shape; a shard whose strides do not allow
// a view is copied, as reshape would do. Where they allow one, the view is
// what reshape returns, made without reshape's symbolic-size bookkeeping
// (as long again as the view itself).
void reshape_kernel(const c10::OperatorHandle&, torch::jit::Stack& stack,
                    const LocalContext& context) {
  const at::Tensor local = stack[0].toTensor();
  const auto& shape = local_output_shape(context, 0, local.scalar_type());
  torch::jit::drop(stack, stack.size());
  // A contiguous shard takes any shape of its size: only the others need
  // the stride search, which costs about as much as the view.
  const bool viewable =
      local.layout() == at::kStrided &&
      (local.is_contiguous() || at::detail::computeStride(local.sizes(), local.strides(), shape));
  stack.push_back(viewable ? local.view(shape) : local.reshape(shape));
}

}  // namespace dtensor
