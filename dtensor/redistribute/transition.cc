// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/transition.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include <absl/container/flat_hash_map.h>
#include <dtensor/base/check.h>

namespace dtensor {

StepContext::StepContext(const DTensorSpec& source, const DTensorSpec& target,
                         std::vector<int64_t> mesh_dims,
                         std::optional<std::vector<int64_t>> coordinate)
    : source_(source), target_(target), mesh_dims_(std::move(mesh_dims)) {
  const DeviceMesh& mesh = source_.mesh();
  is_calling_rank_ = !coordinate || *coordinate == mesh.coordinate();
  if (coordinate) {
    base_coordinate_ = std::move(*coordinate);
  } else {
    base_coordinate_ = mesh.coordinate();
  }
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
  // Sized on first use: the planner makes a context per step it prices and
  // most of its transitions only read the calling rank's layouts.
  if (source_layouts_.empty()) source_layouts_.resize(group_size_);
  if (!source_layouts_[member]) {
    source_layouts_[member] =
        std::make_unique<LocalLayout>(source_.layout_at(member_coordinate(member)));
  }
  return *source_layouts_[member];
}

const LocalLayout& StepContext::target_layout(int64_t member) const {
  if (member == group_rank_ && is_calling_rank_) return target_.local_layout();
  if (target_layouts_.empty()) target_layouts_.resize(group_size_);
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
  if (!communicator_) communicator_ = source_.mesh().group_communicator(mesh_dims_);
  return communicator_;
}

namespace {

void check_placement_pair(std::string_view what, std::string_view key) {
  const size_t arrow = key.find("->");
  DTENSOR_CHECK(arrow != std::string_view::npos && arrow > 0 && arrow + 2 < key.size() &&
                    key.find("->", arrow + 2) == std::string_view::npos,
                what, ": expected a placement pair like \"S->R\" or \"*->R\", found \"", key, "\"");
}

using Candidates = std::vector<std::shared_ptr<const Transition>>;

// The transitions registered for a pair of kinds, its wildcards included, in
// priority order (stable: registration order breaks ties).
Candidates candidates_for(const std::string& from, const std::string& to) {
  Candidates out;
  for (const std::string& key : {from + "->" + to, from + "->*", "*->" + to, std::string("*->*")}) {
    if (auto found = transitions().find(key)) out.insert(out.end(), found->begin(), found->end());
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a->priority() < b->priority(); });
  return out;
}

// Per thread (ranks of the local backend plan concurrently), dropped when a
// registry changes.
const Candidates& cached_candidates(const Placement& from, const Placement& to) {
  thread_local uint64_t generation = ~uint64_t{0};
  thread_local absl::flat_hash_map<std::string, Candidates> cache;
  if (generation != registries_generation()) {
    cache.clear();
    generation = registries_generation();
  }
  const std::string from_kind = from.kind(), to_kind = to.kind();
  auto [it, inserted] = cache.try_emplace(from_kind + "->" + to_kind);
  if (inserted) it->second = candidates_for(from_kind, to_kind);
  return it->second;
}

}  // namespace

Registry<std::shared_ptr<const Transition>>& transitions() {
  static auto* registry = new Registry<std::shared_ptr<const Transition>>(
      "transition registry", Registry<std::shared_ptr<const Transition>>::PerKey::kJoinedValues,
      check_placement_pair);
  return *registry;
}

std::shared_ptr<const Transition> find_transition(const StepContext& step) {
  for (const auto& transition :
       cached_candidates(step.source_placement(), step.target_placement())) {
    if (!step.changes_only_group_dims() && !transition->reads_layouts_only()) continue;
    if (transition->applies(step)) return transition;
  }
  return nullptr;
}

}  // namespace dtensor
