// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/cost.h>

namespace dtensor {

double step_cost(StepKind kind, int64_t bytes, int64_t peers, const CollectiveCosts& costs) {
  const double moved = static_cast<double>(bytes);
  if (kind == StepKind::kLocalCopy) return costs.local_step_us + moved / (costs.bytes_per_us * 10);
  const double factor = kind == StepKind::kAllToAll && peers > 1 ? costs.all_to_all_factor : 1.0;
  return costs.latency_us + factor * moved / costs.bytes_per_us;
}

double placement_change_cost(const Placement& from, const Placement& to, int64_t piece_bytes,
                             int64_t n, const CollectiveCosts& costs) {
  if (from == to) return 0;
  const int64_t share = piece_bytes / n;       // one rank's part of a split piece
  const int64_t others = piece_bytes - share;  // what a gather brings each rank
  // Slicing a replicated tensor, or turning it into a Partial term.
  if (from.is_replicate()) return step_cost(StepKind::kLocalCopy, share, 0, costs);
  if (from.is_partial()) {
    // An all-reduce sends twice a reduce-scatter's bytes.
    return step_cost(StepKind::kCollective, to.is_replicate() ? 2 * others : others, n - 1, costs);
  }
  const double gather = step_cost(StepKind::kCollective, others, n - 1, costs);
  if (to.is_replicate()) return gather;
  // A split into a Partial: gather, then keep a term.
  if (to.is_partial()) return gather + step_cost(StepKind::kLocalCopy, share, 0, costs);
  // Split to split: an all-to-all of one rank's part.
  return step_cost(StepKind::kAllToAll, share - share / n, n - 1, costs);
}

}  // namespace dtensor
