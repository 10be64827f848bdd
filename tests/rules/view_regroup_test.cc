// Copyright 2026 The dtensor Authors.
//
// Views that regroup a split dim with its neighbours (flatten, unflatten,
// [4,4,4] -> [8,8]) keep a layout without communication wherever each
// rank's elements are exactly a Shard or StridedShard of an output dim,
// uneven splits and empty shards included (rules/dim_map.cc,
// regrouped_split). Forward and backward: exact values, the expected
// placements, no collective. Where no such layout exists the view gathers,
// with exact values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <dtensor/dispatch/dispatch.h>
#include <dtensor/placements/placement.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/rules/op_call.h>
#include <dtensor/rules/propagation.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using rules_testing::iota;
using rules_testing::placements_of;
using rules_testing::Shape;

struct Case {
  Shape shape;
  const char* placements;
  Shape view;
  const char* expected;  // the view's placements
};

std::string name(const Case& c) {
  return ::testing::PrintToString(c.shape) + " " + c.placements + " -> " +
         ::testing::PrintToString(c.view);
}

// The view of `c` on `mesh`, forward and backward, in strict mode (any
// redistribute raises) with no collective, equal to one device's.
void expect_view_without_communication(const DeviceMesh& mesh, const Case& c) {
  SCOPED_TRACE(name(c));
  const at::Tensor global = iota(c.shape, 1, at::kDouble);
  const at::Tensor weights = iota(c.view, -50, at::kDouble);
  const DTensor x = dist(global.clone().requires_grad_(), mesh, c.placements);
  const at::Tensor w = dist(weights, mesh, c.expected).tensor();
  at::Tensor y;
  {
    const ScopedStrictMode strict;
    CollectiveCounter counter;
    y = x.tensor().view(c.view);
    EXPECT_EQ(counter.total(), 0);
  }
  EXPECT_EQ(placements_of(y), c.expected);
  EXPECT_DT(y, global.view(c.view), c.expected);
  const at::Tensor loss = (y * w).sum();
  {
    CollectiveCounter counter;
    loss.backward();
    EXPECT_EQ(counter.total(), 0);
  }
  EXPECT_DT(x.tensor().grad(), weights.view(c.shape), c.placements);
}

// On 4 ranks. Flattening [6, 5, 3]'s dims 0 and 1 split on the 5 (pieces
// 2, 2, 1, 0) holds the same rows of each of the 6 blocks of 5: SS(0,6),
// exactly torch.chunk's pieces although uneven; viewing back unflattens the
// blocks. Flattening dims 1 and 2 instead keeps S(1) only where torch.chunk
// of 7*3 = 21 cuts where that of 7 does (6, 6, 6, 3). [4, 4, 4] split on
// dim 1 merged with dim 0: SS(0,4); [4, 8] split on rows viewed as [8, 4]:
// two rows each. Strided inputs: [6, 4] with SS(0,2) unflattens to [2, 3, 4]
// with 3 rows per block over 4 ranks (1, 1, 1, 0), and regrouping the
// columns' blocks with the rows strides them by the rows.
const Case kOneDim[] = {
    {{6, 5, 3}, "S(1)", {30, 3}, "SS(0,6)"}, {{30, 3}, "SS(0,6)", {6, 5, 3}, "S(1)"},
    {{6, 7, 3}, "S(1)", {6, 21}, "S(1)"},    {{6, 21}, "S(1)", {6, 7, 3}, "S(1)"},
    {{6, 7, 3}, "S(1)", {42, 3}, "SS(0,6)"}, {{4, 4, 4}, "S(1)", {16, 4}, "SS(0,4)"},
    {{4, 6}, "S(1)", {24}, "SS(0,4)"},       {{5, 4}, "S(1)", {20}, "SS(0,5)"},
    {{4, 8}, "S(0)", {8, 4}, "S(0)"},        {{6, 4}, "SS(0,2)", {2, 3, 4}, "S(1)"},
    {{2, 3, 4}, "S(1)", {6, 4}, "SS(0,2)"},  {{2, 12}, "SS(1,3)", {3, 8}, "SS(1,2)"},
    {{3, 8}, "SS(1,2)", {2, 12}, "SS(1,3)"},
};

