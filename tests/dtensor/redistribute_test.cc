// Copyright 2026 The dtensor Authors.
//
// Redistribute: every single-mesh-dim transition of design.md section 3 on a
// 1-D mesh, the N-D cases, collective counts and kinds, plan printing and
// caching.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/redistribute/index_exchange.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/redistribute/transition.h>
#include "tests/support/expect_error.h"
#include "tests/support/layout_reference.h"
#include "tests/support/scoped_cache_capacity.h"

namespace dtensor {
namespace {

using Shape = std::vector<int64_t>;

at::Tensor make_global(const Shape& shape, at::ScalarType dtype = at::kFloat) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  at::Tensor values = at::arange(numel, at::kLong);
  // bfloat16 holds integers exactly only up to 256: keep sums of scaled terms below it.
  if (dtype == at::kBFloat16) values = values % 20;
  return (values + 1).reshape(shape).to(dtype);
}

// A source laid out as `placements` whose Partial(sum) mesh dims hold
// non-trivial terms on every rank; returns it and the global tensor it
// represents.
std::pair<DTensor, at::Tensor> make_source(const at::Tensor& global, const DeviceMesh& mesh,
                                           const std::vector<PlacementPtr>& placements) {
  std::vector<PlacementPtr> normalized =
      normalize_placements(placements, global.dim(), mesh.shape());
  bool partial = false;
  for (const PlacementPtr& p : normalized) partial = partial || p->is_partial();
  if (!partial) return {distribute_tensor(global, mesh, placements), global};
  // Sum partials only: the rank at coordinate c holds piece * prod(c[m] + 1)
  // over the partial mesh dims m, so the tensor represented is global times
  // prod(n(n+1)/2).
  std::vector<PlacementPtr> non_partial;
  int64_t scale = 1;
  int64_t weight = 1;
  for (size_t m = 0; m < normalized.size(); ++m) {
    if (normalized[m]->is_partial()) {
      EXPECT_EQ(*normalized[m]->partial_op(), ReduceOp::kSum);
      non_partial.push_back(Replicate::make());
      const int64_t n = mesh.shape()[m];
      scale *= n * (n + 1) / 2;  // sum of (c + 1) over c
      weight *= mesh.coordinate()[m] + 1;
    } else {
      non_partial.push_back(normalized[m]);
    }
  }
  at::Tensor piece = testing::expected_local(global, mesh, non_partial);
  auto spec = std::make_shared<const DTensorSpec>(mesh, normalized, global.sizes().vec(),
                                                  global.scalar_type());
  return {DTensor((piece * weight).contiguous(), spec), global * scale};
}

struct Case {
  std::string from;
  std::string to;
  int64_t collectives;
  // When non-empty: every collective is one of these.
  std::vector<std::string> kinds;
};

std::vector<std::string> gathers() { return {"all_gather_v", "all_gather"}; }
std::vector<std::string> reduce_scatters() { return {"reduce_scatter_v", "reduce_scatter"}; }
std::vector<std::string> all_to_alls() { return {"all_to_all_v", "all_to_all"}; }

// Runs `c` on the calling rank: redistribute under a counter, compare with a
// direct distribute of the represented tensor, check the count and kinds.
void run_case(const Case& c, const at::Tensor& global_in, const DeviceMesh& mesh,
              bool check_count = true) {
  SCOPED_TRACE(::testing::Message()
               << c.from << " -> " << c.to << " shape " << global_in.sizes() << " mesh "
               << mesh.to_string() << " rank " << mesh.world()->rank());
  auto [source, global] = make_source(global_in, mesh, parse_placements(c.from));
  const at::Tensor source_values = source.to_local().clone();
  std::vector<PlacementPtr> target = parse_placements(c.to);
  CollectiveCounter counter;
  DTensor out = source.redistribute(target);
  const int64_t total = counter.total();
  EXPECT_TRUE(at::equal(source.to_local(), source_values)) << "the source changed";
  std::map<std::string, int64_t, std::less<>> kinds = counter.by_collective();
  std::string kinds_text = testing::describe_counts(counter);
  if (check_count) {
    EXPECT_EQ(total, c.collectives) << "collectives " << kinds_text;
    if (!c.kinds.empty()) {
      int64_t matching = 0;
      for (const std::string& kind : c.kinds) matching += counter.count(kind);
      EXPECT_EQ(matching, total) << "collective kinds " << kinds_text << ", expected only "
                                 << ::testing::PrintToString(c.kinds);
    }
  }
  EXPECT_TRUE(
      same_placements(out.placements(), normalize_placements(target, global.dim(), mesh.shape())))
      << placements_to_string(out.placements());
  EXPECT_EQ(out.sizes(), global.sizes().vec());
  bool partial_target = false;
  for (const PlacementPtr& p : target) partial_target = partial_target || p->is_partial();
  if (partial_target) {
    // Only P -> same P here: the terms stay where they are.
    EXPECT_TRUE(at::equal(out.to_local(), source.to_local()))
        << "got " << out.to_local() << "\nexpected " << source.to_local();
  } else {
    at::Tensor direct = distribute_tensor(global, mesh, target).to_local();
    EXPECT_TRUE(at::equal(out.to_local(), direct))
        << "got " << out.to_local() << "\nexpected " << direct;
    EXPECT_TRUE(at::equal(out.to_local(), testing::expected_local(global, mesh, target)));
  }
  at::Tensor full = out.full_tensor();
  EXPECT_TRUE(at::equal(full, global)) << "full " << full;
  // Given up, the source's memory may be reused: the same values.
  DTensor given_up = make_source(global_in.clone(), mesh, parse_placements(c.from)).first;
  const DTensor consumed = std::move(given_up).redistribute(target);
  EXPECT_TRUE(at::equal(consumed.to_local(), out.to_local()))
      << "given up: " << consumed.to_local() << "\nexpected " << out.to_local();
}

// design.md section 3, one mesh dim of 4 ranks.
std::vector<Case> one_dim_cases() {
  const std::string rg_a = "RG(dims=1,units=[1,2,1,0])";
  const std::string rg_b = "RG(dims=1,units=[0,1,3,1])";
  return {
      {"S(0)", "R", 1, gathers()},
      {"S(1)", "R", 1, gathers()},
      {"P(sum)", "R", 1, {"all_reduce"}},
      {"P(sum)", "S(0)", 1, reduce_scatters()},
      {"P(sum)", "S(1)", 1, reduce_scatters()},
      {"S(0)", "S(1)", 1, all_to_alls()},
      {"S(1)", "S(0)", 1, all_to_alls()},
      {"R", "S(0)", 0, {}},
      {"R", "S(1)", 0, {}},
      {"R", "SS(0,2)", 0, {}},
      {"R", "SS(1,3)", 0, {}},
      {"SS(0,2)", "R", 1, gathers()},
      {"SS(1,2)", "R", 1, gathers()},
      {rg_a, "R", 1, gathers()},
      {"R", rg_a, 0, {}},
      {rg_a, rg_b, 1, {"all_to_all_v"}},
      {rg_b, rg_a, 1, {"all_to_all_v"}},
      {"P(sum)", rg_a, 1, {"reduce_scatter_v"}},
      {"S(0)", rg_a, 1, {}},
      {rg_a, "S(0)", 1, {}},
      {"SS(0,2)", "S(0)", 1, {}},
      {"S(0)", "SS(0,2)", 1, {}},
      {"SS(0,2)", "SS(0,3)", 1, {}},
      {"SS(0,2)", "S(1)", 1, {}},
      {"R", "R", 0, {}},
      {"S(0)", "S(0)", 0, {}},
      {"P(sum)", "P(sum)", 0, {}},
  };
}

// Complex pending sums reduce part by part: P -> R (all-reduce) and P -> S
// (reduce-scatter, uneven) equal the sum of the terms.
// `local` with the same sizes and values, its dims laid out in memory in
// reverse order (the shard of a transposed DTensor, say).
at::Tensor reversed_memory(const at::Tensor& local) {
  std::vector<int64_t> reversed(local.dim());
  for (int64_t d = 0; d < local.dim(); ++d) reversed[d] = local.dim() - 1 - d;
  return local.permute(reversed).contiguous().permute(reversed);
}

// Shards of any strides redistribute exactly, every transition included:
// those whose collective needs a contiguous buffer make it themselves.
TEST(RedistributeTest, StridedShardsRedistributeExactly) {
  const auto check = [](const std::string& from, const std::string& to, const DeviceMesh& mesh) {
    SCOPED_TRACE(from + " -> " + to);
    auto [source, global] = make_source(make_global({7, 5}), mesh, parse_placements(from));
    const DTensor strided(reversed_memory(source.to_local()), source.spec_ptr());
    const DTensor out = strided.redistribute(parse_placements(to));
    EXPECT_TRUE(at::equal(out.to_local(), source.redistribute(parse_placements(to)).to_local()));
    EXPECT_TRUE(at::equal(out.full_tensor(), global));
  };
  run_ranks(4, [&](int) {
    const DeviceMesh line = init_device_mesh("local", {4});
    for (const Case& c : one_dim_cases()) check(c.from, c.to, line);
    const DeviceMesh square = init_device_mesh("local", {2, 2});
    check("P(sum),P(sum)", "R,R", square);
    check("R,S(0)", "S(0),R", square);
    check("S(0),S(1)", "S(1),S(0)", square);
    check("SS(0,2),S(0)", "R,R", square);
  });
}

TEST(RedistributeTest, ComplexPartialSums) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor real = at::arange(10, at::kDouble).reshape({5, 2});
    auto term = [&](int r) { return at::complex(real * (r + 1), real - r); };
    at::Tensor sum = term(0);
    for (int r = 1; r < 4; ++r) sum = sum + term(r);
    const DTensor p = from_local(term(rank), mesh, parse_placements("P(sum)"));
    EXPECT_TRUE(at::equal(p.full_tensor(), sum));
    const DTensor s = p.redistribute(parse_placements("S(0)"));
    EXPECT_TRUE(at::equal(s.full_tensor(), sum));
  });
}

