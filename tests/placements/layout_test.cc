// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/layout.h>

#include <algorithm>
#include <limits>
#include <random>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/placements/placements.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using Shape = std::vector<int64_t>;

struct Expected {
  Shape shape;
  Shape offset;
};

void expect_layouts(const Shape& global, const Shape& mesh, const std::string& placements,
                    const std::vector<Expected>& by_rank) {
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    SCOPED_TRACE(::testing::Message() << placements << " rank " << rank);
    LocalLayout layout = compute_local_layout(global, mesh, grid_coordinate(rank, mesh),
                                              parse_placements(placements));
    EXPECT_EQ(layout.local_shape, by_rank[rank].shape);
    EXPECT_EQ(layout.global_offset, by_rank[rank].offset);
  }
}

TEST(LayoutTest, DesignCaseShardOfFiveOverFour) {
  expect_layouts({5}, {4}, "S(0)", {{{2}, {0}}, {{2}, {2}}, {{1}, {4}}, {{0}, {5}}});
}

TEST(LayoutTest, DesignCaseTwoDimShards) {
  expect_layouts({7, 5}, {2, 2}, "S(0),S(1)",
                 {{{4, 3}, {0, 0}}, {{4, 2}, {0, 3}}, {{3, 3}, {4, 0}}, {{3, 2}, {4, 3}}});
}

TEST(LayoutTest, DesignCaseShardTwiceOnOneDim) {
  std::vector<Expected> expected;
  for (int64_t dp = 0; dp < 3; ++dp) {
    expected.push_back({{2, 2}, {4 * dp, 0}});
    expected.push_back({{2, 2}, {4 * dp + 2, 0}});
  }
  expected.push_back({{1, 2}, {12, 0}});
  expected.push_back({{0, 2}, {13, 0}});
  expect_layouts({13, 2}, {4, 2}, "S(0),S(0)", expected);
}

TEST(LayoutTest, DesignCaseFsdpOverTensorParallel) {
  // Rows 9*tp + 3*dp onwards, 3 of them; dp 3 holds nothing (18 = 2 * 9 = 2 * (3+3+3+0)).
  std::vector<Expected> expected;
  for (int64_t dp = 0; dp < 4; ++dp) {
    for (int64_t tp = 0; tp < 2; ++tp) {
      expected.push_back(dp < 3 ? Expected{{3, 2}, {9 * tp + 3 * dp, 0}}
                                : Expected{{0, 2}, {18, 0}});
    }
  }
  expect_layouts({18, 2}, {4, 2}, "SS(0,2),S(0)", expected);
  LocalLayout rank1 =
      compute_local_layout({18, 2}, {4, 2}, {0, 1}, parse_placements("SS(0,2),S(0)"));
  EXPECT_EQ(rank1.global_indices()[0], (Shape{9, 10, 11}));
}

TEST(LayoutTest, DesignCaseStridedUneven) {
  const Shape offsets = {0, 8, 2, 10, 4, 12, 6, 14};
  std::vector<Expected> expected;
  for (int64_t rank = 0; rank < 8; ++rank) {
    expected.push_back({{rank == 7 ? 1 : 2, 5}, {offsets[rank], 0}});
  }
  expect_layouts({15, 5}, {4, 2}, "SS(0,2),S(0)", expected);
}

TEST(LayoutTest, StridedShardInterleavesChunks) {
  // L=9, split_factor=2, n=4: [0,1,5], [2,3,6], [4,7], [8].
  const std::vector<Shape> want = {{0, 1, 5}, {2, 3, 6}, {4, 7}, {8}};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(compute_local_layout({9}, {4}, {r}, {StridedShard::make(0, 2)}).global_indices()[0],
              want[r]);
  }
}

TEST(LayoutTest, SplitFactorsBeyondTheLengthGiveEmptyChunks) {
  // Chunks past the length are empty: a factor of 10^18 answers at once.
  const int64_t huge = 999999999999999999;
  expect_layouts({4}, {2}, "SS(0," + std::to_string(huge) + ")", {{{4}, {0}}, {{0}, {4}}});
  EXPECT_EQ(compute_local_layout({5}, {2}, {0}, {StridedShard::make(0, 7)}).global_indices()[0],
            Shape({0, 1, 2, 3, 4}));
}

