// Copyright 2026 The dtensor Authors.
//
// mesh/device_mesh.h: an N-D grid of ranks with one communicator per dim.
//
// A `DeviceMesh` arranges ranks of a world communicator in a row-major grid
// with a name per dim, e.g. 8 ranks as (dp=2, tp=4): rank 5 sits at [1, 1],
// its tp group is {4, 5, 6, 7} and its dp group {1, 5}. Placements are given
// per mesh dim, and every collective along a mesh dim runs on that dim's
// communicator, created once, eagerly, when the mesh is built.
//
//   auto mesh = dtensor::init_device_mesh("local", {2, 4}, {"dp", "tp"});
//   mesh.get_local_rank("tp");          // position in the tp group
//   dtensor::DeviceMesh tp = mesh["tp"];  // 1-D sub-mesh, same communicator
//   dtensor::DeviceMesh dp_tp = mesh.flatten("dp_tp");  // one group of 8
//
// Building a mesh, `flatten` and `unflatten` are collective over the world
// communicator: every world rank, also one outside the mesh, makes the same
// call in the same order. They also create the communicators of every run of
// adjacent dims, so DTensor calls on the mesh (merged redistribute steps
// included) involve the mesh's ranks only. Groups of dims that are not
// adjacent (dims 0 and 2 of a 3-D mesh) get theirs on first use, split from a
// run's communicator by the mesh's ranks alone (`group_communicator`).
// Slicing (`operator[]`) is local and never creates a communicator: the
// sub-mesh is the calling rank's slice and reuses the communicators of the
// dims it keeps; merging dims of a slice that are not adjacent in its root
// (pp and tp of (pp, dp, tp)) creates a communicator on first use,
// collectively over the world. Communicators for a given set of groups are
// created once and shared by every mesh derived from the same root.
//
// A `DeviceMesh` is a handle to one immutable state, shared by its copies:
// copying one is a reference-count increment, and two copies compare equal
// by a pointer compare. Meshes built separately compare (and hash) by what
// they are: the same world, ranks, layout and names. Moving one copies it,
// so that no mesh is ever left without its state.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

#include <dtensor/mesh/collective_costs.h>

namespace dtensor {

// The backends (<dtensor/mesh/communicator.h>): only the layers that move
// data see them.
class Communicator;

class DeviceMesh {
 public:
  // Lays `ranks` (default: 0..world->size()-1) out row-major in `shape`, with
  // `dim_names` (default: "dim0", "dim1", ...). Collective over `world`.
  DeviceMesh(std::shared_ptr<Communicator> world, std::vector<int64_t> shape,
             std::vector<std::string> dim_names = {}, std::vector<int64_t> ranks = {});
  // Declared so that no move is: a moved-from handle would hold no state.
  DeviceMesh(const DeviceMesh&) = default;
  DeviceMesh& operator=(const DeviceMesh&) = default;

  int64_t ndim() const { return static_cast<int64_t>(state_->shape.size()); }
  // Number of ranks in the mesh.
  int64_t size() const;
  // Number of ranks along `dim` (negative dims count from the end).
  int64_t size(int64_t dim) const;
  const std::vector<int64_t>& shape() const { return state_->shape; }
  const std::vector<std::string>& dim_names() const { return state_->names; }
  // The index of the dim called `name`; throws naming the known names.
  int64_t dim_index(std::string_view name) const;

  // The mesh's ranks (world ranks) in row-major order.
  const std::vector<int64_t>& ranks() const;
  // The world rank at `coordinate`.
  int64_t rank_at(const std::vector<int64_t>& coordinate) const;

  // Whether the calling rank is in this mesh.
  bool contains_calling_rank() const { return state_->sibling >= 0; }
  // The calling rank's coordinate; throws if it is not in the mesh.
  const std::vector<int64_t>& coordinate() const;
  // The calling rank's position along `dim`, i.e. its rank in that dim's group.
  int64_t get_local_rank(int64_t dim) const;
  int64_t get_local_rank(std::string_view dim_name) const;

  // Every group of world ranks along `dim` in this mesh, e.g. for (dp=2, tp=4)
  // and dim tp: {{0,1,2,3}, {4,5,6,7}}.
  std::vector<std::vector<int64_t>> groups(int64_t dim) const;
  // The calling rank's group along `dim`.
  std::vector<int64_t> group_ranks(int64_t dim) const;
  // The communicator of the calling rank's group along `dim`.
  const std::shared_ptr<Communicator>& communicator(int64_t dim) const;
  // The communicator of the calling rank's group spanning `dims` (distinct,
  // in mesh order), its members in row-major order over them: the group a
  // redistribute step changing those dims alike runs its one collective on.
  //  * One dim: that dim's communicator.
  //  * A run of adjacent dims: the one created with the mesh (for a slice
  //    whose dims are not adjacent in its root: created on first use,
  //    collectively over the world, as `flatten` does).
  //  * Any other set, such as dims {0, 2} of a 3-D mesh: created on first
  //    use by splitting the communicator of the run from the first to the
  //    last of `dims`, so collectively over that run's group only, whose
  //    ranks are this mesh's and make the same DTensor calls; never over the
  //    world, whose other ranks need not take part. Lazily rather than with
  //    the mesh, as runs are: an N-D mesh has 2^N - N - 1 such sets, each a
  //    costly communicator on NCCL, and few are ever used. Cached per run
  //    communicator, which every split of it involves entirely, so its
  //    ranks always agree on whether one is needed.
  std::shared_ptr<Communicator> group_communicator(const std::vector<int64_t>& dims) const;
  // The world communicator the mesh was built on.
  const std::shared_ptr<Communicator>& world() const;
  // Where tensors of this mesh live (the backend's device).
  c10::Device device() const;
  // What its backend's collectives cost, for the cost model (rules/cost.h).
  CollectiveCosts collective_costs() const;