TEST(RedistributeTest, SingleMeshDimTransitionsUneven) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const Case& c : one_dim_cases()) run_case(c, make_global({7, 5}), mesh);
  });
}

TEST(RedistributeTest, SingleMeshDimTransitionsEven) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const Case& c : one_dim_cases()) run_case(c, make_global({8, 4}), mesh);
  });
}

TEST(RedistributeTest, SingleMeshDimTransitionsTinyAndEmpty) {
  // Values only: with empty pieces an implementation may skip collectives.
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const Case& c : one_dim_cases()) {
      run_case(c, make_global({3, 1}), mesh, /*check_count=*/false);
      run_case(c, make_global({1, 2}), mesh, /*check_count=*/false);
      run_case(c, make_global({0, 5}), mesh, /*check_count=*/false);
    }
  });
}

TEST(RedistributeTest, SingleMeshDimTransitionsOtherDtypes) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (at::ScalarType dtype : {at::kBFloat16, at::kLong}) {
      for (const Case& c : one_dim_cases()) run_case(c, make_global({7, 5}, dtype), mesh);
    }
  });
}

TEST(RedistributeTest, ThreeDimTensorAndMergedRagged) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const std::string rg2 = "RG(dims=2,units=[2,1,0,1])";
    const std::vector<Case> cases = {
        {"S(2)", "R", 1, gathers()},
        {"S(0)", "S(2)", 1, all_to_alls()},
        {"S(2)", "S(1)", 1, all_to_alls()},
        {"P(sum)", "S(2)", 1, reduce_scatters()},
        {"R", rg2, 0, {}},
        {rg2, "R", 1, gathers()},
        {rg2, "RG(dims=2,units=[1,1,1,1])", 1, {"all_to_all_v"}},
        {"P(sum)", rg2, 1, {"reduce_scatter_v"}},
        {"S(2)", rg2, 1, {}},
        {rg2, "S(2)", 1, {}},
    };
    for (const Case& c : cases) run_case(c, make_global({3, 5, 2}), mesh);
  });
}

TEST(RedistributeTest, ScalarTensor) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor scalar = at::scalar_tensor(5.0, at::kFloat);
    run_case({"P(sum)", "R", 1, {"all_reduce"}}, scalar, mesh);
    run_case({"R", "R", 0, {}}, scalar, mesh);
  });
}

