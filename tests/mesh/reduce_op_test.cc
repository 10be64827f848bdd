// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/reduce_op.h>

#include <gtest/gtest.h>

#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

TEST(ReduceOpTest, NamesRoundTrip) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin,
                      ReduceOp::kProduct, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op);
  }
  EXPECT_EQ(reduce_op_name(ReduceOp::kProduct), "product");
}

TEST(ReduceOpTest, UnknownNameListsValidOnes) {
  DTENSOR_EXPECT_ERROR(parse_reduce_op("mean"), "expected one of sum, avg, max");
  DTENSOR_EXPECT_ERROR(parse_reduce_op("mean"), "found \"mean\"");
}

TEST(ReduceOpTest, DtypeSupport) {
  EXPECT_NO_THROW(check_reduce_op_supports(ReduceOp::kSum, at::kBFloat16, "t"));
  EXPECT_NO_THROW(check_reduce_op_supports(ReduceOp::kBxor, at::kBool, "t"));
  EXPECT_NO_THROW(check_reduce_op_supports(ReduceOp::kMax, at::kBool, "t"));
  DTENSOR_EXPECT_ERROR(check_reduce_op_supports(ReduceOp::kAvg, at::kInt, "t"), "floating");
  DTENSOR_EXPECT_ERROR(check_reduce_op_supports(ReduceOp::kBor, at::kHalf, "t"), "integer or bool");
  DTENSOR_EXPECT_ERROR(check_reduce_op_supports(ReduceOp::kSum, at::kBool, "t"), "on bool");
  EXPECT_NO_THROW(check_reduce_op_supports(ReduceOp::kSum, at::kComplexFloat, "t"));
  EXPECT_NO_THROW(check_reduce_op_supports(ReduceOp::kAvg, at::kComplexDouble, "t"));
  DTENSOR_EXPECT_ERROR(check_reduce_op_supports(ReduceOp::kMax, at::kComplexFloat, "t"),
                       "t: reduce op max on a complex dtype: expected sum or avg, found "
                       "ComplexFloat");
  DTENSOR_EXPECT_ERROR(check_reduce_op_supports(ReduceOp::kSum, at::kQInt8, "t"),
                       "t: expected a dtype to reduce, found QInt8");
}

// The predicate answers what the check does, for every op and dtype.
TEST(ReduceOpTest, SupportPredicateMatchesTheCheck) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin,
                      ReduceOp::kProduct, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    for (int d = 0; d < static_cast<int>(c10::ScalarType::NumOptions); ++d) {
      const auto dtype = static_cast<c10::ScalarType>(d);
      bool checked = true;
      try {
        check_reduce_op_supports(op, dtype, "t");
      } catch (const Error&) {
        checked = false;
      }
      EXPECT_EQ(reduce_op_supports(op, dtype), checked) << reduce_op_name(op) << " on " << dtype;
    }
  }
}

}  // namespace
}  // namespace dtensor
