// Copyright 2026 The dtensor Authors.
#include <dtensor/dtensor.h>

#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <dtensor/autograd/layout_functions.h>
#include <dtensor/base/check.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/placements/ragged.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/async_redistribute.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/redistribute/index_exchange.h>
#include <dtensor/redistribute/planner.h>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

using redistribute_internal::gather_positions;
using redistribute_internal::merge_leading_dims;

// Whether `tensor` lives where `mesh` computes: the backend's device type,
// and its index when the backend has one (each NCCL rank owns one GPU).
bool on_mesh_device(const at::Tensor& tensor, const DeviceMesh& mesh) {
  const c10::Device expected = mesh.device();
  return tensor.device().type() == expected.type() &&
         (!expected.has_index() || tensor.device().index() == expected.index());
}

// What every entry point that takes a plain tensor for a mesh checks, on the
// calling rank alone (from_local with run_check checks the device on every
// rank at once instead, see gather_locals).
void check_local_input(const at::Tensor& tensor, const DeviceMesh& mesh, std::string_view call,
                       bool check_device = true) {
  DTENSOR_CHECK(tensor.defined(), call, ": expected a defined tensor, found undefined");
  DTENSOR_CHECK(!is_dtensor(tensor), call,
                ": expected a plain tensor, found a DTensor laid out as ",
                is_dtensor(tensor) ? dtensor_impl(tensor)->spec()->to_string() : "",
                " (redistribute it instead)");
  DTENSOR_CHECK(mesh.contains_calling_rank(), call, ": expected the calling rank (world rank ",
                mesh.world()->rank(), ") to be in ", mesh.to_string(), ", found it outside");
  DTENSOR_CHECK(!check_device || on_mesh_device(tensor, mesh), call, ": expected a tensor on ",
                mesh.device(), " (the mesh's ", mesh.world()->backend_name(),
                " backend), found one on ", tensor.device());
}

// `tensor`, with a lazy conjugate or negation applied: collectives move the
// bytes in memory, which such a view reads differently.
at::Tensor with_values_in_memory(const at::Tensor& tensor) {
  return tensor.resolve_conj().resolve_neg();
}

std::vector<PlacementPtr> all_replicate(size_t n) {
  return std::vector<PlacementPtr>(n, Replicate::make());
}

// The communicator over every rank of `mesh`, in row-major coordinate order.
std::shared_ptr<Communicator> whole_mesh_communicator(const DeviceMesh& mesh) {
  return mesh.ndim() == 1 ? mesh.communicator(0) : mesh.flatten("whole_mesh").communicator(0);
}

// redistribute_any, giving `tensor`'s shard up when `consume`.
DTensor redistribute_planned(const DTensor& tensor, const std::vector<PlacementPtr>& placements,
                             bool consume) {
  const RedistributePlanPtr plan = plan_redistribute(tensor.spec(), placements);
  if (plan->steps.empty()) return tensor;
  return DTensor(consume ? redistribute_consuming_with_grad(tensor.tensor(), plan->target)
                         : redistribute_with_grad(tensor.tensor(), plan->target));
}

// Only what the Partial rule needs is checked here; the plan lookup takes the
// placements as given, so a cache hit normalizes and allocates nothing, and
// a miss validates them fully.
void check_redistribute_targets(const std::vector<PlacementPtr>& placements,
                                const std::vector<PlacementPtr>& current) {
  DTENSOR_CHECK(placements.size() == current.size(), "placements: expected one per mesh dim (",
                current.size(), "), found ", placements.size());
  for (size_t i = 0; i < placements.size(); ++i) {
    DTENSOR_CHECK(placements[i] != nullptr, "placements[", i,
                  "]: expected a placement, found null");
    DTENSOR_CHECK(!placements[i]->is_partial() || *placements[i] == *current[i],
                  "redistribute: mesh dim ", i, ": a Partial target (", placements[i]->to_string(),
                  ") needs that mesh dim to hold the same Partial already, found ",
                  current[i]->to_string(),
                  "; Partial values come from operators, not from redistribute");
  }
}