// ---------------------------------------------------------------------------
// N-D meshes

bool rank_zero(const DeviceMesh& mesh) { return mesh.world()->rank() == 0; }

// Redistributes on the calling rank, asserting at most `max_collectives`
// (exactly, when `exact`) and equality with a direct distribute.
// Checks from -> to against a direct distribute and the collective count;
// returns the collectives it ran ("{ all_gather_v:2 }").
std::string run_nd(const std::string& from, const std::string& to, const Shape& shape,
                   const DeviceMesh& mesh, int64_t max_collectives, bool exact) {
  SCOPED_TRACE(::testing::Message()
               << from << " -> " << to << " shape " << ::testing::PrintToString(shape) << " mesh "
               << mesh.to_string() << " rank " << mesh.world()->rank());
  at::Tensor global = make_global(shape);
  DTensor source = distribute_tensor(global, mesh, parse_placements(from));
  CollectiveCounter counter;
  DTensor out = source.redistribute(parse_placements(to));
  const int64_t total = counter.total();
  const std::string kinds = testing::describe_counts(counter);
  if (exact) {
    EXPECT_EQ(total, max_collectives) << kinds;
  } else {
    EXPECT_LE(total, max_collectives) << kinds;
  }
  at::Tensor direct = distribute_tensor(global, mesh, parse_placements(to)).to_local();
  EXPECT_TRUE(at::equal(out.to_local(), direct))
      << "got " << out.to_local() << "\nexpected " << direct;
  EXPECT_TRUE(at::equal(out.full_tensor(), global));
  if (::testing::Test::HasFailure() && rank_zero(mesh)) {
    const RedistributePlanPtr plan =
        plan_redistribute(source.spec(), source.spec().with_placements(parse_placements(to)));
    std::cout << "plan " << from << " -> " << to << ":\n" << plan->to_string() << std::endl;
  }
  return kinds;
}

TEST(RedistributeTest, TwoDimMeshIssueCases) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const Shape& shape : {Shape{7, 5}, Shape{8, 8}, Shape{3, 9}}) {
      run_nd("S(0),S(1)", "S(0),S(0)", shape, mesh, 1, /*exact=*/true);
      run_nd("S(0),S(1)", "S(1),S(0)", shape, mesh, 2, /*exact=*/false);
      run_nd("S(0),S(0)", "S(1),S(1)", shape, mesh, 2, /*exact=*/false);
      run_nd("S(0),S(0)", "R,R", shape, mesh, 2, /*exact=*/false);
      run_nd("S(0),S(1)", "R,R", shape, mesh, 2, /*exact=*/false);
      run_nd("R,R", "S(1),S(0)", shape, mesh, 0, /*exact=*/true);
      run_nd("P(sum),P(sum)", "R,R", shape, mesh, 2, /*exact=*/false);
      run_nd("P(sum),S(0)", "S(0),S(1)", shape, mesh, 2, /*exact=*/false);
      run_nd("S(0),R", "R,S(0)", shape, mesh, 2, /*exact=*/false);
    }
  });
}

TEST(RedistributeTest, ThreeDimMeshIssueCase) {
  run_ranks(8, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2});
    for (const Shape& shape : {Shape{8, 8}, Shape{9, 10}, Shape{5, 3}}) {
      run_nd("S(0),S(0),S(0)", "S(1),S(1),S(1)", shape, mesh, 3, /*exact=*/false);
      run_nd("S(0),S(0),S(0)", "R,R,R", shape, mesh, 3, /*exact=*/false);
      run_nd("S(0),S(1),R", "R,S(0),S(1)", shape, mesh, 3, /*exact=*/false);
    }
  });
}

// Mesh dims that change alike merge into one collective whether or not they
// are adjacent: [P,R,P] -> [R,R,R] on a 2x2x2 mesh is one all-reduce over
// mesh dims {0, 2} (PyTorch's count), and gathers, reduce-scatters and
// exchanges over them keep the order of the pieces exactly, uneven and empty
// ones included, when the mesh dim between splits another tensor dim.
TEST(RedistributeTest, NonAdjacentMeshDimsMergeIntoOneCollective) {
  run_ranks(8, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2});
    const std::vector<Case> cases = {
        {"P(sum),R,P(sum)", "R,R,R", 1, {"all_reduce"}},
        {"P(sum),S(0),P(sum)", "R,S(0),R", 1, {"all_reduce"}},
        {"P(sum),S(1),P(sum)", "S(0),S(1),S(0)", 1, reduce_scatters()},
        {"S(0),S(1),S(0)", "R,S(1),R", 1, gathers()},
        {"S(0),R,S(0)", "S(1),R,S(1)", 1, all_to_alls()},
    };
    for (const Shape& shape : {Shape{8, 4}, Shape{7, 5}, Shape{3, 2}}) {
      for (const Case& c : cases) run_case(c, make_global(shape), mesh);
    }
    DTensorSpec source(mesh, parse_placements("P(sum),R,P(sum)"), Shape{8, 4}, at::kFloat);
    const RedistributePlanPtr plan = plan_redistribute(source, parse_placements("R,R,R"));
    ASSERT_EQ(plan->steps.size(), 1u) << plan->to_string();
    EXPECT_EQ(plan->steps[0].mesh_dims, (std::vector<int64_t>{0, 2}));
    const std::string text = plan->to_string();
    EXPECT_EQ(text.rfind("mesh dims 0,2: P(sum),R,P(sum) -> R,R,R  all_reduce  192 bytes", 0), 0u)
        << text;
  });
}

// Partials reduce left to right by mesh dim: with a max between two sums,
// mesh dims 0 and 2 must not reduce together (the sum over both, then the
// max, is another number).
TEST(RedistributeTest, NonAdjacentPartialsKeepTheReductionOrder) {
  run_ranks(8, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2});
    const at::Tensor base = make_global({3, 2});
    // The term at (i, j, k): large where j == k, so the max over j picks
    // another j for each k.
    auto term = [&](int64_t i, int64_t j, int64_t k) { return base * (i + 1) * (j == k ? 10 : 1); };
    at::Tensor expected = at::zeros_like(base);
    for (int64_t k = 0; k < 2; ++k) {
      at::Tensor best;
      for (int64_t j = 0; j < 2; ++j) {
        const at::Tensor sum = term(0, j, k) + term(1, j, k);
        best = best.defined() ? at::maximum(best, sum) : sum;
      }
      expected = expected + best;
    }
    const std::vector<int64_t>& c = mesh.coordinate();
    const DTensor source =
        from_local(term(c[0], c[1], c[2]), mesh, parse_placements("P(sum),P(max),P(sum)"));
    EXPECT_TRUE(at::equal(source.redistribute(parse_placements("R,R,R")).to_local(), expected));
  });
}

