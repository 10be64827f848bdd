// Copyright 2026 The dtensor Authors.
//
// InterleavedShard, the reference user placement (examples/interleaved_shard):
// its layout, spelling, identity, and that distribute, full_tensor and
// redistribute to and from the built-in placements work through the generic
// paths, bit-equal to the single-device tensor, with the expected number of
// collectives; and that ATen ops run on it: the merged QKV projection
// (merged_qkv.h) through linear, the plugin's split rule and per-head
// products, exactly and without communication.
#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/tools/rule_verifier.h>
#include "interleaved_shard.h"
#include "merged_qkv.h"
#include "tests/support/expect_error.h"
#include "tests/support/layout_reference.h"

namespace dtensor {
namespace {

using Shape = std::vector<int64_t>;
using Indices = std::vector<int64_t>;

at::Tensor make_global(const Shape& shape) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  return (at::arange(numel, at::kLong) + 1).reshape(shape).to(at::kFloat);
}

// torch.chunk's piece r of n, computed here independently of the library.
std::pair<int64_t, int64_t> chunk_bounds(int64_t length, int64_t n, int64_t r) {
  const int64_t chunk = (length + n - 1) / n;
  return {std::min(chunk * r, length), std::min(chunk * (r + 1), length)};
}

// Single-device reference: rank r's part of `t` under IS(dim, k) over n ranks.
at::Tensor interleaved_piece(const at::Tensor& t, int64_t dim, int64_t k, int64_t n, int64_t r) {
  const int64_t block = t.size(dim) / k;
  const auto [begin, end] = chunk_bounds(block, n, r);
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < k; ++b) parts.push_back(t.narrow(dim, b * block + begin, end - begin));
  return at::cat(parts, dim).contiguous();
}

// Single-device reference: rank r's part of `t` under S(dim) over n ranks.
at::Tensor shard_piece(const at::Tensor& t, int64_t dim, int64_t n, int64_t r) {
  const auto [begin, end] = chunk_bounds(t.size(dim), n, r);
  return t.narrow(dim, begin, end - begin).contiguous();
}

// ---------------------------------------------------------------------------
// Layout

