// Copyright 2026 The dtensor Authors.
//
// examples/ragged_optimizer/newton_schulz.h: the Muon optimizer's
// orthogonalization, a matrix function that needs the WHOLE matrix.
//
// A few quintic Newton-Schulz iterations push every singular value of the
// (Frobenius-normalised) matrix towards 1, i.e. towards U V^T of its SVD. The
// normalisation and the products X X^T couple every element with every
// other, so applying it to row shards and concatenating gives a different
// (wrong) answer: the optimizer must hold each matrix whole on some rank.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace dtensor::examples {

// Muon's zeropower_via_newtonschulz5 on a 2-D float tensor: `iterations`
// steps of X <- a X + (b A + c A A) X with A = X X^T, on the wide orientation
// of the matrix (transposed when it has more rows than columns).
at::Tensor newton_schulz_orthogonalize(const at::Tensor& matrix, int64_t iterations);

}  // namespace dtensor::examples