// The communicator of a merged group of mesh dims that are not adjacent is
// made by the mesh's ranks alone: world ranks outside the mesh leave at once.
TEST(RedistributeTest, NonAdjacentMergeOnAMeshOverPartOfTheWorld) {
  run_ranks(10, [](int rank) {
    DeviceMesh mesh(local_world(), {2, 2, 2}, {}, {9, 8, 7, 6, 5, 4, 3, 2});
    if (rank < 2) return;
    for (const Shape& shape : {Shape{8, 4}, Shape{7, 5}}) {
      run_case({"P(sum),R,P(sum)", "R,R,R", 1, {"all_reduce"}}, make_global(shape), mesh);
      run_case({"S(0),S(1),S(0)", "R,S(1),R", 1, gathers()}, make_global(shape), mesh);
    }
  });
}

// A mesh dim of size 1 changes placement without communicating: its one rank
// holds the same elements either way (and a Partial of one term is the value).
TEST(RedistributeTest, SingleRankMeshDimsChangeWithoutCollectives) {
  if (single_rank_groups_communicate()) GTEST_SKIP() << "DTENSOR_SINGLE_RANK_COLLECTIVES=1";
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {1, 4});
    for (const Shape& shape : {Shape{7, 5}, Shape{2, 9}}) {
      run_nd("S(0),S(1)", "R,S(1)", shape, mesh, 0, /*exact=*/true);
      run_nd("S(1),S(0)", "SS(0,2),S(0)", shape, mesh, 0, /*exact=*/true);
      run_nd("RG(dims=1,units=[3]),S(1)", "S(1),S(1)", shape, mesh, 0, /*exact=*/true);
      run_nd("S(0),S(0)", "R,S(1)", shape, mesh, 1, /*exact=*/true);
    }
  });
  run_ranks(1, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {1});
    run_nd("S(0)", "S(1)", Shape{7, 5}, mesh, 0, /*exact=*/true);
    run_nd("S(1)", "R", Shape{7, 5}, mesh, 0, /*exact=*/true);
  });
}

// With DTENSOR_SINGLE_RANK_COLLECTIVES=1 (the CTest entry
// unit_single_rank_collectives) a one-rank group runs its collective, as it
// would on more ranks, with the same results.
TEST(RedistributeTest, SingleRankGroupsCommunicateWhenAsked) {
  if (!single_rank_groups_communicate()) GTEST_SKIP() << "needs DTENSOR_SINGLE_RANK_COLLECTIVES=1";
  run_ranks(1, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {1});
    EXPECT_EQ(run_nd("S(0)", "S(1)", Shape{7, 5}, mesh, 1, true), "{ all_to_all_v:1 }");
    EXPECT_EQ(run_nd("S(1)", "R", Shape{7, 5}, mesh, 1, true), "{ all_gather_v:1 }");
    EXPECT_EQ(run_nd("P(sum)", "R", Shape{7, 5}, mesh, 1, true), "{ all_reduce:1 }");
  });
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {1, 4});
    EXPECT_EQ(run_nd("S(0),S(1)", "R,S(1)", Shape{7, 5}, mesh, 1, true), "{ all_gather_v:1 }");
  });
}

// FSDP over TP stores [SS(0,tp), S(0)]: gathering over dp alone gives the tp
// layout back, and a Partial over dp lands in the storage layout, each with
// one collective inside the dp groups (the planner checks that every group
// holds what it needs, since a later mesh dim splits the same tensor dim).
TEST(RedistributeTest, FsdpOverTpStepsStayInsideTheDpGroups) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    run_nd("SS(0,2),S(0)", "R,S(0)", Shape{8, 4}, mesh, 1, /*exact=*/true);
    run_nd("P(sum),S(0)", "SS(0,2),S(0)", Shape{8, 4}, mesh, 1, /*exact=*/true);
    run_nd("R,S(0)", "SS(0,2),S(0)", Shape{8, 4}, mesh, 0, /*exact=*/true);
    for (const Shape& shape : {Shape{7, 5}, Shape{3, 9}, Shape{1, 2}}) {
      run_nd("SS(0,2),S(0)", "R,S(0)", shape, mesh, 2, /*exact=*/false);
      run_nd("P(sum),S(0)", "SS(0,2),S(0)", shape, mesh, 2, /*exact=*/false);
    }
  });
}

// A box is one view of the source, equal to its narrows taken one by one
// (two on one dim included), strided sources and empty ranges too; one
// outside the tensor is an error, never a read past it. Under autograd the
// narrows themselves are taken.
TEST(RedistributeTest, NarrowToTakesABoxAsOneView) {
  using redistribute_internal::Narrow;
  using redistribute_internal::narrow_to;
  const at::Tensor t = at::arange(120, at::kFloat).reshape({4, 5, 6});
  const std::vector<std::vector<Narrow>> boxes = {
      {}, {{0, 1, 2}}, {{2, 3, 3}, {0, 0, 4}}, {{1, 1, 3}, {1, 1, 2}}, {{1, 5, 0}}};
  for (const at::Tensor& source : {t, t.transpose(0, 2), t.narrow(1, 1, 3)}) {
    for (const std::vector<Narrow>& box : boxes) {
      if (!box.empty() && box.front().start + box.front().length > source.size(box.front().dim)) {
        continue;
      }
      at::Tensor expected = source;
      for (const Narrow& n : box) expected = expected.narrow(n.dim, n.start, n.length);
      const at::Tensor view = narrow_to(source, box);
      EXPECT_TRUE(view.is_alias_of(source));
      EXPECT_EQ(view.sizes(), expected.sizes());
      EXPECT_EQ(view.strides(), expected.strides());
      EXPECT_EQ(view.storage_offset(), expected.storage_offset());
      EXPECT_TRUE(at::equal(view, expected));
    }
  }
  DTENSOR_EXPECT_ERROR(narrow_to(t, {{1, 4, 2}}), "expected a narrow within [4, 5, 6]");
  DTENSOR_EXPECT_ERROR(narrow_to(t, {{3, 0, 1}}), "found dim 3");
  const at::Tensor watched = at::arange(6.0).requires_grad_();
  narrow_to(watched, {{0, 2, 3}}).sum().backward();
  EXPECT_TRUE(at::equal(watched.grad(), at::tensor({0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f})));
  EXPECT_EQ(watched.grad().scalar_type(), at::kFloat);
}