TEST(InterleavedShardTest, MergedQkvLayout) {
  const PlacementPtr is = InterleavedShard::make(0, 3);
  // Dim 12 = Q [0..3], K [4..7], V [8..11]; 2 ranks.
  LocalLayout r0 = compute_local_layout({12}, {2}, {0}, {is});
  LocalLayout r1 = compute_local_layout({12}, {2}, {1}, {is});
  EXPECT_EQ(r0.global_indices()[0], (Indices{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(r1.global_indices()[0], (Indices{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(r0.local_shape, (Shape{6}));
  EXPECT_EQ(r0.global_offset, (Shape{0}));
  EXPECT_EQ(r1.global_offset, (Shape{2}));

  // 4 ranks: one row of each block.
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(compute_local_layout({12, 4}, {4}, {r}, {is}).global_indices()[0],
              (Indices{r, 4 + r, 8 + r}));
  }
  // Blocks of 5 over 2 ranks follow torch.chunk inside each block: 3 + 2.
  EXPECT_EQ(compute_local_layout({15}, {2}, {0}, {is}).global_indices()[0],
            (Indices{0, 1, 2, 5, 6, 7, 10, 11, 12}));
  EXPECT_EQ(compute_local_layout({15}, {2}, {1}, {is}).global_indices()[0],
            (Indices{3, 4, 8, 9, 13, 14}));
  // Blocks of 2 over 4 ranks: the last two ranks hold nothing, offset = size.
  LocalLayout empty = compute_local_layout({6, 3}, {4}, {3}, {is});
  EXPECT_EQ(empty.local_shape, (Shape{0, 3}));
  EXPECT_EQ(empty.global_offset[0], 6);

  // Nested on a 2-D mesh: S(0) halves the dim, then IS(0,3) interleaves each half.
  const std::vector<PlacementPtr> nested = {Shard::make(0), is};
  EXPECT_EQ(compute_local_layout({12}, {2, 2}, {1, 0}, nested).global_indices()[0],
            (Indices{6, 8, 10}));
  // IS(0,3) then S(1): dim 0 interleaved, dim 1 chunked.
  LocalLayout two = compute_local_layout({12, 5}, {2, 2}, {1, 1}, {is, Shard::make(1)});
  EXPECT_EQ(two.global_indices()[0], (Indices{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(two.global_indices()[1], (Indices{3, 4}));
}

// ---------------------------------------------------------------------------
// Spelling and identity

TEST(InterleavedShardTest, ParsePrintRoundTrip) {
  // The spelling registered by the plugin library's static initializer.
  const PlacementPtr parsed = parse_placement("IS(0,3)");
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->to_string(), "IS(0,3)");
  EXPECT_EQ(*parsed, *InterleavedShard::make(0, 3));
  const auto* typed = dynamic_cast<const InterleavedShard*>(parsed.get());
  ASSERT_NE(typed, nullptr);
  EXPECT_EQ(typed->dim(), 0);
  EXPECT_EQ(typed->interleave(), 3);

  EXPECT_EQ(*parse_placement(" IS( dim = 1 , interleave = 2 ) "), *InterleavedShard::make(1, 2));
  const std::vector<PlacementPtr> list = parse_placements("IS(0,3),S(1)");
  EXPECT_EQ(placements_to_string(list), "IS(0,3),S(1)");
  EXPECT_TRUE(same_placements(parse_placements(placements_to_string(list)), list));

  DTENSOR_EXPECT_ERROR(parse_placement("IS(0)"), "IS(0)");
  DTENSOR_EXPECT_ERROR(parse_placement("IS(0,0)"), "at least 1");
  DTENSOR_EXPECT_ERROR(InterleavedShard::make(0, 0), "interleave: expected at least 1");
}

TEST(InterleavedShardTest, EqualityAndHash) {
  const PlacementPtr is03 = InterleavedShard::make(0, 3);
  const PlacementPtr is02 = InterleavedShard::make(0, 2);
  const PlacementPtr is13 = InterleavedShard::make(1, 3);
  const PlacementPtr s0 = Shard::make(0);
  const PlacementPtr ss03 = StridedShard::make(0, 3);

  EXPECT_EQ(*is03, *InterleavedShard::make(0, 3));
  EXPECT_EQ(is03->hash(), InterleavedShard::make(0, 3)->hash());
  EXPECT_NE(*is03, *is02);
  EXPECT_NE(*is03, *is13);
  EXPECT_NE(*is02, *s0);
  EXPECT_NE(*s0, *is02);
  EXPECT_NE(*is03, *ss03);  // the same layout when divisible, but not the same placement
  EXPECT_NE(*ss03, *is03);
  EXPECT_NE(is03->hash(), is02->hash());
  EXPECT_NE(is03->hash(), is13->hash());
  EXPECT_NE(is02->hash(), s0->hash());
  EXPECT_NE(is03->hash(), ss03->hash());

  // What the library asks instead of casting.
  EXPECT_EQ(is03->split_dim(), 0);
  EXPECT_FALSE(is03->splits_into_ordered_blocks());
  EXPECT_FALSE(is03->is_replicate());
  EXPECT_FALSE(is03->is_partial());
  EXPECT_EQ(*InterleavedShard::make(-2, 3)->normalized(2), *is03);
  DTENSOR_EXPECT_ERROR(InterleavedShard::make(2, 3)->normalized(2), "IS(2,3)");
}

// ---------------------------------------------------------------------------
// Distribute and full_tensor

void check_distribute_1d(int64_t n) {
  run_ranks(static_cast<int>(n), [n](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {n});
    for (const Shape& shape : {Shape{12, 4}, Shape{15, 5}, Shape{6, 3}, Shape{3, 12}}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " shape " << ::testing::PrintToString(shape)
                                        << " rank " << rank);
      const at::Tensor global = make_global(shape);
      for (int64_t dim : {0, 1}) {
        if (shape[dim] % 3 != 0) continue;
        const std::vector<PlacementPtr> p = {InterleavedShard::make(dim, 3)};
        DTensor dt = distribute_tensor(global, mesh, p);
        const at::Tensor expected = interleaved_piece(global, dim, 3, n, rank);
        EXPECT_TRUE(at::equal(dt.to_local(), expected))
            << "got " << dt.to_local() << "\nexpected " << expected;
        EXPECT_TRUE(at::equal(dt.full_tensor(), global));
        // from_local of the same pieces describes the same tensor.
        FromLocalOptions options;
        options.shape = shape;
        DTensor back = from_local(expected, mesh, p, options);
        EXPECT_TRUE(at::equal(back.full_tensor(), global));
        // Scattered from one rank.
        DTensor scattered = distribute_tensor(rank == 0 ? global : at::zeros_like(global), mesh, p,
                                              /*src_rank=*/0);
        EXPECT_TRUE(at::equal(scattered.to_local(), expected));
      }
    }
  });
}

TEST(InterleavedShardTest, DistributeFullTensorTwoRanks) { check_distribute_1d(2); }
TEST(InterleavedShardTest, DistributeFullTensorFourRanks) { check_distribute_1d(4); }

TEST(InterleavedShardTest, DistributeFullTensorTwoDimMesh) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const int64_t c0 = mesh.coordinate()[0];
    const int64_t c1 = mesh.coordinate()[1];
    for (const Shape& shape : {Shape{12, 4}, Shape{12, 5}, Shape{6, 7}}) {
      SCOPED_TRACE(::testing::Message()
                   << "shape " << ::testing::PrintToString(shape) << " rank " << rank);
      const at::Tensor global = make_global(shape);
      // [IS(0,3), S(1)]: dim 0 interleaved over dp, dim 1 chunked over tp.
      DTensor a = distribute_tensor(global, mesh, parse_placements("IS(0,3),S(1)"));
      const at::Tensor expected_a = shard_piece(interleaved_piece(global, 0, 3, 2, c0), 1, 2, c1);
      EXPECT_TRUE(at::equal(a.to_local(), expected_a))
          << "got " << a.to_local() << "\nexpected " << expected_a;
      EXPECT_TRUE(at::equal(a.full_tensor(), global));
      // [IS(0,3)] on the first mesh dim only, replicated over the second.
      DTensor b = distribute_tensor(global, mesh, parse_placements("IS(0,3),R"));
      EXPECT_TRUE(at::equal(b.to_local(), interleaved_piece(global, 0, 3, 2, c0)));
      EXPECT_TRUE(at::equal(b.full_tensor(), global));
      // [R, IS(0,3)] and [S(1), IS(0,3)].
      DTensor c = distribute_tensor(global, mesh, parse_placements("S(1),IS(0,3)"));
      const at::Tensor expected_c = interleaved_piece(shard_piece(global, 1, 2, c0), 0, 3, 2, c1);
      EXPECT_TRUE(at::equal(c.to_local(), expected_c));
      EXPECT_TRUE(at::equal(c.full_tensor(), global));
    }
  });
}

// ---------------------------------------------------------------------------
// Redistribute

struct Move {
  std::string from;
  std::string to;
  int64_t collectives;
  std::string only_kind;  // when non-empty: every collective is this one
};

// Builds the source (a Partial(sum) source through redistribute_any from
// Replicate), redistributes under a counter and compares with a direct
// distribute of the target.
void run_move(const Move& m, const at::Tensor& global, const DeviceMesh& mesh, bool exact) {
  SCOPED_TRACE(::testing::Message()
               << m.from << " -> " << m.to << " shape " << global.sizes() << " mesh "
               << mesh.to_string() << " rank " << mesh.world()->rank());
  const std::vector<PlacementPtr> from = parse_placements(m.from);
  const std::vector<PlacementPtr> to = parse_placements(m.to);
  bool partial = false;
  std::vector<PlacementPtr> without_partial;
  for (const PlacementPtr& p : from) {
    partial = partial || p->is_partial();
    without_partial.push_back(p->is_partial() ? Replicate::make() : p);
  }
  DTensor source = distribute_tensor(global, mesh, without_partial);
  if (partial) source = redistribute_any(source, from);
  ASSERT_TRUE(
      same_placements(source.placements(), normalize_placements(from, global.dim(), mesh.shape())));

  CollectiveCounter counter;
  DTensor out = source.redistribute(to);
  const int64_t total = counter.total();
  const std::string kinds = testing::describe_counts(counter);
  if (exact) {
    EXPECT_EQ(total, m.collectives) << "collectives " << kinds;
  } else {
    EXPECT_LE(total, m.collectives) << "collectives " << kinds;
  }
  if (!m.only_kind.empty()) {
    EXPECT_EQ(counter.count(m.only_kind), total) << "collectives " << kinds;
  }

  const at::Tensor direct = distribute_tensor(global, mesh, to).to_local();
  EXPECT_TRUE(at::equal(out.to_local(), direct))
      << "got " << out.to_local() << "\nexpected " << direct;
  EXPECT_TRUE(at::equal(out.full_tensor(), global));
  if (::testing::Test::HasFailure() && mesh.world()->rank() == 0) {
    std::cout << "plan " << m.from << " -> " << m.to << " " << kinds << ":\n"
              << plan_redistribute(source.spec(), to)->to_string() << std::endl;
  }
}

std::vector<Move> one_dim_moves() {
  return {
      {"IS(0,3)", "R", 1, "all_gather_v"},
      {"R", "IS(0,3)", 0, ""},
      {"IS(0,3)", "S(0)", 1, "all_to_all_v"},
      {"S(0)", "IS(0,3)", 1, "all_to_all_v"},
      {"IS(0,3)", "S(1)", 1, "all_to_all_v"},
      {"S(1)", "IS(0,3)", 1, "all_to_all_v"},
      // IS claims no ordered blocks, yet its pieces are one equal run per
      // block: the reduce-scatter runs along a [blocks, ...] view.
      {"P(sum)", "IS(0,3)", 1, "reduce_scatter_v"},
      {"IS(0,3)", "IS(0,3)", 0, ""},
      {"IS(0,3)", "SS(0,2)", 1, "all_to_all_v"},
  };
}

void check_redistribute_1d(int64_t n) {
  run_ranks(static_cast<int>(n), [n](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {n});
    for (const Shape& shape : {Shape{12, 4}, Shape{15, 7}, Shape{6, 5}}) {
      for (const Move& m : one_dim_moves()) run_move(m, make_global(shape), mesh, /*exact=*/true);
    }
  });
}

TEST(InterleavedShardTest, RedistributeTwoRanks) { check_redistribute_1d(2); }
TEST(InterleavedShardTest, RedistributeFourRanks) { check_redistribute_1d(4); }

TEST(InterleavedShardTest, RedistributeTwoDimMesh) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const Shape& shape : {Shape{12, 4}, Shape{12, 5}}) {
      const at::Tensor global = make_global(shape);
      // One mesh dim changes: one collective (none from Replicate).
      run_move({"IS(0,3),S(1)", "R,S(1)", 1, "all_gather_v"}, global, mesh, true);
      run_move({"R,S(1)", "IS(0,3),S(1)", 0, ""}, global, mesh, true);
      run_move({"IS(0,3),S(1)", "S(0),S(1)", 1, "all_to_all_v"}, global, mesh, true);
      run_move({"S(0),S(1)", "IS(0,3),S(1)", 1, "all_to_all_v"}, global, mesh, true);
      run_move({"P(sum),S(1)", "IS(0,3),S(1)", 1, "reduce_scatter_v"}, global, mesh, true);
      run_move({"R,R", "IS(0,3),S(1)", 0, ""}, global, mesh, true);
      // Two mesh dims change.
      run_move({"IS(0,3),S(1)", "R,R", 2, ""}, global, mesh, false);
      run_move({"IS(0,3),S(1)", "S(1),IS(0,3)", 2, ""}, global, mesh, false);
    }
  });
}

