// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/device_mesh.h>

#include <algorithm>
#include <numeric>
#include <sstream>

#include <dtensor/base/check.h>
#include <dtensor/mesh/communicator.h>
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

int64_t product(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

std::vector<std::string> default_names(size_t ndim) {
  std::vector<std::string> names;
  for (size_t d = 0; d < ndim; ++d) names.push_back("dim" + std::to_string(d));
  return names;
}

void check_names(const std::vector<std::string>& names, size_t ndim) {
  DTENSOR_CHECK(names.size() == ndim, "DeviceMesh: dim_names: expected one name per mesh dim (",
                ndim, "), found ", names.size(), " [", absl::StrJoin(names, ", "), "]");
  absl::flat_hash_set<std::string_view> seen;
  for (const std::string& name : names) {
    DTENSOR_CHECK(!name.empty(), "DeviceMesh: dim_names: expected non-empty names, found \"\"");
    DTENSOR_CHECK(seen.insert(name).second,
                  "DeviceMesh: dim_names: expected distinct names, found \"", name, "\" twice in [",
                  absl::StrJoin(names, ", "), "]");
  }
}

}  // namespace

// Shared by every mesh derived from one root: the world and the communicators
// already created, keyed by the full set of groups so that all ranks, making
// the same calls, agree on whether a creation (a collective) is needed.
class DeviceMesh::Context {
 public:
  explicit Context(std::shared_ptr<Communicator> world) : world_(std::move(world)) {}

  // Newest first, in the same order on every rank: tearing a communicator
  // down can be collective (NCCL), and a hash map's order differs between
  // processes. A split goes before the communicator it was split from.
  ~Context() {
    cache_.clear();
    splits_.clear();
    while (!created_.empty()) created_.pop_back();
  }

  const std::shared_ptr<Communicator>& world() const { return world_; }

  // The state of the mesh the constructor built, kept without its context
  // (which owns this): every derived mesh can rebuild it.
  void set_root(std::shared_ptr<const State> root) { root_ = std::move(root); }
  DeviceMesh root(std::shared_ptr<Context> self) const {
    auto root = std::make_shared<State>(*root_);
    root->context = std::move(self);
    return DeviceMesh(std::move(root));
  }

  // Collective over the world on a cache miss.
  std::shared_ptr<Communicator> communicator_for(Partition partition) {
    std::sort(partition.begin(), partition.end());
    auto it = cache_.find(partition);
    if (it != cache_.end()) return it->second;
    std::shared_ptr<Communicator> comm = create(partition);
    cache_.emplace(std::move(partition), comm);
    created_.push_back(comm);
    return comm;
  }

  // The calling rank's group of `partition` (groups of world ranks, each
  // inside one of `parent`'s groups), split out of `parent`: collective over
  // `parent` on a cache miss. Keyed by `parent`, whose ranks all take part in
  // every split of it, so they agree on whether one is needed.
  std::shared_ptr<Communicator> split_of(const std::shared_ptr<Communicator>& parent,
                                         Partition partition) {
    std::sort(partition.begin(), partition.end());
    SplitKey key{parent.get(), std::move(partition)};
    auto it = splits_.find(key);
    if (it != splits_.end()) return it->second;
    const auto [color, rank_key] = color_and_key(key.second);
    std::shared_ptr<Communicator> comm = parent->split(color, rank_key);
    splits_.emplace(std::move(key), comm);
    created_.push_back(comm);
    return comm;
  }

 private:
  using SplitKey = std::pair<const Communicator*, Partition>;

  std::shared_ptr<Communicator> create(const Partition& partition) {
    std::vector<int64_t> everyone(world_->size());
    std::iota(everyone.begin(), everyone.end(), 0);
    if (partition.size() == 1 && partition[0] == everyone) return world_;
    const auto [color, key] = color_and_key(partition);
    return world_->split(color, key);
  }

  // The split arguments that put the calling rank into its group of
  // `partition`, ordered as listed there: the group's index and the rank's
  // position in it (-1 and 0 when it is in none).
  std::pair<int, int> color_and_key(const Partition& partition) const {
    for (size_t g = 0; g < partition.size(); ++g) {
      auto pos = std::find(partition[g].begin(), partition[g].end(), world_->rank());
      if (pos != partition[g].end()) {
        return {static_cast<int>(g), static_cast<int>(pos - partition[g].begin())};
      }
    }
    return {-1, 0};
  }