// Whether `tensor` (a DTensor handle) alone holds its DTensor and the memory
// of its shard: no other handle, no to_local() result or other view of the
// shard, nothing autograd saved (a saved DTensor holds its shard), no view
// of it that remembers its shard; and whether that memory is libtorch's to
// reuse: a from_blob or mapped buffer (not resizable) is someone else's
// whatever the counts say, and a leaf that requires grad is never written
// in place. local() also settles pending async work before the caller
// writes.
bool holds_alone(const at::Tensor& tensor) {
  if (tensor.use_count() != 1 || (tensor.requires_grad() && tensor.is_leaf())) return false;
  const at::Tensor& local = dtensor_impl(tensor)->local();
  return local.use_count() == 1 && local.has_storage() && local.storage().use_count() == 1 &&
         local.storage().resizable();
}

DTensor redistribute_with_gradient_layout(const DTensor& tensor,
                                          const std::vector<PlacementPtr>& placements,
                                          const std::vector<PlacementPtr>& grad_placements) {
  DTENSOR_CHECK(grad_placements.size() == placements.size(),
                "redistribute: grad_placements: expected one per mesh dim (", placements.size(),
                "), found ", grad_placements.size());
  const RedistributePlanPtr plan = plan_redistribute(tensor.spec(), placements);
  auto grad_spec =
      std::make_shared<const DTensorSpec>(tensor.spec().with_placements(grad_placements));
  return DTensor(redistribute_with_grad(tensor.tensor(), plan->target, grad_spec));
}

}  // namespace

DTensor::DTensor(at::Tensor local, DTensorSpecPtr spec) {
  DTENSOR_CHECK(spec != nullptr, "DTensor: expected a spec, found null");
  check_local_input(local, spec->mesh(), "DTensor");
  tensor_ = from_local_with_grad(with_values_in_memory(local), spec);
}

DTensor::DTensor(at::Tensor tensor) : tensor_(std::move(tensor)) { dtensor_impl(tensor_); }

at::Tensor DTensor::to_local(
    const std::optional<std::vector<PlacementPtr>>& grad_placements) const {
  if (!tensor_.requires_grad() || !c10::GradMode::is_enabled()) return impl()->local();
  if (!grad_placements) return to_local_with_grad(tensor_, nullptr);
  DTENSOR_CHECK(grad_placements->size() == placements().size(),
                "to_local: grad_placements: expected one per mesh dim (", placements().size(),
                "), found ", grad_placements->size());
  return to_local_with_grad(
      tensor_, std::make_shared<const DTensorSpec>(spec().with_placements(*grad_placements)));
}

at::Tensor DTensor::full_tensor(
    const std::optional<std::vector<PlacementPtr>>& grad_placements) const {
  return redistribute_any(*this, all_replicate(placements().size())).to_local(grad_placements);
}

DTensor DTensor::redistribute(const std::vector<PlacementPtr>& placements,
                              RedistributeOptions options) const& {
  check_redistribute_targets(placements, spec().placements());
  if (options.grad_placements) {
    DTENSOR_CHECK(!options.async_op,
                  "redistribute: expected async_op or grad_placements, found both");
    return redistribute_with_gradient_layout(*this, placements, *options.grad_placements);
  }
  if (!options.async_op) return redistribute_any(*this, placements);
  return DTensor(
      redistribute_async(tensor_, [&] { return redistribute_any(*this, placements).tensor(); }));
}

DTensor DTensor::redistribute(const std::vector<PlacementPtr>& placements,
                              RedistributeOptions options) && {
  if (options.async_op || options.grad_placements || !holds_alone(tensor_)) {
    return std::as_const(*this).redistribute(placements, std::move(options));
  }
  check_redistribute_targets(placements, spec().placements());
  return redistribute_planned(*this, placements, /*consume=*/true);
}