TEST(LayoutTest, ExtentsNearTheLargestInt64) {
  const int64_t largest = std::numeric_limits<int64_t>::max();
  expect_layouts({largest}, {2}, "S(0)",
                 {{{int64_t{1} << 62}, {0}}, {{(int64_t{1} << 62) - 1}, {int64_t{1} << 62}}});
  // chunk = ceil(largest / 3) = largest / 3 + 1; the last piece is what remains.
  const ChunkRange last = torch_chunk_range(largest, 3, 2);
  EXPECT_EQ(last.begin, 2 * (largest / 3 + 1));
  EXPECT_EQ(last.end, largest);
}

TEST(LayoutTest, ExtentsOfMergedRows) {
  EXPECT_EQ(LayoutIndices::extents({2, 3, 4}, 2), Shape({6, 4}));
  EXPECT_EQ(LayoutIndices::extents({2, 3, 4}, 0), Shape({2, 3, 4}));
  EXPECT_EQ(LayoutIndices::extents({}, 1), Shape({}));
}

TEST(LayoutTest, RaggedRowsFollowUnits) {
  // Units that are row counts give exactly those rows; zero units hold nothing.
  const std::vector<Expected> counts = {
      {{1, 3}, {0, 0}}, {{2, 3}, {1, 0}}, {{1, 3}, {3, 0}}, {{0, 3}, {4, 0}}};
  expect_layouts({4, 3}, {4}, "RG(dims=1,units=[1,2,1,0])", counts);
  // One non-zero unit puts everything on one rank.
  expect_layouts({4, 3}, {3}, "RG(dims=1,units=[0,5,0])",
                 {{{0, 3}, {4, 0}}, {{4, 3}, {0, 0}}, {{0, 3}, {4, 0}}});
  // Proportional, floor boundaries: 10 rows over units 1:2:1 -> 2, 5, 3.
  expect_layouts({10}, {3}, "RG(dims=1,units=[1,2,1])", {{{2}, {0}}, {{5}, {2}}, {{3}, {7}}});
}

TEST(LayoutTest, RaggedMergesLeadingDims) {
  // [2,3,4] with dims=2: 6 rows of 4; units 1,2 -> rows [0,2) and [2,6).
  LocalLayout first =
      compute_local_layout({2, 3, 4}, {2}, {0}, parse_placements("RG(dims=2,units=[1,2])"));
  LocalLayout second =
      compute_local_layout({2, 3, 4}, {2}, {1}, parse_placements("RG(dims=2,units=[1,2])"));
  EXPECT_EQ(first.local_shape, (Shape{2, 4}));
  EXPECT_EQ(second.local_shape, (Shape{4, 4}));
  EXPECT_EQ(second.global_indices()[0], (Shape{2, 3, 4, 5}));
  EXPECT_EQ(second.merged_leading_dims, 2);
  // A trailing dim may still be split on another mesh dim.
  LocalLayout both = compute_local_layout({2, 3, 4}, {2, 2}, {1, 1},
                                          parse_placements("RG(dims=2,units=[1,2]),S(2)"));
  EXPECT_EQ(both.local_shape, (Shape{4, 2}));
  EXPECT_EQ(both.global_offset, (Shape{2, 2}));
}

TEST(LayoutTest, ReplicateAndPartialHoldEverything) {
  expect_layouts({3, 4}, {2, 2}, "R,P(max)",
                 {{{3, 4}, {0, 0}}, {{3, 4}, {0, 0}}, {{3, 4}, {0, 0}}, {{3, 4}, {0, 0}}});
}

TEST(LayoutTest, ZeroDimTensor) {
  LocalLayout layout = compute_local_layout({}, {2}, {1}, parse_placements("R"));
  EXPECT_TRUE(layout.local_shape.empty());
  DTENSOR_EXPECT_ERROR(compute_local_layout({}, {2}, {0}, parse_placements("S(0)")),
                       "expected a tensor dim in [0, 0) for a 0-D tensor, found 0");
}

