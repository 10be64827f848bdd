// Copyright 2026 The dtensor Authors.
#include "rules/cost.h"


namespace dtensor {

double placement_change_cost(const Placement& from, const Placement& to, int64_t global_bytes,
                             int64_t n, const CollectiveCosts& model) {
  if (from == to) return 0;
  const double bytes = static_cast<double>(global_bytes);
  const double collective = model.latency_us;
  // Slicing a replicated tensor, or turning it into a Partial term, is local.
  if (from.is_replicate()) return model.local_step_us + bytes / n / model.bytes_per_us;
  if (from.is_partial()) {
    const double moved = to.is_replicate() ? 2 * bytes : bytes;
    return collective + moved / model.bytes_per_us;
  }
  if (to.is_replicate()) return collective + bytes / model.bytes_per_us;
  // Split to split: an all-to-all, or a gather and a slice for odd pairs.
  const double factor = model.all_to_all_factor * (to.is_partial() ? 2 : 1);
  return collective + factor * bytes / n / model.bytes_per_us;
}

}  // namespace dtensor
