// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/dim_map.h>

#include <numeric>

#include <dtensor/base/check.h>
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

// Mesh-dim sizes that split input dim `dim` of input 0, multiplied: a view
// may only move a split that divides the dim evenly at every nesting level.
int64_t split_ways(const OpCall& call, int64_t dim) {
  int64_t ways = 1;
  for (int64_t m = 0; m < call.mesh().ndim(); ++m) {
    const auto d = split_dim_of(*call.placement(0, m));
    if (d && *d == dim) ways *= call.mesh().size(m);
  }
  return ways;
}

// The size of input dim `dim` in the piece mesh dim `m` splits: what the mesh
// dims before it left (placements apply left to right), which it adds to
// `read`. -1 when they do not leave equal pieces.
int64_t piece_size(const OpCall& call, int64_t dim, int64_t m, std::vector<int64_t>& read) {
  int64_t size = call.input(0).spec->shape()[dim];
  for (int64_t before = 0; before < m; ++before) {
    const auto d = split_dim_of(*call.placement(0, before));
    if (!d || *d != dim) continue;
    if (size % call.mesh().size(before) != 0) return -1;
    size /= call.mesh().size(before);
    read.push_back(before);
  }
  return size;
}

// The output dims o0 .. o that input dim `dim` is cut into, as the piece
// that the mesh dims before m which split it too leave on each rank: they
// take whole leading output dims, or whole factors of them, first. Adds
// those mesh dims to `read`; nothing when they do not cut evenly so.
std::optional<std::vector<int64_t>> piece_before(const OpCall& call, int64_t m, int64_t dim,
                                                 const std::vector<int64_t>& out, size_t o0,
                                                 size_t o, std::vector<int64_t>& read) {
  std::vector<int64_t> piece(out.begin() + o0, out.begin() + o);
  for (int64_t before = 0; before < m; ++before) {
    if (split_dim_of(*call.placement(0, before)) != dim) continue;
    int64_t ways = call.mesh().size(before);
    read.push_back(before);
    for (int64_t& size : piece) {
      if (ways == 1) break;
      if (size % ways == 0) {
        size /= ways;
        ways = 1;
      } else if (ways % size == 0) {
        ways /= size;
        size = 1;
      } else {
        return std::nullopt;
      }
    }
    if (ways != 1) return std::nullopt;
  }
  return piece;
}

// Whether a mesh dim after m splits input dim `dim` too.
bool split_after(const OpCall& call, int64_t m, int64_t dim) {
  for (int64_t after = m + 1; after < call.mesh().ndim(); ++after) {
    if (split_dim_of(*call.placement(0, after)) == dim) return true;
  }
  return false;
}

// Input dim `dim` cut into output dims o0 .. o, split into even blocks on mesh
// dim m. The mesh dims before m that split it too took whole leading output
// dims (or whole factors of them) first; m's blocks go to the first output
// dim of the piece they left that is longer than 1, when it divides evenly.
// The result assumes those earlier splits stay, which it adds to
// `assumed_kept`.
PlacementPtr split_into_several(const OpCall& call, int64_t m, int64_t dim,
                                const std::vector<int64_t>& out, size_t o0, size_t o,
                                std::vector<int64_t>& assumed_kept) {
  std::vector<int64_t> read;
  const std::optional<std::vector<int64_t>> piece = piece_before(call, m, dim, out, o0, o, read);
  if (!piece) return nullptr;
  const int64_t n = call.mesh().size(m);
  for (size_t d = 0; d < piece->size(); ++d) {
    if ((*piece)[d] == 1) continue;
    if ((*piece)[d] % n != 0) return nullptr;
    assumed_kept.insert(assumed_kept.end(), read.begin(), read.end());
    return Shard::make(static_cast<int64_t>(o0 + d));
  }
  return nullptr;
}

// A split of `k` strided blocks (StridedShard) of input dim `dim`, which the
// reshape alone (the group i0 .. i holds no other input dim) cuts into
// [.., k, rest...] (o0 .. o), where the mesh dims before m that split `dim`
// too leave the piece [k, rest...] (a merge of [a, b] with a split over
// "dp" and b over "tp" makes such blocks): the blocks become that leading
// dim, and each rank's piece of every block is a Shard of the next, exactly
// (even or not) when the rest is one dim, or when the next dim divides by the
// mesh dim. Adds the earlier mesh dims to `assumed_kept`.
PlacementPtr unflattened_blocks(const OpCall& call, int64_t m, const Placement& p, int64_t dim,
                                size_t i0, size_t i, const std::vector<int64_t>& out, size_t o0,
                                size_t o, std::vector<int64_t>& assumed_kept) {
  const std::optional<int64_t> blocks = p.strided_blocks();
  if (!blocks || i - i0 != 1 || o - o0 < 2 || split_after(call, m, dim)) return nullptr;
  std::vector<int64_t> read;
  const std::optional<std::vector<int64_t>> piece = piece_before(call, m, dim, out, o0, o, read);
  if (!piece) return nullptr;
  // The piece's leading dims of size 1 are those the earlier splits took.
  size_t lead = 0;
  while (lead + 1 < piece->size() && (*piece)[lead] == 1) ++lead;
  if (piece->size() - lead < 2 || (*piece)[lead] != *blocks) return nullptr;
  if (piece->size() - lead > 2 && (*piece)[lead + 1] % call.mesh().size(m) != 0) return nullptr;
  assumed_kept.insert(assumed_kept.end(), read.begin(), read.end());
  return Shard::make(static_cast<int64_t>(o0 + lead) + 1);
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
    const int64_t ways = split_ways(call, dim);
    if (i - i0 == 1 && o - o0 == 1) return p.moved_to_dim(o0);  // kept as is
    // Only size-1 dims join or leave the split dim ([1, 11] <-> [11]): the
    // split moves as it is, even or not.
    if (product(in, i0, i) == in[dim]) {
      for (size_t d = o0; d < o; ++d) {
        if (out[d] == in[dim]) return p.moved_to_dim(d);
      }
    }
    if (PlacementPtr unstrided =
            unflattened_blocks(call, m, p, dim, i0, i, out, o0, o, assumed_kept)) {
      return unstrided;
    }
    if (!p.fills_role(RuleRole::kEvenBlocks) || in[dim] % ways != 0) return nullptr;
    if (o - o0 == 1) {
      // Merged: blocks of a leading dim stay blocks; of a later dim, strided
      // with one stride per row of the piece the earlier mesh dims left.
      int64_t before = 1;
      for (size_t d = i0; d < static_cast<size_t>(dim); ++d) {
        const int64_t size = piece_size(call, d, m, assumed_kept);
        if (size < 0) return nullptr;
        before *= size;
      }
      if (before == 1) return Shard::make(o0);
      return StridedShard::make(o0, before);
    }
    if (static_cast<size_t>(dim) == i0 && i - i0 == 1) {
      return split_into_several(call, m, dim, out, o0, o, assumed_kept);
    }
    return nullptr;
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
// a view is copied, as reshape would do.
void reshape_kernel(const c10::OperatorHandle&, torch::jit::Stack& stack,
                    const LocalContext& context) {
  const at::Tensor local = stack[0].toTensor();
  const auto& shape = local_output_shape(context, 0, local.scalar_type());
  torch::jit::drop(stack, stack.size());
  stack.push_back(local.reshape(shape));
}

}  // namespace dtensor
