// Copyright 2026 The dtensor Authors.
#include "examples/llama/llama.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>

#include <dtensor/base/compat.h>
#include <dtensor/nn/module_hooks.h>

#include <cmath>
#include <limits>

namespace dtensor::examples {
namespace {

torch::nn::Linear projection(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// The second half of the last dim, negated, before the first.
at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

// Each of [batch, kv_heads, seq, head_dim]'s heads `times` over in a row:
// [batch, kv_heads * times, seq, head_dim], as grouped-query attention
// pairs query heads with key/value heads.
at::Tensor repeat_kv(const at::Tensor& x, int64_t times) {
  const int64_t batch = x.size(0), kv_heads = x.size(1), seq = x.size(2), dim = x.size(3);
  return x.unsqueeze(2)
      .expand({batch, kv_heads, times, seq, dim})
      .reshape({batch, kv_heads * times, seq, dim});
}

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps)
    : weight_(register_parameter("weight", at::ones({dim}))), eps_(eps) {}

void RMSNormImpl::rebind_parameter(const std::string& name, const at::Tensor& value) {
  if (name == "weight") weight_ = value;
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  return x * at::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + eps_) * weight_;
}

AttentionImpl::AttentionImpl(const LlamaConfig& config)
    : heads_(config.heads),
      kv_heads_(config.kv_heads),
      head_dim_(config.head_dim > 0 ? config.head_dim : config.dim / config.heads) {
  wq = register_module("wq", projection(config.dim, heads_ * head_dim_));
  wk = register_module("wk", projection(config.dim, kv_heads_ * head_dim_));
  wv = register_module("wv", projection(config.dim, kv_heads_ * head_dim_));
  wo = register_module("wo", projection(heads_ * head_dim_, config.dim));
  const at::Tensor inverse_frequency =
      at::pow(config.rope_theta, at::arange(0, head_dim_, 2, at::kDouble) / -double(head_dim_));
  const at::Tensor angles = at::outer(at::arange(config.max_seq, at::kDouble), inverse_frequency);
  const at::Tensor both = at::cat({angles, angles}, -1);
  cos_ = register_buffer("cos", both.cos());
  sin_ = register_buffer("sin", both.sin());
  // Added to the scores: 0 where a position may attend, -inf after it. A
  // float mask, not a boolean one: Module::to(dtype) converts every buffer.
  causal_ = register_buffer(
      "causal",
      at::full({config.max_seq, config.max_seq}, -std::numeric_limits<double>::infinity()).triu(1));
}

void AttentionImpl::rebind_buffer(const std::string& name, const at::Tensor& value) {
  if (name == "cos") cos_ = value;
  if (name == "sin") sin_ = value;
  if (name == "causal") causal_ = value;
}

at::Tensor AttentionImpl::rotate(const at::Tensor& x, int64_t seq) const {
  const at::Tensor cos = cos_.slice(0, 0, seq), sin = sin_.slice(0, 0, seq);
  return x * cos + rotate_half(x) * sin;
}

at::Tensor AttentionImpl::forward(const at::Tensor& x) {
  const int64_t batch = x.size(0), seq = x.size(1);
  // [batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim]
  auto heads_of = [&](const at::Tensor& projected, int64_t count) {
    return projected.view({batch, seq, count, head_dim_}).transpose(1, 2);
  };
  at::Tensor q = rotate(heads_of(nn::call(wq, x), heads_), seq);
  at::Tensor k = rotate(heads_of(nn::call(wk, x), kv_heads_), seq);
  at::Tensor v = heads_of(nn::call(wv, x), kv_heads_);
  if (kv_heads_ != heads_) {
    k = repeat_kv(k, heads_ / kv_heads_);
    v = repeat_kv(v, heads_ / kv_heads_);
  }
  const at::Tensor attended =
      dtensor::scaled_dot_product_attention(q, k, v, causal_.slice(0, 0, seq).slice(1, 0, seq));
  return nn::call(wo, attended.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_}));
}

FeedForwardImpl::FeedForwardImpl(const LlamaConfig& config) {
  w1 = register_module("w1", projection(config.dim, config.ffn_hidden));
  w2 = register_module("w2", projection(config.ffn_hidden, config.dim));
  w3 = register_module("w3", projection(config.dim, config.ffn_hidden));
}

at::Tensor FeedForwardImpl::forward(const at::Tensor& x) {
  return nn::call(w2, torch::nn::functional::silu(nn::call(w1, x)) * nn::call(w3, x));
}

BlockImpl::BlockImpl(const LlamaConfig& config) {
  attention_norm = register_module("attention_norm", RMSNorm(config.dim, config.norm_eps));
  attention = register_module("attention", Attention(config));
  ffn_norm = register_module("ffn_norm", RMSNorm(config.dim, config.norm_eps));
  feed_forward = register_module("feed_forward", FeedForward(config));
}

at::Tensor BlockImpl::forward(const at::Tensor& x) {
  const at::Tensor h = x + nn::call(attention, nn::call(attention_norm, x));
  return h + nn::call(feed_forward, nn::call(ffn_norm, h));
}

LlamaImpl::LlamaImpl(const LlamaConfig& config) : config_(config) {
  tok_embeddings =
      register_module("tok_embeddings", torch::nn::Embedding(config.vocab, config.dim));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.layers; ++i) layers->push_back(Block(config));
  norm = register_module("norm", RMSNorm(config.dim, config.norm_eps));
  output = register_module("output", projection(config.dim, config.vocab));
}

at::Tensor LlamaImpl::forward(const at::Tensor& tokens) {
  at::Tensor h = nn::call(tok_embeddings, tokens);
  for (const auto& layer : *layers) h = nn::call(std::dynamic_pointer_cast<BlockImpl>(layer), h);
  return nn::call(output, nn::call(norm, h));
}

at::Tensor LlamaImpl::loss(const at::Tensor& tokens, const at::Tensor& targets) {
  const at::Tensor logits = forward(tokens);
  return at::cross_entropy_loss(logits.reshape({-1, config_.vocab}), targets.reshape({-1}));
}

}  // namespace dtensor::examples