TEST(RedistributeTest, InterleavedBlockCountFindsInPlaceLayouts) {
  using redistribute_internal::interleaved_block_count;
  const std::vector<int64_t> eight = {0, 1, 2, 3, 4, 5, 6, 7};
  // Shard: consecutive blocks, an empty one included.
  EXPECT_EQ(interleaved_block_count({{0, 1, 2}, {3, 4, 5, 6, 7}, {}}, eight), 1);
  // SS(0,2) on 2 ranks: each holds its run of both chunks.
  EXPECT_EQ(interleaved_block_count({{0, 1, 4, 5}, {2, 3, 6, 7}}, eight), 2);
  // Runs are counted from the first piece that holds something.
  EXPECT_EQ(interleaved_block_count({{}, {0, 2}, {1, 3}}, {0, 1, 2, 3}), 2);
  // Runs of unequal length (SS(0,2) of 7 rows) and orders no blocking gives.
  EXPECT_EQ(interleaved_block_count({{0, 1, 4, 5}, {2, 3, 6}}, {0, 1, 2, 3, 4, 5, 6}),
            std::nullopt);
  EXPECT_EQ(interleaved_block_count({{1, 0}, {2, 3}}, {0, 1, 2, 3}), std::nullopt);
  EXPECT_EQ(interleaved_block_count({{0, 1}, {2, 3}}, {0, 1, 2}), std::nullopt);
}

// A StridedShard's pieces are one run per chunk of the later split: P ->
// SS reduce-scatters along a [chunks, ...] view of the dim (never an
// all-reduce plus a slice) and SS -> R gathers along it, as long as every
// rank's runs are equally long; otherwise all_reduce + slice and a reordered
// gather, still exact.
TEST(RedistributeTest, StridedShardPiecesMoveAsBlocks) {
  for (int ranks : {2, 4}) {
    run_ranks(ranks, [ranks](int) {
      DeviceMesh line = init_device_mesh("local", {ranks});
      const std::string scatter = "{ reduce_scatter_v:1 }";
      EXPECT_EQ(run_nd("P(sum)", "SS(0,2)", Shape{8, 3}, line, 1, true), scatter);
      EXPECT_EQ(run_nd("P(sum)", "SS(1,3)", Shape{2, 12}, line, 1, true), scatter);
      EXPECT_EQ(run_nd("P(sum)", "SS(0,2)", Shape{7, 3}, line, 1, true), "{ all_reduce:1 }");
      EXPECT_EQ(run_nd("SS(0,2)", "R", Shape{8, 3}, line, 1, true), "{ all_gather_v:1 }");
      EXPECT_EQ(run_nd("SS(1,3)", "R", Shape{2, 12}, line, 1, true), "{ all_gather_v:1 }");
      EXPECT_EQ(run_nd("SS(0,2)", "R", Shape{7, 3}, line, 1, true), "{ all_gather_v:1 }");
    });
  }
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    EXPECT_EQ(run_nd("P(sum),S(0)", "SS(0,2),S(0)", Shape{8, 4}, mesh, 1, true),
              "{ reduce_scatter_v:1 }");
    // Large enough that two gathers beat one exchange of every piece with
    // every rank (which small tensors take: one latency instead of two).
    EXPECT_EQ(run_nd("SS(0,2),S(0)", "R,R", Shape{1024, 256}, mesh, 2, true), "{ all_gather_v:2 }");
    EXPECT_EQ(run_nd("SS(0,2),S(0)", "R,R", Shape{8, 4}, mesh, 1, true), "{ all_to_all_v:1 }");
  });
}

// A change of two mesh dims whose data moves inside one of them is one
// exchange in that dim's groups (a cross step), not a gather and a slice:
// [R,S(0)] -> [S(0),R] sends each rank the rows one member of its mesh-dim-1
// group holds; [S(0),S(1)] -> [S(1),S(0)] is one exchange over the mesh.
// Uneven and empty shards included; a Partial is never moved by one.
TEST(RedistributeTest, CrossStepsExchangeInsideOneMeshDim) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const Shape& shape : {Shape{8, 4}, Shape{7, 5}, Shape{3, 2}, Shape{1, 3}}) {
      EXPECT_EQ(run_nd("R,S(0)", "S(0),R", shape, mesh, 1, true), "{ all_to_all_v:1 }");
      EXPECT_EQ(run_nd("S(0),S(1)", "S(1),S(0)", shape, mesh, 1, true), "{ all_to_all_v:1 }");
      run_nd("P(sum),S(0)", "S(0),R", shape, mesh, 2, /*exact=*/false);
      run_nd("S(0),P(max)", "R,S(1)", shape, mesh, 2, /*exact=*/false);
    }
    DTensorSpec source(mesh, parse_placements("R,S(0)"), Shape{8, 4}, at::kFloat);
    const RedistributePlanPtr plan = plan_redistribute(source, parse_placements("S(0),R"));
    ASSERT_EQ(plan->steps.size(), 1u) << plan->to_string();
    EXPECT_EQ(plan->steps[0].mesh_dims, std::vector<int64_t>{1}) << plan->to_string();
  });
  run_ranks(8, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 4});
    for (const Shape& shape : {Shape{8, 3}, Shape{9, 2}}) {
      EXPECT_EQ(run_nd("R,S(0)", "S(0),R", shape, mesh, 1, true), "{ all_to_all_v:1 }");
    }
    // A Partial that stays outside the group moves as it is.
    const at::Tensor global = make_global(Shape{8, 6});
    DeviceMesh cube = init_device_mesh("local", {2, 2, 2});
    const DTensor source = distribute_tensor(global, cube, parse_placements("P(sum),R,S(0)"));
    CollectiveCounter counter;
    const DTensor moved = redistribute_any(source, parse_placements("P(sum),S(0),R"));
    EXPECT_EQ(testing::describe_counts(counter), "{ all_to_all_v:1 }");
    EXPECT_TRUE(at::equal(moved.full_tensor(), global));
  });
  // Mesh dims of one rank never run a collective, cross step or not
  // (unless asked to, for measuring).
  if (single_rank_groups_communicate()) return;
  run_ranks(4, [](int) {
    EXPECT_EQ(run_nd("R,R", "S(1),S(0)", Shape{8, 4}, init_device_mesh("local", {1, 4}), 0, true),
              "{ }");
    EXPECT_EQ(run_nd("R,S(0)", "S(0),R", Shape{8, 4}, init_device_mesh("local", {4, 1}), 0, true),
              "{ }");
  });
}