  // The calling rank's sub-mesh over the named dims, which must be distinct
  // and in mesh order. Local: no communicator is created.
  DeviceMesh operator[](std::string_view dim_name) const;
  DeviceMesh operator[](const std::vector<std::string>& dim_names) const;
  // `mesh[{"dp", "tp"}]`. Without it, C++20 reads the two literals as
  // string_view's (first, last) constructor too, and the call is ambiguous.
  DeviceMesh operator[](std::initializer_list<std::string_view> dim_names) const;

  // A 1-D mesh called `name` over all ranks of this mesh, with one
  // communicator for the whole group (created on first use, then cached).
  DeviceMesh flatten(std::string name) const;
  // Splits `dim` into dims of `sizes` (product == size(dim)) named `names`.
  DeviceMesh unflatten(int64_t dim, const std::vector<int64_t>& sizes,
                       const std::vector<std::string>& names) const;

  // The mesh built by the constructor that this one was sliced, flattened or
  // unflattened from (itself for that mesh). Slices of one root compose:
  // `mesh["dp"].root()[{"dp", "tp"}]` is the 2-D mesh around the calling
  // rank. Local.
  DeviceMesh root() const;

  // "DeviceMesh((dp=2, tp=4), ranks=[0, 1, 2, 3, 4, 5, 6, 7])".
  std::string to_string() const;

  // Same world communicator, ranks, layout and names (copies of one mesh:
  // a pointer compare).
  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b);
  friend bool operator!=(const DeviceMesh& a, const DeviceMesh& b) { return !(a == b); }
  // Of the world communicator, ranks, layout and names: computed once, when
  // the mesh is made.
  template <typename H>
  friend H AbslHashValue(H h, const DeviceMesh& mesh) {
    return H::combine(std::move(h), mesh.state_->hash);
  }

 private:
  class Context;
  using Partition = std::vector<std::vector<int64_t>>;

  // What a mesh is, made once by the constructor, a slicing, `flatten`,
  // `unflatten` or `root` and never changed: every copy of the mesh shares it.
  struct State {
    std::shared_ptr<Context> context;
    // Row-major rank grids of this mesh and of its siblings (the meshes other
    // ranks got from the same slicing), one row each; collective creation
    // needs every sibling's groups, slicing picks the calling rank's row.
    std::shared_ptr<const Partition> family;
    int64_t sibling = -1;
    std::vector<int64_t> shape;
    std::vector<std::string> names;
    std::vector<int64_t> coordinate;
    std::vector<std::shared_ptr<Communicator>> dim_communicators;
    // Of world, ranks, shape and names (AbslHashValue).
    size_t hash = 0;
  };

  explicit DeviceMesh(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  int64_t normalize_dim(int64_t dim) const;
  int64_t numel() const;
  // Groups of world ranks spanned by `dims` (in order) over every sibling of
  // `state`, or over its own row only.
  static Partition partition(const State& state, const std::vector<int64_t>& dims,
                             bool all_siblings);
  static void locate_calling_rank(State& state);
  static void create_dim_communicators(State& state, const std::vector<int64_t>& dims);
  // The groups of every run of two or more adjacent dims (the whole mesh
  // among them), which redistribute's merged steps, distribute_tensor and
  // from_local flatten into: created with the mesh, so that using them later
  // needs only the mesh's ranks.
  static void create_run_communicators(State& state);
  // Sets `state.hash`, the rest of `state` made.
  static void set_hash(State& state);

  std::shared_ptr<const State> state_;
};

// The coordinate of row-major position `flat` in a grid of `shape` (a mesh,
// or any box of mesh coordinates), and the position of `coordinate`.
// DeviceMesh lays its ranks out this way.
std::vector<int64_t> grid_coordinate(int64_t flat, const std::vector<int64_t>& shape);
int64_t grid_position(const std::vector<int64_t>& coordinate, const std::vector<int64_t>& shape);
// Calls `visit(coordinate)` for every coordinate of a grid of `shape`, in
// row-major order.
void for_each_grid_coordinate(const std::vector<int64_t>& shape,
                              const std::function<void(const std::vector<int64_t>&)>& visit);

// Builds a mesh of `shape` over the whole world of `backend` ("local" inside
// run_ranks, "mpi", "nccl"); the product of `shape` must be the world size.
DeviceMesh init_device_mesh(std::string_view backend, std::vector<int64_t> shape,
                            std::vector<std::string> dim_names = {});

}  // namespace dtensor