// On a 2x2 mesh. [4, 4, 4] with [S(1), R] viewed as [8, 8]: the rank at
// coordinate r of mesh dim 0 holds dim-1 indices 2r, 2r+1, that is rows r,
// 2+r, 4+r, 6+r: SS(0,4); a second split of dim 1 then takes the columns.
// Uneven pieces on the last mesh dim that splits the group (5 over 2: 3, 2),
// earlier even splits of the same group ([S(0), S(1)] of [6, 5, 3] flattened:
// each dp rank's 3 blocks of 5), strided inputs under an earlier split.
const Case kTwoDims[] = {
    {{4, 4, 4}, "S(1),R", {8, 8}, "SS(0,4),R"},
    {{8, 8}, "SS(0,4),R", {4, 4, 4}, "S(1),R"},
    {{4, 4, 4}, "R,S(1)", {8, 8}, "R,SS(0,4)"},
    {{4, 4, 4}, "S(1),S(1)", {8, 8}, "SS(0,4),S(1)"},
    {{8, 8}, "SS(0,4),S(1)", {4, 4, 4}, "S(1),S(1)"},
    {{6, 5, 3}, "S(1),R", {30, 3}, "SS(0,6),R"},
    {{6, 5, 3}, "R,S(1)", {30, 3}, "R,SS(0,6)"},
    {{6, 5, 3}, "S(0),S(1)", {30, 3}, "S(0),SS(0,3)"},
    {{30, 3}, "S(0),SS(0,3)", {6, 5, 3}, "S(0),S(1)"},
    {{6, 4}, "R,SS(0,2)", {2, 3, 4}, "R,S(1)"},
    {{8, 3}, "SS(0,2),S(0)", {2, 4, 3}, "S(1),S(0)"},
};

TEST(ViewRegroupTest, SplitsThatStayAShardOrStridedShardNeedNoCollective) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    for (const Case& c : kOneDim) expect_view_without_communication(mesh, c);
  });
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const Case& c : kTwoDims) expect_view_without_communication(mesh, c);
  });
}

// flatten, unflatten and reshape decompose into the same view.
TEST(ViewRegroupTest, FlattenAndUnflattenOfAnUnevenSplit) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = iota({6, 5, 3}, 1, at::kDouble);
    at::Tensor flat, unflattened, reshaped;
    {
      const ScopedStrictMode strict;
      CollectiveCounter counter;
      flat = dist(global, mesh, "S(1)").tensor().flatten(0, 1);
      unflattened = flat.unflatten(0, {6, 5});
      reshaped = flat.reshape({6, 5, 3});
      EXPECT_EQ(counter.total(), 0);
    }
    EXPECT_DT(flat, global.flatten(0, 1), "SS(0,6)");
    EXPECT_DT(unflattened, global, "S(1)");
    EXPECT_DT(reshaped, global, "S(1)");
  });
}

// No Shard or StridedShard of an output dim holds each rank's elements:
// torch.chunk of 5*3 = 15 over 2 or 4 ranks cuts elsewhere than that of 5
// (8 | 7 against 9 | 6), [4, 4, 4] on 4 ranks viewed as [8, 8] leaves each
// rank half of every other row, and an uneven split under an earlier split
// of the same group leaves unequal pieces. The view gathers what it must,
// with exact values.
TEST(ViewRegroupTest, SplitsWithNoSuchLayoutGatherExactly) {
  const auto check = [](const DeviceMesh& mesh, const Shape& shape, const char* placements,
                        const Shape& view) {
    SCOPED_TRACE(::testing::PrintToString(shape) + " " + placements);
    const at::Tensor global = iota(shape, 1, at::kDouble);
    const DTensor x = dist(global, mesh, placements);
    at::Tensor y;
    {
      CollectiveCounter counter;
      y = x.tensor().view(view);
      EXPECT_GT(counter.total(), 0);
    }
    EXPECT_DT(y, global.view(view));
  };
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    check(mesh, {6, 5, 3}, "S(1)", {6, 15});
    check(mesh, {6, 5, 3}, "S(1)", {90});
    check(mesh, {4, 4, 4}, "S(1)", {8, 8});
  });
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    check(mesh, {6, 5, 3}, "R,S(1)", {6, 15});
    check(mesh, {6, 5, 3}, "S(1),S(1)", {30, 3});
  });
}