TEST(RedistributeTest, StridedShardOverShardToReplicate) {
  run_ranks(8, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4, 2});
    for (const Shape& shape : {Shape{18, 2}, Shape{15, 5}}) {
      run_nd("SS(0,2),S(0)", "R,R", shape, mesh, 2, /*exact=*/false);
      run_nd("R,R", "SS(0,2),S(0)", shape, mesh, 0, /*exact=*/true);
      run_nd("SS(0,2),S(0)", "S(0),R", shape, mesh, 2, /*exact=*/false);
      run_nd("S(0),S(0)", "SS(0,2),S(0)", shape, mesh, 2, /*exact=*/false);
    }
  });
}

// ---------------------------------------------------------------------------
// Plans

TEST(RedistributeTest, PlanPrintsEachStepsCollective) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    // Large: a small one is gathered by one exchange over the whole mesh.
    DTensorSpec source(mesh, parse_placements("S(0),S(1)"), Shape{1024, 1024}, at::kFloat);
    DTensorSpec target = source.with_placements(parse_placements("R,R"));
    const RedistributePlanPtr plan = plan_redistribute(source, target);
    ASSERT_FALSE(plan->steps.empty());
    EXPECT_GE(plan->collectives(), 1);
    EXPECT_LE(plan->collectives(), 2);
    const std::string text = plan->to_string();
    for (const PlannedStep& step : plan->steps) {
      ASSERT_NE(step.transition, nullptr);
      EXPECT_NE(text.find(std::string(step.transition->collective())), std::string::npos) << text;
      EXPECT_FALSE(step.mesh_dims.empty());
      ASSERT_NE(step.before, nullptr);
      ASSERT_NE(step.after, nullptr);
    }
    EXPECT_EQ(*plan->steps.front().before, source);
    EXPECT_EQ(*plan->steps.back().after, target);
    EXPECT_NE(text.find("all_gather"), std::string::npos) << text;
    EXPECT_NE(text.find("bytes"), std::string::npos) << text;
    // One line per step plus a totals line.
    EXPECT_GE(std::count(text.begin(), text.end(), '\n') + (text.back() == '\n' ? 0 : 1),
              static_cast<int64_t>(plan->steps.size()) + 1)
        << text;
    EXPECT_GT(plan->total_cost, 0);

    // A 1-D P -> R plan is one all_reduce step.
    DeviceMesh line = init_device_mesh("local", {4});
    DTensorSpec partial(line, parse_placements("P(sum)"), Shape{4, 4}, at::kFloat);
    const RedistributePlanPtr reduce =
        plan_redistribute(partial, partial.with_placements(parse_placements("R")));
    ASSERT_EQ(reduce->steps.size(), 1u);
    EXPECT_EQ(reduce->collectives(), 1);
    EXPECT_EQ(reduce->steps[0].transition->collective(), "all_reduce");
    EXPECT_NE(reduce->to_string().find("all_reduce"), std::string::npos) << reduce->to_string();

    // R -> S is local: no collective.
    DTensorSpec rep(line, parse_placements("R"), Shape{4, 4}, at::kFloat);
    const RedistributePlanPtr slice =
        plan_redistribute(rep, rep.with_placements(parse_placements("S(1)")));
    EXPECT_EQ(slice->collectives(), 0);
  });
}

TEST(RedistributeTest, PlansAreCached) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTensorSpec source(mesh, parse_placements("S(0),S(1)"), Shape{7, 5}, at::kFloat);
    DTensorSpec target = source.with_placements(parse_placements("S(1),S(0)"));
    const RedistributePlanPtr first = plan_redistribute(source, target);
    const RedistributePlanPtr second = plan_redistribute(source, target);
    EXPECT_EQ(first, second);
    // An equal spec built anew hits the same entry.
    DTensorSpec source_again(mesh, parse_placements("S(-2),S(-1)"), Shape{7, 5}, at::kFloat);
    DTensorSpec target_again(mesh, parse_placements("S(1),S(0)"), Shape{7, 5}, at::kFloat);
    EXPECT_EQ(plan_redistribute(source_again, target_again), first);
    // A different shape is a different plan.
    DTensorSpec other(mesh, parse_placements("S(0),S(1)"), Shape{8, 5}, at::kFloat);
    EXPECT_NE(plan_redistribute(other, other.with_placements(parse_placements("S(1),S(0)"))),
              first);
  });
}

TEST(RedistributeTest, PlanCacheCapacityDefaultsTo4096AndRefusesZero) {
  EXPECT_EQ(kDefaultPlanCacheCapacity, 4096);
  EXPECT_EQ(plan_cache_capacity(), kDefaultPlanCacheCapacity);
  DTENSOR_EXPECT_ERROR(set_plan_cache_capacity(0),
                       "cache capacity: expected at least 1 entry, found 0");
  EXPECT_EQ(plan_cache_capacity(), kDefaultPlanCacheCapacity);
}

