// Copyright 2026 The dtensor Authors.
#include "merged_qkv.h"

#include <ATen/ATen.h>

namespace dtensor::examples {

QkvProjection project_qkv(const at::Tensor& x, const at::Tensor& w_qkv) {
  const std::vector<at::Tensor> parts = at::linear(x, w_qkv).chunk(3, -1);
  return {parts[0], parts[1], parts[2]};
}

at::Tensor split_heads(const at::Tensor& t, int64_t heads) {
  return t.view({t.size(0), heads, t.size(1) / heads}).transpose(0, 1);
}

HeadAttention attend_per_head(const QkvProjection& qkv, int64_t heads) {
  const at::Tensor q = split_heads(qkv.q, heads);
  const at::Tensor k = split_heads(qkv.k, heads);
  const at::Tensor v = split_heads(qkv.v, heads);
  const at::Tensor scores = at::bmm(q, k.transpose(1, 2));
  return {scores, at::bmm(scores, v)};
}

}  // namespace dtensor::examples
