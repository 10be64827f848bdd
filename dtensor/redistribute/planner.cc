// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/planner.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <functional>
#include <iomanip>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <sstream>
#include <utility>

#include <dtensor/base/check.h>
#include <dtensor/base/lru_cache.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/redistribute/cross_step.h>
#include <dtensor/redistribute/trace_sink.h>
#include <dtensor/rules/cost.h>
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

using redistribute_internal::exact_group_exchange;
using redistribute_internal::GroupExchange;
using redistribute_internal::groups_hold_their_targets;
using redistribute_internal::RankLayouts;
using Placements = std::vector<PlacementPtr>;

bool contains(const std::vector<int64_t>& values, int64_t value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// A step on mesh dims `dims` only exchanges data inside its group when no
// mesh dim to the right of the first of them, outside the group, splits a
// tensor dim that the change touches. Then the members' pieces of every
// touched dim are nested the way those of adjacent dims are (the dims
// between them split other tensor dims, or none), so a group of dims that
// are not adjacent gathers, scatters and exchanges in row-major group order
// exactly as a run does: [S(0),S(1),S(0)] -> [R,S(1),R] gathers dim 0 over
// mesh dims {0, 2} at once, [S(0),S(0),S(0)] -> [R,S(0),R] is refused.
// Asked for every step priced, so it reads split_tensor_dims' answers off
// the placements rather than making the lists.
bool is_group_local(const Placements& state, const std::vector<int64_t>& dims,
                    const Placement& from, const Placement& to) {
  // Whether tensor dim `d` is among split_tensor_dims(p).
  const auto splits = [](const Placement& p, int64_t d) {
    return p.split_dim() == d || (d >= 0 && d < p.merged_leading_dims());
  };
  const auto touched = [&](int64_t d) { return splits(from, d) || splits(to, d); };
  for (int64_t m = dims.front() + 1; m < static_cast<int64_t>(state.size()); ++m) {
    if (contains(dims, m)) continue;
    const Placement& other = *state[m];
    const std::optional<int64_t> split = other.split_dim();
    if (split && touched(*split)) return false;
    for (int64_t d = 0; d < other.merged_leading_dims(); ++d) {
      if (touched(d)) return false;
    }
  }
  return true;
}

// Whether `dims` are adjacent mesh dims.
bool is_run(const std::vector<int64_t>& dims) {
  return dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
}

// The mesh dims [first, last].
std::vector<int64_t> run_of(int64_t first, int64_t last) {
  std::vector<int64_t> dims(last - first + 1);
  std::iota(dims.begin(), dims.end(), first);
  return dims;
}

// The groups of mesh dims a step may change alike from `state`: each mesh
// dim `first` with any of the later mesh dims that hold the same placement,
// adjacent or not ([P,R,P] -> [R,R,R] is one all-reduce over mesh dims
// {0, 2}). Meshes have a handful of dims, so listing every subset is cheap.
std::vector<std::vector<int64_t>> step_groups(const Placements& state) {
  std::vector<std::vector<int64_t>> groups;
  const auto ndim = static_cast<int64_t>(state.size());
  for (int64_t first = 0; first < ndim; ++first) {
    std::vector<int64_t> alike;
    for (int64_t m = first + 1; m < ndim; ++m) {
      if (*state[m] == *state[first]) alike.push_back(m);
    }
    for (uint64_t subset = 0; subset < (uint64_t{1} << alike.size()); ++subset) {
      std::vector<int64_t> dims;
      dims.reserve(alike.size() + 1);
      dims.push_back(first);
      for (size_t i = 0; i < alike.size(); ++i) {
        if (subset >> i & 1) dims.push_back(alike[i]);
      }
      groups.push_back(std::move(dims));
    }
  }
  return groups;
}

// The one tensor dim a change from `from` to `to` touches, if it is one.
std::optional<int64_t> single_touched_dim(const Placement& from, const Placement& to) {
  std::vector<int64_t> touched = split_tensor_dims(from);
  for (int64_t d : split_tensor_dims(to)) {
    if (std::find(touched.begin(), touched.end(), d) == touched.end()) touched.push_back(d);
  }
  if (touched.size() != 1 || from.merged_leading_dims() > 1 || to.merged_leading_dims() > 1) {
    return std::nullopt;
  }
  return touched.front();
}

// Several Partial mesh dims reduce left to right (design.md section 2): a
// step may reduce mesh dim `m`'s Partial only when every Partial to its left
// reduces by the same op (the same op commutes with itself; sum and max do
// not: max over j of the sums over i is not the sum over i of the maxima).
bool reduces_in_order(const Placements& state, int64_t m) {
  const std::optional<ReduceOp> op = state[m]->partial_op();
  if (!op) return true;
  for (int64_t left = 0; left < m; ++left) {
    const std::optional<ReduceOp> earlier = state[left]->partial_op();
    if (earlier && *earlier != *op) return false;
  }
  return true;
}

// A group of one rank exchanges nothing, whatever the other mesh dims split.
bool single_rank_group(const DeviceMesh& mesh, const std::vector<int64_t>& dims) {
  if (single_rank_groups_communicate()) return false;
  for (int64_t m : dims) {
    if (mesh.size(m) != 1) return false;
  }
  return true;
}

// The cost model's price of one step (rules/cost.h).
double transition_cost(const Transition& transition, const StepContext& context, int64_t bytes,
                       const CollectiveCosts& costs) {
  const StepKind kind = !transition.communicates()                  ? StepKind::kLocalCopy
                        : transition.collective() == "all_to_all_v" ? StepKind::kAllToAll
                                                                    : StepKind::kCollective;
  return step_cost(kind, bytes, transition.peers(context), costs);
}

// A floor under every ordinary step's price: the cheaper kind of step
// moving no bytes. Bytes (never negative: cost_of checks) only add to a
// price when the cost model's rate is positive and its all-to-all factor is
// not negative; otherwise, or for a model whose prices are not numbers,
// there is no floor. The float operations are monotone, so the floor is
// exact.
double cheapest_step_cost(const CollectiveCosts& costs) {
  constexpr double kNoFloor = -std::numeric_limits<double>::infinity();
  if (!(costs.bytes_per_us > 0) || !(costs.all_to_all_factor >= 0)) return kNoFloor;
  const double local = step_cost(StepKind::kLocalCopy, 0, 0, costs);
  const double collective = step_cost(StepKind::kCollective, 0, 0, costs);
  if (std::isnan(local) || std::isnan(collective)) return kNoFloor;
  return std::min(local, collective);
}

// Whether every registered transition that may change a placement other
// than Replicate on a group of more than one rank communicates. Kept per
// thread until the transitions change.
bool non_replicated_changes_communicate() {
  thread_local uint64_t generation = ~uint64_t{0};
  thread_local bool communicate = false;
  if (generation != transitions().generation()) {
    generation = transitions().generation();
    communicate = true;
    for (const std::string& key : transitions().keys()) {
      const auto registered = transitions().find(key);
      if (registered == nullptr) continue;  // removed since keys()
      for (const std::shared_ptr<const Transition>& transition : *registered) {
        communicate = communicate && !transition->may_change_non_replicated_locally();
      }
    }
  }
  return communicate;
}

// A floor under the price of every step that communicates: a collective
// moving no bytes (the all-to-all factor only scales bytes). Only where no
// step costs less than nothing (cheapest_step_cost >= 0: bounded_dims_
// leave the other steps out of the bound, which counts them as free) and
// while changes of placements that do not replicate, on groups of more than
// one rank, always communicate. 0 (no floor) otherwise.
double collective_step_floor(const CollectiveCosts& costs) {
  if (!(cheapest_step_cost(costs) >= 0) || !non_replicated_changes_communicate()) return 0;
  const double latency = step_cost(StepKind::kCollective, 0, 0, costs);
  return std::isfinite(latency) ? latency : 0;
}

// What a search state holds at one mesh dim. Every state the search reaches
// holds, at each mesh dim, Replicate, the source's placement or the
// target's (candidates() offers nothing else), so a state is a number: one
// base-3 digit per mesh dim.
enum Holding : int64_t { kReplicate = 0, kSource = 1, kTarget = 2 };

// A placement a group of mesh dims may move to (owned by the source's or
// the target's placements, or Replicate's shared instance), and which one
// it is.
struct Candidate {
  const Placement* placement;
  Holding holding;
};

// Placements a group of mesh dims may move to: the source's, the target's,
// or Replicate. A Partial is only entered where the target has it. Inline
// and unowned: asked for every group of every state expanded.
absl::InlinedVector<Candidate, 3> candidates(const Placements& source, const Placements& target,
                                             const std::vector<int64_t>& dims) {
  static const Placement* const replicate = Replicate::make().get();
  absl::InlinedVector<Candidate, 3> out;
  out.push_back({replicate, kReplicate});
  auto uniform = [&](const Placements& list) {
    for (int64_t m : dims) {
      if (*list[m] != *list[dims.front()]) return false;
    }
    return true;
  };
  if (uniform(target)) out.push_back({target[dims.front()].get(), kTarget});
  if (uniform(source) && !source[dims.front()]->is_partial()) {
    out.push_back({source[dims.front()].get(), kSource});
  }
  return out;
}

class Planner {
 public:
  Planner(const DTensorSpec& source, const DTensorSpec& target)
      : source_(source),
        target_(target),
        costs_(source.mesh().collective_costs()),
        cheapest_step_(cheapest_step_cost(costs_)),
        collective_floor_(collective_step_floor(costs_)),
        origin_(source.mesh().ndim(), 0) {
    const Placements& from = source_.placements();
    const Placements& to = target_.placements();
    const PlacementPtr replicate = Replicate::make();
    for (size_t m = 0; m < from.size(); ++m) {
      // The digit each of the three placements is spelled with at mesh dim
      // m: equal placements share the lowest.
      const int64_t source_digit = *from[m] == *replicate ? kReplicate : kSource;
      const int64_t target_digit = *to[m] == *replicate ? kReplicate
                                   : *to[m] == *from[m] ? source_digit
                                                        : kTarget;
      digits_.push_back({kReplicate, source_digit, target_digit});
      weights_.push_back(m == 0 ? 1 : weights_.back() * 3);
      // is_replicate(), not equality with Replicate: a plugin's placement
      // that says it replicates may be sliced locally.
      if (!from[m]->is_replicate() && *to[m] != *from[m] &&
          source.mesh().size(static_cast<int64_t>(m)) > 1) {
        bounded_dims_.push_back(static_cast<int64_t>(m));
      }
    }
  }

  RedistributePlan plan() {
    // A* (Dijkstra when there is no bound): the frontier is ordered by the
    // cost so far plus bound_to_goal, which never overestimates what is left
    // and drops by at most a step's cost along every step but the cross
    // steps (which only leave the source, taken first), so the first goal
    // taken off the frontier is reached by a cheapest plan.
    struct Entry {
      double estimate;  // cost + bound_to_goal
      double cost;
      int64_t steps;
      int64_t state;
      bool operator>(const Entry& other) const {
        return estimate != other.estimate ? estimate > other.estimate : steps > other.steps;
      }
    };
    const int64_t goal = code_of(kTarget);
    start_ = state_index(code_of(kSource), std::make_shared<const DTensorSpec>(source_));
    states_[start_].cost = 0;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> frontier;
    frontier.push({0, 0, 0, start_});
    while (!frontier.empty()) {
      const Entry entry = frontier.top();
      frontier.pop();
      if (states_[entry.state].code == goal) return reconstruct(entry.state);
      if (entry.cost > *states_[entry.state].cost) continue;
      ++expanded_;
      for (auto& [next, step] : expand(entry.state)) {
        const double cost = entry.cost + step.cost;
        State& reached = states_[next];
        if (reached.cost && !(cost < *reached.cost)) continue;
        reached.cost = cost;
        reached.previous = entry.state;
        reached.step = std::move(step);
        frontier.push({cost + bound_to_goal(reached.code), cost, entry.steps + 1, next});
      }
    }
    DTENSOR_CHECK(false, "redistribute: expected a way from ", source_.to_string(), " to ",
                  placements_to_string(target_.placements()), ", found none");
  }

 private:
  // One state of the search, made when a step first reaches it.
  struct State {
    int64_t code = 0;
    DTensorSpecPtr spec;                   // null when the placements are not a valid layout
    std::unique_ptr<RankLayouts> layouts;  // see layouts()
    std::optional<double> cost;            // of the cheapest way found so far
    int64_t previous = -1;                 // the state the cheapest step so far came from
    PlannedStep step;                      // that step
  };

  // The code of the state holding `holding` at every mesh dim.
  int64_t code_of(Holding holding) const {
    int64_t code = 0;
    for (size_t m = 0; m < digits_.size(); ++m) code += digits_[m][holding] * weights_[m];
    return code;
  }

  // `code` with mesh dims `dims` holding `holding`.
  int64_t code_with(int64_t code, const std::vector<int64_t>& dims, Holding holding) const {
    for (int64_t m : dims) {
      code += (digits_[m][holding] - code / weights_[m] % 3) * weights_[m];
    }
    return code;
  }

  // The index of the state of `code`, made (with `spec`, or the spec its
  // code spells) on first use.
  int64_t state_index(int64_t code, DTensorSpecPtr spec = nullptr) {
    auto [it, inserted] = index_of_.try_emplace(code, static_cast<int64_t>(states_.size()));
    if (!inserted) return it->second;
    State& state = states_.emplace_back();
    state.code = code;
    state.spec = spec ? std::move(spec) : spec_of(code);
    return it->second;
  }

  // The spec whose placements `code` spells, or nullptr when that is not a
  // valid layout (e.g. it splits a dim merged into rows).
  DTensorSpecPtr spec_of(int64_t code) const {
    Placements placements;
    placements.reserve(digits_.size());
    for (size_t m = 0; m < digits_.size(); ++m) {
      const int64_t digit = code / weights_[m] % 3;
      placements.push_back(digit == kReplicate ? Replicate::make()
                           : digit == kSource  ? source_.placements()[m]
                                               : target_.placements()[m]);
    }
    try {
      return std::make_shared<const DTensorSpec>(source_.with_placements(std::move(placements)));
    } catch (const Error&) {
      return nullptr;
    }
  }

  // Whether no step from state `index` can make the state of `code`
  // cheaper than it already is: then the step is skipped unpriced, which
  // leaves the search exactly as pricing it would (a step only counts when
  // it lowers the cost, and cost_of's checks only ever drop steps).
  bool cannot_improve(int64_t index, int64_t code) const {
    const auto it = index_of_.find(code);
    if (it == index_of_.end()) return false;
    const std::optional<double>& reached = states_[it->second].cost;
    return reached && !(*states_[index].cost + cheapest_step_ < *reached);
  }

  // A lower bound on the cost from the state of `code` to the goal: a
  // collective's latency for each distinct placement the state still holds
  // from the source on bounded_dims_. Changing such a mesh dim communicates
  // (collective_floor_'s condition), and one step changes mesh dims of one
  // placement only (a cross step changes several, but only from the source,
  // whose bound is never asked), so each step lowers the count by at most
  // one: the bound is consistent, as A* needs. 0 where collective_floor_ is.
  double bound_to_goal(int64_t code) const {
    if (collective_floor_ == 0) return 0;
    absl::InlinedVector<const Placement*, 4> to_change;
    for (int64_t m : bounded_dims_) {
      if (code / weights_[m] % 3 != kSource) continue;
      const Placement& held = *source_.placements()[m];
      if (std::none_of(to_change.begin(), to_change.end(),
                       [&](const Placement* p) { return *p == held; })) {
        to_change.push_back(&held);
      }
    }
    return static_cast<double>(to_change.size()) * collective_floor_;
  }

  // Every rank's layout of `state`, made when a check first needs one.
  const RankLayouts& layouts(State& state) {
    if (!state.layouts) state.layouts = std::make_unique<RankLayouts>(state.spec);
    return *state.layouts;
  }

  // The steps out of state `index`, each with the index of the state it
  // reaches.
  std::vector<std::pair<int64_t, PlannedStep>> expand(int64_t index) {
    const DTensorSpecPtr from = states_[index].spec;
    const int64_t code = states_[index].code;
    const Placements& state = from->placements();
    const std::vector<std::vector<int64_t>> groups = step_groups(state);
    std::vector<std::pair<int64_t, PlannedStep>> steps;
    steps.reserve(groups.size());
    for (const std::vector<int64_t>& dims : groups) {
      // Every Partial left of the last dim must reduce alike: that covers
      // the dims between non-adjacent ones too.
      if (!reduces_in_order(state, dims.back())) continue;
      const Placement& current = *state[dims.front()];
      for (const Candidate& to : candidates(source_.placements(), target_.placements(), dims)) {
        if (*to.placement == current) continue;
        if (to.placement->is_partial() && !current.is_replicate()) continue;
        const int64_t next_code = code_with(code, dims, to.holding);
        if (cannot_improve(index, next_code)) continue;
        const bool local = single_rank_group(from->mesh(), dims) ||
                           is_group_local(state, dims, current, *to.placement);
        std::optional<int64_t> touched;
        if (!local) {
          touched = single_touched_dim(current, *to.placement);
          // The exact check below knows runs of mesh dims only.
          if (!touched || !is_run(dims)) continue;
        }
        const int64_t next = state_index(next_code);
        const DTensorSpecPtr after = states_[next].spec;
        if (!after) continue;
        const auto cost_of = [&](const StepContext& context,
                                 const Transition& transition) -> std::optional<Costed> {
          // Passed no structural group-locality rule: check exactly that
          // the groups hold what they need of the one touched tensor dim.
          if (!local && !groups_hold_their_targets(layouts(states_[index]), layouts(states_[next]),
                                                   dims.front(), dims.back(), *touched)) {
            return std::nullopt;
          }
          const int64_t bytes = transition.bytes(context);
          DTENSOR_CHECK(bytes >= 0, "redistribute: the ", transition.collective(),
                        " transition's bytes() for ", context.source_placement().to_string(),
                        " -> ", context.target_placement().to_string(),
                        ": expected bytes >= 0, found ", bytes);
          return Costed{bytes, transition_cost(transition, context, bytes, costs_)};
        };
        if (std::optional<PlannedStep> step = make_step(from, after, dims, cost_of)) {
          steps.emplace_back(next, std::move(*step));
        }
      }
    }
    if (index == start_) add_cross_steps(steps);
    return steps;
  }

  // Steps straight from the source to the target over one group of
  // adjacent mesh dims, other mesh dims changing too (cross_step.h). They let
  // a change of two mesh dims that moves data inside one of them be one
  // exchange, instead of a gather and a slice that together move and copy
  // more. From the source only: each candidate looks at every rank.
  void add_cross_steps(std::vector<std::pair<int64_t, PlannedStep>>& steps) {
    const DTensorSpecPtr from = states_[start_].spec;
    const Placements& state = from->placements();
    const Placements& goal = target_.placements();
    const auto ndim = static_cast<int64_t>(state.size());
    const int64_t goal_code = code_of(kTarget);
    for (int64_t first = 0; first < ndim; ++first) {
      for (int64_t last = first; last < ndim; ++last) {
        // A group of one rank is the single-rank copy's, with no collective.
        const std::vector<int64_t> dims = run_of(first, last);
        if (is_ordinary_step(state, goal, first, last) || single_rank_group(from->mesh(), dims)) {
          continue;
        }
        const int64_t next = state_index(goal_code);
        const auto cost_of = [&](const StepContext&, const Transition&) -> std::optional<Costed> {
          const std::optional<GroupExchange> exchange =
              exact_group_exchange(layouts(states_[start_]), layouts(states_[next]), first, last);
          if (!exchange) return std::nullopt;
          return Costed{exchange->rank0_sent_bytes, cross_step_cost(*exchange, costs_)};
        };
        if (std::optional<PlannedStep> step = make_step(from, states_[next].spec, dims, cost_of)) {
          steps.emplace_back(next, std::move(*step));
        }
      }
    }
  }

  // Seen from the busiest rank, sending or receiving: coordinate 0 is often
  // the one that keeps its piece ([R,S(0)] -> [S(0),R] on the diagonal) and
  // would make the step look free.
  static double cross_step_cost(const GroupExchange& exchange, const CollectiveCosts& costs) {
    // The exchange, plus the copy of the rank's own piece (without the local
    // step's fixed cost, which the exchange's latency covers).
    return step_cost(StepKind::kAllToAll, exchange.max_bytes, exchange.max_peers, costs) +
           step_cost(StepKind::kLocalCopy, exchange.max_own_bytes, 0, costs) - costs.local_step_us;
  }

  // Whether going from `state` to `goal` changes nothing outside [first,
  // last] and all of it alike (the search's ordinary edges), or nothing.
  static bool is_ordinary_step(const Placements& state, const Placements& goal, int64_t first,
                               int64_t last) {
    for (int64_t m = 0; m < static_cast<int64_t>(state.size()); ++m) {
      const bool in_group = m >= first && m <= last;
      if (!in_group && *state[m] != *goal[m]) return false;
      if (in_group && (*state[m] != *state[first] || *goal[m] != *goal[first])) return false;
    }
    return true;
  }

  // What a step moves from rank 0 and what it costs, or nullopt when its
  // groups do not hold what they need.
  struct Costed {
    int64_t bytes;
    double cost;
  };

  // The step on mesh dims `dims` from `from` to `after`, when a transition
  // applies and `cost_of` (asked only then: it is the costly part) finds
  // that the groups hold what they need. `cost_of(context, transition)`
  // returns an optional Costed; a template, not a std::function, which
  // would allocate for each step priced.
  template <typename CostOf>
  std::optional<PlannedStep> make_step(const DTensorSpecPtr& from, DTensorSpecPtr after,
                                       const std::vector<int64_t>& dims, const CostOf& cost_of) {
    // Seen from coordinate 0: applicability and cost must not depend on which
    // rank plans, or ranks would run different collectives.
    StepContext context(*from, *after, dims, origin_);
    std::shared_ptr<const Transition> transition = find_transition(context);
    if (transition == nullptr) return std::nullopt;
    const std::optional<Costed> costed = cost_of(context, *transition);
    if (!costed) return std::nullopt;
    PlannedStep step;
    step.mesh_dims = dims;
    step.before = from;
    step.after = std::move(after);
    step.transition = std::move(transition);
    step.bytes = costed->bytes;
    step.cost = costed->cost;
    return step;
  }

  RedistributePlan reconstruct(int64_t goal) {
    RedistributePlan plan;
    plan.total_cost = *states_[goal].cost;
    plan.states_expanded = expanded_;
    for (int64_t index = goal; index != start_; index = states_[index].previous) {
      plan.steps.insert(plan.steps.begin(), states_[index].step);
    }
    return plan;
  }

  const DTensorSpec& source_;
  const DTensorSpec& target_;
  // The mesh's cost model, read once: the floor and every price agree.
  const CollectiveCosts costs_;
  const double cheapest_step_;
  // What any step that communicates costs at least (bound_to_goal), or 0.
  const double collective_floor_;
  // Coordinate 0 of the mesh, where every step is seen from (make_step).
  const std::vector<int64_t> origin_;
  // Per mesh dim, the digit of Replicate, the source's and the target's
  // placement, and the digit's weight in a state's code.
  std::vector<std::array<int64_t, 3>> digits_;
  std::vector<int64_t> weights_;
  // The mesh dims of more than one rank where the source holds a placement
  // that does not replicate and the target another: what bound_to_goal counts.
  std::vector<int64_t> bounded_dims_;
  // The states made so far (a deque: references to a state stay valid while
  // others are made), and each code's index among them.
  std::deque<State> states_;
  absl::flat_hash_map<int64_t, int64_t> index_of_;
  int64_t start_ = 0;
  int64_t expanded_ = 0;
};

// Cache key: the source spec and the target placements as given. Lookups go
// through PlanKeyView, which borrows both, so a hit copies and allocates
// nothing.
struct PlanKey {
  DTensorSpecPtr source;
  Placements target;
};

struct PlanKeyView {
  const DTensorSpec* source;
  const Placements* target;
};

struct PlanKeyHash {
  using is_transparent = void;
  size_t operator()(const PlanKeyView& key) const {
    return absl::HashOf(key.source->hash(), PlacementListHash()(*key.target));
  }
  size_t operator()(const PlanKey& key) const {
    return (*this)(PlanKeyView{key.source.get(), &key.target});
  }
};

struct PlanKeyEq {
  using is_transparent = void;
  static PlanKeyView view(const PlanKey& key) { return {key.source.get(), &key.target}; }
  static PlanKeyView view(const PlanKeyView& key) { return key; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const PlanKeyView x = view(a), y = view(b);
    return *x.source == *y.source && same_placements(*x.target, *y.target);
  }
};

// Per thread: with the local backend every rank is a thread with its own
// communicators, so plans (which name none) are still kept per rank.
using PlanCache = LruCache<PlanKey, RedistributePlanPtr, PlanKeyHash, PlanKeyEq>;

CacheLimits& plan_cache_limits() {
  static CacheLimits limits("DTENSOR_PLAN_CACHE_CAPACITY", kDefaultPlanCacheCapacity);
  return limits;
}

// The calling thread's plans, emptied when the transitions change.
PlanCache& plan_cache() {
  thread_local PlanCache cache(plan_cache_limits().capacity());
  cache.sync(plan_cache_limits(), transitions().generation());
  return cache;
}

}  // namespace