TEST(LayoutTest, BadPlacementsAreExplained) {
  DTENSOR_EXPECT_ERROR(compute_local_layout({4}, {2, 2}, {0, 0}, parse_placements("S(0)")),
                       "expected one per mesh dim (2), found 1");
  DTENSOR_EXPECT_ERROR(compute_local_layout({4}, {2}, {0}, parse_placements("S(1)")),
                       "S(1): expected a tensor dim in [-1, 1) for a 1-D tensor, found 1");
  DTENSOR_EXPECT_ERROR(
      compute_local_layout({4}, {2}, {0}, parse_placements("RG(dims=1,units=[1,1,1])")),
      "expected one unit per rank of the mesh dim (2), found 3");
  DTENSOR_EXPECT_ERROR(
      compute_local_layout({4, 4}, {2, 2}, {0, 0}, parse_placements("RG(dims=2,units=[1,1]),S(1)")),
      "which a Ragged placement merged into rows");
  DTENSOR_EXPECT_ERROR(compute_local_layout({4}, {2}, {2}, parse_placements("S(0)")),
                       "coordinate[0]: expected a value in [0, 2), found 2");
  DTENSOR_EXPECT_ERROR(compute_local_layout({4}, {2}, {0}, {nullptr}), "found null");
}

TEST(LayoutTest, NegativeDimsNormalize) {
  LocalLayout layout = compute_local_layout({4, 6}, {2}, {1}, parse_placements("S(-1)"));
  EXPECT_EQ(layout.local_shape, (Shape{4, 3}));
  EXPECT_EQ(layout.global_offset, (Shape{0, 3}));
}

// ---- Brute force: the same layouts from torch's own chunk on a tensor of ids.

// Piece r of at::chunk(t, n, dim), or an empty slice when chunk returns fewer.
at::Tensor chunk_piece(const at::Tensor& t, int64_t n, int64_t dim, int64_t r) {
  if (t.size(dim) == 0) return t;
  std::vector<at::Tensor> pieces = at::chunk(t, n, dim);
  if (r < static_cast<int64_t>(pieces.size())) return pieces[r];
  return t.narrow(dim, t.size(dim), 0);
}

at::Tensor brute_force_local(const Shape& global, const Shape& mesh, const Shape& coordinate,
                             const std::vector<PlacementPtr>& placements) {
  at::Tensor t = at::arange(c10::multiply_integers(global), at::kLong).reshape(global);
  const int64_t merged = merged_leading_dims(placements);
  if (merged > 1) t = t.flatten(0, merged - 1);
  auto local_dim = [&](int64_t d) { return merged > 1 ? d - merged + 1 : d; };
  for (size_t i = 0; i < placements.size(); ++i) {
    const Placement& p = *placements[i];
    const int64_t n = mesh[i], r = coordinate[i];
    if (const auto* shard = dynamic_cast<const Shard*>(&p)) {
      t = chunk_piece(t, n, local_dim(shard->dim()), r);
    } else if (const auto* strided = dynamic_cast<const StridedShard*>(&p)) {
      const int64_t d = local_dim(strided->dim());
      std::vector<at::Tensor> parts;
      for (int64_t c = 0; c < strided->split_factor(); ++c) {
        parts.push_back(chunk_piece(chunk_piece(t, strided->split_factor(), d, c), n, d, r));
      }
      t = at::cat(parts, d);
    } else if (const auto* ragged = dynamic_cast<const Ragged*>(&p)) {
      // Direct from the definition: floor(R * prefix / total).
      const std::vector<int64_t>& units = ragged->units();
      int64_t total = 0, before = 0;
      for (size_t u = 0; u < units.size(); ++u) {
        total += units[u];
        if (static_cast<int64_t>(u) < r) before += units[u];
      }
      const int64_t rows = t.size(0);
      const int64_t begin = rows * before / total, end = rows * (before + units[r]) / total;
      t = t.narrow(0, begin, end - begin);
    }
  }
  return t;
}

at::Tensor gather_by_layout(const Shape& global, const LocalLayout& layout) {
  at::Tensor t = at::arange(c10::multiply_integers(global), at::kLong).reshape(global);
  if (layout.merged_leading_dims > 1) t = t.flatten(0, layout.merged_leading_dims - 1);
  for (size_t d = 0; d < layout.global_indices().size(); ++d) {
    t = t.index_select(d, at::tensor(layout.global_indices()[d], at::kLong));
  }
  return t;
}

