// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/reduce_op.h>

#include <array>
#include <utility>

#include <dtensor/base/check.h>

namespace dtensor {
namespace {

constexpr std::array<std::pair<ReduceOp, std::string_view>, 8> kNames = {{
    {ReduceOp::kSum, "sum"},
    {ReduceOp::kAvg, "avg"},
    {ReduceOp::kMax, "max"},
    {ReduceOp::kMin, "min"},
    {ReduceOp::kProduct, "product"},
    {ReduceOp::kBand, "band"},
    {ReduceOp::kBor, "bor"},
    {ReduceOp::kBxor, "bxor"},
}};

}  // namespace

std::string_view reduce_op_name(ReduceOp op) {
  for (const auto& [candidate, name] : kNames) {
    if (candidate == op) return name;
  }
  DTENSOR_CHECK(false, "reduce_op_name: expected a ReduceOp enumerator, found value ",
                static_cast<int>(op));
}

ReduceOp parse_reduce_op(std::string_view name) {
  for (const auto& [op, candidate] : kNames) {
    if (candidate == name) return op;
  }
  DTENSOR_CHECK(false, "reduce op: expected one of sum, avg, max, min, product, band, bor, bxor;",
                " found \"", name, "\"");
}

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}

bool reduce_op_supports(ReduceOp op, c10::ScalarType dtype) {
  if (c10::isQIntType(dtype)) return false;
  if (c10::isComplexType(dtype) && op != ReduceOp::kSum && op != ReduceOp::kAvg) return false;
  if (is_bitwise(op)) return c10::isIntegralType(dtype, /*includeBool=*/true);
  if (op == ReduceOp::kAvg) return c10::isFloatingType(dtype) || c10::isComplexType(dtype);
  if (dtype == c10::ScalarType::Bool) return op == ReduceOp::kMax || op == ReduceOp::kMin;
  return true;
}

void check_reduce_op_supports(ReduceOp op, c10::ScalarType dtype, std::string_view context) {
  DTENSOR_CHECK(!c10::isQIntType(dtype), context, ": expected a dtype to reduce, found ", dtype);
  // Complex values add up part by part (the communicators reduce their real
  // and imaginary parts); they have no order and no part-wise product.
  DTENSOR_CHECK(!c10::isComplexType(dtype) || op == ReduceOp::kSum || op == ReduceOp::kAvg, context,
                ": reduce op ", reduce_op_name(op),
                " on a complex dtype: expected sum or avg, found ", dtype);
  const bool integral = c10::isIntegralType(dtype, /*includeBool=*/true);
  if (is_bitwise(op)) {
    DTENSOR_CHECK(integral, context, ": reduce op ", reduce_op_name(op),
                  " expects an integer or bool dtype, found ", dtype);
  } else if (op == ReduceOp::kAvg) {
    DTENSOR_CHECK(c10::isFloatingType(dtype) || c10::isComplexType(dtype), context,
                  ": reduce op avg expects a floating or complex dtype, found ", dtype);
  } else if (dtype == c10::ScalarType::Bool) {
    DTENSOR_CHECK(op == ReduceOp::kMax || op == ReduceOp::kMin, context, ": reduce op ",
                  reduce_op_name(op), " on bool: expected max, min, band, bor or bxor");
  }
}

}  // namespace dtensor
