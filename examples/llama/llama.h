// Copyright 2026 The dtensor Authors.
//
// examples/llama/llama.h: a Llama-style decoder, written as ordinary
// torch::nn / ATen code.
//
// Token embedding, then per layer: RMSNorm, causal multi-head attention
// (scaled-dot-product attention) with rotary position embeddings
// (rotate_half from slices and cat) and optional grouped key/value heads,
// residual add, RMSNorm, SwiGLU feed-forward,
// residual add; a final RMSNorm and an untied output head. The same module
// trains on one device on plain tensors and, once its parameters and buffers
// are DTensors (examples/llama/llama_parallel.h), on a mesh: the forward code
// does not change. Two things only are there for parallel plans: modules
// call their children through dtensor::nn::call (C++ has no forward hooks;
// with none registered it is the child's forward()), and modules that keep
// copies of parameters or buffers in members implement
// dtensor::nn::ParameterMembers.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <dtensor/nn/module_parameters.h>

namespace dtensor::examples {

struct LlamaConfig {
  int64_t vocab = 32;
  int64_t dim = 16;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 4;  // fewer than heads: grouped-query attention
  int64_t head_dim = 0;  // 0: dim / heads
  int64_t ffn_hidden = 24;
  int64_t max_seq = 8;
  double rope_theta = 10000;
  double norm_eps = 1e-6;
};

// x / rms(x) * weight, over the last dim. Reads its weight through a member
// (hence ParameterMembers, so that distributing it follows).
class RMSNormImpl : public torch::nn::Module, public nn::ParameterMembers {
 public:
  RMSNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);
  void rebind_parameter(const std::string& name, const at::Tensor& value) override;

 private:
  torch::Tensor weight_;
  double eps_;
};
TORCH_MODULE(RMSNorm);

// Causal self-attention with rotary embeddings. The rotary tables and the
// causal mask are buffers (read through members, hence ParameterMembers).
class AttentionImpl : public torch::nn::Module, public nn::ParameterMembers {
 public:
  explicit AttentionImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);
  void rebind_parameter(const std::string&, const at::Tensor&) override {}
  void rebind_buffer(const std::string& name, const at::Tensor& value) override;

  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};

 private:
  at::Tensor rotate(const at::Tensor& x, int64_t seq) const;

  int64_t heads_, kv_heads_, head_dim_;
  at::Tensor cos_, sin_, causal_;
};
TORCH_MODULE(Attention);

// w2(silu(w1 x) * w3 x).
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(FeedForward);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);

  RMSNorm attention_norm{nullptr}, ffn_norm{nullptr};
  Attention attention{nullptr};
  FeedForward feed_forward{nullptr};
};
TORCH_MODULE(Block);

class LlamaImpl : public torch::nn::Module {
 public:
  explicit LlamaImpl(const LlamaConfig& config);
  // tokens [batch, seq] -> logits [batch, seq, vocab].
  at::Tensor forward(const at::Tensor& tokens);
  // Mean cross-entropy of the next-token logits against `targets`.
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets);

  const LlamaConfig& config() const { return config_; }

  torch::nn::Embedding tok_embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  torch::nn::Linear output{nullptr};

 private:
  LlamaConfig config_;
};
TORCH_MODULE(Llama);

}  // namespace dtensor::examples
