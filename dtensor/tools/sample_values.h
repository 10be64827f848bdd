// Copyright 2026 The dtensor Authors.
//
// dtensor/tools/sample_values.h: the tensors the rule verifier's samples are
// made of. Values are small random integers (exact in every float dtype, so
// sums in any order agree), shapes split unevenly over 4 ranks.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace dtensor {
namespace sample_values {

// Random integers in [-3, 3] of `shape`, the same for the same `seed` on
// every rank and in every process.
inline at::Tensor values(std::vector<int64_t> shape, int64_t seed = 0) {
  const at::Generator generator = at::detail::createCPUGenerator(0x5eed + seed);
  return at::randint(-3, 4, shape, generator, at::TensorOptions().dtype(at::kFloat));
}

// values() with 4 in place of 0: a divisor that is never zero (a Partial's
// terms divided by zero sum to NaN where one device gets an infinity).
inline at::Tensor nonzero(std::vector<int64_t> shape, int64_t seed = 0) {
  const at::Tensor v = values(std::move(shape), seed);
  return v.masked_fill(v.eq(0), 4);
}

// Integers in [1, 4] of `shape`: divisors, norms' weights, log's domain.
inline at::Tensor positive(std::vector<int64_t> shape, int64_t seed = 0) {
  return values(std::move(shape), seed).abs().add(1);
}

// [rows, cols] indices whose entry (i, j) is (step * j + i) mod `modulo`:
// with step coprime to modulo and cols == modulo, each row is a permutation.
inline at::Tensor index_pattern(int64_t rows, int64_t cols, int64_t step, int64_t modulo) {
  const at::Tensor i = at::arange(rows, at::kLong).unsqueeze(1);
  const at::Tensor j = at::arange(cols, at::kLong).unsqueeze(0);
  return (j * step + i).remainder(modulo);
}

}  // namespace sample_values
}  // namespace dtensor
