// Copyright 2026 The dtensor Authors.
//
// dtensor/dtensor.h: a tensor laid out over a DeviceMesh.
//
// A `DTensor` holds the calling rank's local shard and the spec (mesh,
// placements, global shape, dtype). Make one with `distribute_tensor` (from a
// global tensor) or `from_local` (from each rank's shard), change its layout
// with `redistribute`, and get data back with `to_local` / `full_tensor`.
//
//   dtensor::DTensor w = dtensor::distribute_tensor(weight, mesh,
//   dtensor::parse_placements("S(0),R")); dtensor::DTensor w1 =
//   w.redistribute(dtensor::parse_placements("R,S(1)")); at::Tensor all = w1.full_tensor();   //
//   equals `weight` on every rank
//
// Every call is collective over the mesh where it communicates: all ranks of
// the mesh make it with the same arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/core/tensor_impl.h>
#include <dtensor/placements/spec.h>

namespace dtensor {

struct RedistributeOptions {
  // On a CUDA mesh (NCCL), return as soon as the collectives are enqueued on
  // a side stream, without making the caller's stream wait for them: the
  // result's (and the source's) first use does that, so kernels enqueued in
  // between overlap with the communication (dtensor/redistribute/
  // async_redistribute.h). The local and MPI backends complete in the call.
  bool async_op = false;
  // The layout the gradient goes back to (as to_local's grad_placements).
  // By default the source placements with Partial read as Replicate, and a
  // redistribute that moves nothing records no backward. When given, the
  // backward is recorded even then: a module boundary whose replicated input
  // must get its Partial gradient reduced (dtensor/nn/parallel_style.h).
  std::optional<std::vector<PlacementPtr>> grad_placements = std::nullopt;
};

// A handle on a DTensor at::Tensor (dtensor/core/tensor_impl.h). `tensor()` is the
// at::Tensor itself: pass it to any ATen op (`at::mm(a.tensor(), b.tensor())`,
// `x.tensor().sum(1)`, torch::nn modules with DTensor parameters) and the
// result is again a DTensor, laid out by the sharding rules (rules/). The
// conversion is implicit, so `at::relu(x)` works on a DTensor `x` too.
// Autograd differentiates through ops and through the calls below.
class DTensor {
 public:
  // Wraps `local` (on the mesh's device, of the spec's dtype and of the local
  // shape the spec gives the calling rank; throws otherwise). Differentiable
  // in `local`.
  DTensor(at::Tensor local, DTensorSpecPtr spec);
  // Views an at::Tensor that is a DTensor, e.g. an op's result. Throws
  // dtensor::Error for a plain tensor.
  explicit DTensor(at::Tensor tensor);

  // The DTensor as an at::Tensor.
  const at::Tensor& tensor() const { return tensor_; }
  operator const at::Tensor&() const { return tensor_; }

  // The calling rank's shard (sharing its storage). Differentiable: the
  // gradient flows back as a DTensor laid out as `grad_placements` (as
  // PyTorch's: say Partial(sum) when each rank's gradient is a term of the
  // whole one); by default this layout, Partial read as Replicate.
  at::Tensor to_local(
      const std::optional<std::vector<PlacementPtr>>& grad_placements = std::nullopt) const;
  // The whole global tensor on every rank (Partial placements reduced).
  // Differentiable: each rank's gradient of the result is read as
  // `grad_placements` (by default Replicate) of the whole gradient.
  at::Tensor full_tensor(
      const std::optional<std::vector<PlacementPtr>>& grad_placements = std::nullopt) const;
  // The same global tensor with `placements`. A Partial target is refused
  // unless that mesh dim already holds the same Partial. Differentiable.
  // Where anything moves, the result shares no memory with this DTensor;
  // where nothing does, it is this DTensor.
  DTensor redistribute(const std::vector<PlacementPtr>& placements,
                       RedistributeOptions options = {}) const&;
  // The same on a DTensor given up: `std::move(x).redistribute(...)`, or a
  // temporary. When this handle alone holds the DTensor and its shard's
  // memory (no other copy of the handle, no to_local() result or view of
  // it, nothing autograd saved), that memory is reused: P -> R reduces in
  // place, R -> S/SS/Ragged returns a view of the replicated shard wherever
  // the part kept is contiguous (which keeps the whole replicated buffer
  // alive with the shard: clone its local tensor to hold only the part),
  // and a group of one rank copies nothing. Values and gradients are the
  // same as the copying form's; when the memory is shared, or with async_op
  // or grad_placements, this is the copying form.
  DTensor redistribute(const std::vector<PlacementPtr>& placements,
                       RedistributeOptions options = {}) &&;