int64_t RedistributePlan::collectives() const {
  int64_t count = 0;
  for (const PlannedStep& step : steps) count += step.transition->communicates() ? 1 : 0;
  return count;
}

std::string RedistributePlan::to_string() const {
  std::ostringstream out;
  int64_t bytes = 0;
  for (const PlannedStep& step : steps) {
    out << "mesh dim" << (step.mesh_dims.size() > 1 ? "s " : " ")
        << absl::StrJoin(step.mesh_dims, ",") << ": "
        << placements_to_string(step.before->placements()) << " -> "
        << placements_to_string(step.after->placements()) << "  " << step.transition->collective()
        << "  " << step.bytes << " bytes  est " << std::fixed << std::setprecision(1) << step.cost
        << " us\n";
    bytes += step.bytes;
  }
  out << "total: " << steps.size() << " steps, " << collectives() << " collectives, " << bytes
      << " bytes, est " << std::fixed << std::setprecision(1) << total_cost << " us\n";
  return out.str();
}

RedistributePlanPtr plan_redistribute(const DTensorSpec& source, const DTensorSpec& target) {
  DTENSOR_CHECK(source.mesh() == target.mesh() && source.shape() == target.shape() &&
                    source.dtype() == target.dtype(),
                "redistribute: expected the same mesh, shape and dtype, found ", source.to_string(),
                " and ", target.to_string());
  return plan_redistribute(source, target.placements());
}