// A user placement of even blocks (RuleRole::kEvenBlocks) on columns: rank r
// keeps torch.chunk's block r. `truthful` says so in held_pieces; otherwise
// it says every rank holds block 0, which rank 0's own layout cannot tell.
class ColumnBlocks final : public Placement {
 public:
  explicit ColumnBlocks(bool truthful) : truthful_(truthful) {}
  std::string to_string() const override { return truthful_ ? "CB" : "CB(lying)"; }
  std::string kind() const override { return "CB"; }
  bool equals(const Placement& other) const override {
    const auto* same = exactly<ColumnBlocks>(other);
    return same != nullptr && same->truthful_ == truthful_;
  }
  size_t hash() const override { return truthful_ ? 7 : 8; }
  std::optional<int64_t> split_dim() const override { return 1; }
  bool splits_into_ordered_blocks() const override { return true; }
  bool fills_role(RuleRole role) const override { return role == RuleRole::kEvenBlocks; }
  PlacementPtr normalized(int64_t) const override {
    return std::make_shared<const ColumnBlocks>(truthful_);
  }
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override {
    std::vector<int64_t>& along = indices.along(1);
    keep_range(along, torch_chunk_range(static_cast<int64_t>(along.size()), n, r));
  }
  std::optional<RangeList> held_pieces(int64_t length, int64_t n, int64_t r) const override {
    const ChunkRange block = torch_chunk_range(length, n, truthful_ ? r : 0);
    std::optional<RangeList> pieces(std::in_place);
    if (block.begin < block.end) pieces->push_back(block);
    return pieces;
  }

 private:
  bool truthful_;
};

// The view rules read every rank's pieces of such a placement (flat_split):
// a truthful one flattens into a strided split without communication,
// exact.
TEST(ViewRegroupTest, UserEvenBlocksAreReadAsTheirLayoutIsChecked) {
  const at::Tensor global = iota({4, 6}, 1, at::kDouble);
  const auto shard_of = [&](int rank, bool truthful) {
    FromLocalOptions options;
    options.run_check = false;
    options.shape = std::vector<int64_t>{4, 6};
    return from_local(global.narrow(1, 3 * rank, 3).contiguous(), init_device_mesh("local", {2}),
                      {std::make_shared<const ColumnBlocks>(truthful)}, options);
  };
  run_ranks(2, [&](int rank) {
    const DTensor x = shard_of(rank, /*truthful=*/true);
    CollectiveCounter counter;
    const at::Tensor y = x.tensor().view({24});
    EXPECT_EQ(counter.total(), 0);
    EXPECT_DT(y, global.view({24}), "SS(0,4)");
  });
  // A lying one is refused on every rank as the DTensor is made: rank 0 reads
  // rank 1's layout too (the smallest shard of each dim).
  run_ranks(2, [&](int rank) {
    DTENSOR_EXPECT_ERROR(shard_of(rank, /*truthful=*/false),
                         "CB(lying): held_pieces and restrict disagree on what rank 1 of 2 "
                         "holds of 6 positions: expected held_pieces to give what restrict "
                         "keeps, [3, 6); found [0, 3)");
  });
}

// The view rule checks the pieces it reads itself (flat_split through
// checked_held_pieces), not only through the DTensor made first: propagated
// on a bare spec, the lying placement is refused as the rule reads rank 1's
// pieces, never flattened into a wrong split.
TEST(ViewRegroupTest, TheViewRuleRefusesUserBlocksThatLie) {
  const c10::OperatorHandle view = c10::Dispatcher::singleton().findSchemaOrThrow("aten::view", "");
  run_ranks(2, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    const std::vector<c10::IValue> arguments = {at::zeros({4, 6}, at::kDouble),
                                                std::vector<int64_t>{24}};
    DTENSOR_EXPECT_ERROR(
        propagate(OpCall(view, arguments,
                         {TensorInput{0, -1,
                                      std::make_shared<const DTensorSpec>(
                                          mesh,
                                          std::vector<PlacementPtr>{
                                              std::make_shared<const ColumnBlocks>(false)},
                                          std::vector<int64_t>{4, 6}, at::kDouble),
                                      true}},
                         mesh),
                  PropagationOptions{}),
        "CB(lying): held_pieces and restrict disagree on what rank 1 of 2 holds of 6 "
        "positions: expected held_pieces to give what restrict keeps, [3, 6); found [0, 3)");
  });
}

}  // namespace
}  // namespace dtensor