// ---------------------------------------------------------------------------
// ATen ops: the merged QKV projection

// Integer values in [-3, 3]: every product and sum below is exact in float.
at::Tensor small_integers(const Shape& shape, int64_t seed) {
  return (at::arange(shape[0] * shape[1], at::kLong) * seed)
      .remainder(7)
      .sub(3)
      .reshape(shape)
      .to(at::kFloat);
}

constexpr int64_t kTokens = 4, kIn = 4, kHeads = 4, kHeadDim = 2;

struct QkvCase {
  at::Tensor x = small_integers({kTokens, kIn}, 5);
  at::Tensor w_qkv = small_integers({3 * kHeads * kHeadDim, kIn}, 3);
  examples::QkvProjection qkv = examples::project_qkv(x, w_qkv);
  examples::HeadAttention attention = examples::attend_per_head(qkv, kHeads);
};

// `got` is a DTensor laid out as `placements`, holding exactly `expected`.
void expect_dtensor(const at::Tensor& got, const std::string& placements,
                    const at::Tensor& expected) {
  const DTensor d(got);
  EXPECT_EQ(placements_to_string(d.placements()), placements);
  EXPECT_TRUE(at::equal(d.full_tensor(), expected))
      << "got " << d.full_tensor() << "\nexpected " << expected;
  const at::Tensor direct = distribute_tensor(expected, d.mesh(), d.placements()).to_local();
  EXPECT_TRUE(at::equal(d.to_local(), direct));
}