// More distinct redistributes than the cache holds: it never holds more
// than its capacity, and plans made again after their eviction give exactly
// what the first ones gave.
TEST(RedistributeTest, PlanCacheEvictsAndReplansExactly) {
  const testing::ScopedCacheCapacity capacity(plan_cache_capacity, set_plan_cache_capacity, 3);
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const at::Tensor global = make_global({7, 5});
    const DTensor source = distribute_tensor(global, mesh, parse_placements("S(0),S(1)"));
    const std::vector<const char*> targets = {"R,R",    "S(1),S(0)",    "S(1),R",    "R,S(0)",
                                              "S(0),R", "SS(0,2),S(0)", "S(1),S(1)", "R,S(1)"};
    std::vector<at::Tensor> first;
    for (const char* to : targets) {
      first.push_back(source.redistribute(parse_placements(to)).to_local());
      EXPECT_LE(plan_cache_size(), 3) << to;
    }
    EXPECT_EQ(plan_cache_size(), 3);
    for (size_t i = 0; i < targets.size(); ++i) {
      SCOPED_TRACE(targets[i]);
      const at::Tensor again = source.redistribute(parse_placements(targets[i])).to_local();
      EXPECT_TRUE(at::equal(again, first[i]));
      EXPECT_TRUE(
          at::equal(again, testing::expected_local(global, mesh, parse_placements(targets[i]))));
      EXPECT_LE(plan_cache_size(), 3);
    }
  });
}

// A plan held by a caller outlives its eviction and still runs exactly.
TEST(RedistributeTest, APlanInUseSurvivesItsEviction) {
  const testing::ScopedCacheCapacity capacity(plan_cache_capacity, set_plan_cache_capacity, 1);
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const at::Tensor global = make_global({7, 5});
    const DTensor source = distribute_tensor(global, mesh, parse_placements("S(0),S(1)"));
    const std::vector<PlacementPtr> target = parse_placements("S(1),S(0)");
    const RedistributePlanPtr held = plan_redistribute(source.spec(), target);
    plan_redistribute(source.spec(), parse_placements("R,R"));  // evicts `held`
    EXPECT_EQ(plan_cache_size(), 1);
    EXPECT_EQ(held.use_count(), 1);
    const at::Tensor expected = testing::expected_local(global, mesh, target);
    EXPECT_TRUE(at::equal(execute_plan(*held, source.to_local()), expected));
    const RedistributePlanPtr again = plan_redistribute(source.spec(), target);
    EXPECT_NE(again, held);  // planned anew
    EXPECT_EQ(again->to_string(), held->to_string());
    EXPECT_TRUE(at::equal(execute_plan(*again, source.to_local()), expected));
  });
}

// A plan cached under two spellings (S(-1) and S(1)) is one plan, held once
// per key.
TEST(RedistributeTest, PlanCacheCountsEverySpelling) {
  run_ranks(4, [](int /*rank*/) {
    EXPECT_EQ(plan_cache_size(), 0);  // a new thread's cache
    DeviceMesh mesh = init_device_mesh("local", {4});
    const DTensorSpec source(mesh, parse_placements("S(0)"), Shape{8, 4}, at::kFloat);
    const RedistributePlanPtr normalized = plan_redistribute(source, parse_placements("S(1)"));
    EXPECT_EQ(plan_cache_size(), 1);
    EXPECT_EQ(plan_redistribute(source, parse_placements("S(-1)")), normalized);
    EXPECT_EQ(plan_cache_size(), 2);
  });
}

// clear_plan_cache empties every thread's cache, not only the caller's.
TEST(RedistributeTest, ClearPlanCacheEmptiesEveryRanksCache) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const DTensorSpec source(mesh, parse_placements("S(0)"), Shape{8, 4}, at::kFloat);
    const RedistributePlanPtr before = plan_redistribute(source, parse_placements("R"));
    plan_redistribute(source, parse_placements("S(1)"));
    EXPECT_GE(plan_cache_size(), 2);
    mesh.world()->barrier();
    if (rank == 0) clear_plan_cache();
    mesh.world()->barrier();
    EXPECT_EQ(plan_cache_size(), 0);
    EXPECT_NE(plan_redistribute(source, parse_placements("R")), before);
    EXPECT_EQ(plan_cache_size(), 1);
  });
}

// Cached plans run again with their derived data (counts, positions): the
// second and third executions must give what the first did, and neither may
// touch the source or share memory with it.
TEST(RedistributeTest, RepeatedExecutionsKeepSourceAndResultApart) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = make_global({9, 6});
    for (const char* from : {"R", "S(0)", "S(1)", "P(sum)", "RG(dims=1,units=[1,2,3,4])"}) {
      for (const char* to : {"R", "S(0)", "S(1)", "RG(dims=1,units=[4,3,2,1])"}) {
        SCOPED_TRACE(::testing::Message() << from << " -> " << to);
        auto [source, represented] = make_source(global, mesh, parse_placements(from));
        const at::Tensor before = source.to_local().clone();
        const at::Tensor expected =
            testing::expected_local(represented, mesh, parse_placements(to));
        for (int run = 0; run < 3; ++run) {
          const DTensor result = redistribute_any(source, parse_placements(to));
          EXPECT_TRUE(at::equal(result.to_local(), expected)) << "run " << run;
          EXPECT_TRUE(at::equal(source.to_local(), before)) << "run " << run;
          if (std::string(from) != to) {
            EXPECT_FALSE(result.to_local().is_alias_of(source.to_local())) << "run " << run;
          }
        }
      }
    }
  });
}

// Without streams (local, MPI) async_op completes in the call: the same
// result, ready at once. The CUDA behaviour is tested in tests/nccl.
TEST(RedistributeTest, AsyncOpOnStreamlessBackendsCompletesInTheCall) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const at::Tensor global = make_global({7, 5});
    for (const char* to : {"R,R", "S(1),S(0)", "S(0),RG(dims=1,units=[3,0])"}) {
      SCOPED_TRACE(to);
      const DTensor source = distribute_tensor(global, mesh, parse_placements("S(0),S(1)"));
      const DTensor result = source.redistribute(parse_placements(to), {/*async_op=*/true});
      EXPECT_TRUE(result.is_ready());
      EXPECT_TRUE(source.is_ready());
      EXPECT_TRUE(at::equal(result.to_local(),
                            testing::expected_local(global, mesh, parse_placements(to))));
    }
  });
}