DTensor redistribute_any(const DTensor& tensor, const std::vector<PlacementPtr>& placements) {
  return redistribute_planned(tensor, placements, /*consume=*/false);
}

namespace {

DTensor distribute_detached(const at::Tensor& tensor, const DeviceMesh& mesh,
                            const std::vector<PlacementPtr>& placements,
                            std::optional<int64_t> src_rank) {
  const std::vector<int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
  auto spec = std::make_shared<const DTensorSpec>(mesh, placements, shape, tensor.scalar_type());
  // What a scatter or a slice of the global value gives, before the Partials
  // are applied locally.
  auto spread = std::make_shared<const DTensorSpec>(
      spec->with_placements(gradient_placements(spec->placements())));
  if (!src_rank) {
    const DTensor replicated(
        tensor.contiguous(),
        std::make_shared<const DTensorSpec>(spec->with_placements(all_replicate(mesh.ndim()))));
    return redistribute_any(replicated, spec->placements());
  }
  const std::vector<int64_t> ranks = mesh.ranks();
  auto root = std::find(ranks.begin(), ranks.end(), *src_rank);
  DTENSOR_CHECK(root != ranks.end(), "distribute_tensor: src_rank: expected a rank of ",
                mesh.to_string(), ", found ", *src_rank);
  const int64_t root_index = root - ranks.begin();
  std::shared_ptr<Communicator> comm = whole_mesh_communicator(mesh);
  const bool replicated = std::all_of(spread->placements().begin(), spread->placements().end(),
                                      [](const PlacementPtr& p) { return p->is_replicate(); });
  if (replicated) {
    // One broadcast: a scatter would stage a copy of the whole tensor per rank.
    at::Tensor whole =
        comm->rank() == root_index
            ? tensor.contiguous().clone()
            : at::empty(shape, tensor.options().memory_format(c10::MemoryFormat::Contiguous));
    comm->broadcast(whole, static_cast<int>(root_index));
    CollectiveCounter::record("broadcast", whole);
    return redistribute_any(DTensor(whole, spread), spec->placements());
  }
  // One scatter-v: the source sends each rank its piece; the others send nothing.
  std::vector<int64_t> send_counts(comm->size(), 0), recv_counts(comm->size(), 0);
  std::vector<at::Tensor> pieces;
  if (comm->rank() == root_index) {
    const at::Tensor global = tensor.contiguous();
    const LocalLayout whole = spread->with_placements(all_replicate(mesh.ndim())).local_layout();
    const auto merged =
        merge_leading_dims(global, whole, shape, merged_leading_dims(spread->placements()));
    for (int64_t member = 0; member < comm->size(); ++member) {
      const LocalLayout layout = spread->layout_at(grid_coordinate(member, mesh.shape()));
      pieces.push_back(gather_positions(
          merged.local,
          redistribute_internal::shared_positions(layout.global_indices(), merged.lists).wanted));
      send_counts[member] = pieces.back().numel();
    }
  }
  const LocalLayout& mine = spread->local_layout();
  at::Tensor local =
      at::empty(mine.local_shape, tensor.options().memory_format(c10::MemoryFormat::Contiguous));
  recv_counts[root_index] = local.numel();
  at::Tensor send = pieces.empty() ? at::empty({0}, tensor.options()) : at::cat(pieces);
  at::Tensor recv = local.view({-1});
  comm->all_to_all_v(send, send_counts, recv, recv_counts);
  CollectiveCounter::record("all_to_all_v", send);
  return redistribute_any(DTensor(local, spread), spec->placements());
}

}  // namespace