void expect_thirds(const examples::QkvProjection& got, const std::string& placements,
                   const examples::QkvProjection& expected) {
  expect_dtensor(got.q, placements, expected.q);
  expect_dtensor(got.k, placements, expected.k);
  expect_dtensor(got.v, placements, expected.v);
}

// The projection and the per-head products on DTensors laid out as given, and
// the collectives each part ran.
struct DistributedQkv {
  at::Tensor merged;
  examples::QkvProjection qkv;
  examples::HeadAttention attention;
  int64_t projection_collectives = 0;
  int64_t attention_collectives = 0;
};

DistributedQkv run_distributed(const QkvCase& c, const DeviceMesh& mesh, const char* x_layout,
                               const char* w_layout) {
  const at::Tensor x = distribute_tensor(c.x, mesh, parse_placements(x_layout)).tensor();
  const at::Tensor w = distribute_tensor(c.w_qkv, mesh, parse_placements(w_layout)).tensor();
  DistributedQkv out;
  {
    CollectiveCounter counter;
    out.merged = at::linear(x, w);
    out.qkv = examples::project_qkv(x, w);
    out.projection_collectives = counter.total();
  }
  CollectiveCounter counter;
  out.attention = examples::attend_per_head(out.qkv, kHeads);
  out.attention_collectives = counter.total();
  return out;
}