PlacementPtr random_placement(std::mt19937& rng, int64_t ndim, int64_t mesh_dim_size,
                              int64_t ragged_dims) {
  std::uniform_int_distribution<int> kind(0, 5);
  std::uniform_int_distribution<int64_t> dim(0, ndim - 1);
  switch (kind(rng)) {
    case 0:
      return Replicate::make();
    case 1:
      return Partial::make(ReduceOp::kSum);
    case 2:
    case 3:
      return Shard::make(std::max<int64_t>(dim(rng), ragged_dims > 1 ? ragged_dims : 0) % ndim);
    case 4:
      return StridedShard::make(
          std::max<int64_t>(dim(rng), ragged_dims > 1 ? ragged_dims : 0) % ndim,
          std::uniform_int_distribution<int64_t>(1, 3)(rng));
    default: {
      std::vector<int64_t> units(mesh_dim_size);
      for (int64_t& u : units) u = std::uniform_int_distribution<int64_t>(0, 3)(rng);
      units[0] += 1;  // never all zero
      return Ragged::make(std::max<int64_t>(ragged_dims, 1), units);
    }
  }
}

// A layout of placements that say which positions they hold (all but
// Ragged here) carries its indices as runs: rising, disjoint, touching ones
// merged, none empty; the index lists were checked against torch.chunk.
void expect_canonical_runs(const LocalLayout& layout, const std::vector<PlacementPtr>& placements) {
  const bool ragged = std::any_of(placements.begin(), placements.end(),
                                  [](const PlacementPtr& p) { return p->kind() == "RG"; });
  ASSERT_EQ(layout.runs() == nullptr, ragged);
  if (ragged) return;
  for (size_t d = 0; d < layout.runs()->size(); ++d) {
    std::vector<int64_t> expanded;
    int64_t previous_end = -1;
    for (const ChunkRange& run : (*layout.runs())[d]) {
      EXPECT_LT(run.begin, run.end);
      EXPECT_LT(previous_end, run.begin) << "dim " << d << ": runs touch or overlap";
      previous_end = run.end;
      for (int64_t i = run.begin; i < run.end; ++i) expanded.push_back(i);
    }
    EXPECT_EQ(expanded, layout.global_indices()[d]) << "dim " << d;
  }
}

TEST(LayoutTest, RandomLayoutsMatchTorchChunk) {
  std::mt19937 rng(20261122);
  int checked = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int64_t mesh_ndim = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    Shape mesh(mesh_ndim);
    for (int64_t& m : mesh) m = std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const int64_t ndim = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    Shape global(ndim);
    for (int64_t& s : global) s = std::uniform_int_distribution<int64_t>(0, 11)(rng);
    const int64_t ragged_dims =
        ndim >= 2 && std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 2 : 1;
    std::vector<PlacementPtr> placements;
    for (int64_t i = 0; i < mesh_ndim; ++i) {
      placements.push_back(random_placement(rng, ndim, mesh[i], ragged_dims));
    }
    // Skip combinations that split a merged dim (covered by the error test).
    try {
      normalize_placements(placements, ndim, mesh);
    } catch (const Error&) {
      continue;
    }
    for (int64_t rank = 0; rank < c10::multiply_integers(mesh); ++rank) {
      const Shape coordinate = grid_coordinate(rank, mesh);
      SCOPED_TRACE(::testing::Message()
                   << "global " << c10::IntArrayRef(global) << " mesh " << c10::IntArrayRef(mesh)
                   << " placements " << placements_to_string(placements) << " rank " << rank);
      const LocalLayout layout = compute_local_layout(global, mesh, coordinate, placements);
      const at::Tensor want = brute_force_local(global, mesh, coordinate, placements);
      const at::Tensor got = gather_by_layout(global, layout);
      ASSERT_EQ(got.sizes(), want.sizes());
      ASSERT_TRUE(at::equal(got, want)) << "got\n" << got << "\nwant\n" << want;
      EXPECT_EQ(c10::IntArrayRef(layout.local_shape), want.sizes());
      expect_canonical_runs(layout, placements);
      ++checked;
    }
  }
  EXPECT_GT(checked, 1500);
}