// Like PyTorch, a distributed tensor is a new leaf: parameters stay parameters.
DTensor distribute_tensor(const at::Tensor& tensor, const DeviceMesh& mesh,
                          const std::vector<PlacementPtr>& placements,
                          std::optional<int64_t> src_rank) {
  check_local_input(tensor, mesh, "distribute_tensor");
  DTensor out =
      distribute_detached(with_values_in_memory(tensor.detach()), mesh, placements, src_rank);
  if (tensor.requires_grad()) out.tensor().set_requires_grad(true);
  return out;
}

namespace {

// A fingerprint of `text` that is the same in every process (absl::Hash is
// seeded per process): FNV-1a.
int64_t fingerprint(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<int64_t>(hash >> 1);
}

// What from_local's arguments must agree on across ranks.
struct LocalArguments {
  const at::Tensor& local;
  const std::vector<PlacementPtr>& placements;
  const std::optional<std::vector<int64_t>>& shape;
  const std::optional<std::vector<int64_t>>& stride;
};

// Every rank's local shape and dtype code, gathered over the whole mesh,
// after checking on every rank that all agree on the rest: a check that
// fails on one rank alone would leave the others waiting in a collective.
struct GatheredLocals {
  std::vector<std::vector<int64_t>> shapes;  // by flat mesh index
  std::vector<int64_t> dtypes;
};

GatheredLocals gather_locals(const LocalArguments& arguments, const DeviceMesh& mesh) {
  constexpr int64_t kMaxDims = 16;
  enum Field : int64_t { kDims, kDtype, kPlacements, kShape, kOnDevice, kSizes };
  const at::Tensor& local = arguments.local;
  std::shared_ptr<Communicator> comm = whole_mesh_communicator(mesh);
  at::Tensor mine = at::full({kSizes + kMaxDims}, -1, at::kLong);
  mine[kDims] = local.dim();
  mine[kDtype] = static_cast<int64_t>(local.scalar_type());
  mine[kPlacements] = fingerprint(placements_to_string(arguments.placements));
  mine[kShape] =
      fingerprint(absl::StrCat(arguments.shape ? absl::StrJoin(*arguments.shape, ",") : "none", ";",
                               arguments.stride ? absl::StrJoin(*arguments.stride, ",") : "none"));
  mine[kOnDevice] = on_mesh_device(local, mesh) ? 1 : 0;
  for (int64_t d = 0; d < std::min<int64_t>(local.dim(), kMaxDims); ++d) {
    mine[kSizes + d] = local.size(d);
  }
  at::Tensor all = at::empty({comm->size(), kSizes + kMaxDims}, at::kLong);
  const at::Tensor device_mine = mine.to(mesh.device());
  at::Tensor device_all = all.to(mesh.device());
  comm->all_gather(device_mine.view({1, -1}), device_all);
  CollectiveCounter::record("all_gather", device_mine);
  all = device_all.cpu();
  const int64_t* first = all[0].data_ptr<int64_t>();
  GatheredLocals out;
  for (int64_t r = 0; r < comm->size(); ++r) {
    const int64_t* row = all[r].data_ptr<int64_t>();
    DTENSOR_CHECK(row[kOnDevice] == 1, "from_local: expected every rank's local tensor on its ",
                  "mesh device (", mesh.world()->backend_name(), " backend), found mesh rank ", r,
                  "'s elsewhere");
    DTENSOR_CHECK(row[kDims] <= kMaxDims, "from_local: expected local tensors of at most ",
                  kMaxDims, " dims, found ", row[kDims], " on mesh rank ", r);
    DTENSOR_CHECK(row[kPlacements] == first[kPlacements], "from_local: expected the same ",
                  "placements on every rank, found mesh rank ", r, "'s differ from mesh rank 0's");
    DTENSOR_CHECK(row[kShape] == first[kShape], "from_local: expected the same options.shape ",
                  "and options.stride on every rank, found mesh rank ", r,
                  "'s differ from mesh rank 0's");
    out.shapes.emplace_back(row + kSizes, row + kSizes + row[kDims]);
    out.dtypes.push_back(row[kDtype]);
  }
  return out;
}

// The rows a local tensor of `shape` holds (a Ragged shard's first dim).
int64_t rows_of(const std::vector<int64_t>& shape) { return shape.empty() ? 0 : shape[0]; }

// `spec`'s placements with every Ragged's units learned from the members'
// local row counts: member j of Ragged mesh dim i holds the rows of every
// rank at coordinate j there, at coordinate 0 of the other mesh dims, except
// the later ones that split the rows further (their pieces add up to member
// j's). The same on every rank: from_local's layout check then passes or
// fails on every rank alike.
std::vector<PlacementPtr> learn_ragged_units(const DTensorSpec& spec,
                                             const GatheredLocals& locals) {
  const DeviceMesh& mesh = spec.mesh();
  std::vector<PlacementPtr> out = spec.placements();
  for (int64_t i = 0; i < mesh.ndim(); ++i) {
    const auto* ragged = dynamic_cast<const Ragged*>(out[i].get());
    if (ragged == nullptr) continue;
    std::vector<int64_t> units(mesh.size(i), 0);
    for (int64_t flat = 0; flat < mesh.size(); ++flat) {
      const std::vector<int64_t> coordinate = grid_coordinate(flat, mesh.shape());
      bool counted = true;
      for (int64_t k = 0; k < mesh.ndim(); ++k) {
        const bool splits_rows_further = k > i && splits_tensor_dim(*out[k], 0);
        counted = counted && (k == i || coordinate[k] == 0 || splits_rows_further);
      }
      if (counted) units[coordinate[i]] += rows_of(locals.shapes[flat]);
    }
    // All-empty pieces keep the given units: any split of nothing is the same.
    if (std::accumulate(units.begin(), units.end(), int64_t{0}) > 0) {
      out[i] = Ragged::make(ragged->dims(), units);
    }
  }
  return out;
}

// The first mesh rank whose local shape is not the one `spec` lays out
// there, described, or nullopt when every rank's fits.
std::optional<std::string> misfit(const DTensorSpec& spec, const GatheredLocals& locals) {
  const DeviceMesh& mesh = spec.mesh();
  for (int64_t flat = 0; flat < mesh.size(); ++flat) {
    const LocalLayout layout = spec.layout_at(grid_coordinate(flat, mesh.shape()));
    if (locals.shapes[flat] != layout.local_shape) {
      return absl::StrCat("mesh rank ", flat, " holds a local tensor of shape [",
                          absl::StrJoin(locals.shapes[flat], ", "), "]; expected [",
                          absl::StrJoin(layout.local_shape, ", "), "] for ", spec.to_string());
    }
  }
  return std::nullopt;
}

// Global size of each local dim (no placement merges several dims): the sum
// of local sizes over the ranks at coordinate 0 of every mesh dim that does
// not split it.
std::vector<int64_t> infer_global_shape(const std::vector<PlacementPtr>& placements,
                                        const GatheredLocals& locals, const DeviceMesh& mesh) {
  const std::vector<int64_t>& local_shape =
      locals.shapes[grid_position(mesh.coordinate(), mesh.shape())];
  std::vector<int64_t> shape(local_shape.size(), 0);
  for (int64_t flat = 0; flat < mesh.size(); ++flat) {
    const std::vector<int64_t> coordinate = grid_coordinate(flat, mesh.shape());
    for (size_t d = 0; d < shape.size(); ++d) {
      bool counted = true;
      for (size_t i = 0; i < placements.size(); ++i) {
        const bool splits = splits_tensor_dim(*placements[i], static_cast<int64_t>(d));
        counted = counted && (splits || coordinate[i] == 0);
      }
      if (counted) shape[d] += locals.shapes[flat][d];
    }
  }
  return shape;
}

}  // namespace