void check_qkv_projection_1d(int64_t n) {
  run_ranks(static_cast<int>(n), [n](int rank) {
    SCOPED_TRACE(::testing::Message() << "n " << n << " rank " << rank);
    const QkvCase expected;
    const DeviceMesh mesh = init_device_mesh("local", {n}, {"tp"});
    const DistributedQkv got = run_distributed(expected, mesh, "R", "IS(0,3)");
    EXPECT_EQ(got.projection_collectives, 0);
    EXPECT_EQ(got.attention_collectives, 0);
    // The output's last dim carries the interleaved layout; its thirds are
    // ordinary shards: rank r holds heads [r * 4/n, (r+1) * 4/n) of each.
    expect_dtensor(got.merged, "IS(1,3)", at::linear(expected.x, expected.w_qkv));
    expect_thirds(got.qkv, "S(1)", expected.qkv);
    EXPECT_TRUE(at::equal(DTensor(got.qkv.q).to_local(), shard_piece(expected.qkv.q, 1, n, rank)));
    // Per-head products stay on each rank's heads.
    expect_dtensor(got.attention.scores, "S(0)", expected.attention.scores);
    expect_dtensor(got.attention.mixed, "S(0)", expected.attention.mixed);
    EXPECT_EQ(DTensor(got.attention.scores).to_local().size(0), kHeads / n);
  });
}

TEST(InterleavedShardTest, MergedQkvProjectionTwoRanks) { check_qkv_projection_1d(2); }
TEST(InterleavedShardTest, MergedQkvProjectionFourRanks) { check_qkv_projection_1d(4); }

TEST(InterleavedShardTest, MergedQkvProjectionWithTokensSplitOverDp) {
  run_ranks(4, [](int rank) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    const QkvCase expected;
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const DistributedQkv got = run_distributed(expected, mesh, "S(0),R", "R,IS(0,3)");
    EXPECT_EQ(got.projection_collectives, 0);
    expect_dtensor(got.merged, "S(0),IS(1,3)", at::linear(expected.x, expected.w_qkv));
    expect_thirds(got.qkv, "S(0),S(1)", expected.qkv);
    // Scores mix tokens, so the split tokens are gathered over dp; the heads
    // stay split over tp.
    const DTensor scores(got.attention.scores);
    EXPECT_EQ(scores.placements()[1]->to_string(), "S(0)");
    EXPECT_TRUE(at::equal(scores.full_tensor(), expected.attention.scores));
    EXPECT_TRUE(at::equal(DTensor(got.attention.mixed).full_tensor(), expected.attention.mixed));
  });
}