RedistributePlanPtr plan_redistribute(const DTensorSpec& source,
                                      const std::vector<PlacementPtr>& target_placements) {
  PlanCache& plans = plan_cache();
  if (const RedistributePlanPtr* hit = plans.find(PlanKeyView{&source, &target_placements})) {
    return *hit;
  }
  const DTensorSpec target = source.with_placements(target_placements);
  // Also cached under the normalized spelling (e.g. S(-1) and S(1) share a plan).
  RedistributePlanPtr plan;
  if (const RedistributePlanPtr* found = plans.find(PlanKeyView{&source, &target.placements()})) {
    plan = *found;
  } else {
    auto made = std::make_shared<RedistributePlan>(Planner(source, target).plan());
    made->target = made->steps.empty() ? std::make_shared<const DTensorSpec>(source)
                                       : made->steps.back().after;
    plan = plans.insert(PlanKey{std::make_shared<const DTensorSpec>(source), target.placements()},
                        std::move(made));
  }
  if (!same_placements(target_placements, target.placements())) {
    plans.insert(PlanKey{std::make_shared<const DTensorSpec>(source), target_placements}, plan);
  }
  return plan;
}

int64_t plan_cache_size() { return plan_cache().size(); }

int64_t plan_cache_capacity() { return plan_cache_limits().capacity(); }

