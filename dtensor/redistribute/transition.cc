// Copyright 2026 The dtensor Authors.
#include "dtensor/redistribute/transition.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "dtensor/base/check.h"

namespace dtensor {

StepContext::StepContext(const DTensorSpec& source, const DTensorSpec& target,
                         std::vector<int64_t> mesh_dims,
                         std::optional<std::vector<int64_t>> coordinate)
    : source_(source), target_(target), mesh_dims_(std::move(mesh_dims)) {
  const DeviceMesh& mesh = source_.mesh();
  is_calling_rank_ = !coordinate || *coordinate == mesh.coordinate();
  base_coordinate_ = coordinate ? *coordinate : mesh.coordinate();
  for (int64_t dim : mesh_dims_) {
    group_rank_ = group_rank_ * mesh.size(dim) + base_coordinate_[dim];
    group_size_ *= mesh.size(dim);
  }
  const std::vector<PlacementPtr>& before = source_.placements();
  const std::vector<PlacementPtr>& after = target_.placements();
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    const bool in_group = std::find(mesh_dims_.begin(), mesh_dims_.end(), m) != mesh_dims_.end();
    const bool as_expected =
        in_group ? *before[m] == source_placement() && *after[m] == target_placement()
                 : *before[m] == *after[m];
    changes_only_group_dims_ = changes_only_group_dims_ && as_expected;
  }
  source_layouts_.resize(group_size_);
  target_layouts_.resize(group_size_);
}

int64_t StepContext::local_split_dim(const Placement& placement, int64_t merged) {
  if (placement.merged_leading_dims() > 0) return 0;
  const std::optional<int64_t> dim = placement.split_dim();
  if (!dim) return -1;
  return *dim < merged ? 0 : *dim - merged + 1;
}

std::vector<int64_t> StepContext::member_coordinate(int64_t member) const {
  std::vector<int64_t> coordinate = base_coordinate_;
  for (auto it = mesh_dims_.rbegin(); it != mesh_dims_.rend(); ++it) {
    const int64_t extent = source_.mesh().size(*it);
    coordinate[*it] = member % extent;
    member /= extent;
  }
  return coordinate;
}

const LocalLayout& StepContext::source_layout(int64_t member) const {
  if (member == group_rank_ && is_calling_rank_) return source_.local_layout();
  if (!source_layouts_[member]) {
    source_layouts_[member] =
        std::make_unique<LocalLayout>(source_.layout_at(member_coordinate(member)));
  }
  return *source_layouts_[member];
}

const LocalLayout& StepContext::target_layout(int64_t member) const {
  if (member == group_rank_ && is_calling_rank_) return target_.local_layout();
  if (!target_layouts_[member]) {
    target_layouts_[member] =
        std::make_unique<LocalLayout>(target_.layout_at(member_coordinate(member)));
  }
  return *target_layouts_[member];
}

bool single_rank_groups_communicate() {
  static const bool communicate = [] {
    const char* value = std::getenv("DTENSOR_SINGLE_RANK_COLLECTIVES");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return communicate;
}

int64_t StepContext::element_size() const { return c10::elementSize(source_.dtype()); }

const std::shared_ptr<Communicator>& StepContext::communicator() const {
  if (communicator_) return communicator_;
  const DeviceMesh& mesh = source_.mesh();
  if (mesh_dims_.size() == 1) {
    communicator_ = mesh.communicator(mesh_dims_[0]);
  } else {
    std::vector<std::string> names;
    for (int64_t dim : mesh_dims_) names.push_back(mesh.dim_names()[dim]);
    communicator_ = mesh[names].flatten("redistribute_group").communicator(0);
  }
  return communicator_;
}

namespace {

struct TransitionRegistry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Transition>> transitions;
};

TransitionRegistry& transition_registry() {
  static TransitionRegistry* registry = new TransitionRegistry();
  return *registry;
}

}  // namespace

const std::vector<std::unique_ptr<Transition>>& registered_transitions() {
  return transition_registry().transitions;
}

bool register_transition(std::unique_ptr<Transition> transition) {
  TransitionRegistry& registry = transition_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto position = std::upper_bound(
      registry.transitions.begin(), registry.transitions.end(), transition->priority(),
      [](int priority, const std::unique_ptr<Transition>& t) { return priority < t->priority(); });
  registry.transitions.insert(position, std::move(transition));
  return true;
}

const Transition* find_transition(const StepContext& step) {
  for (const std::unique_ptr<Transition>& transition : registered_transitions()) {
    if (!step.changes_only_group_dims() && !transition->reads_layouts_only()) continue;
    if (transition->applies(step)) return transition.get();
  }
  return nullptr;
}

}  // namespace dtensor