TEST(InterleavedShardTest, SplitsOtherThanTheBlocksStayCorrect) {
  run_ranks(2, [](int /*rank*/) {
    const QkvCase expected;
    const at::Tensor merged_expected = at::linear(expected.x, expected.w_qkv);
    const DeviceMesh mesh = init_device_mesh("local", {2}, {"tp"});
    const at::Tensor merged =
        distribute_tensor(merged_expected, mesh, parse_placements("IS(1,3)")).tensor();
    // The blocks by explicit sizes: the same S(1) thirds, locally.
    const std::vector<at::Tensor> thirds = merged.split_with_sizes({8, 8, 8}, 1);
    ASSERT_EQ(thirds.size(), 3u);
    expect_dtensor(thirds[1], "S(1)", expected.qkv.k);
    // Halves cut across the blocks: correct, through a gathered dim.
    const std::vector<at::Tensor> halves = merged.chunk(2, 1);
    const std::vector<at::Tensor> expected_halves = merged_expected.chunk(2, 1);
    ASSERT_EQ(halves.size(), 2u);
    for (size_t i = 0; i < halves.size(); ++i) {
      EXPECT_TRUE(at::equal(DTensor(halves[i]).full_tensor(), expected_halves[i]));
    }
    // Splitting another dim keeps the interleaved one as it is.
    const std::vector<at::Tensor> token_pairs = merged.split(2, 0);
    ASSERT_EQ(token_pairs.size(), 2u);
    expect_dtensor(token_pairs[1], "IS(1,3)", merged_expected.split(2, 0)[1]);
  });
}

TEST(InterleavedShardTest, RuleVerifierAcceptsThePluginSplitRule) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    const at::Tensor t = make_global({6, 6});
    // Only an interleaved input makes the plugin's rule offer its rows.
    VerifierOptions with_plugin;
    with_plugin.extra_placements = {InterleavedShard::make(1, 3), InterleavedShard::make(0, 3)};
    for (const SampleCall& sample :
         {SampleCall{"aten::split.Tensor", {t, int64_t{2}, int64_t{1}}},
          SampleCall{"aten::split_with_sizes", {t, std::vector<int64_t>{2, 2, 2}, int64_t{0}}}}) {
      const VerifierReport built_in = verify_rules(mesh, sample);
      const VerifierReport report = verify_rules(mesh, sample, with_plugin);
      // At least the row IS(d,3) -> [S(d), S(d), S(d)] joins the built-in ones.
      EXPECT_GT(report.rows_checked, built_in.rows_checked) << sample.op_name;
      for (const std::string& failure : report.failures) ADD_FAILURE() << failure;
    }
  });
}

// ---------------------------------------------------------------------------
// Errors

TEST(InterleavedShardTest, SizeNotDivisibleByInterleave) {
  // Layout alone.
  DTENSOR_EXPECT_ERROR(compute_local_layout({10, 4}, {2}, {0}, {InterleavedShard::make(0, 3)}),
                       "IS(0,3): tensor dim 0 has size 10, which is not divisible by interleave 3");
  run_ranks(2, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    const at::Tensor global = make_global({10, 4});
    DTENSOR_EXPECT_ERROR(distribute_tensor(global, mesh, parse_placements("IS(0,3)")),
                         "has size 10, which is not divisible by interleave 3");
    DTENSOR_EXPECT_ERROR(
        distribute_tensor(global, mesh, parse_placements("IS(1,3)")),
        "IS(1,3): tensor dim 1 has size 4, which is not divisible by interleave 3");
    DTensor replicated = distribute_tensor(global, mesh, parse_placements("R"));
    DTENSOR_EXPECT_ERROR(replicated.redistribute(parse_placements("IS(0,3)")),
                         "not divisible by interleave 3");
  });
  // Nested: the size checked is the piece this mesh dim splits (8 / 2 = 4).
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTENSOR_EXPECT_ERROR(
        distribute_tensor(make_global({8, 3}), mesh, parse_placements("S(0),IS(0,3)")),
        "has size 4, which is not divisible by interleave 3");
  });
}

}  // namespace
}  // namespace dtensor
