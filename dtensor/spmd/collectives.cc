// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/collectives.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <dtensor/base/check.h>
#include <dtensor/base/compat.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/placements/strided_shard.h>
#include <dtensor/redistribute/row_exchange.h>
#include <dtensor/spmd/types.h>

namespace dtensor::spmd {
namespace {

// What a collective does over one mesh dim: the forward moves `x` from
// `from` to `to`; the backward takes the gradient as `to_grad` and brings it
// to `from_grad` (collectives.h derives these from the types).
struct Layouts {
  PlacementPtr from;
  PlacementPtr to;
  PlacementPtr to_grad;
  PlacementPtr from_grad;
};

// The gradient layout of a result that is the same on every rank.
PlacementPtr replicated_gradient(ReplicatedType type) {
  return type == ReplicatedType::kReplicate ? Partial::make() : Replicate::make();
}

// `x`, this rank's part of a tensor of `global_shape` laid out as
// `layouts.from` over mesh dim `dim`, laid out as `layouts.to` instead: a
// from_local, a redistribute (planned and counted) and a to_local, whose
// backwards carry the gradient layouts of `layouts`.
at::Tensor relayout(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                    std::vector<int64_t> global_shape, const Layouts& layouts) {
  FromLocalOptions options;
  options.run_check = false;
  options.shape = std::move(global_shape);
  options.grad_placements = std::vector<PlacementPtr>{layouts.from_grad};
  const DTensor source = from_local(x, mesh[dim], {layouts.from}, std::move(options));
  return source.redistribute({layouts.to}).to_local(std::vector<PlacementPtr>{layouts.to_grad});
}

// `tensor_dim` of `x` in [0, x.dim()), negative counting from the end.
int64_t normalized_dim(const at::Tensor& x, int64_t tensor_dim, const char* call,
                       const char* argument) {
  DTENSOR_CHECK(x.defined(), call, ": expected a defined tensor, found undefined");
  DTENSOR_CHECK(tensor_dim >= -x.dim() && tensor_dim < x.dim(), call, ": ", argument,
                ": expected a dim in [", -x.dim(), ", ", x.dim(), ") of a tensor of shape ",
                x.sizes(), ", found ", tensor_dim);
  return tensor_dim < 0 ? tensor_dim + x.dim() : tensor_dim;
}

// The backward of all_to_all_v: the same exchange with the splits swapped,
// itself differentiable (through spmd::all_to_all_v) for double backward.
class AllToAllVBackward final : public torch::autograd::Node {
 public:
  AllToAllVBackward(DeviceMesh mesh, std::string dim, std::vector<int64_t> send_splits,
                    std::vector<int64_t> recv_splits, const at::Tensor& output)
      : mesh_(std::move(mesh)),
        dim_(std::move(dim)),
        send_splits_(std::move(send_splits)),
        recv_splits_(std::move(recv_splits)),
        output_shape_(output.sizes().vec()),
        output_options_(output.options()) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    // An undefined gradient (the output fed nothing on this rank) still
    // takes part, as zeros: the peers' gradients need this rank's call.
    const at::Tensor grad =
        grads[0].defined() ? grads[0] : at::zeros(output_shape_, output_options_);
    return {all_to_all_v(grad, mesh_, dim_, recv_splits_, send_splits_)};
  }
  std::string name() const override { return "dtensor::spmd::AllToAllVBackward"; }

