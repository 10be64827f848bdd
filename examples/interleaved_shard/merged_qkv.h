// Copyright 2026 The dtensor Authors.
//
// examples/interleaved_shard/merged_qkv.h: the merged QKV projection of an
// attention layer and its per-head follow-up, in plain ATen.
//
// The same code runs on plain tensors (one device) and on DTensors. With the
// merged weight W_qkv [3h, in] laid out IS(0,3) on "tp" and the input
// replicated there, no op communicates:
//   qkv = linear(x, W_qkv)        [tokens, 3h]   IS(1,3)  (IS fills the pass-through role)
//   q, k, v = qkv.chunk(3, -1)    [tokens, h]    S(1)     (the plugin's split rule)
//   q_h = q.view(tokens, heads, head_dim).transpose(0, 1)   [heads, tokens, head_dim]  S(0)
//   scores = q_h @ k_h^T          [heads, tokens, tokens]  S(0): each rank its own heads
//   mixed = scores @ v_h          [heads, tokens, head_dim]  S(0)
// (the scores are left unscaled and without softmax so that integer inputs
// give exact results to compare).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace dtensor::examples {

struct QkvProjection {
  at::Tensor q, k, v;  // [tokens, h] each
};

// x [tokens, in] @ w_qkv^T, cut into its q, k and v thirds along the last dim.
QkvProjection project_qkv(const at::Tensor& x, const at::Tensor& w_qkv);

// [tokens, heads * head_dim] -> [heads, tokens, head_dim].
at::Tensor split_heads(const at::Tensor& t, int64_t heads);

struct HeadAttention {
  at::Tensor scores;  // q_h @ k_h^T   [heads, tokens, tokens]
  at::Tensor mixed;   // scores @ v_h  [heads, tokens, head_dim]
};

HeadAttention attend_per_head(const QkvProjection& qkv, int64_t heads);

}  // namespace dtensor::examples