  // Whether no async redistribute's collectives are still running on the
  // device for this tensor (a query; never blocks).
  bool is_ready() const { return impl()->ready(); }
  // Orders the current stream after pending async collectives now; to_local
  // and every op do it on first use anyway.
  void wait() const { impl()->local(); }

  const DTensorSpec& spec() const { return *impl()->spec(); }
  const DTensorSpecPtr& spec_ptr() const { return impl()->spec(); }
  const DeviceMesh& mesh() const { return spec().mesh(); }
  const std::vector<PlacementPtr>& placements() const { return spec().placements(); }
  const std::vector<int64_t>& sizes() const { return spec().shape(); }
  c10::ScalarType dtype() const { return spec().dtype(); }

 private:
  const DTensorImpl* impl() const {
    return static_cast<const DTensorImpl*>(tensor_.unsafeGetTensorImpl());
  }

  at::Tensor tensor_;
};

// Internal: redistributes to any placements, Partial targets included (used by
// autograd and factories).
DTensor redistribute_any(const DTensor& tensor, const std::vector<PlacementPtr>& placements);

// Lays `tensor` out over `mesh`. With `src_rank` (a world rank in the mesh),
// only that rank's data counts and is scattered; every rank passes a tensor of
// the same shape and dtype. Without it, every rank holds the same tensor and
// keeps its part without communicating.
DTensor distribute_tensor(const at::Tensor& tensor, const DeviceMesh& mesh,
                          const std::vector<PlacementPtr>& placements,
                          std::optional<int64_t> src_rank = std::nullopt);

struct FromLocalOptions {
  // Check across ranks that dtypes, placements, `shape`, `stride` and devices
  // agree and that local shapes fit the layout; a disagreement raises on
  // every rank. Without it, every rank must pass the same arguments.
  bool run_check = true;
  // The global shape; inferred from every rank's local shape when absent.
  std::optional<std::vector<int64_t>> shape;
  // Must be the DTensor's strides when given: the row-major strides of the
  // shape, taken in the memory order of the local tensor's dims (a
  // transposed local tensor gives a transposed DTensor).
  std::optional<std::vector<int64_t>> stride;
  // The layout the DTensor's gradient is brought to before its shard becomes
  // `local`'s gradient (as to_local's grad_placements, in reverse): by
  // default `placements` with Partial read as Replicate. Partial(sum) where a
  // Replicate `local` is used as a value whose gradient is a pending sum
  // (dtensor/spmd/local_map.h): the gradient's shard is then exact, one rank
  // holding it and the others zeros.
  std::optional<std::vector<PlacementPtr>> grad_placements;
};

// The sum over every rank of `mesh` of each rank's `value`, on every rank:
// one all_reduce of one int64 on the communicator of the mesh's ranks
// (counted by CollectiveCounter), without a DTensor's planning and
// dispatch. For verdicts every rank must act on alike (checkpoint's
// agreement that every rank's checks passed). Collective over the mesh (on
// first use of a slice whose dims are not adjacent in its root, over the
// root's world: its communicator is made then). Throws dtensor::Error on a
// rank outside the mesh.
int64_t sum_over_mesh(const DeviceMesh& mesh, int64_t value);

// Builds a DTensor from each rank's shard. The shard is `local` itself, with
// its strides and memory, as PyTorch's from_local keeps it (no copy): writes
// through either are seen by both. Ragged placements keep their units when
// every rank's local rows fit them, whatever other mesh dims split the rows
// too; otherwise they learn their units from the local row counts (one small
// all-gather; the same units on every rank), and the layout must fit those.
DTensor from_local(const at::Tensor& local, const DeviceMesh& mesh,
                   const std::vector<PlacementPtr>& placements, FromLocalOptions options = {});

}  // namespace dtensor
