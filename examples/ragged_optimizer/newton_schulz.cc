// Copyright 2026 The dtensor Authors.
#include "examples/ragged_optimizer/newton_schulz.h"

#include <ATen/ATen.h>

#include <dtensor/base/check.h>

namespace dtensor::examples {

at::Tensor newton_schulz_orthogonalize(const at::Tensor& matrix, int64_t iterations) {
  DTENSOR_CHECK(matrix.dim() == 2, "newton_schulz_orthogonalize: expected a matrix, found ",
                matrix.dim(), " dims");
  // Muon's coefficients: a fast, slightly overshooting quintic.
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = matrix.size(0) > matrix.size(1);
  // X X^T is then the smaller Gram matrix.
  at::Tensor x = tall ? matrix.t() : matrix;
  // Singular values at most 1, where the iteration converges.
  x = x / (x.norm() + 1e-7);
  for (int64_t i = 0; i < iterations; ++i) {
    const at::Tensor gram = at::mm(x, x.t());
    const at::Tensor poly = gram * b + at::mm(gram, gram) * c;
    x = x * a + at::mm(poly, x);
  }
  return (tall ? x.t() : x).contiguous();
}

}  // namespace dtensor::examples
