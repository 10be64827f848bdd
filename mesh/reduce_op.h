// Copyright 2026 The dtensor Authors.
//
// mesh/reduce_op.h: the reductions a communicator and a Partial placement
// understand.
//
// `kSum`, `kAvg`, `kMax`, `kMin` and `kProduct` apply to every numeric dtype
// (`kAvg` to floating dtypes only); `kBand`, `kBor` and `kBxor` to integer and
// bool dtypes only. Spellings for parsing and printing are the lower-case
// names: "sum", "avg", "max", "min", "product", "band", "bor", "bxor".
#pragma once

#include <string_view>

#include <c10/core/ScalarType.h>

namespace dtensor {

enum class ReduceOp { kSum, kAvg, kMax, kMin, kProduct, kBand, kBor, kBxor };

// The lower-case spelling of `op`, e.g. "sum".
std::string_view reduce_op_name(ReduceOp op);

// Parses a lower-case spelling; throws dtensor::Error naming the valid ones.
ReduceOp parse_reduce_op(std::string_view name);

// True for kBand, kBor and kBxor.
bool is_bitwise(ReduceOp op);

// Throws dtensor::Error when `op` cannot reduce values of `dtype` (e.g. kAvg
// on int64, kBand on float32, anything on complex). `context` names the call.
void check_reduce_op_supports(ReduceOp op, c10::ScalarType dtype, std::string_view context);
// Whether `op` can reduce values of `dtype`: check_reduce_op_supports would
// not throw. For callers whose `context` costs something to spell.
bool reduce_op_supports(ReduceOp op, c10::ScalarType dtype);

}  // namespace dtensor