 private:
  DeviceMesh mesh_;
  std::string dim_;
  std::vector<int64_t> send_splits_;
  std::vector<int64_t> recv_splits_;
  std::vector<int64_t> output_shape_;
  at::TensorOptions output_options_;
};

// `splits`, the `argument` of `call`: `per_rank` counts for each of `ranks`
// ranks, none negative, summing to x.size(0) (`rows`) when given.
void check_splits(const std::vector<int64_t>& splits, const char* call, const char* argument,
                  int64_t ranks, int64_t per_rank, std::optional<int64_t> rows) {
  DTENSOR_CHECK(static_cast<int64_t>(splits.size()) == ranks * per_rank, call, ": ", argument,
                ": expected ", per_rank, " count(s) per rank of the mesh dim (", ranks * per_rank,
                " in all), found ", splits.size());
  for (int64_t count : splits) {
    DTENSOR_CHECK(count >= 0, call, ": ", argument, ": expected counts >= 0, found ", count);
  }
  const int64_t sum = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  DTENSOR_CHECK(!rows || sum == *rows, call, ": ", argument,
                ": expected counts summing to x.size(0) (", rows.value_or(0), "), found ", sum);
}

void check_has_rows(const at::Tensor& x, const char* call) {
  DTENSOR_CHECK(x.defined() && x.dim() >= 1, call,
                ": expected a tensor with at least one dim (rows), found ",
                x.defined() ? "a 0-dim tensor" : "an undefined tensor");
}

// The same value on every rank for the same sizes past dim 0 (absl::Hash is
// seeded per process): FNV-1a over the sizes.
int64_t row_shape_fingerprint(const at::Tensor& x) {
  uint64_t hash = 14695981039346656037ull;
  for (int64_t d = 1; d < x.dim(); ++d) {
    hash = (hash ^ static_cast<uint64_t>(x.size(d))) * 1099511628211ull;
  }
  return static_cast<int64_t>(hash >> 1);
}

// `run()`, the collective `name` over mesh dim `dim`, with the type checker
// (dtensor/spmd/types.h) paused: it checks that `x` is of an `accepted` type
// on `dim` first, and gives the result `x`'s types with `produced` on `dim`.
template <typename Run>
at::Tensor typed(const at::Tensor& x, const char* name, std::string_view dim,
                 const std::vector<Type>& accepted, Type produced, Run&& run) {
  const std::optional<Types> types = collective_result_types(x, name, dim, accepted, produced);
  at::Tensor out;
  {
    ScopedTypeCheckPause pause;
    out = run();
  }
  if (types) set_types(out, *types);
  return out;
}

Type replicated_type(ReplicatedType type) {
  return type == ReplicatedType::kReplicate ? Type::kReplicate : Type::kInvariant;
}

}  // namespace

at::Tensor all_reduce(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      ReplicatedType dst) {
  return typed(x, "all_reduce", dim, {Type::kPartial, Type::kVarying}, replicated_type(dst), [&] {
    return relayout(
        x, mesh, dim, x.sizes().vec(),
        {Partial::make(), Replicate::make(), replicated_gradient(dst), Replicate::make()});
  });
}

at::Tensor all_gather(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      int64_t gather_dim, ReplicatedType dst) {
  const int64_t d = normalized_dim(x, gather_dim, "all_gather", "gather_dim");
  std::vector<int64_t> shape = x.sizes().vec();
  shape[d] *= mesh.size(mesh.dim_index(dim));
  return typed(x, "all_gather", dim, {Type::kVarying}, replicated_type(dst), [&] {
    return relayout(x, mesh, dim, std::move(shape),
                    {Shard::make(d), Replicate::make(), replicated_gradient(dst), Shard::make(d)});
  });
}

at::Tensor reduce_scatter(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                          int64_t scatter_dim) {
  const int64_t d = normalized_dim(x, scatter_dim, "reduce_scatter", "scatter_dim");
  return typed(x, "reduce_scatter", dim, {Type::kPartial, Type::kVarying}, Type::kVarying, [&] {
    return relayout(x, mesh, dim, x.sizes().vec(),
                    {Partial::make(), Shard::make(d), Shard::make(d), Replicate::make()});
  });
}

at::Tensor invariant_to_replicate(const at::Tensor& x, const DeviceMesh& mesh,
                                  std::string_view dim) {
  return typed(x, "invariant_to_replicate", dim, {Type::kInvariant}, Type::kReplicate, [&] {
    return relayout(x, mesh, dim, x.sizes().vec(),
                    {Replicate::make(), Replicate::make(), Partial::make(), Replicate::make()});
  });
}

at::Tensor replicate_to_invariant(const at::Tensor& x, const DeviceMesh& mesh,
                                  std::string_view dim) {
  return typed(x, "replicate_to_invariant", dim, {Type::kReplicate}, Type::kInvariant, [&] {
    return relayout(x, mesh, dim, x.sizes().vec(),
                    {Replicate::make(), Replicate::make(), Replicate::make(), Partial::make()});
  });
}