void set_plan_cache_capacity(int64_t capacity) { plan_cache_limits().set_capacity(capacity); }

void clear_plan_cache() { plan_cache_limits().clear_all(); }

namespace {

// Runs the steps; with `consume_source` every step may reuse the memory it is
// given (the source's, then each step's result, which only this call holds).
// A held source is never given to run_consuming: a view of it, or of a step's
// result, would keep buffers up to the group size times the shard alive.
at::Tensor run_steps(const RedistributePlan& plan, at::Tensor local, bool consume_source) {
  TraceSink* const sink = trace_sink();
  const int64_t began = sink != nullptr ? trace_clock_ns() : -1;
  at::Tensor current = std::move(local);
  for (const PlannedStep& step : plan.steps) {
    if (!step.context) {
      step.context = std::make_shared<const StepContext>(*step.before, *step.after, step.mesh_dims);
    }
    const Transition& transition = *step.transition;
    const int64_t step_began = sink != nullptr ? trace_clock_ns() : -1;
    const auto input_bytes = static_cast<int64_t>(current.nbytes());
    const bool input_is_cuda = current.is_cuda();
    current = consume_source ? transition.run_consuming(std::move(current), *step.context)
                             : transition.run(current, *step.context);
    if (transition.communicates()) {
      CollectiveCounter::record(transition.collective(), input_bytes, input_is_cuda, step_began);
    }
  }
  if (sink != nullptr && !plan.steps.empty()) {
    sink->on_redistribute({placements_to_string(plan.steps.front().before->placements()),
                           placements_to_string(plan.target->placements()),
                           plan.to_string(),
                           {began, trace_clock_ns()}});
  }
  return current;
}

}  // namespace

at::Tensor execute_plan(const RedistributePlan& plan, const at::Tensor& local) {
  return run_steps(plan, local, /*consume_source=*/false);
}

at::Tensor execute_plan_consuming(const RedistributePlan& plan, at::Tensor local) {
  return run_steps(plan, std::move(local), /*consume_source=*/true);
}

}  // namespace dtensor