DTensor from_local(const at::Tensor& local, const DeviceMesh& mesh,
                   const std::vector<PlacementPtr>& placements, FromLocalOptions options) {
  bool has_ragged = false;
  for (const PlacementPtr& p : placements) {
    DTENSOR_CHECK(p != nullptr, "from_local: expected placements, found null");
    has_ragged = has_ragged || p->merged_leading_dims() > 0;
  }
  const bool gather = options.run_check || !options.shape || has_ragged;
  check_local_input(local, mesh, "from_local", /*check_device=*/!gather);
  std::vector<int64_t> shape;
  std::optional<GatheredLocals> locals;
  if (gather) {
    locals = gather_locals({local, placements, options.shape, options.stride}, mesh);
    for (size_t r = 0; r < locals->dtypes.size(); ++r) {
      DTENSOR_CHECK(locals->dtypes[r] == static_cast<int64_t>(local.scalar_type()),
                    "from_local: expected every rank's local dtype to be the same, found ",
                    static_cast<c10::ScalarType>(locals->dtypes[0]), " on mesh rank 0 and ",
                    static_cast<c10::ScalarType>(locals->dtypes[r]), " on mesh rank ", r);
      DTENSOR_CHECK(locals->shapes[r].size() == static_cast<size_t>(local.dim()),
                    "from_local: expected every rank's local tensor to have ", local.dim(),
                    " dims, found ", locals->shapes[r].size(), " on mesh rank ", r);
    }
  }
  if (options.shape) {
    shape = *options.shape;
  } else {
    const std::vector<PlacementPtr> normalized =
        normalize_placements(placements, local.dim(), mesh.shape());
    DTENSOR_CHECK(merged_leading_dims(normalized) <= 1,
                  "from_local: a Ragged placement merging several dims needs options.shape");
    shape = infer_global_shape(normalized, *locals, mesh);
  }
  auto spec = std::make_shared<const DTensorSpec>(mesh, placements, shape, local.scalar_type());
  if (locals) {
    // Ragged units that the local row counts do not fit are learned from them.
    std::optional<std::string> problem = misfit(*spec, *locals);
    if (problem && has_ragged) {
      spec = std::make_shared<const DTensorSpec>(
          spec->with_placements(learn_ragged_units(*spec, *locals)));
      problem = misfit(*spec, *locals);
    }
    DTENSOR_CHECK(!problem, "from_local: ", *problem);
  }
  DTensorSpecPtr grad_spec;
  if (options.grad_placements) {
    DTENSOR_CHECK(options.grad_placements->size() == placements.size(),
                  "from_local: grad_placements: expected one per mesh dim (", placements.size(),
                  "), found ", options.grad_placements->size());
    grad_spec =
        std::make_shared<const DTensorSpec>(spec->with_placements(*options.grad_placements));
  }
  // The given tensor itself, strides and memory, as PyTorch keeps it: no copy.
  DTensor out(from_local_with_grad(with_values_in_memory(local), spec, grad_spec));
  if (options.stride) {
    const c10::IntArrayRef strides = out.tensor().strides();
    DTENSOR_CHECK(c10::IntArrayRef(*options.stride) == strides,
                  "from_local: stride: expected the DTensor's strides [",
                  absl::StrJoin(strides, ", "),
                  "] (row-major over the dims in the local tensor's memory order), found [",
                  absl::StrJoin(*options.stride, ", "), "]");
  }
  return out;
}

int64_t sum_over_mesh(const DeviceMesh& mesh, int64_t value) {
  DTENSOR_CHECK(mesh.contains_calling_rank(), "sum_over_mesh: expected a rank of ",
                mesh.to_string(), ", found world rank ", mesh.world()->rank(), " outside it");
  const std::shared_ptr<Communicator> comm = whole_mesh_communicator(mesh);
  at::Tensor term = at::full({1}, value, at::TensorOptions(at::kLong).device(mesh.device()));
  comm->all_reduce(term, ReduceOp::kSum);
  CollectiveCounter::record("all_reduce", term);
  return term.item<int64_t>();
}

}  // namespace dtensor
