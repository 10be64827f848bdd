// Copyright 2026 The dtensor Authors.
#include "tests/support/redistribute_cases.h"

#include <optional>
#include <random>
#include <sstream>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/support/layout_reference.h"

namespace dtensor::testing {
namespace {

using Shape = std::vector<int64_t>;

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A random placement for a mesh dim of `n` ranks and a tensor of `ndim` dims.
PlacementPtr random_placement(std::mt19937& rng, int64_t n, int64_t ndim, bool allow_partial) {
  const int64_t kinds = allow_partial ? 6 : 5;
  switch (uniform(rng, 0, kinds - 1)) {
    case 0:
      return Replicate::make();
    case 1:
    case 2: {
      if (ndim == 0) return Replicate::make();
      // Negative dims too: they normalize.
      return Shard::make(uniform(rng, -ndim, ndim - 1));
    }
    case 3:
      if (ndim == 0) return Replicate::make();
      return StridedShard::make(uniform(rng, 0, ndim - 1), uniform(rng, 1, 3));
    case 4: {
      if (ndim == 0) return Replicate::make();
      std::vector<int64_t> units(n);
      bool any = false;
      while (!any) {
        for (int64_t& u : units) {
          u = uniform(rng, 0, 3);
          any = any || u > 0;
        }
      }
      // Mostly one leading dim, sometimes all of them merged into rows.
      const int64_t dims = (ndim >= 2 && uniform(rng, 0, 4) == 0) ? uniform(rng, 2, ndim) : 1;
      return Ragged::make(dims, units);
    }
    default:
      return Partial::make(ReduceOp::kSum);
  }
}

std::vector<PlacementPtr> random_placements(std::mt19937& rng, const Shape& mesh_shape,
                                            int64_t ndim, bool allow_partial) {
  std::vector<PlacementPtr> placements;
  for (int64_t n : mesh_shape) placements.push_back(random_placement(rng, n, ndim, allow_partial));
  return placements;
}

// normalize_placements, or nothing when the combination is invalid.
std::optional<std::vector<PlacementPtr>> try_normalize(const std::vector<PlacementPtr>& placements,
                                                       int64_t ndim, const Shape& mesh_shape) {
  try {
    return normalize_placements(placements, ndim, mesh_shape);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

void RedistributeCaseTotals::note_collectives(int64_t collectives, int64_t changed,
                                              const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex);
  ++collectives_histogram[collectives];
  if (collectives > changed) {
    ++over_changed;
    if (over_examples.size() < 5) over_examples.push_back(what);
  }
}

void RedistributeCaseTotals::fail(const std::string& message) {
  ++failures;
  std::lock_guard<std::mutex> lock(mutex);
  if (messages.size() < 20) messages.push_back(message);
}

void run_random_redistribute_cases(const DeviceMesh& mesh, int64_t cases, uint32_t seed,
                                   RedistributeCaseTotals& totals, std::string* current) {
  const Shape mesh_shape = mesh.shape();
  int64_t rank = 0;
  for (size_t d = 0; d < mesh_shape.size(); ++d) rank = rank * mesh_shape[d] + mesh.coordinate()[d];
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < cases; ++i) {
    // Mostly 1-3 dims, sometimes a 0-dim tensor.
    const int64_t min_ndim = uniform(rng, 0, 7) == 0 ? 0 : 1;
    const int64_t ndim = uniform(rng, min_ndim, 3);
    Shape shape(ndim);
    for (int64_t& s : shape) s = uniform(rng, 0, 9);
    const auto source = random_placements(rng, mesh_shape, ndim, /*allow_partial=*/true);
    const auto target = random_placements(rng, mesh_shape, ndim, /*allow_partial=*/false);
    const bool bf16 = uniform(rng, 0, 9) == 0;
    auto norm_source = try_normalize(source, ndim, mesh_shape);
    auto norm_target = try_normalize(target, ndim, mesh_shape);
    if (!norm_source || !norm_target) {
      if (rank == 0) ++totals.skipped;
      continue;
    }
    std::ostringstream what;
    what << "mesh " << ::testing::PrintToString(mesh_shape) << " shape "
         << ::testing::PrintToString(shape) << " " << placements_to_string(source) << " -> "
         << placements_to_string(target) << (bf16 ? " bf16" : " float") << " (seed " << seed
         << " case " << i << ")";
    if (rank == 0 && current != nullptr) *current = what.str();
    try {
      int64_t numel = 1;
      for (int64_t s : shape) numel *= s;
      // Integer values, small enough for bfloat16 to hold exactly.
      // On the mesh's device; comparisons happen on the CPU.
      const at::Tensor global = ((at::arange(numel, at::kLong) * 7) % 61 + 1)
                                    .reshape(shape)
                                    .to(bf16 ? at::kBFloat16 : at::kFloat);
      DTensor dt = distribute_tensor(global.to(mesh.device()), mesh, source);
      if (!at::equal(dt.to_local().cpu(), expected_local(global, mesh, *norm_source))) {
        totals.fail(what.str() + " mesh rank " + std::to_string(rank) +
                    ": distribute_tensor to the source gave a wrong local tensor");
      }
      int64_t collectives = 0;
      std::string kinds;
      DTensor out = [&] {
        CollectiveCounter counter;
        DTensor result = dt.redistribute(target);
        collectives = counter.total();
        for (const auto& [name, n] : counter.by_collective()) {
          kinds += " " + name + ":" + std::to_string(n);
        }
        return result;
      }();
      int64_t changed = 0;
      for (size_t m = 0; m < mesh_shape.size(); ++m) {
        changed += (*(*norm_source)[m] != *(*norm_target)[m]) ? 1 : 0;
      }
      if (rank == 0) totals.note_collectives(collectives, changed, what.str() + kinds);
      const at::Tensor direct =
          distribute_tensor(global.to(mesh.device()), mesh, target).to_local().cpu();
      const at::Tensor full = out.full_tensor().cpu();
      const at::Tensor local = out.to_local().cpu();
      if (rank == 0) ++totals.cases;
      std::ostringstream problem;
      if (!same_placements(out.placements(), *norm_target)) {
        problem << " placements " << placements_to_string(out.placements());
      }
      if (!at::equal(local, direct)) {
        problem << " local " << local.sizes() << " " << local.flatten() << " expected "
                << direct.sizes() << " " << direct.flatten();
      } else if (!at::equal(local, expected_local(global, mesh, *norm_target))) {
        problem << " local equals a direct distribute but not the layout's slice";
      }
      if (!at::equal(full, global)) {
        problem << " full_tensor " << full.flatten() << " expected " << global.flatten();
      }
      if (!problem.str().empty()) {
        totals.fail(what.str() + " mesh rank " + std::to_string(rank) + ":" + problem.str());
      }
    } catch (const std::exception& e) {
      totals.fail(what.str() + " mesh rank " + std::to_string(rank) + " threw: " + e.what());
      throw;  // the other ranks fail too; run_ranks rethrows
    }
  }
}

void check_issue_collective_counts(const DeviceMesh& mesh) {
  const at::Tensor global = at::arange(7 * 6, at::kFloat).reshape({7, 6});
  const at::Tensor on_device = global.to(mesh.device());
  struct Case {
    const char* from;
    const char* to;
    int64_t most;
  };
  for (const Case& c : {Case{"S(0),S(1)", "S(0),S(0)", 1}, Case{"S(0),S(1)", "S(1),S(0)", 2},
                        Case{"S(0),S(0)", "S(1),S(1)", 2}, Case{"P(sum),R", "R,R", 1},
                        // A cross step: one exchange inside the mesh-dim-1 groups.
                        Case{"R,S(0)", "S(0),R", 1}}) {
    SCOPED_TRACE(std::string(c.from) + " -> " + c.to);
    const DTensor source =
        c.from[0] == 'P'
            ? redistribute_any(distribute_tensor(on_device, mesh, parse_placements("R,R")),
                               parse_placements(c.from))
            : distribute_tensor(on_device, mesh, parse_placements(c.from));
    CollectiveCounter counter;
    const DTensor target = source.redistribute(parse_placements(c.to));
    EXPECT_LE(counter.total(), c.most);
    EXPECT_GE(counter.total(), 1);
    const at::Tensor direct = distribute_tensor(on_device, mesh, parse_placements(c.to)).to_local();
    EXPECT_TRUE(at::equal(target.to_local().cpu(), direct.cpu()));
    EXPECT_TRUE(at::equal(target.full_tensor().cpu(), global));
  }
}

}  // namespace dtensor::testing
