// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/parse.h>

#include <limits>
#include <string>

#include <gtest/gtest.h>

#include <dtensor/placements/placements.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

TEST(ParseTest, EveryBuiltInRoundTrips) {
  for (const char* text : {"R", "S(0)", "S(-1)", "P(sum)", "P(avg)", "P(max)", "P(min)",
                           "P(product)", "P(band)", "P(bor)", "P(bxor)", "SS(0,2)", "SS(1,3)",
                           "RG(dims=1,units=[1,2,1,0])", "RG(dims=2,units=[3])"}) {
    PlacementPtr p = parse_placement(text);
    EXPECT_EQ(p->to_string(), text);
    EXPECT_TRUE(*parse_placement(p->to_string()) == *p) << text;
    // The built-ins spell their kinds out (no string cut per call): the
    // spelling up to its first parenthesis, as the default.
    const std::string spelling = text;
    EXPECT_EQ(p->kind(), spelling.substr(0, spelling.find('('))) << text;
  }
}

TEST(ParseTest, SpellingVariants) {
  EXPECT_EQ(parse_placement(" S ( 1 ) ")->to_string(), "S(1)");
  EXPECT_EQ(parse_placement("P")->to_string(), "P(sum)");
  EXPECT_EQ(parse_placement("R()")->to_string(), "R");
  EXPECT_EQ(parse_placement("SS(dim=0, split_factor=4)")->to_string(), "SS(0,4)");
  EXPECT_EQ(parse_placement("RG(1, [2, 0])")->to_string(), "RG(dims=1,units=[2,0])");
  EXPECT_EQ(parse_placement("RG(units=[1,1], dims=1)")->to_string(), "RG(dims=1,units=[1,1])");
}

TEST(ParseTest, Lists) {
  std::vector<PlacementPtr> list = parse_placements("SS(0,2), S(0),R ,P(max)");
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(placements_to_string(list), "SS(0,2),S(0),R,P(max)");
  EXPECT_TRUE(same_placements(list, parse_placements(placements_to_string(list))));
}

TEST(ParseTest, ErrorsPointAtTheBadCharacter) {
  DTENSOR_EXPECT_ERROR(parse_placement("S(0"),
                       "expected ')' at column 4, found the end:\n  S(0\n     ^");
  DTENSOR_EXPECT_ERROR(parse_placement("S(x)"), "expected dim to be an integer at column 3");
  DTENSOR_EXPECT_ERROR(parse_placement("Q(0)"), "expected a known placement (P, R, RG, S, SS");
  DTENSOR_EXPECT_ERROR(parse_placement("S(0))"), "expected ',' or the end at column 5, found ')'");
  DTENSOR_EXPECT_ERROR(parse_placements("S(0),,R"), "at column 6, found ','");
  DTENSOR_EXPECT_ERROR(parse_placement(""), "expected a placement name");
  DTENSOR_EXPECT_ERROR(parse_placement("S(0,1)"), "expected S to take 1 argument (it has 2)");
  DTENSOR_EXPECT_ERROR(parse_placement("P(mean)"), "expected op to be one of sum, avg");
  DTENSOR_EXPECT_ERROR(parse_placement("SS(0,0)"),
                       "expected split_factor to be at least 1 at column 6");
  DTENSOR_EXPECT_ERROR(parse_placement("RG(dims=1,units=[0,0])"), "at least one non-zero unit");
  DTENSOR_EXPECT_ERROR(parse_placement("RG(dims=1,units=[1,-1])"), "non-negative integers");
  DTENSOR_EXPECT_ERROR(parse_placement("RG(dims=0,units=[1])"), "expected dims to be at least 1");
  DTENSOR_EXPECT_ERROR(parse_placement("RG(dims=1)"), "expected RG to take 2 arguments (it has 1)");
  DTENSOR_EXPECT_ERROR(parse_placement("RG(dims=1,unit=[1])"), "to have argument units");
  DTENSOR_EXPECT_ERROR(parse_placement("S(99999999999999999999)"), "expected an integer");
  // Each unit has at most 18 digits; ten of them overflow int64.
  std::string ten_large_units = "RG(dims=1,units=[999999999999999999";
  for (int i = 1; i < 10; ++i) ten_large_units += ",999999999999999999";
  DTENSOR_EXPECT_ERROR(parse_placement(ten_large_units + "])"),
                       "expected units to be a list whose sum fits in 64 bits");
  DTENSOR_EXPECT_ERROR(parse_placement("S(\xc3\xa9)"), "expected an integer at column 3");
}

TEST(PlacementTest, IdentityAndKinds) {
  EXPECT_FALSE(*StridedShard::make(0, 1) == *Shard::make(0));
  EXPECT_FALSE(*Shard::make(0) == *Shard::make(1));
  EXPECT_FALSE(*Partial::make(ReduceOp::kSum) == *Partial::make(ReduceOp::kMax));
  EXPECT_FALSE(*Ragged::make(1, {1, 2}) == *Ragged::make(1, {2, 1}));
  EXPECT_TRUE(*Ragged::make(1, {1, 2}) == *Ragged::make(1, {1, 2}));
  EXPECT_EQ(Ragged::make(1, {1, 2})->hash(), Ragged::make(1, {1, 2})->hash());
  EXPECT_NE(Ragged::make(1, {1, 2})->hash(), Ragged::make(1, {2, 1})->hash());
  EXPECT_TRUE(Replicate::make()->is_replicate());
  EXPECT_EQ(Partial::make(ReduceOp::kMin)->partial_op(), ReduceOp::kMin);
  EXPECT_EQ(StridedShard::make(1, 2)->split_dim(), 1);
  EXPECT_EQ(Replicate::make()->split_dim(), std::nullopt);
  EXPECT_EQ(Shard::make(-1)->normalized(3)->to_string(), "S(2)");
  EXPECT_EQ(PlacementListHash()(parse_placements("S(0),R")),
            PlacementListHash()(parse_placements("S(0),R")));
}

TEST(PlacementTest, FactoriesRejectBadParameters) {
  DTENSOR_EXPECT_ERROR(StridedShard::make(0, 0), "split_factor: expected at least 1, found 0");
  DTENSOR_EXPECT_ERROR(Ragged::make(1, {}), "expected one unit per rank, found none");
  DTENSOR_EXPECT_ERROR(Ragged::make(1, {0, 0}), "found all zero");
  DTENSOR_EXPECT_ERROR(Ragged::make(1, {1, -2}), "expected non-negative units, found -2");
  DTENSOR_EXPECT_ERROR(Ragged::make(0, {1}), "expected at least 1 leading dim");
  DTENSOR_EXPECT_ERROR(Ragged::make(1, {std::numeric_limits<int64_t>::max(), 1}),
                       "units: expected units whose sum fits in 64 bits, found a larger sum");
  DTENSOR_EXPECT_ERROR(Ragged::make(3, {1})->normalized(2), "expected at most 2 leading dims");
}

}  // namespace
}  // namespace dtensor