// A user placement that keeps every third index of its dim (from `offset`),
// through `restrict` alone, or also saying so through held_pieces: both
// layouts hold the same indices. `bad` pieces are refused with an error.
class EveryThird final : public Placement {
 public:
  EveryThird(int64_t dim, bool says_pieces, bool bad = false)
      : dim_(dim), says_pieces_(says_pieces), bad_(bad) {}
  std::string to_string() const override { return "EveryThird"; }
  std::string kind() const override { return "E3"; }
  bool equals(const Placement& other) const override { return &other == this; }
  size_t hash() const override { return 3; }
  std::optional<int64_t> split_dim() const override { return dim_; }
  PlacementPtr normalized(int64_t) const override {
    return std::make_shared<const EveryThird>(dim_, says_pieces_, bad_);
  }
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override {
    std::vector<int64_t>& along = indices.along(dim_);
    keep_pieces(along, pieces(static_cast<int64_t>(along.size()), n, r));
  }
  std::optional<RangeList> held_pieces(int64_t length, int64_t n, int64_t r) const override {
    if (!says_pieces_) return std::nullopt;
    RangeList held = pieces(length, n, r);
    if (bad_ && held.size() > 1) std::swap(held[0], held[1]);
    return held;
  }

 private:
  // Rank r of n keeps positions r, r + n, r + 2n, ...
  static RangeList pieces(int64_t length, int64_t n, int64_t r) {
    RangeList held;
    for (int64_t i = r; i < length; i += n) held.push_back({i, i + 1});
    return held;
  }
  int64_t dim_;
  bool says_pieces_, bad_;
};

TEST(LayoutTest, HeldPiecesGiveWhatRestrictKeeps) {
  const Shape global = {10, 7};
  const Shape mesh = {3, 2};
  for (int64_t rank = 0; rank < 6; ++rank) {
    const Shape coordinate = grid_coordinate(rank, mesh);
    const LocalLayout lists = compute_local_layout(
        global, mesh, coordinate,
        {std::make_shared<const EveryThird>(0, false), StridedShard::make(0, 2)});
    const LocalLayout runs = compute_local_layout(
        global, mesh, coordinate,
        {std::make_shared<const EveryThird>(0, true), StridedShard::make(0, 2)});
    EXPECT_EQ(lists.runs(), nullptr);
    ASSERT_NE(runs.runs(), nullptr);
    EXPECT_EQ(runs.local_shape, lists.local_shape) << "rank " << rank;
    EXPECT_EQ(runs.global_offset, lists.global_offset) << "rank " << rank;
    EXPECT_EQ(runs.global_indices(), lists.global_indices()) << "rank " << rank;
  }
  // Rank 0 holds 0, 3, 6, 9 of dim 0: pieces out of order are refused.
  DTENSOR_EXPECT_ERROR(
      compute_local_layout(
          global, mesh, {0, 0},
          {std::make_shared<const EveryThird>(0, true, /*bad=*/true), Replicate::make()}),
      "EveryThird: held_pieces: expected non-empty pieces in rising order within [0, 10), "
      "found [0, 1)");
}

// A plugin that keeps one position of dim 1 per rank: restrict keeps
// position `keeps_`, held_pieces names position `says_` (the plugin's bug
// when they differ). Its hash ignores both, as hash() may.
class KeepsOnePosition final : public Placement {
 public:
  KeepsOnePosition(int64_t keeps, int64_t says) : keeps_(keeps), says_(says) {}
  std::string to_string() const override {
    return "KeepsOnePosition(" + std::to_string(keeps_) + "," + std::to_string(says_) + ")";
  }
  std::string kind() const override { return "K"; }
  bool equals(const Placement& other) const override {
    const auto* same = exactly<KeepsOnePosition>(other);
    return same != nullptr && same->keeps_ == keeps_ && same->says_ == says_;
  }
  size_t hash() const override { return 4; }
  std::optional<int64_t> split_dim() const override { return 1; }
  PlacementPtr normalized(int64_t) const override {
    return std::make_shared<const KeepsOnePosition>(keeps_, says_);
  }
  void restrict(LayoutIndices& indices, int64_t, int64_t) const override {
    std::vector<int64_t>& along = indices.along(1);
    along = {along[keeps_]};
  }
  std::optional<RangeList> held_pieces(int64_t, int64_t, int64_t) const override {
    return RangeList{{says_, says_ + 1}};
  }

