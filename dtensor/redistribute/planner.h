// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/planner.h: the cheapest sequence of steps from one
// layout to another.
//
// A redistribute from spec A to spec B (same mesh, shape and dtype) is planned
// by a shortest-path search over placement states: each edge changes one mesh
// dim (or several mesh dims changing alike, adjacent or not, on one
// communicator over their group: [P,R,P] -> [R,R,R] is one all-reduce over
// mesh dims {0, 2}) through a registered Transition, and costs a
// per-collective latency plus the bytes it moves (all-to-all weighted
// higher). An edge exists only where the step is local to its group: no mesh
// dim right of the first changing one, other than the changing ones, splits
// a tensor dim that the change touches (so [S(0),S(0)] -> [R,R] gathers the
// inner mesh dim first). A cross step goes straight to the
// target over one run of mesh dims while others change too, when each
// rank's group there holds exactly what the rank needs: [R,S(0)] -> [S(0),R]
// is one exchange inside the mesh-dim-1 groups (half the bytes of a gather,
// and no slice). The search is A*: it counts a collective's latency for
// each distinct placement that does not replicate still to change on mesh
// dims of more than one rank, a bound that holds while every registered
// transition making such a change communicates
// (Transition::may_change_non_replicated_locally), so it prices fewer steps
// and still finds a cheapest plan. Plans are cached per (source spec,
// target placements) on each rank, in a bounded cache that drops the least
// recently used plan, and every plan can be printed.
//
//   const dtensor::RedistributePlanPtr plan = dtensor::plan_redistribute(source, target);
//   std::cout << plan->to_string();
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/transition.h>

namespace dtensor {

struct PlannedStep {
  std::vector<int64_t> mesh_dims;  // the mesh dims that change alike, in mesh order
  DTensorSpecPtr before;
  DTensorSpecPtr after;
  std::shared_ptr<const Transition> transition;
  int64_t bytes = 0;  // what rank 0 sends (copies, for local steps)
  double cost = 0;    // estimated microseconds
  // The calling rank's view of the step, made on first execution and kept:
  // plans are per rank, and the context caches member layouts and the
  // group's communicator, which every later execution reuses.
  mutable std::shared_ptr<const StepContext> context;
};

struct RedistributePlan {
  std::vector<PlannedStep> steps;
  // The spec after the last step (the source's when there is no step).
  DTensorSpecPtr target;
  double total_cost = 0;
  // States the search expanded to find it: the planning work.
  int64_t states_expanded = 0;
  // Steps that run a collective.
  int64_t collectives() const;
  // One line per step: "mesh dim 1: S(1) -> R  all_gather_v  4096 bytes  est 20.4 us",
  // then a totals line.
  std::string to_string() const;
};

// Plans are shared: the cache may evict a plan while a caller still holds
// (or runs) it, which keeps it valid.
using RedistributePlanPtr = std::shared_ptr<const RedistributePlan>;

// The cached plan from `source` to `target` (same mesh, shape and dtype).
// Partial target placements are allowed here (the internal path autograd
// uses); the public DTensor::redistribute refuses them. Throws dtensor::Error
// when no plan exists.
RedistributePlanPtr plan_redistribute(const DTensorSpec& source, const DTensorSpec& target);
// The same, naming only the target placements: a cache hit builds no spec.
RedistributePlanPtr plan_redistribute(const DTensorSpec& source,
                                      const std::vector<PlacementPtr>& target_placements);

// The plan cache. Each thread (one rank of the local backend, or the
// process) keeps its own, of at most plan_cache_capacity() entries: a plan
// under each spelling of its target planned (S(-1) and S(1) are two entries
// of one plan). A plan made when the cache is full evicts the least recently
// used entry. The cache empties itself when the transitions registry changes.
inline constexpr int64_t kDefaultPlanCacheCapacity = 4096;

// The number of entries cached on the calling thread.
int64_t plan_cache_size();
// How many entries each thread's cache holds at most: kDefaultPlanCacheCapacity
// unless the environment variable DTENSOR_PLAN_CACHE_CAPACITY (read at first
// use) or set_plan_cache_capacity says otherwise.
int64_t plan_cache_capacity();
// Every thread's cache holds at most `capacity` entries (at least 1;
// dtensor::Error otherwise) from its next use.
void set_plan_cache_capacity(int64_t capacity);
// Empties every thread's plan cache at its next use.
void clear_plan_cache();

// Runs `plan` on the calling rank's local tensor of `plan`'s source spec,
// which may have any strides (transition.h). `local` is left unchanged and
// the result shares no memory with it, unless the plan has no steps: then
// the result is `local`.
at::Tensor execute_plan(const RedistributePlan& plan, const at::Tensor& local);
// The same on a `local` the caller gives up (nothing else holds its memory,
// transition.h): every step may reuse what it is given
// (Transition::run_consuming), so Partial -> R reduces in place and R -> S
// returns a view of `local` where the shard is contiguous.
at::Tensor execute_plan_consuming(const RedistributePlan& plan, at::Tensor local);

}  // namespace dtensor