TEST(RedistributeTest, ExecutePlanMatchesRedistribute) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor global = make_global({7, 5});
    DTensor source = distribute_tensor(global, mesh, parse_placements("S(0),S(1)"));
    DTensorSpec target = source.spec().with_placements(parse_placements("S(1),R"));
    const RedistributePlanPtr plan = plan_redistribute(source.spec(), target);
    at::Tensor local = execute_plan(*plan, source.to_local());
    EXPECT_TRUE(
        at::equal(local, testing::expected_local(global, mesh, parse_placements("S(1),R"))));
  });
}

TEST(RedistributeTest, PartialTargetsRefusedPubliclyButPlannable) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    DTensor dt = distribute_tensor(global, mesh, parse_placements("S(0)"));
    DTENSOR_EXPECT_ERROR(dt.redistribute(parse_placements("P(sum)")), "Partial");
    const RedistributePlanPtr plan =
        plan_redistribute(dt.spec(), dt.spec().with_placements(parse_placements("P(sum)")));
    EXPECT_FALSE(plan->steps.empty());
    DTensor any = redistribute_any(dt, parse_placements("P(sum)"));
    EXPECT_TRUE(at::equal(any.full_tensor(), global));
  });
}

// Partial mesh dims of different ops reduce left to right, whatever the
// costs: [P(sum),P(max)] means the max over mesh dim 1 of the sums over mesh
// dim 0. Reducing the cheaper mesh dim 1 first would give 2 here, not 1.
TEST(RedistributeTest, PartialsOfDifferentOpsReduceLeftToRight) {
  run_ranks(8, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4, 2});
    const std::vector<int64_t>& at = mesh.coordinate();
    // Terms x[i][j] = 1 at (0, 0) and (1, 1): sums over i are 1 and 1, max 1.
    const float term = (at[0] == 0 && at[1] == 0) || (at[0] == 1 && at[1] == 1) ? 1 : 0;
    DTensor sum_then_max = from_local(at::full({1}, term), mesh, parse_placements("P(sum),P(max)"));
    EXPECT_TRUE(at::equal(sum_then_max.full_tensor(), at::ones({1})));
    EXPECT_TRUE(at::equal(sum_then_max.redistribute(parse_placements("R,S(0)")).full_tensor(),
                          at::ones({1})));
  });
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const std::vector<int64_t>& at = mesh.coordinate();
    // [P(max),P(sum)]: the sum over mesh dim 1 of the maxima over mesh dim 0.
    const float term = at[0] == at[1] ? 1 : 0;
    DTensor max_then_sum = from_local(at::full({2}, term), mesh, parse_placements("P(max),P(sum)"));
    const at::Tensor twos = at::full({2}, 2.0);
    EXPECT_TRUE(at::equal(max_then_sum.full_tensor(), twos));
    // Keeping mesh dim 0's P(max) while scattering mesh dim 1's sum still
    // reduces mesh dim 0 first.
    DTensor kept = max_then_sum.redistribute(parse_placements("P(max),S(0)"));
    EXPECT_TRUE(at::equal(kept.full_tensor(), twos));
  });
}

// Meshes of the same shape on two different sub-communicators are other
// groups: a plan cached for one must not run on the other's ranks.
TEST(RedistributeTest, MeshesOfOtherCommunicatorsShareNoPlans) {
  run_ranks(4, [](int rank) {
    const std::shared_ptr<Communicator> world = local_world();
    DeviceMesh pairs(world->split(rank / 2, rank), {2});    // {0,1} and {2,3}
    DeviceMesh strided(world->split(rank % 2, rank), {2});  // {0,2} and {1,3}
    EXPECT_NE(pairs, strided);
    const at::Tensor first = make_global({4, 3});
    const at::Tensor second = make_global({4, 3}) + 100;
    EXPECT_TRUE(
        at::equal(distribute_tensor(first, pairs, parse_placements("S(0)")).full_tensor(), first));
    EXPECT_TRUE(at::equal(
        distribute_tensor(second, strided, parse_placements("S(0)")).full_tensor(), second));
  });
}

// A mesh over part of the world: DTensor calls on it, merged redistribute
// steps included, involve only its ranks (the others may leave at once).
TEST(RedistributeTest, MeshOverPartOfTheWorldNeedsOnlyItsRanks) {
  run_ranks(8, [](int rank) {
    DeviceMesh mesh(local_world(), {2, 2}, {"a", "b"}, {0, 1, 2, 3});
    if (rank >= 4) return;
    const at::Tensor global = make_global({8, 4});
    DTensor rows = from_local(global.chunk(4)[rank].clone(), mesh, parse_placements("S(0),S(0)"));
    EXPECT_TRUE(at::equal(rows.full_tensor(), global));
    DTensor scattered = distribute_tensor(global, mesh, parse_placements("S(1),S(0)"), 0);
    EXPECT_TRUE(at::equal(scattered.full_tensor(), global));
  });
}

// Outputs come from the buffer pool (base/buffer_pool.h): a second
// redistribute of the same size takes the blocks the first one's outputs
// returned, and nothing stays in use once the outputs are gone.
TEST(RedistributeTest, OutputsReuseThePoolsBlocks) {
  const int64_t saved_capacity = buffer_pool_capacity();
  set_buffer_pool_capacity(int64_t{64} << 20);
  release_cached_buffers();
  const at::Tensor global = make_global({1024, 256});  // 1 MiB of float32
  const auto gather_all = [&] {
    run_ranks(4, [&](int /*rank*/) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      const DTensor rows = distribute_tensor(global, mesh, parse_placements("S(0)"));
      EXPECT_TRUE(at::equal(rows.redistribute(parse_placements("R")).to_local(), global));
      EXPECT_TRUE(at::equal(rows.redistribute(parse_placements("S(1)")).full_tensor(), global));
    });
  };
  const BufferPoolStats before = buffer_pool_stats();
  gather_all();
  const BufferPoolStats first = buffer_pool_stats();
  gather_all();
  const BufferPoolStats second = buffer_pool_stats();
  // Every rank's 1 MiB output of the second round finds an idle block.
  EXPECT_GE(second.hits - first.hits, 4);
  EXPECT_GT(first.cached_bytes, 4 << 20);
  EXPECT_EQ(second.in_use_bytes, before.in_use_bytes);
  set_buffer_pool_capacity(saved_capacity);
  release_cached_buffers();
}

}  // namespace
}  // namespace dtensor
