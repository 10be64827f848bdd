// Copyright 2026 The dtensor Authors.
#include <dtensor/spmd/collectives.h>

#include <utility>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>

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

}  // namespace

at::Tensor all_reduce(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      ReplicatedType dst) {
  return relayout(
      x, mesh, dim, x.sizes().vec(),
      {Partial::make(), Replicate::make(), replicated_gradient(dst), Replicate::make()});
}

at::Tensor all_gather(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      int64_t gather_dim, ReplicatedType dst) {
  const int64_t d = normalized_dim(x, gather_dim, "all_gather", "gather_dim");
  std::vector<int64_t> shape = x.sizes().vec();
  shape[d] *= mesh.size(mesh.dim_index(dim));
  return relayout(x, mesh, dim, std::move(shape),
                  {Shard::make(d), Replicate::make(), replicated_gradient(dst), Shard::make(d)});
}

at::Tensor reduce_scatter(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                          int64_t scatter_dim) {
  const int64_t d = normalized_dim(x, scatter_dim, "reduce_scatter", "scatter_dim");
  return relayout(x, mesh, dim, x.sizes().vec(),
                  {Partial::make(), Shard::make(d), Shard::make(d), Replicate::make()});
}

at::Tensor invariant_to_replicate(const at::Tensor& x, const DeviceMesh& mesh,
                                  std::string_view dim) {
  return relayout(x, mesh, dim, x.sizes().vec(),
                  {Replicate::make(), Replicate::make(), Partial::make(), Replicate::make()});
}

at::Tensor replicate_to_invariant(const at::Tensor& x, const DeviceMesh& mesh,
                                  std::string_view dim) {
  return relayout(x, mesh, dim, x.sizes().vec(),
                  {Replicate::make(), Replicate::make(), Replicate::make(), Partial::make()});
}

}  // namespace dtensor::spmd