 private:
  int64_t keeps_, says_;
};

// Keeps indices by value (odd ones on rank 1): held_pieces, which names
// positions, cannot describe that, though it matches on a dim no earlier
// mesh dim narrowed.
class KeepsByValue final : public Placement {
 public:
  std::string to_string() const override { return "KeepsByValue"; }
  std::string kind() const override { return "KV"; }
  bool equals(const Placement& other) const override {
    return exactly<KeepsByValue>(other) != nullptr;
  }
  size_t hash() const override { return 5; }
  std::optional<int64_t> split_dim() const override { return 0; }
  PlacementPtr normalized(int64_t) const override { return std::make_shared<const KeepsByValue>(); }
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override {
    std::vector<int64_t>& along = indices.along(0);
    along.erase(std::remove_if(along.begin(), along.end(), [&](int64_t i) { return i % n != r; }),
                along.end());
  }
  std::optional<RangeList> held_pieces(int64_t length, int64_t n, int64_t r) const override {
    RangeList held;
    for (int64_t i = r; i < length; i += n) held.push_back({i, i + 1});
    return held;
  }
};

TEST(LayoutTest, HeldPiecesThatDisagreeWithRestrictAreRefused) {
  const auto layout_with = [](PlacementPtr p) {
    return compute_local_layout({4, 6}, {2}, {1}, {std::move(p)});
  };
  DTENSOR_EXPECT_ERROR(layout_with(std::make_shared<const KeepsOnePosition>(5, 0)),
                       "KeepsOnePosition(5,0): held_pieces and restrict disagree on what rank 1 "
                       "of 2 holds of 6 positions: expected held_pieces to give what restrict "
                       "keeps, [5, 6); found [0, 1)");
  // An agreeing placement of the same class and hash, checked first, does
  // not vouch for another (equals() tells them apart).
  EXPECT_EQ(layout_with(std::make_shared<const KeepsOnePosition>(2, 2)).global_offset,
            (Shape{0, 2}));
  DTENSOR_EXPECT_ERROR(layout_with(std::make_shared<const KeepsOnePosition>(3, 2)),
                       "KeepsOnePosition(3,2): held_pieces and restrict disagree");
  DTENSOR_EXPECT_ERROR(
      compute_local_layout({6}, {2}, {1}, {std::make_shared<const KeepsByValue>()}),
      "KeepsByValue: held_pieces and restrict disagree on what rank 1 of 2 holds of 6 positions: "
      "expected held_pieces to give what restrict keeps, [0, 6); found [1, 2), [3, 4), [5, 6)");
}

// A user placement may narrow a dim without naming it its split dim: its
// layout comes from `restrict`, never from runs that would hold everything.
class KeepsOneRowUnnamed final : public Placement {
 public:
  std::string to_string() const override { return "KeepsOneRowUnnamed"; }
  std::string kind() const override { return "K1"; }
  bool equals(const Placement& other) const override { return &other == this; }
  size_t hash() const override { return 1; }
  PlacementPtr normalized(int64_t) const override {
    return std::make_shared<const KeepsOneRowUnnamed>();
  }
  void restrict(LayoutIndices& indices, int64_t, int64_t r) const override {
    keep_range(indices.along(0), {r, r + 1});
  }
};

TEST(LayoutTest, PlacementsWithoutSplitDimMayNarrow) {
  const LocalLayout layout = compute_local_layout(
      {4, 6}, {2, 3}, {1, 2}, {std::make_shared<const KeepsOneRowUnnamed>(), Shard::make(1)});
  EXPECT_EQ(layout.runs(), nullptr);
  EXPECT_EQ(layout.local_shape, (Shape{1, 2}));
  EXPECT_EQ(layout.global_offset, (Shape{1, 4}));
}

}  // namespace
}  // namespace dtensor