at::Tensor all_to_all(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      int64_t split_dim, int64_t concat_dim) {
  const int64_t split = normalized_dim(x, split_dim, "all_to_all", "split_dim");
  const int64_t concat = normalized_dim(x, concat_dim, "all_to_all", "concat_dim");
  const int64_t ranks = mesh.size(mesh.dim_index(dim));
  DTENSOR_CHECK(x.size(split) % ranks == 0, "all_to_all: split_dim: expected a size divisible by ",
                "the ", ranks, " ranks of \"", dim, "\", found ", x.size(split), " (shape ",
                x.sizes(), ")");
  std::vector<int64_t> shape = x.sizes().vec();
  shape[concat] *= ranks;
  // Piece p of every rank's x, in rank order, is the p-th run of each
  // rank's block along the concatenated dim: a strided split when the dims
  // are the same.
  const PlacementPtr to = split == concat ? StridedShard::make(split, ranks) : Shard::make(split);
  return typed(x, "all_to_all", dim, {Type::kVarying}, Type::kVarying, [&] {
    return relayout(x, mesh, dim, std::move(shape),
                    {Shard::make(concat), to, to, Shard::make(concat)});
  });
}

at::Tensor all_to_all_v(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                        std::vector<int64_t> send_splits, std::vector<int64_t> recv_splits) {
  check_has_rows(x, "all_to_all_v");
  const int64_t mesh_dim = mesh.dim_index(dim);
  check_splits(send_splits, "all_to_all_v", "send_splits", mesh.size(mesh_dim), 1, x.size(0));
  check_splits(recv_splits, "all_to_all_v", "recv_splits", mesh.size(mesh_dim), 1, std::nullopt);
  return typed(x, "all_to_all_v", dim, {Type::kVarying}, Type::kVarying, [&] {
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = exchange_rows(x, mesh, mesh_dim, send_splits, recv_splits);
    }
    if (torch::autograd::compute_requires_grad(x)) {
      auto node = make_autograd_node<AllToAllVBackward>(
          mesh, std::string(dim), std::move(send_splits), std::move(recv_splits), out);
      node->set_next_edges(torch::autograd::collect_next_edges(x));
      torch::autograd::set_history(out, node);
    }
    return out;
  });
}

std::vector<int64_t> exchange_split_sizes(const at::Tensor& x,
                                          const std::vector<int64_t>& send_splits,
                                          const DeviceMesh& mesh, std::string_view dim) {
  check_has_rows(x, "exchange_split_sizes");
  const int64_t mesh_dim = mesh.dim_index(dim);
  const int64_t ranks = mesh.size(mesh_dim);
  const int64_t per_rank = std::max<int64_t>(1, static_cast<int64_t>(send_splits.size()) / ranks);
  check_splits(send_splits, "exchange_split_sizes", "send_splits", ranks, per_rank, x.size(0));
  // Row p goes to rank p: the counts for it, and what every rank must agree on.
  const int64_t dtype_field = per_rank, row_shape_field = per_rank + 1;
  at::Tensor mine = at::empty({ranks, per_rank + 2}, at::kLong);
  mine.narrow(1, 0, per_rank).copy_(at::tensor(send_splits, at::kLong).view({ranks, per_rank}));
  mine.select(1, dtype_field).fill_(static_cast<int64_t>(x.scalar_type()));
  mine.select(1, row_shape_field).fill_(row_shape_fingerprint(x));
  // Every rank sees every rank's dtype and row shape, so a mismatch
  // anywhere is an error everywhere and no rank is left waiting.
  const at::Tensor theirs = [&] {
    ScopedTypeCheckPause pause;
    return exchange_blocks(mine, mesh, mesh_dim);
  }();
  std::vector<int64_t> recv_splits;
  recv_splits.reserve(send_splits.size());
  for (int64_t q = 0; q < ranks; ++q) {
    const int64_t* row = theirs[q].data_ptr<int64_t>();
    DTENSOR_CHECK(row[dtype_field] == static_cast<int64_t>(x.scalar_type()),
                  "exchange_split_sizes: expected every rank's x of dtype ", x.scalar_type(),
                  " (this rank's), found ", static_cast<c10::ScalarType>(row[dtype_field]),
                  " on rank ", q, " of \"", dim, "\"");
    DTENSOR_CHECK(row[row_shape_field] == row_shape_fingerprint(x),
                  "exchange_split_sizes: expected every rank's x with rows of shape ",
                  x.sizes().slice(1), " (this rank's), found other rows on rank ", q, " of \"", dim,
                  "\"");
    recv_splits.insert(recv_splits.end(), row, row + per_rank);
  }
  return recv_splits;
}

}  // namespace dtensor::spmd
