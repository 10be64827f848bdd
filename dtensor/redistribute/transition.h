// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/transition.h: one redistribute step, and the registry
// of ways to perform it.
//
// A step changes the placement of one mesh dim, or of several mesh dims that
// change alike, adjacent or not (they then run on one communicator over
// their group, DeviceMesh::group_communicator), from `source` to `target`
// spec, every other mesh dim unchanged. A `Transition`
// says whether it can perform a step, what it costs, and performs it on the
// calling rank's local tensor with one collective (or none). The planner
// (planner.h) picks, for each step, the cheapest registered transition that
// applies; the generic all-to-all-v transition applies to every step between
// non-partial placements that merge the same leading dims, so a new placement
// works before anyone writes a fast path for it.
//
// Transitions are registered by the pair of placement kinds they change
// (`Placement::kind()`: "S", "R", "P", "SS", "RG", a plugin's own), "*"
// matching any kind. Adding one: subclass, then in its own .cc file
//   DTENSOR_REGISTER(my_transition) {
//     dtensor::transitions().add("IS->R", std::make_shared<MyTransition>());
//   }
#pragma once

#include <any>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/base/check.h>
#include <dtensor/base/registry.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/placements/spec.h>

namespace dtensor {

// Everything a transition needs to know about one step on the calling rank.
class StepContext {
 public:
  // `mesh_dims` (in mesh order, not necessarily adjacent) change from source
  // to target placements.
  // The step is seen from the rank at `coordinate` (default: the calling
  // rank); the planner looks from coordinate 0 so that every rank plans alike.
  StepContext(const DTensorSpec& source, const DTensorSpec& target, std::vector<int64_t> mesh_dims,
              std::optional<std::vector<int64_t>> coordinate = std::nullopt);

  const DTensorSpec& source() const { return source_; }
  const DTensorSpec& target() const { return target_; }
  const std::vector<int64_t>& mesh_dims() const { return mesh_dims_; }
  // False for a cross step: the placements also change outside mesh_dims, or
  // not alike on them. Only transitions that read layouts alone serve those.
  bool changes_only_group_dims() const { return changes_only_group_dims_; }
  // The placement the changing mesh dims have before and after.
  const Placement& source_placement() const { return *source_.placements()[mesh_dims_[0]]; }
  const Placement& target_placement() const { return *target_.placements()[mesh_dims_[0]]; }
  // Ranks in the step's group and the calling rank's index among them
  // (row-major over mesh_dims, the order of the group's communicator).
  int64_t group_size() const { return group_size_; }
  int64_t group_rank() const { return group_rank_; }
  // Layouts of group member `member` before and after the step (cached).
  const LocalLayout& source_layout(int64_t member) const;
  const LocalLayout& target_layout(int64_t member) const;
  // This rank's layouts.
  const LocalLayout& my_source_layout() const { return source_layout(group_rank_); }
  const LocalLayout& my_target_layout() const { return target_layout(group_rank_); }
  // Leading dims merged into rows before and after (1: none).
  int64_t source_merged() const { return merged_leading_dims(source_.placements()); }
  int64_t target_merged() const { return merged_leading_dims(target_.placements()); }
  // Elements of one local tensor element, in bytes.
  int64_t element_size() const;
  // The group's communicator (over all of mesh_dims when several change);
  // looked up once per context.
  const std::shared_ptr<Communicator>& communicator() const;

  // What the step's transition derives from the step alone (counts, index
  // lists, shapes), made by `make()` on the first call and kept with the
  // context, so repeated executions of a cached plan do not recompute it.
  // One context serves one transition, hence one type T.
  template <typename T, typename Make>
  const T& derived(Make make) const {
    if (!derived_.has_value()) derived_ = T(make());
    const T* value = std::any_cast<T>(&derived_);
    DTENSOR_CHECK(value != nullptr, "redistribute: internal: a step's derived data was made as ",
                  derived_.type().name(), ", not as ", typeid(T).name());
    return *value;
  }

 private:
  std::vector<int64_t> member_coordinate(int64_t member) const;

  const DTensorSpec& source_;
  const DTensorSpec& target_;
  std::vector<int64_t> mesh_dims_;
  std::vector<int64_t> base_coordinate_;
  bool is_calling_rank_ = true;
  bool changes_only_group_dims_ = true;
  int64_t group_size_ = 1;
  int64_t group_rank_ = 0;
  mutable std::shared_ptr<Communicator> communicator_;
  mutable std::vector<std::unique_ptr<LocalLayout>> source_layouts_;
  mutable std::vector<std::unique_ptr<LocalLayout>> target_layouts_;
  mutable std::any derived_;
};

class Transition {
 public:
  virtual ~Transition() = default;
  // The collective it runs ("all_gather_v", ...) or "local" when none.
  virtual std::string_view collective() const = 0;
  // Lower runs first among transitions that apply to a step.
  virtual int priority() const { return 0; }
  virtual bool applies(const StepContext& step) const = 0;
  // Bytes the calling rank sends (for "local": bytes it copies).
  virtual int64_t bytes(const StepContext& step) const = 0;
  // Group members the calling rank sends to: the planner weighs an
  // all-to-all's bytes higher only when they go to more than one peer.
  virtual int64_t peers(const StepContext& step) const { return step.group_size() - 1; }
  // Whether run() needs nothing but the members' layouts (no assumption that
  // only the group's mesh dims change, or change alike), so it may serve the
  // planner's cross steps, which also change mesh dims outside the group.
  virtual bool reads_layouts_only() const { return false; }
  // Whether it may serve, without communicating, a step that changes a
  // placement other than Replicate on a group of more than one rank. While
  // no registered transition may, the planner's search counts a collective's
  // latency for each such change still to make (an A* bound) and so prices
  // fewer steps; one that may turns the bound off, never the plan's
  // optimality. The default is the safe answer for a transition that does
  // not communicate; override it where applies() rules such steps out.
  virtual bool may_change_non_replicated_locally() const { return !communicates(); }
  // The calling rank's target local tensor (contiguous) from its source
  // one. `local` may have any strides (the shard of a transposed DTensor,
  // say): a transition whose collective needs a contiguous buffer makes one
  // itself, so that callers never copy ahead of steps that need no copy.
  virtual at::Tensor run(const at::Tensor& local, const StepContext& step) const = 0;
  // run() on a `local` the caller gives up: nothing else reads or writes its
  // memory afterwards (no other tensor, view or autograd record holds it),
  // so the result may reuse it: reduce in place, be a view of it, be it.
  // The result must still be laid out as run()'s (contiguous); what it does
  // not keep of `local` it must not hand to anything else. The default is
  // run(); override where reusing the memory saves a copy.
  virtual at::Tensor run_consuming(at::Tensor local, const StepContext& step) const {
    return run(local, step);
  }

  bool communicates() const { return collective() != "local"; }
};

// Transitions by placement pair ("S->R", "P->*", "*->*"); a pair's
// transitions join.
Registry<std::shared_ptr<const Transition>>& transitions();

// Among the transitions registered for the step's pair of placement kinds
// (and the wildcard pairs that match it), the first by priority that applies
// to `step` (and reads layouts only, for a cross step), or nullptr.
std::shared_ptr<const Transition> find_transition(const StepContext& step);

// Whether groups of one rank run their collectives like bigger groups,
// instead of the local copy of transitions/single_rank_group.cc. Set by the
// environment variable DTENSOR_SINGLE_RANK_COLLECTIVES=1 (read once), for
// measuring redistribute's overhead above its collective on one GPU
// (design.md section 6); results are the same either way.
bool single_rank_groups_communicate();

}  // namespace dtensor