  std::shared_ptr<Communicator> world_;
  std::shared_ptr<const State> root_;
  absl::flat_hash_map<Partition, std::shared_ptr<Communicator>> cache_;
  absl::flat_hash_map<SplitKey, std::shared_ptr<Communicator>> splits_;
  std::vector<std::shared_ptr<Communicator>> created_;  // in creation order
};

DeviceMesh::DeviceMesh(std::shared_ptr<Communicator> world, std::vector<int64_t> shape,
                       std::vector<std::string> dim_names, std::vector<int64_t> ranks) {
  auto state = std::make_shared<State>();
  state->shape = std::move(shape);
  state->names = std::move(dim_names);
  const std::vector<int64_t>& sizes = state->shape;
  DTENSOR_CHECK(world != nullptr, "DeviceMesh: world: expected a communicator, found nullptr");
  DTENSOR_CHECK(!sizes.empty(), "DeviceMesh: shape: expected at least one dim, found none");
  for (int64_t extent : sizes) {
    DTENSOR_CHECK(extent >= 1, "DeviceMesh: shape: expected positive sizes, found ",
                  c10::IntArrayRef(sizes));
  }
  if (state->names.empty()) state->names = default_names(sizes.size());
  check_names(state->names, sizes.size());
  if (ranks.empty()) {
    ranks.resize(world->size());
    std::iota(ranks.begin(), ranks.end(), 0);
  }
  DTENSOR_CHECK(static_cast<int64_t>(ranks.size()) == product(sizes), "DeviceMesh: shape ",
                c10::IntArrayRef(sizes), " holds ", product(sizes), " ranks; expected that many ",
                "ranks, found ", ranks.size());
  absl::flat_hash_set<int64_t> seen;
  for (int64_t rank : ranks) {
    DTENSOR_CHECK(rank >= 0 && rank < world->size(),
                  "DeviceMesh: ranks: expected world ranks in [0, ", world->size(), "), found ",
                  rank);
    DTENSOR_CHECK(seen.insert(rank).second, "DeviceMesh: ranks: expected distinct ranks, found ",
                  rank, " twice");
  }
  state->context = std::make_shared<Context>(std::move(world));
  state->family = std::make_shared<const Partition>(Partition{std::move(ranks)});
  locate_calling_rank(*state);
  std::vector<int64_t> all_dims(sizes.size());
  std::iota(all_dims.begin(), all_dims.end(), 0);
  create_dim_communicators(*state, all_dims);
  create_run_communicators(*state);
  set_hash(*state);
  auto root = std::make_shared<State>(*state);
  root->context = nullptr;
  state->context->set_root(std::move(root));
  state_ = std::move(state);
}

DeviceMesh DeviceMesh::root() const { return state_->context->root(state_->context); }

void DeviceMesh::locate_calling_rank(State& state) {
  const int64_t me = state.context->world()->rank();
  state.sibling = -1;
  state.coordinate.clear();
  for (size_t s = 0; s < state.family->size(); ++s) {
    const std::vector<int64_t>& row = (*state.family)[s];
    auto pos = std::find(row.begin(), row.end(), me);
    if (pos == row.end()) continue;
    state.sibling = static_cast<int64_t>(s);
    state.coordinate = grid_coordinate(pos - row.begin(), state.shape);
    return;
  }
}

void DeviceMesh::create_dim_communicators(State& state, const std::vector<int64_t>& dims) {
  state.dim_communicators.resize(state.shape.size());
  for (int64_t dim : dims) {
    state.dim_communicators[dim] =
        state.context->communicator_for(partition(state, {dim}, /*all_siblings=*/true));
  }
}

void DeviceMesh::create_run_communicators(State& state) {
  const auto ndim = static_cast<int64_t>(state.shape.size());
  for (int64_t first = 0; first < ndim; ++first) {
    for (int64_t last = first + 1; last < ndim; ++last) {
      std::vector<int64_t> run(last - first + 1);
      std::iota(run.begin(), run.end(), first);
      state.context->communicator_for(partition(state, run, /*all_siblings=*/true));
    }
  }
}

