// Copyright 2026 The dtensor Authors.
//
// The sharding rule InterleavedShard brings along: splitting an IS(d, k) dim
// into its k blocks (split, chunk, split_with_sizes; chunk decomposes into
// split) gives k tensors that are each an ordinary Shard(d). Rank r holds its
// torch.chunk piece of every block, in block order, so cutting its shard into
// k equal parts hands it piece r of each block: merged QKV becomes q, k and v
// sharded by heads without any communication.
//
// Everything else the plugin needs from rules comes from roles, not from
// rules of its own: IS declares kPassThrough and kContraction
// (interleaved_shard.h), so linear, matmul and pointwise ops carry it through.
// Registered from the plugin library's load, through the public registry.
#include <optional>
#include <vector>

#include <dtensor/placements/shard.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>
#include <dtensor/rules/roles.h>
#include <dtensor/rules/strategy.h>
#include "interleaved_shard.h"

namespace dtensor {
namespace {

// split.Tensor(self, split_size, dim) and split_with_sizes(self, split_sizes,
// dim) both name the dim third.
int64_t split_dim(const OpCall& call) {
  const int64_t ndim = call.input(0).spec->ndim();
  const int64_t dim = call.argument(2).toInt();
  return dim < 0 ? dim + ndim : dim;
}

// Whether the call cuts `dim` into exactly `pieces` equal consecutive parts.
bool cuts_into_equal_parts(const OpCall& call, int64_t dim, int64_t pieces) {
  const int64_t length = call.input(0).spec->shape()[dim];
  if (length % pieces != 0) return false;
  const int64_t part = length / pieces;
  const c10::IValue& sizes = call.argument(1);
  if (sizes.isInt()) return sizes.toInt() == part;
  const std::vector<int64_t> list = sizes.toIntVector();
  if (static_cast<int64_t>(list.size()) != pieces) return false;
  for (int64_t size : list) {
    if (size != part) return false;
  }
  return true;
}

const InterleavedShard* interleaving(const Placement& p, int64_t dim) {
  const auto* interleaved = dynamic_cast<const InterleavedShard*>(&p);
  return interleaved != nullptr && interleaved->dim() == dim ? interleaved : nullptr;
}

// Whether a mesh dim other than `m` splits tensor dim `dim` of the input: the
// blocks would then not be whole inside what mesh dim m splits.
bool split_elsewhere(const OpCall& call, int64_t m, int64_t dim) {
  for (int64_t other = 0; other < call.mesh().ndim(); ++other) {
    if (other != m && split_dim_of(*call.placement(0, other)) == dim) return true;
  }
  return false;
}

// IS(d, k) -> k outputs of S(d), when the call cuts d into the k blocks.
std::optional<ShardingRow> block_split_row(const OpCall& call, int64_t m) {
  const int64_t dim = split_dim(call);
  const InterleavedShard* interleaved = interleaving(*call.placement(0, m), dim);
  if (interleaved == nullptr || split_elsewhere(call, m, dim) ||
      !cuts_into_equal_parts(call, dim, interleaved->interleave())) {
    return std::nullopt;
  }
  return ShardingRow{{call.placement(0, m)}, {Shard::make(dim)}};
}

// The interleave of the layout the op runs on, if it interleaves `dim`.
std::optional<int64_t> interleave_of(const DTensorSpec& spec, int64_t dim) {
  for (const PlacementPtr& p : spec.placements()) {
    if (const InterleavedShard* interleaved = interleaving(*p, dim)) {
      return interleaved->interleave();
    }
  }
  return std::nullopt;
}

// The local shard holds piece r of each block, one after the other: cut it
// into `interleave` equal parts (the global split size would be wrong here).
void split_local_blocks(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                        const LocalContext& context) {
  const int64_t dim = split_dim(context.call());
  const auto interleave = interleave_of(*context.propagation().input_targets[0], dim);
  if (!interleave) {
    op.callBoxed(stack);  // any other row: the op itself is right
    return;
  }
  const at::Tensor local = stack[0].toTensor();
  const std::vector<int64_t> parts(static_cast<size_t>(*interleave), local.size(dim) / *interleave);
  std::vector<at::Tensor> pieces = local.split_with_sizes(parts, dim);
  torch::jit::drop(stack, stack.size());
  stack.emplace_back(std::move(pieces));
}

std::vector<ShardingRow> interleaved_split_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  if (auto row = block_split_row(call, m)) rows.push_back(std::move(*row));
  return rows;
}

}  // namespace

// Joins the built-in strategies of the split ops (which keep serving every
// other layout); the kernel runs for every layout of these ops and falls back
// to the op itself wherever the input is not interleaved.
DTENSOR_REGISTER(interleaved_shard_split) {
  Strategy strategy;
  strategy.rows = interleaved_split_rows;
  const std::initializer_list<std::string_view> ops = {"aten::split.Tensor",
                                                       "aten::split_with_sizes"};
  add_to_existing(strategies(), ops, strategy);
  add_to_existing(local_kernels(), ops, LocalKernel(split_local_blocks));
}

}  // namespace dtensor