void DeviceMesh::set_hash(State& state) {
  const std::vector<int64_t>& ranks = (*state.family)[std::max<int64_t>(state.sibling, 0)];
  state.hash = absl::HashOf(state.context->world().get(), state.shape, state.names, ranks);
}

DeviceMesh::Partition DeviceMesh::partition(const State& state, const std::vector<int64_t>& dims,
                                            bool all_siblings) {
  const std::vector<int64_t>& shape = state.shape;
  std::vector<int64_t> others;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) others.push_back(d);
  }
  const std::vector<int64_t> strides = row_major_strides(shape);
  // Offsets into a row of the positions spanned by `along`, in row-major order.
  auto offsets_along = [&](const std::vector<int64_t>& along) {
    std::vector<int64_t> offsets{0};
    for (int64_t d : along) {
      std::vector<int64_t> next;
      for (int64_t base : offsets) {
        for (int64_t i = 0; i < shape[d]; ++i) next.push_back(base + i * strides[d]);
      }
      offsets = std::move(next);
    }
    return offsets;
  };
  const std::vector<int64_t> group_offsets = offsets_along(dims);
  const Partition& family = *state.family;
  Partition groups;
  for (size_t s = 0; s < family.size(); ++s) {
    if (!all_siblings && static_cast<int64_t>(s) != state.sibling) continue;
    for (int64_t base : offsets_along(others)) {
      std::vector<int64_t> group;
      for (int64_t offset : group_offsets) group.push_back(family[s][base + offset]);
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

int64_t DeviceMesh::numel() const { return product(state_->shape); }

int64_t DeviceMesh::size() const { return numel(); }

int64_t DeviceMesh::normalize_dim(int64_t dim) const {
  DTENSOR_CHECK(dim >= -ndim() && dim < ndim(), "DeviceMesh: dim: expected a value in [", -ndim(),
                ", ", ndim(), ") for a ", ndim(), "-D mesh, found ", dim);
  return dim < 0 ? dim + ndim() : dim;
}

int64_t DeviceMesh::size(int64_t dim) const { return state_->shape[normalize_dim(dim)]; }

int64_t DeviceMesh::dim_index(std::string_view name) const {
  const std::vector<std::string>& names = state_->names;
  auto it = std::find(names.begin(), names.end(), name);
  DTENSOR_CHECK(it != names.end(), "DeviceMesh: expected a dim name in [",
                absl::StrJoin(names, ", "), "], found \"", name, "\"");
  return it - names.begin();
}

const std::vector<int64_t>& DeviceMesh::ranks() const {
  return (*state_->family)[std::max<int64_t>(state_->sibling, 0)];
}

int64_t DeviceMesh::rank_at(const std::vector<int64_t>& coordinate) const {
  const std::vector<int64_t>& shape = state_->shape;
  DTENSOR_CHECK(coordinate.size() == shape.size(), "DeviceMesh::rank_at: expected a coordinate of ",
                ndim(), " values, found ", coordinate.size());
  const std::vector<int64_t> strides = row_major_strides(shape);
  int64_t flat = 0;
  for (int64_t d = 0; d < ndim(); ++d) {
    DTENSOR_CHECK(coordinate[d] >= 0 && coordinate[d] < shape[d], "DeviceMesh::rank_at: dim ", d,
                  ": expected a coordinate in [0, ", shape[d], "), found ", coordinate[d]);
    flat += coordinate[d] * strides[d];
  }
  return ranks()[flat];
}

const std::vector<int64_t>& DeviceMesh::coordinate() const {
  DTENSOR_CHECK(contains_calling_rank(), "DeviceMesh: expected the calling rank (world rank ",
                world()->rank(), ") to be in ", to_string(), ", found it outside");
  return state_->coordinate;
}

int64_t DeviceMesh::get_local_rank(int64_t dim) const { return coordinate()[normalize_dim(dim)]; }

int64_t DeviceMesh::get_local_rank(std::string_view dim_name) const {
  return get_local_rank(dim_index(dim_name));
}

std::vector<std::vector<int64_t>> DeviceMesh::groups(int64_t dim) const {
  return partition(*state_, {normalize_dim(dim)}, /*all_siblings=*/false);
}

std::vector<int64_t> DeviceMesh::group_ranks(int64_t dim) const {
  const int64_t me = world()->rank();
  coordinate();  // throws for a rank outside the mesh
  for (std::vector<int64_t>& group : groups(dim)) {
    if (std::find(group.begin(), group.end(), me) != group.end()) return group;
  }
  DTENSOR_CHECK(false, "DeviceMesh: internal: rank ", me, " has no group along dim ", dim);
}

const std::shared_ptr<Communicator>& DeviceMesh::communicator(int64_t dim) const {
  coordinate();  // throws for a rank outside the mesh
  return state_->dim_communicators[normalize_dim(dim)];
}

std::shared_ptr<Communicator> DeviceMesh::group_communicator(
    const std::vector<int64_t>& dims) const {
  coordinate();  // throws for a rank outside the mesh
  DTENSOR_CHECK(!dims.empty(), "DeviceMesh::group_communicator: expected at least one dim, ",
                "found none");
  for (size_t i = 0; i < dims.size(); ++i) {
    DTENSOR_CHECK(dims[i] >= 0 && dims[i] < ndim() && (i == 0 || dims[i] > dims[i - 1]),
                  "DeviceMesh::group_communicator: expected distinct dims of the ", ndim(),
                  "-D mesh in increasing order, found ", c10::IntArrayRef(dims));
  }
  if (dims.size() == 1) return state_->dim_communicators[dims[0]];
  std::vector<int64_t> run(dims.back() - dims.front() + 1);
  std::iota(run.begin(), run.end(), dims.front());
  Context& context = *state_->context;
  std::shared_ptr<Communicator> covering =
      context.communicator_for(partition(*state_, run, /*all_siblings=*/true));
  if (run.size() == dims.size()) return covering;
  return context.split_of(covering, partition(*state_, dims, /*all_siblings=*/false));
}

const std::shared_ptr<Communicator>& DeviceMesh::world() const { return state_->context->world(); }

c10::Device DeviceMesh::device() const { return world()->device(); }

CollectiveCosts DeviceMesh::collective_costs() const { return world()->costs(); }

DeviceMesh DeviceMesh::operator[](std::string_view dim_name) const {
  return (*this)[std::vector<std::string>{std::string(dim_name)}];
}

DeviceMesh DeviceMesh::operator[](std::initializer_list<std::string_view> dim_names) const {
  return (*this)[std::vector<std::string>(dim_names.begin(), dim_names.end())];
}

DeviceMesh DeviceMesh::operator[](const std::vector<std::string>& dim_names) const {
  DTENSOR_CHECK(!dim_names.empty(),
                "DeviceMesh slicing: expected at least one dim name, found none");
  std::vector<int64_t> dims;
  for (const std::string& name : dim_names) {
    const int64_t dim = dim_index(name);
    DTENSOR_CHECK(dims.empty() || dim > dims.back(), "DeviceMesh slicing: expected distinct dim ",
                  "names in mesh order [", absl::StrJoin(state_->names, ", "), "], found [",
                  absl::StrJoin(dim_names, ", "), "]");
    dims.push_back(dim);
  }
  coordinate();  // slicing picks the calling rank's slice
  auto sub = std::make_shared<State>();
  sub->context = state_->context;
  for (int64_t d : dims) {
    sub->shape.push_back(state_->shape[d]);
    sub->names.push_back(state_->names[d]);
    sub->dim_communicators.push_back(state_->dim_communicators[d]);
  }
  sub->family = std::make_shared<const Partition>(partition(*state_, dims, /*all_siblings=*/true));
  locate_calling_rank(*sub);
  set_hash(*sub);
  return DeviceMesh(std::move(sub));
}

DeviceMesh DeviceMesh::flatten(std::string name) const {
  auto flat = std::make_shared<State>();
  flat->context = state_->context;
  flat->family = state_->family;
  flat->shape = {numel()};
  flat->names = {std::move(name)};
  check_names(flat->names, 1);
  locate_calling_rank(*flat);
  create_dim_communicators(*flat, {0});
  set_hash(*flat);
  return DeviceMesh(std::move(flat));
}

DeviceMesh DeviceMesh::unflatten(int64_t dim, const std::vector<int64_t>& sizes,
                                 const std::vector<std::string>& names) const {
  dim = normalize_dim(dim);
  DTENSOR_CHECK(!sizes.empty() && product(sizes) == state_->shape[dim],
                "DeviceMesh::unflatten: sizes ", c10::IntArrayRef(sizes),
                ": expected a product equal to dim ", dim, "'s size ", state_->shape[dim]);
  DTENSOR_CHECK(sizes.size() == names.size(), "DeviceMesh::unflatten: expected one name per size (",
                sizes.size(), "), found ", names.size());
  auto out = std::make_shared<State>();
  out->context = state_->context;
  out->family = state_->family;  // row-major order is unchanged by splitting a dim
  out->shape = state_->shape;
  out->names = state_->names;
  out->shape.erase(out->shape.begin() + dim);
  out->shape.insert(out->shape.begin() + dim, sizes.begin(), sizes.end());
  out->names.erase(out->names.begin() + dim);
  out->names.insert(out->names.begin() + dim, names.begin(), names.end());
  check_names(out->names, out->shape.size());
  locate_calling_rank(*out);
  out->dim_communicators = state_->dim_communicators;
  out->dim_communicators.erase(out->dim_communicators.begin() + dim);
  out->dim_communicators.insert(out->dim_communicators.begin() + dim, sizes.size(), nullptr);
  std::vector<int64_t> new_dims(sizes.size());
  std::iota(new_dims.begin(), new_dims.end(), dim);
  create_dim_communicators(*out, new_dims);
  create_run_communicators(*out);
  set_hash(*out);
  return DeviceMesh(std::move(out));
}

std::string DeviceMesh::to_string() const {
  std::ostringstream out;
  out << "DeviceMesh((";
  for (int64_t d = 0; d < ndim(); ++d) {
    out << (d ? ", " : "") << state_->names[d] << "=" << state_->shape[d];
  }
  out << "), ranks=[" << absl::StrJoin(ranks(), ", ") << "])";
  return out.str();
}

bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
  if (a.state_ == b.state_) return true;  // copies of one mesh
  const DeviceMesh::State& x = *a.state_;
  const DeviceMesh::State& y = *b.state_;
  // The hash covers everything compared below: unequal hashes, unequal meshes.
  if (x.hash != y.hash) return false;
  // Ranks count in each mesh's own world: meshes of other worlds (two
  // sub-communicators, say) are other groups, whatever their ranks say.
  if (a.world() != b.world()) return false;
  if (x.family == y.family && x.sibling == y.sibling && x.shape == y.shape) {
    return x.names == y.names;  // same rank grid: a mesh rebuilt from the same root
  }
  return x.shape == y.shape && x.names == y.names && a.ranks() == b.ranks();
}

std::vector<int64_t> grid_coordinate(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coordinate(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coordinate[d] = flat % shape[d];
    flat /= shape[d];
  }
  return coordinate;
}

void for_each_grid_coordinate(const std::vector<int64_t>& shape,
                              const std::function<void(const std::vector<int64_t>&)>& visit) {
  const int64_t count = product(shape);
  for (int64_t flat = 0; flat < count; ++flat) visit(grid_coordinate(flat, shape));
}

int64_t grid_position(const std::vector<int64_t>& coordinate, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + coordinate[d];
  return flat;
}

DeviceMesh init_device_mesh(std::string_view backend, std::vector<int64_t> shape,
                            std::vector<std::string> dim_names) {
  std::shared_ptr<Communicator> world = make_world_communicator(backend);
  DTENSOR_CHECK(product(shape) == world->size(), "init_device_mesh: shape ",
                c10::IntArrayRef(shape), " holds ", product(shape), " ranks; expected the ",
                backend, " world size ", world->size());
  return DeviceMesh(std::move(world), std::move(shape), std::move(dim_names));
}

}  // namespace dtensor
